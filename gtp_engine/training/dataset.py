"""Dataset: training samples in compact .npz shards with a JSON sidecar, and their expansion, one of the 8
symmetries per sample, into the network's inputs and targets at training time.

Terms:
- sample: one position and what the network should learn there: the move played or the search's visit
  distribution (policy target), the game's result for the side to move (value target), and the final score
  margin and final ownership where the record lets us trust them (masked elsewhere).
- compact inputs: features.encode's output for the position, stored so that expand() rebuilds the very same
  planes cheaply on any device:
    cells    uint8 [n, H*W]  0 empty; 1, 2, 3 a black stone whose chain has 1, 2, 3+ liberties; 4, 5, 6 the
             same for white. Colours are absolute, not own/opponent, so successive positions of a game are
             nearly the same bytes and compress well.
    to_play  uint8 [n]       1 black, 2 white
    ko       int16 [n]       flat index of the ko ban point, -1 for none
    history  int16 [n, HISTORY]  flat index of the move k+1 moves ago, -1 for a pass or no move
    globals  float32 [n, G]  features.GLOBAL, as encode gave them
- targets, per sample:
    move        int16 [n]    flat index of the move played, H*W for a pass
    value       int8 [n]     0 the side to move won, 1 it lost, 2 draw, -1 no value target
    score       float32 [n]  final lead of the side to move in points; score_mask bool [n] says where it is known
    game        int32 [n]    the sample's game: an index into the shard's game arrays
  optional, both or neither (self-play; see soft policy target):
    policy      float16 [n, H*W+1]  the search's visit distribution, pass last, summing to 1; zeros where masked
    policy_mask bool [n]            whether the sample has a policy target (False: a fast search, whose sample
                                    still trains value, score and ownership)
  optional (self-play; see search value):
    search_value float16 [n]        the search's value of the position for the side to move, in [-1, 1]
  derived when a shard is loaded (not stored):
    opponent_move int16 [n]        the move played after the sample's move (the opponent's reply, H*W a pass):
                                   the next sample's move when that sample is of the same game and its
                                   history starts with this sample's move; -1 where there is none (a game's
                                   last position). The target of the auxiliary opponent policy (train.py)
  and per game (g games in the shard):
    game_key        uint64 [g]     hash of the board size, setup and moves: the validation split and dedup key
    game_source     str [g]        where the record came from
    game_ownership  int8 [g, H*W]  final owner of each point, +1 black, -1 white, 0 neither
    ownership_mask  bool [g]       whether game_ownership is a target
- soft policy target: the policy a sample teaches is its policy distribution where the shard has one, else
  the move played (a one-hot distribution). When shards of both kinds meet in one window, concatenate() turns
  the moves of the plain ones into one-hot distributions, so every batch has one kind of target.
- search value: what the search thought of the position when it moved from there (the root's mean value).
  Training may blend it into the value target (train.py): it varies from position to position where the
  game's result does not, so a few hundred games overfit less. When shards with and without it meet in one
  window, concatenate() gives the others their result as search value (+1 won, -1 lost, 0 draw or unknown).
- shard: one np.savez_compressed file of whole games, train-00012.npz or val-00000.npz. Measured on real
  games, a sample takes about 8 bytes on disk on 9x9 and 11 on 19x19 (about 130 and 420 in memory), so the
  shard size, counted in samples, sets the file size: 250k 19x19 samples are about 3 MB.
- sidecar: index.json beside the shards: FORMAT, features version and plane names, board size, each shard with
  its split and counts, the rule inputs its samples carry ("rules", network_evaluator.RuleInputs.to_json; absent
  from older sidecars) and the samples of each ("rule_samples", in the same order; absent from older sidecars
  still), and whatever the writer adds (sources, filters, ingest counts).
- game key, split: as in splits.py: a hash of the game's board size, setup stones and moves, and whether that
  key puts the game in the "train" or the "val" shards.
- window: shards read into memory together and shuffled as one during training; a batch never spans two
  windows, and the last samples of a window that do not fill a batch are left out of that epoch.
- batch stream: the batches of a run, a pure function of (seed, batch index), so a resumed run continues
  exactly where its checkpoint stopped.
- symmetry: symmetry.py's numbering, applied by expand() to the cells, the points (ko, history, move,
  opponent_move), the
  policy distribution (pass unchanged) and the ownership exactly as features.encode applies it to a board.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from gtp_engine import features, network_evaluator, symmetry
from gtp_engine.board import WHITE
from gtp_engine.training.files import replacing

FORMAT = "gtp_engine-shards-1"
SIDECAR = "index.json"
SPLITS = ("train", "val")

SAMPLE_FIELDS = {
    "cells": np.uint8,
    "to_play": np.uint8,
    "ko": np.int16,
    "history": np.int16,
    "globals": np.float32,
    "move": np.int16,
    "value": np.int8,
    "score": np.float32,
    "score_mask": np.bool_,
    "game": np.int32,
}
OPTIONAL_SAMPLE_FIELDS = {
    "policy": np.float16,
    "policy_mask": np.bool_,
    "search_value": np.float16,
}
DERIVED_SAMPLE_FIELDS = {"opponent_move": np.int16}
_OPTIONAL_GROUPS = (("policy", "policy_mask"), ("search_value",))  # each present whole or not at all
# numpy parses each array's header with ast.literal_eval, and CPython 3.11's AST builder keeps its recursion
# depth in interpreter-wide state: two threads loading shards at once can fail with "AST constructor recursion
# depth mismatch". The window loader's thread and the validation set's loads therefore take turns.
_LOAD_LOCK = threading.Lock()
GAME_FIELDS = {
    "game_key": np.uint64,
    "game_source": np.str_,
    "game_ownership": np.int8,
    "ownership_mask": np.bool_,
}

# The planes of features version 1 that expand() rebuilds; any other layout must be taught here first.
_KNOWN_VERSION = 1
_CH = {name: i for i, name in enumerate(features.SPATIAL)}
_LIBERTY_PLANES = {
    "own": ("own_1_liberty", "own_2_liberties", "own_3plus_liberties"),
    "opponent": ("opponent_1_liberty", "opponent_2_liberties", "opponent_3plus_liberties"),
}
_HISTORY_PLANES = tuple(f"move_{k}_ago" for k in range(1, features.HISTORY + 1))
_LAYOUT = ("on_board", "own_stones", "opponent_stones", "ko_ban") + sum(_LIBERTY_PLANES.values(), ()) \
    + _HISTORY_PLANES
if features.FEATURES_VERSION != _KNOWN_VERSION or set(features.SPATIAL) != set(_LAYOUT):
    raise ImportError(f"dataset.py stores features version {_KNOWN_VERSION}, but features.py is version "
                      f"{features.FEATURES_VERSION} with planes {features.SPATIAL}: teach dataset.py the new layout")


class DatasetError(Exception):
    """A shard folder that cannot be used: the message says which and why."""


# ---- compact form ---------------------------------------------------------------------------------------------

def compact(spatial: np.ndarray, to_play: np.ndarray) -> dict[str, np.ndarray]:
    """cells, ko and history (see the module docstring) from features.encode planes [n, C, H, W] and the colour
    to move of each position."""
    n = spatial.shape[0]
    planes = spatial.reshape(n, spatial.shape[1], -1) > 0.5
    white_to_move = (np.asarray(to_play) == WHITE)[:, None]
    classes = {}
    for side, names in _LIBERTY_PLANES.items():
        classes[side] = sum((k + 1) * planes[:, _CH[name]].astype(np.uint8) for k, name in enumerate(names))
    black = np.where(white_to_move, classes["opponent"], classes["own"])
    white = np.where(white_to_move, classes["own"], classes["opponent"])
    cells = (black + np.where(white > 0, white + 3, 0)).astype(np.uint8)
    return {"cells": cells, "ko": _single_point(planes[:, _CH["ko_ban"]]),
            "history": np.stack([_single_point(planes[:, _CH[name]]) for name in _HISTORY_PLANES], axis=1)}


def _single_point(plane: np.ndarray) -> np.ndarray:
    """The flat index of the one marked point of each [n, area] plane, -1 where none is marked."""
    return np.where(plane.any(axis=1), plane.argmax(axis=1), -1).astype(np.int16)


# ---- expansion (torch, on the training device) ---------------------------------------------------------------

def to_device(batch: dict[str, np.ndarray], device: torch.device | str) -> dict[str, torch.Tensor]:
    """The numeric arrays of a batch as tensors on device (small integer types travel as they are stored)."""
    return {key: torch.from_numpy(np.ascontiguousarray(value)).to(device, non_blocking=True)
            for key, value in batch.items() if value.dtype.kind in "biuf"}


@functools.lru_cache(maxsize=None)
def _tables(height: int, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(perm, lands): perm[s] is symmetry s's flat permutation, lands[s][j] where original flat j goes under s."""
    table = torch.from_numpy(np.array(symmetry.permutation_table(height, width))).to(device)
    return table, table[list(symmetry.INVERSE[: len(table)])]


