"""Refit a network's ownership readout to ingested ownership targets, every other weight left as it is.

Terms:
- readout: the ownership head's last layer, a 1x1 convolution without bias (`ownership_out.weight`, one weight per
  channel of the value head's features v): ownership = tanh(W . v) on each point, +1 owned by the side to move.
  Nothing else reads it, so the policy, value and score of a refitted file are the original's exactly.
- targets: the final ownership of the shards' games that have one (ingest; with --ownership-playouts, games ended
  by counting whose dead stones rollouts found), from the side to move's view, for samples drawn from those games.
- fit: W minimising the mean squared error of the readout against the targets over every point of the training
  samples (train.py's ownership loss), by full-batch Adam from the file's own W; the validation shards' samples
  score it before and after, with the share of stones whose owner the readout gets wrong (the dead stones among
  them are the point of the exercise).
- apply: the networks given get the fitted W (an int8 sibling keeps this layer in float, so one W serves both),
  and a line in their metadata says so.

    python -m tools.refit_ownership --shards runs/own/shards --network weights/default.onnx \
        --apply weights/default.onnx weights/default.int8.onnx
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from gtp_engine import features
from gtp_engine.training import dataset

READOUT = "ownership_out.weight"
METADATA_KEY = "gtp_engine"


def readout(model: onnx.ModelProto) -> onnx.TensorProto:
    """The readout's weight initializer."""
    initializer = next((i for i in model.graph.initializer if i.name == READOUT), None)
    if initializer is None:
        raise SystemExit(f"refit_ownership: the network has no {READOUT}")
    return initializer


def readout_input(model: onnx.ModelProto) -> str:
    """The name of the tensor the readout convolution reads (v)."""
    for node in model.graph.node:
        if node.op_type == "Conv" and READOUT in node.input:
            return node.input[0]
    raise SystemExit(f"refit_ownership: the network has no {READOUT} convolution")


def feature_session(model: onnx.ModelProto, threads: int) -> tuple[ort.InferenceSession, str]:
    """An onnxruntime session of the network with v as an extra output (the model itself is left as it is)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    name = readout_input(model)
    model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]), name


def samples(shards: Path, split: str, count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """`count` samples drawn from the games of `split` that have an ownership target."""
    arrays = dataset.concatenate([dataset.load_shard(p) for p in sorted(shards.glob(f"{split}-*.npz"))])
    eligible = np.flatnonzero(arrays["ownership_mask"][arrays["game"]])
    if len(eligible) == 0:
        raise SystemExit(f"refit_ownership: no {split} sample in {shards} has an ownership target")
    return dataset.take(arrays, np.sort(rng.choice(eligible, min(count, len(eligible)), replace=False)))


def features_and_targets(session: ort.InferenceSession, name: str, batch: dict[str, np.ndarray], size: int,
                         chunk: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """v [N, C, H, W] float32, the targets [N, H, W] and the stones' colours from the side to move's view
    [N, H, W] (+1 own, -1 the opponent's, 0 empty)."""
    spatial, global_, targets = dataset.expand(dataset.to_device(batch, "cpu"), size, size)
    spatial, global_ = spatial.numpy(), global_.numpy()
    parts = [session.run([name], {"spatial": spatial[i:i + chunk], "global": global_[i:i + chunk]})[0]
             for i in range(0, len(spatial), chunk)]
    own, opponent = features.SPATIAL.index("own_stones"), features.SPATIAL.index("opponent_stones")
    stones = spatial[:, own] - spatial[:, opponent]
    return np.concatenate(parts), targets["ownership"].numpy(), stones


def evaluate(weight: np.ndarray, v: np.ndarray, target: np.ndarray, stones: np.ndarray) -> dict[str, float]:
    """Mean squared error over every point, and the share of stones whose owner by the readout's sign is not
    the target's (all stones, and those the target calls dead)."""
    predicted = np.tanh(np.einsum("c,nchw->nhw", weight, v))
    on_stone = stones != 0
    dead = on_stone & (np.sign(target) == -stones)
    wrong = np.sign(predicted) != np.sign(target)
    return {"mse": float(np.mean((predicted - target) ** 2)),
            "stones_wrong": float(wrong[on_stone].mean()),
            "dead_stones_wrong": float(wrong[dead].mean()) if dead.any() else float("nan"),
            "dead_stones": int(dead.sum())}


def fit(weight: np.ndarray, v: np.ndarray, target: np.ndarray, steps: int, lr: float) -> np.ndarray:
    """Full-batch Adam on the mean squared error of tanh(W . v), from `weight`."""
    w = torch.tensor(weight, dtype=torch.float64, requires_grad=True)
    value_features, goal = torch.from_numpy(v).double(), torch.from_numpy(target).double()
    optimizer = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = (torch.tanh(torch.einsum("c,nchw->nhw", w, value_features)) - goal).square().mean()
        loss.backward()
        optimizer.step()
    return w.detach().numpy()


def apply(path: Path, weight: np.ndarray, note: str) -> None:
    """Writes `weight` into the network file's readout, and `note` into its metadata."""
    model = onnx.load(str(path))
    initializer = readout(model)
    shape = tuple(initializer.dims)
    initializer.CopyFrom(onnx.numpy_helper.from_array(weight.astype(np.float32).reshape(shape), READOUT))
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            info = json.loads(prop.value)
            info["ownership_readout"] = note
            prop.value = json.dumps(info)
    onnx.save(model, str(path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=Path, required=True, help="ingest's shard folder, with ownership targets")
    parser.add_argument("--network", type=Path, required=True, help="the fp32 network whose v the fit reads")
    parser.add_argument("--apply", type=Path, nargs="*", default=[], help="network files to write the fit into")
    parser.add_argument("--train-samples", type=int, default=8000)
    parser.add_argument("--val-samples", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    sidecar = dataset.read_sidecar(args.shards)
    if sidecar["width"] != sidecar["height"]:
        raise SystemExit("refit_ownership: square boards only")
    size = sidecar["width"]
    rng = np.random.default_rng(args.seed)
    model = onnx.load(str(args.network))
    session, name = feature_session(model, args.threads)
    train = features_and_targets(session, name, samples(args.shards, "train", args.train_samples, rng), size)
    val = features_and_targets(session, name, samples(args.shards, "val", args.val_samples, rng), size)
    before = onnx.numpy_helper.to_array(readout(model)).reshape(-1)
    after = fit(before.astype(np.float64), *train[:2], args.steps, args.lr)
    for label, weight in (("before", before), ("after", after)):
        scores = {split: evaluate(weight, *data) for split, data in (("train", train), ("val", val))}
        print(f"{label}: " + "; ".join(f"{split} " + ", ".join(f"{k} {v:.4g}" for k, v in s.items())
                                       for split, s in scores.items()), flush=True)
    note = (f"refitted by tools/refit_ownership.py ({args.steps} steps, seed {args.seed}) to {len(train[0])} "
            f"positions of {sidecar['games']['train']} games ingested with ownership_playouts "
            f"{sidecar['config'].get('ownership_playouts', 0)}")
    for path in args.apply:
        apply(path, after, note)
        print(f"wrote the fitted readout into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
