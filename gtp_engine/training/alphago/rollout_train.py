"""Rollout policy training: the weights of rollout.RolloutPolicy fitted to the moves of SGF records.

Terms:
- record, game key, validation split: as in splits.py: a game is held out by the hash of its moves, so the same
  game is held out in every run.
- sample: one position of a game (the side to move's view) with its candidates' features and the index of the
  candidate that was played; a move that is no candidate (a pass, an own-eye filling) leaves the sample without a
  target: it is not trained on, and counts as a miss in the accuracy.
- positions_per_game: how many positions of each game become samples (drawn at random; 0 takes every position):
  fewer positions from more games spread the data over more games for the same memory.
- vocabulary: the canonical 3x3 patterns seen at least min_pattern_count times among the training candidates;
  rarer ones share the "unseen pattern" weight.
- fit: softmax regression (maximum likelihood of the played move among the candidates, L2 penalty), full-data
  epochs of Adam steps over blocks of positions, the learning rate falling to 0 along a cosine, in numpy.
- accuracy: top-1 move prediction on the held-out games: the share of their board moves (passes left out) that
  are the policy's most probable candidate, ties broken at random.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from gtp_engine import rollout, sgf_io
from gtp_engine.board import IllegalMoveError
from gtp_engine.coords import PASS
from gtp_engine.training import runs, splits
from gtp_engine.training.sgf_ingest import Skip

log = logging.getLogger(__name__)

_BLOCK_POSITIONS = 512  # positions per Adam step


@dataclass(frozen=True)
class RolloutTrainConfig:
    size: int = 19
    games: int | None = None  # most games used (None: all); drawn at random from the sources
    positions_per_game: int = 0  # positions sampled per game; 0: all
    val_fraction: float = 0.05
    min_pattern_count: int = 3
    epochs: int = 6
    lr: float = 0.02
    l2: float = 1e-6
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError("val_fraction must be in (0, 1)")
        if self.games is not None and self.games < 1:
            raise ValueError("games must be positive")
        if self.positions_per_game < 0 or self.min_pattern_count < 1 or self.epochs < 1:
            raise ValueError("positions_per_game must be >= 0, min_pattern_count and epochs >= 1")


class Samples:
    """Samples as flat candidate arrays: position i owns candidates starts[i]:starts[i + 1]."""

    def __init__(self, codes: list[np.ndarray], groups: list[np.ndarray], targets: list[int], board_moves: int):
        self.board_moves = board_moves  # samples whose move is a board point (the accuracy's denominator)
        counts = np.array([len(c) for c in codes], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        self.codes = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        self.groups = np.concatenate(groups) if groups else np.zeros((0, len(rollout.GROUPS)), np.int8)
        self.targets = np.array(targets, dtype=np.int64)  # candidate offset within the position, -1 for none

    def __len__(self) -> int:
        return len(self.targets)


class _Collector:
    def __init__(self) -> None:
        self.codes: list[np.ndarray] = []
        self.groups: list[np.ndarray] = []
        self.targets: list[int] = []
        self.board_moves = 0

    def add(self, features: rollout.MoveFeatures, flat: int | None) -> None:
        self.codes.append(rollout.canonical_patterns(features.cells).astype(np.int32))
        self.groups.append(features.groups.astype(np.int8))
        hits = np.flatnonzero(features.flat == flat) if flat is not None else []
        self.targets.append(int(hits[0]) if len(hits) else -1)
        self.board_moves += flat is not None

    def samples(self) -> Samples:
        return Samples(self.codes, self.groups, self.targets, self.board_moves)


def collect(sources: Iterable[str], config: RolloutTrainConfig, progress: bool = True) \
        -> tuple[Samples, Samples, dict]:
    """(training samples, held-out samples, counts) from the records of sources (sgf_io.read_sgf_files)."""
    rng = np.random.default_rng(config.seed)
    records = [record for source in sources for record in sgf_io.read_sgf_files(source)]
    order = rng.permutation(len(records))
    train, val = _Collector(), _Collector()
    counts = {"records": len(records), "games": 0, "train_games": 0, "val_games": 0, "skipped": 0}
    seen: set[int] = set()
    wanted = config.games or len(records)
    bar = runs.progress(progress, total=wanted, unit="game", desc="features")
    for i in order.tolist():
        if counts["games"] >= wanted:
            break
        name, data = records[i]
        try:
            record = sgf_io.load_sgf(data, source=name)
            if (record.width, record.height) != (config.size, config.size) or not record.moves:
                raise Skip("board size")
            key = splits.record_key(record)
            if key in seen:
                raise Skip("duplicate")
            held_out = splits.split_of(key, config.val_fraction) == "val"
            _add_game(record, val if held_out else train, config, rng)
        except (Skip, sgf_io.SgfError, IllegalMoveError):
            counts["skipped"] += 1
            continue
        seen.add(key)
        counts["games"] += 1
        counts["val_games" if held_out else "train_games"] += 1
        bar.update(1)
    bar.close()
    return train.samples(), val.samples(), counts


def _add_game(record: sgf_io.GameRecord, out: _Collector, config: RolloutTrainConfig,
              rng: np.random.Generator) -> None:
    state = record.to_game(max_moves=0)
    moves = record.moves
    chosen = set(range(len(moves)))
    if config.positions_per_game and config.positions_per_game < len(moves):
        chosen = set(rng.choice(len(moves), config.positions_per_game, replace=False).tolist())
    collected = []
    for number, (color, point) in enumerate(moves):
        if color != state.to_play:
            raise Skip("move out of turn")
        if number in chosen:
            collected.append((rollout.game_features(state), None if point == PASS else state.grid.flat(point)))
        state.play(point, color)
    for features, flat in collected:  # only once the whole game replayed legally
        out.add(features, flat)


def vocabulary_of(samples: Samples, min_count: int) -> np.ndarray:
    codes, counts = np.unique(samples.codes, return_counts=True)
    return codes[counts >= min_count].astype(np.int64)


class _Indexed:
    """Samples with their feature indices into the weights of one policy (pattern ids resolved once)."""

    def __init__(self, samples: Samples, policy: rollout.RolloutPolicy):
        self.samples = samples
        self.pattern = rollout.pattern_ids(policy.vocabulary, samples.codes).astype(np.int32)
        self.offsets = policy.offsets
        self.vocabulary_size = len(policy.vocabulary)

    def block(self, first: int, last: int) -> _Block:
        """Positions first:last with the feature indices of their candidates."""
        s = self.samples
        a, b = s.starts[first], s.starts[last]
        groups = s.groups[a:b].astype(np.int64)
        indices = groups + self.offsets
        indices[:, 0] = self.pattern[a:b] + (self.vocabulary_size + 1) * groups[:, 0]
        return _Block(indices, s.starts[first:last + 1] - a, s.targets[first:last])


class _Block:
    """Consecutive positions: candidate feature indices [m, groups], their starts [n + 1] and targets [n]."""

    def __init__(self, indices: np.ndarray, starts: np.ndarray, targets: np.ndarray):
        self.indices = indices
        counts = np.diff(starts)
        self.owner = np.repeat(np.arange(len(counts)), counts)  # position of each candidate
        self.nonempty = counts > 0
        self.segments = starts[:-1][self.nonempty]
        self.has_target = targets >= 0
        self.target_rows = starts[:-1][self.has_target] + targets[self.has_target]

    def logits(self, weights: np.ndarray) -> np.ndarray:
        return weights[self.indices].sum(axis=1)

    def best(self, logits: np.ndarray) -> np.ndarray:
        """Highest candidate logit per position (-inf where there is no candidate)."""
        top = np.full(len(self.nonempty), -np.inf)
        top[self.nonempty] = np.maximum.reduceat(logits, self.segments)
        return top

    def softmax(self, logits: np.ndarray) -> np.ndarray:
        e = np.exp(logits - self.best(logits)[self.owner])
        total = np.add.reduceat(e, self.segments)
        sums = np.zeros(len(self.nonempty))
        sums[self.nonempty] = total
        return e / sums[self.owner]


def _evaluate(data: _Indexed, weights: np.ndarray) -> dict:
    """Top-1 accuracy over board moves and mean log loss over samples with a target.

    A played move tied for the highest logit with k - 1 others counts 1/k, as if the tie were broken at random:
    features alone cannot tell the points of an empty board apart.
    """
    s = data.samples
    hits, loss = 0.0, 0.0
    for first in range(0, len(s), 4096):
        block = data.block(first, min(first + 4096, len(s)))
        logits = block.logits(weights)
        best = block.best(logits)
        ties = np.bincount(block.owner, weights=logits >= best[block.owner], minlength=len(best))
        on_top = logits[block.target_rows] >= best[block.has_target]
        hits += float(np.sum(on_top / ties[block.has_target]))
        loss -= float(np.log(np.maximum(block.softmax(logits)[block.target_rows], 1e-12)).sum())
    trained = int(np.sum(s.targets >= 0))
    return {"accuracy": hits / max(s.board_moves, 1), "log_loss": loss / max(trained, 1), "positions": len(s),
            "board_moves": s.board_moves, "targets": trained}


def evaluate(samples: Samples, policy: rollout.RolloutPolicy) -> dict:
    """Accuracy and log loss of a policy on samples (see the docstring)."""
    return _evaluate(_Indexed(samples, policy), policy.weights)


def fit(train: Samples, val: Samples, config: RolloutTrainConfig,
        progress: bool = True) -> tuple[rollout.RolloutPolicy, dict]:
    """Fits a policy; returns it with the final training and held-out figures."""
    vocabulary = vocabulary_of(train, config.min_pattern_count)
    policy = rollout.RolloutPolicy(vocabulary, np.zeros(rollout.feature_count(len(vocabulary))))
    train_data, val_data = _Indexed(train, policy), _Indexed(val, policy)
    weights = policy.weights.copy()
    m, v = np.zeros_like(weights), np.zeros_like(weights)
    beta1, beta2, step = 0.9, 0.999, 0
    rng = np.random.default_rng(config.seed)
    blocks = np.arange(0, len(train), _BLOCK_POSITIONS)
    total_steps = config.epochs * len(blocks)
    for epoch in range(1, config.epochs + 1):
        bar = runs.progress(progress, iterable=rng.permutation(blocks), unit="block", desc=f"epoch {epoch}")
        for first in bar:
            block = train_data.block(first, min(first + _BLOCK_POSITIONS, len(train)))
            if not block.has_target.any():
                continue
            # d(-log p_target)/d logit = p - [target], over the positions that have a target
            grad_logits = block.softmax(block.logits(weights)) * block.has_target[block.owner]
            grad_logits[block.target_rows] -= 1.0
            indices = block.indices
            gradient = np.bincount(indices.ravel(), weights=np.repeat(grad_logits, indices.shape[1]),
                                   minlength=len(weights)) / block.has_target.sum() + config.l2 * weights
            step += 1
            m = beta1 * m + (1 - beta1) * gradient
            v = beta2 * v + (1 - beta2) * gradient * gradient
            lr = config.lr * 0.5 * (1 + np.cos(np.pi * step / total_steps))
            lr *= np.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
            weights -= lr * m / (np.sqrt(v) + 1e-8)
        held_out = _evaluate(val_data, weights)
        log.info("epoch %d: held-out top-1 %.2f%%, log loss %.3f", epoch, 100 * held_out["accuracy"],
                 held_out["log_loss"])
    figures = {"train": _evaluate(train_data, weights), "val": held_out}
    return rollout.RolloutPolicy(vocabulary, weights), figures


def train_rollout(sources: Iterable[str], out: str | Path, config: RolloutTrainConfig,
                  progress: bool = True) -> dict:
    """Collects samples, fits, writes the weights file to `out`; returns a summary."""
    started = time.monotonic()
    sources = [str(s) for s in sources]
    train, val, counts = collect(sources, config, progress)
    if len(train) == 0 or len(val) == 0:
        raise ValueError(f"no {config.size}x{config.size} games to train on or to hold out in {', '.join(sources)} "
                         f"({counts['games']} games read)")
    log.info("%d train + %d held-out positions (%d + %d candidates) from %d games in %.0f s", len(train), len(val),
             len(train.codes), len(val.codes), counts["games"], time.monotonic() - started)
    policy, figures = fit(train, val, config, progress)
    summary = {"config": asdict(config), "sources": sources, "counts": counts, "vocabulary": len(policy.vocabulary),
               **figures, "seconds": round(time.monotonic() - started, 1)}
    policy.save(out, board_size=config.size, games=counts["games"], val_games=counts["val_games"],
                val_accuracy=figures["val"]["accuracy"], val_positions=figures["val"]["board_moves"],
                sources=";".join(Path(s).name for s in sources), config=json.dumps(asdict(config)))
    return summary