def expand(batch: dict[str, torch.Tensor], height: int, width: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """(spatial float32 [B, C, H, W], global float32 [B, G], targets) for a batch from take(), after to_device().

    With a "symmetry" entry each sample is transformed by its symmetry, exactly as features.encode(states,
    symmetries) would encode the position (square boards when any symmetry transposes). targets: move (long,
    pass = H*W), value (long, -1 masked), score, score_mask, ownership (float [B, H, W], +1 owned by the side
    to move), ownership_mask, and where the batch has them policy (float [B, H*W + 1]) and policy_mask,
    search_value (float) and opponent_move (long, -1 masked).
    """
    cells = batch["cells"].long()
    device, count, area = cells.device, cells.shape[0], cells.shape[1]
    ko, history, move = batch["ko"].long(), batch["history"].long(), batch["move"].long()
    opponent_move = batch["opponent_move"].long() if "opponent_move" in batch else None
    ownership = batch["ownership"].long()
    policy = batch["policy"].float() if "policy" in batch else None
    if "symmetry" in batch:
        sym = batch["symmetry"].long()
        perm, lands = _tables(height, width, device)
        perm = perm[sym]
        cells = cells.gather(1, perm)
        ownership = ownership.gather(1, perm)
        if policy is not None:
            policy = torch.cat([policy[:, :area].gather(1, perm), policy[:, area:]], dim=1)
        lands = lands[sym]
        ko, history = _move_points(ko, lands), _move_points(history, lands)
        move = _move_points(move, lands)
        if opponent_move is not None:
            opponent_move = _move_points(opponent_move, lands)
        if bool((sym & symmetry.TRANSPOSE).any()):
            height, width = width, height

    white_to_move = (batch["to_play"] == WHITE)[:, None]
    own_base = torch.where(white_to_move, 3, 0)
    opponent_base = 3 - own_base
    planes = torch.zeros(count, features.SPATIAL_CHANNELS, area, dtype=torch.float32, device=device)
    planes[:, _CH["on_board"]] = 1.0
    for side, base in (("own", own_base), ("opponent", opponent_base)):
        for k, name in enumerate(_LIBERTY_PLANES[side]):
            planes[:, _CH[name]] = (cells == base + k + 1).float()
    planes[:, _CH["own_stones"]] = ((cells > own_base) & (cells <= own_base + 3)).float()
    planes[:, _CH["opponent_stones"]] = ((cells > opponent_base) & (cells <= opponent_base + 3)).float()
    for channel, points in [(_CH["ko_ban"], ko)] + [(_CH[n], history[:, k]) for k, n in enumerate(_HISTORY_PLANES)]:
        rows = torch.nonzero(points >= 0)[:, 0]
        planes[rows, channel, points[rows]] = 1.0

    sign = torch.where(white_to_move, -1.0, 1.0)
    targets = {
        "move": move,
        "value": batch["value"].long(),
        "score": batch["score"].float(),
        "score_mask": batch["score_mask"].bool(),
        "ownership": (ownership.float() * sign).reshape(count, height, width),
        "ownership_mask": batch["ownership_mask"].bool(),
    }
    if policy is not None:
        targets["policy"] = policy
        targets["policy_mask"] = batch["policy_mask"].bool()
    if "search_value" in batch:
        targets["search_value"] = batch["search_value"].float()
    if opponent_move is not None:
        targets["opponent_move"] = opponent_move
    return planes.reshape(count, -1, height, width), batch["globals"].float(), targets


def _move_points(points: torch.Tensor, lands: torch.Tensor) -> torch.Tensor:
    """Flat indices ([B] or [B, k]; -1 for none, H*W a pass: both stay) moved by each row's lands table."""
    area = lands.shape[1]
    flat = points.reshape(points.shape[0], -1)
    on_board = (flat >= 0) & (flat < area)
    moved = torch.where(on_board, lands.gather(1, flat.clamp(0, area - 1)), flat)
    return moved.reshape(points.shape)


# ---- writing --------------------------------------------------------------------------------------------------

class ShardWriter:
    """Collects whole games per split and writes a shard each time one holds shard_samples samples or more;
    finish() writes what is left and the sidecar.

    A game is a dict of the sample fields (without "game"), optionally the soft policy fields, and the game fields
    for that one game. The games of one writer all have the soft policy fields or none do.
    """

    def __init__(self, directory: str | os.PathLike, width: int, height: int, shard_samples: int,
                 write_threads: int = 0):
        """write_threads > 0 compresses and writes shards in that many background threads (zlib releases the
        GIL), so a producer such as the ingest's parent process never waits for compression; finish() waits."""
        self.directory = Path(directory)
        self.width, self.height = width, height
        self.shard_samples = shard_samples
        self.pending: dict[str, list[dict]] = {split: [] for split in SPLITS}
        self.pending_samples = dict.fromkeys(SPLITS, 0)
        self.shards: list[dict] = []
        self.optional: list[str] | None = None  # the optional fields of every game, from the first one
        self.rules: collections.Counter[network_evaluator.RuleInputs] = collections.Counter()  # samples by rules
        self._write_threads = write_threads
        self._writer = concurrent.futures.ThreadPoolExecutor(write_threads) if write_threads > 0 else None
        self._writes: list[concurrent.futures.Future] = []
        self.directory.mkdir(parents=True, exist_ok=True)
        stale = [p.name for p in self.directory.glob("*.npz")] + \
            ([SIDECAR] if (self.directory / SIDECAR).exists() else [])
        if stale:
            raise DatasetError(f"{self.directory} already holds shards ({', '.join(sorted(stale)[:3])}...);"
                               f" choose an empty folder")

    def add(self, split: str, game: dict[str, np.ndarray]) -> None:
        optional = sorted(key for key in OPTIONAL_SAMPLE_FIELDS if key in game)
        for group in _OPTIONAL_GROUPS:
            if 0 < sum(key in game for key in group) < len(group):
                raise ValueError(f"a game with {optional} only: the fields {list(group)} go together")
        if self.optional is None:
            self.optional = optional
        elif optional != self.optional:
            raise ValueError(f"games with and without the optional fields {sorted(set(optional) ^ set(self.optional))} "
                             f"cannot share a shard folder")
        self.pending[split].append(game)
        self.pending_samples[split] += len(game["move"])
        self.rules.update(network_evaluator.rules_in(game["globals"]))  # Counter.update adds the counts
        if self.pending_samples[split] >= self.shard_samples:
            self._flush(split)

    def _flush(self, split: str) -> None:
        games = self.pending[split]
        if not games:
            return
        arrays = {}
        optional = {key: OPTIONAL_SAMPLE_FIELDS[key] for key in self.optional}
        for key, dtype in {**SAMPLE_FIELDS, **optional, **GAME_FIELDS}.items():
            if key != "game":
                arrays[key] = np.concatenate([g[key] for g in games]).astype(dtype, copy=False)
        arrays["game"] = np.repeat(np.arange(len(games), dtype=np.int32), [len(g["move"]) for g in games])
        number = sum(1 for s in self.shards if s["split"] == split)
        name = f"{split}-{number:05d}.npz"
        self.shards.append({"file": name, "split": split, "samples": len(arrays["move"]), "games": len(games),
                            "value_samples": int((arrays["value"] >= 0).sum()),
                            "score_samples": int(arrays["score_mask"].sum()),
                            "ownership_games": int(arrays["ownership_mask"].sum()),
                            **({"policy_samples": int(arrays["policy_mask"].sum())} if "policy" in optional else {})})
        self.pending[split], self.pending_samples[split] = [], 0
        write = functools.partial(_atomic_write, self.directory / name,
                                  lambda f: np.savez_compressed(f, **arrays))
        if self._writer is None:
            write()
            return
        # At most two shards a thread in flight: a fast producer waits rather than holding every shard in memory.
        while len(self._writes) >= 2 * self._write_threads:
            self._writes.pop(0).result()
        self._writes.append(self._writer.submit(write))

    def finish(self, extra: dict) -> dict:
        """Writes the remaining games and the sidecar (format, features, size, shards, plus extra); returns it."""
        for split in SPLITS:
            self._flush(split)
        if self._writer is not None:
            for write in self._writes:
                write.result()
            self._writer.shutdown()
        for shard in self.shards:
            shard["bytes"] = (self.directory / shard["file"]).stat().st_size
        ordered_rules = sorted(self.rules, key=lambda rules: rules.code)
        sidecar = {
            "format": FORMAT,
            "features_version": features.FEATURES_VERSION,
            "spatial": list(features.SPATIAL),
            "global": list(features.GLOBAL),
            "history": features.HISTORY,
            "width": self.width,
            "height": self.height,
            "samples": {split: sum(s["samples"] for s in self.shards if s["split"] == split) for split in SPLITS},
            "games": {split: sum(s["games"] for s in self.shards if s["split"] == split) for split in SPLITS},
            "bytes": sum(s["bytes"] for s in self.shards),
            "shards": self.shards,
            "rules": [rules.to_json() for rules in ordered_rules],
            "rule_samples": [self.rules[rules] for rules in ordered_rules],
            **extra,
        }
        text = json.dumps(sidecar, indent=1, sort_keys=True)
        _atomic_write(self.directory / SIDECAR, lambda f: f.write(text.encode()))
        return sidecar


def write_sample(source: str | os.PathLike, out: str | os.PathLike, samples: int, seed: int) -> dict:
    """Writes a random sample of source's training games, whole games until they hold `samples` samples or
    more, into the empty folder out as training shards; returns its sidecar."""
    sidecar = read_sidecar(source)
    arrays = concatenate([load_shard(path) for path, _ in Shards([source], "train").files])
    lengths = np.bincount(arrays["game"], minlength=len(arrays["game_key"]))
    order = np.random.default_rng(seed).permutation(len(lengths))
    chosen = order[:int(np.searchsorted(np.cumsum(lengths[order]), samples)) + 1]
    writer = ShardWriter(out, sidecar["width"], sidecar["height"], shard_samples=max(samples, 1))
    for game in chosen:
        rows = np.flatnonzero(arrays["game"] == game)
        record = {key: arrays[key][rows] for key in arrays if _is_sample_field(key) and key != "game"}
        record.update({key: arrays[key][game:game + 1] for key in GAME_FIELDS})
        writer.add("train", record)
    return writer.finish({"sampled_from": str(source), "seed": seed})


def _atomic_write(path: Path, write) -> None:
    with replacing(path) as tmp, open(tmp, "wb") as f:
        write(f)


# ---- reading --------------------------------------------------------------------------------------------------

def read_sidecar(directory: str | os.PathLike) -> dict:
    """The sidecar of a shard folder; raises DatasetError when it is missing or was written for other features."""
    path = Path(directory) / SIDECAR
    try:
        sidecar = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"{path}: no readable shard index ({e})") from None
    if sidecar.get("format") != FORMAT:
        raise DatasetError(f"{path}: format {sidecar.get('format')!r}, expected {FORMAT!r}")
    if sidecar["features_version"] != features.FEATURES_VERSION or sidecar["spatial"] != list(features.SPATIAL):
        raise DatasetError(f"{path}: written for features version {sidecar['features_version']}, this engine "
                           f"computes version {features.FEATURES_VERSION}: ingest the data again")
    return sidecar


