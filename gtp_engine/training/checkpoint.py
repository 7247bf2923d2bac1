"""Checkpoints: a trained model saved so that it describes itself.

Terms:
- checkpoint: a torch.save'd dict with FORMAT, the model config (preset fields), the features version and
  channel counts the model was built for, the board sizes it was trained on, provenance (training data,
  steps, free-form notes), the weights, and optionally the optimizer state.
- atomic save: written to a temporary file in the same folder, then moved over the target with os.replace,
  so a crash mid-save never leaves a half-written checkpoint under the real name.
- prefixes: torch.compile ("_orig_mod.") and DataParallel/DistributedDataParallel ("module.") rename weights;
  load strips them so a checkpoint from any of these wrappers loads into a plain model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gtp_engine import features
from gtp_engine.training import model as model_lib
from gtp_engine.training.files import replacing

FORMAT = "gtp_engine-checkpoint-1"
_PREFIXES = ("module.", "_orig_mod.")


class CheckpointError(Exception):
    """A checkpoint that cannot be read or used; the message names the file and the reason."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self):  # pickled from a worker process (Ray, a gate's parts) to the one that reports it
        return CheckpointError, (self.path, self.reason)


@dataclass
class Checkpoint:
    config: model_lib.ModelConfig
    state_dict: dict
    trained_sizes: list[int] = field(default_factory=list)
    provenance: dict = field(default_factory=dict)  # e.g. {"data": "...", "steps": 12000, "notes": "..."}
    features_version: int = features.FEATURES_VERSION
    optimizer_state: dict | None = None

    def build_model(self) -> model_lib.GoNet:
        """The model with these weights, in eval mode."""
        net = model_lib.build(self.config)
        net.load_state_dict(self.state_dict)
        return net.eval()


def from_model(net: model_lib.GoNet, trained_sizes=(), provenance: dict | None = None,
               optimizer: torch.optim.Optimizer | None = None) -> Checkpoint:
    return Checkpoint(
        config=net.config,
        state_dict=strip_prefixes(net.state_dict()),
        trained_sizes=sorted(trained_sizes),
        provenance=dict(provenance or {}),
        optimizer_state=optimizer.state_dict() if optimizer is not None else None,
    )


def save(checkpoint: Checkpoint, path: str | os.PathLike) -> None:
    path = Path(path)
    payload = {
        "format": FORMAT,
        "config": checkpoint.config.to_dict(),
        "features_version": checkpoint.features_version,
        "trained_sizes": list(checkpoint.trained_sizes),
        "provenance": checkpoint.provenance,
        "model": {k: v.detach().cpu() for k, v in strip_prefixes(checkpoint.state_dict).items()},
        "optimizer": checkpoint.optimizer_state,
    }
    with replacing(path) as tmp:
        torch.save(payload, tmp)


def load(path: str | os.PathLike, with_optimizer: bool = False) -> Checkpoint:
    """Reads a checkpoint; raises CheckpointError for a missing, unreadable or incompatible file."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(path, "no such file")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a corrupt file; all mean the same here
        raise CheckpointError(path, f"not a readable checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(path, f"not a {FORMAT} file (format: {found!r})")
    if payload["features_version"] != features.FEATURES_VERSION:
        raise CheckpointError(path, f"features version {payload['features_version']}, but this engine "
                                    f"computes version {features.FEATURES_VERSION}")
    try:
        config = model_lib.ModelConfig.from_dict(payload["config"])
    except (TypeError, ValueError, KeyError) as e:
        raise CheckpointError(path, f"bad model config: {e}") from e
    checkpoint = Checkpoint(
        config=config,
        state_dict=strip_prefixes(payload["model"]),
        trained_sizes=list(payload["trained_sizes"]),
        provenance=dict(payload["provenance"]),
        features_version=payload["features_version"],
        optimizer_state=payload["optimizer"] if with_optimizer else None,
    )
    try:
        checkpoint.build_model()
    except RuntimeError as e:  # weights that do not fit the config
        raise CheckpointError(path, f"weights do not match the {config.name} config: {e}") from e
    return checkpoint


def strip_prefixes(state_dict: dict) -> dict:
    stripped = {}
    for key, value in state_dict.items():
        changed = True
        while changed:
            changed = False
            for prefix in _PREFIXES:
                if key.startswith(prefix):
                    key = key[len(prefix):]
                    changed = True
        stripped[key] = value
    return stripped
