"""Game keys and the validation split: which games training holds out, the same ones in every run.

Terms:
- game key: a 64-bit hash of a game's board size, setup stones (in any order) and moves (in order), so the same
  game has the same key wherever it comes from: an SGF record, a self-play game, a value-net game. Shards store
  it per game (dataset.py) and ingest drops a later game with a key already seen.
- split: "val" for a game whose key falls in the first val_fraction of the key space, else "train". Every writer
  of training data (ingest, self-play, value data, rollout-train) and quantize's calibration split games by this
  rule, so a game held out in one run is held out in all.

It needs neither torch nor tqdm, so quantize imports it with the engine's own dependencies.
"""

from __future__ import annotations

import hashlib

from gtp_engine import sgf_io

_KEY_BUCKETS = 1_000_000


def game_key(width: int, height: int, setup, moves) -> int:
    """The game's key: setup as (color, point) pairs in any order, moves in order."""
    digest = hashlib.blake2b(repr((width, height, sorted(setup), list(moves))).encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


def record_key(record: sgf_io.GameRecord) -> int:
    """The game key of an SGF record."""
    return game_key(record.width, record.height, record.setup, record.moves)


def split_of(key: int, val_fraction: float) -> str:
    """"val" for the games a val_fraction holds out, else "train"."""
    return "val" if key % _KEY_BUCKETS < val_fraction * _KEY_BUCKETS else "train"