def load_shard(path: str | os.PathLike) -> dict[str, np.ndarray]:
    with _LOAD_LOCK, np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    missing = (set(SAMPLE_FIELDS) | set(GAME_FIELDS)) - set(arrays)
    if missing:
        raise DatasetError(f"{path}: not a shard (missing {sorted(missing)})")
    for group in _OPTIONAL_GROUPS:
        present = set(group) & set(arrays)
        if present and present != set(group):
            raise DatasetError(f"{path}: {sorted(present)} without {sorted(set(group) - present)}")
    if "policy" in arrays and arrays["policy"].shape != (len(arrays["move"]), arrays["cells"].shape[1] + 1):
        raise DatasetError(f"{path}: policy of shape {arrays['policy'].shape} for {len(arrays['move'])} samples "
                           f"of {arrays['cells'].shape[1]} points")
    arrays["opponent_move"] = opponent_moves(arrays)
    return arrays


def opponent_moves(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Per sample, the move played after its move (see opponent_move), -1 where there is none."""
    move, game, history = arrays["move"], arrays["game"], arrays["history"]
    area = arrays["cells"].shape[1]
    out = np.full(len(move), -1, DERIVED_SAMPLE_FIELDS["opponent_move"])
    if len(move) > 1:
        previous = history[1:, 0]  # the move before the next sample's position: -1 for a pass
        follows = (game[1:] == game[:-1]) & (previous == np.where(move[:-1] == area, -1, move[:-1]))
        out[:-1] = np.where(follows, move[1:], -1)
    return out


def concatenate(shards: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Several loaded shards as one, game indices renumbered; where some have soft policy targets, the moves of
    the others become one-hot ones."""
    if any("policy" in s for s in shards):
        shards = [s if "policy" in s else _with_one_hot_policy(s) for s in shards]
    if any("search_value" in s for s in shards):
        shards = [s if "search_value" in s else _with_result_as_search_value(s) for s in shards]
    offsets = np.cumsum([0] + [len(s["game_key"]) for s in shards[:-1]])
    merged = {key: np.concatenate([s[key] for s in shards]) for key in shards[0] if key != "game"}
    merged["game"] = np.concatenate([s["game"] + offset for s, offset in zip(shards, offsets)]).astype(np.int32)
    return merged


def _with_one_hot_policy(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    count, area = arrays["cells"].shape
    policy = np.zeros((count, area + 1), OPTIONAL_SAMPLE_FIELDS["policy"])
    policy[np.arange(count), arrays["move"]] = 1.0
    return {**arrays, "policy": policy, "policy_mask": np.ones(count, np.bool_)}


def _with_result_as_search_value(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    result = np.select([arrays["value"] == 0, arrays["value"] == 1], [1.0, -1.0], 0.0)
    return {**arrays, "search_value": result.astype(OPTIONAL_SAMPLE_FIELDS["search_value"])}


def _is_sample_field(key: str) -> bool:
    return key in SAMPLE_FIELDS or key in OPTIONAL_SAMPLE_FIELDS or key in DERIVED_SAMPLE_FIELDS


def take(arrays: dict[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
    """The samples at index as a batch: sample fields (the soft policy ones where present), plus each sample's
    game ownership and its mask."""
    batch = {key: arrays[key][index] for key in arrays if _is_sample_field(key)}
    games = batch["game"]
    batch["ownership"] = arrays["game_ownership"][games]
    batch["ownership_mask"] = arrays["ownership_mask"][games]
    return batch


@dataclass(frozen=True)
class _Window:
    epoch: int
    number: int
    files: tuple[Path, ...]
    samples: int


class Shards:
    """The shards of one split in one or more folders (all of one board size)."""

    def __init__(self, directories: Sequence[str | os.PathLike], split: str):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}")
        self.sidecars = [read_sidecar(d) for d in directories]
        sizes = {(s["width"], s["height"]) for s in self.sidecars}
        if len(sizes) != 1:
            raise DatasetError(f"shard folders of several board sizes {sorted(sizes)}; train one size at a time")
        self.width, self.height = sizes.pop()
        self.files = [(Path(d) / shard["file"], shard["samples"])
                      for d, sidecar in zip(directories, self.sidecars)
                      for shard in sidecar["shards"] if shard["split"] == split]
        self.samples = sum(count for _, count in self.files)

    def head(self, limit: int) -> dict[str, np.ndarray]:
        """The first `limit` samples, shards in order (for validation)."""
        loaded, count = [], 0
        for path, samples in self.files:
            if count >= limit:
                break
            loaded.append(load_shard(path))
            count += samples
        if not loaded:
            raise DatasetError("no shards for this split")
        arrays = concatenate(loaded)
        keep = min(limit, len(arrays["move"]))
        return {key: (value[:keep] if _is_sample_field(key) else value) for key, value in arrays.items()}

    def _windows(self, epoch: int, seed: int, window_samples: int) -> list[_Window]:
        order = np.random.default_rng([seed, epoch]).permutation(len(self.files))
        groups: list[list[int]] = [[]]
        counts = [0]
        for i in order:
            if counts[-1] >= window_samples:
                groups.append([])
                counts.append(0)
            groups[-1].append(int(i))
            counts[-1] += self.files[i][1]
        if len(groups) > 1 and counts[-1] < window_samples // 2:  # too small to shuffle well on its own
            groups[-2] += groups.pop()
            counts[-2] += counts.pop()
        return [_Window(epoch, n, tuple(self.files[i][0] for i in group), count)
                for n, (group, count) in enumerate(zip(groups, counts))]

    def batches(self, batch_size: int, seed: int, start: int = 0, window_samples: int = 1 << 21,
                augment: bool = True) -> Iterator[dict[str, np.ndarray]]:
        """The batch stream from batch number `start` on, endless (epoch after epoch); each batch has a
        "symmetry" entry when augment is set. The next window loads in a thread while this one is used."""
        if self.samples < batch_size:
            raise DatasetError(f"{self.samples} samples cannot fill one batch of {batch_size}")
        window_samples = max(window_samples, batch_size)
        syms = len(symmetry.symmetries_for(self.width, self.height))
        plan = self._plan(batch_size, seed, start, window_samples)
        window, first = next(plan)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as loader:
            loading = loader.submit(_load_window, window)
            while True:
                arrays = loading.result()
                following, following_first = next(plan)
                if following.files != window.files:
                    loading = loader.submit(_load_window, following)
                rng = np.random.default_rng([seed, window.epoch, window.number])
                order = rng.permutation(window.samples)
                symmetries = rng.integers(0, syms, size=window.samples).astype(np.uint8)
                for b in range(first, window.samples // batch_size):
                    batch = take(arrays, order[b * batch_size:(b + 1) * batch_size])
                    if augment:
                        batch["symmetry"] = symmetries[b * batch_size:(b + 1) * batch_size]
                    yield batch
                window, first = following, following_first

    def _plan(self, batch_size: int, seed: int, start: int, window_samples: int) -> Iterator[tuple[_Window, int]]:
        """(window, first batch in it) from batch number `start` on, skipping whole windows without loading them."""
        skip, epoch = start, 0
        while True:
            for window in self._windows(epoch, seed, window_samples):
                count = window.samples // batch_size
                if skip >= count:
                    skip -= count
                    continue
                yield window, skip
                skip = 0
            epoch += 1


def _load_window(window: _Window) -> dict[str, np.ndarray]:
    return concatenate([load_shard(path) for path in window.files])
