"""Replays every SGF game in a folder or an archive and counts which load and why the others are rejected.

Usage (from the repository root):
    python -m tools.check_sgf ../shared/data/go9_curated.tar.xz [--processes 2] [--examples 3] [--rules chinese]

A source is a folder (searched recursively for *.sgf), one .sgf file, a tar archive (.tar, .tar.gz, .tgz, .tar.xz,
.tar.bz2) or a .zip, read by sgf_io.read_sgf_files (archives as a stream, never unpacked to disk). A game is
loaded when sgf_io reads it and game.py accepts every setup stone and move; otherwise the SgfError's reason is
counted with a few example files. Any other exception is a bug in the engine and is counted as a crash (exit status 1).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import multiprocessing
import multiprocessing.pool
import sys
import time
from pathlib import Path
from typing import Iterator

from tqdm import tqdm

from gtp_engine.game import Rules
from gtp_engine.sgf_io import SgfError, load_sgf, read_sgf_files


def check_game(job: tuple[str, bytes, str | None]) -> tuple[str, str | None, str, int]:
    """(name, rejection reason or None, detail, moves replayed) for one file."""
    name, data, rules_name = job
    try:
        record = load_sgf(data, source=name)
        record.to_game(Rules.named(rules_name) if rules_name else None)
    except SgfError as e:
        return name, e.reason, e.detail, 0
    except Exception as e:  # noqa: BLE001 - anything else is an engine bug, reported rather than fatal
        return name, f"crash ({type(e).__name__})", str(e), 0
    return name, None, "", len(record.moves)


def _in_batches(pool: multiprocessing.pool.Pool, jobs: Iterator, batch: int = 2048) -> Iterator:
    """pool.imap_unordered over jobs, a batch at a time: the pool would otherwise read a whole archive into memory."""
    while chunk := list(itertools.islice(jobs, batch)):
        yield from pool.imap_unordered(check_game, chunk, chunksize=32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder, .sgf file, tar archive or .zip")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--examples", type=int, default=3, help="example files listed per reason (default 3)")
    parser.add_argument("--rules", default=None, help="replay under these rules instead of each file's RU")
    args = parser.parse_args(argv)
    if args.rules:
        Rules.named(args.rules)  # fail now on an unknown name, not once per game

    started = time.monotonic()
    jobs = ((name, data, args.rules) for name, data in read_sgf_files(args.source))
    reasons: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    loaded = moves = 0
    with multiprocessing.Pool(args.processes) as pool:
        results = _in_batches(pool, jobs)
        for name, reason, detail, count in tqdm(results, unit="game", file=sys.stderr):
            if reason is None:
                loaded += 1
                moves += count
                continue
            reasons[reason] += 1
            if len(examples[reason]) < args.examples:
                examples[reason].append(f"{name}: {detail}")
    elapsed = time.monotonic() - started

    rejected = sum(reasons.values())
    print(f"{args.source}: {loaded + rejected} games, {loaded} loaded ({moves} moves), {rejected} rejected, "
          f"{elapsed:.1f} s with {args.processes} processes")
    for reason, count in reasons.most_common():
        print(f"  {count:7d}  {reason}")
        for example in examples[reason]:
            print(f"             e.g. {example}")
    return 1 if any(reason.startswith("crash") for reason in reasons) else 0


if __name__ == "__main__":
    sys.exit(main())
