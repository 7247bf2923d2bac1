"""Ingest throughput: how fast SGF records become training shards, per core, and what the whole archive costs.

Terms:
- sample: a fixed random choice of records from the archive (the same every run for one --seed).
- replay (the reference): parse each SGF and play its moves through game.py with full legality checks, which any
  ingest must do; the ratio ingest / replay says how much the encoding and compaction add on top of it.
- per core: one process, game_samples() (sgf_ingest.py) over the sample, in positions per second.
- pipeline: sgf_ingest.ingest() on the sample with --workers processes (records read, replayed, deduplicated,
  shards compressed and written), in positions per second of wall time.
- projection: the archive's positions (--archive-positions) over --cores times the per-core rate; the pipeline's
  share of that rate (start-up, reading, dedup, compression) is printed beside it, and on a small sample the
  workers' start-up dominates it.
- ownership rollouts (--ownership-playouts N): ingest's rollouts of counted games' final boards (sgf_ingest), all
  the rates with them; the per-core rate is then measured once more with the rollout policy's Python candidates
  (rollout.IMPLEMENTATIONS.python) in place of the compiled twin, and the ratio of the two printed.

Usage (from the repository root):
  python -m tools.bench_ingest ../shared/data/go19_curated.tar.xz --games 300 --workers 2
  python -m tools.bench_ingest COUNTED_GAMES --games 40 --ownership-playouts 16
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gtp_engine import rollout, sgf_io
from gtp_engine.training import dataset, sgf_ingest

GO19_POSITIONS = 18_000_000  # go19_curated: 71.7k games, about 250 positions each (weights/README.md)


def sample_records(source: str, games: int, seed: int) -> list[tuple[str, bytes]]:
    records = list(sgf_io.read_sgf_files(source))
    random.Random(seed).shuffle(records)
    return records[:games]


def replay_rate(records: list[tuple[str, bytes]], size: int) -> tuple[int, float]:
    """(positions, seconds) to parse and replay every usable record: the reference."""
    positions, started = 0, time.perf_counter()
    for name, data in records:
        try:
            record = sgf_io.load_sgf(data, source=name)
            if (record.width, record.height) != (size, size):
                continue
            state = record.to_game(max_moves=0)
            for color, point in record.moves:
                state.play(point, color)
                positions += 1
        except (sgf_io.SgfError, ValueError):
            continue
    return positions, time.perf_counter() - started


def samples_rate(records: list[tuple[str, bytes]], config: sgf_ingest.IngestConfig) -> tuple[int, float]:
    """(positions, seconds) for game_samples() over the records in this process."""
    positions, started = 0, time.perf_counter()
    for name, data in records:
        try:
            positions += len(sgf_ingest.game_samples(sgf_io.load_sgf(data, source=name), config)["move"])
        except (sgf_io.SgfError, sgf_ingest.Skip, ValueError):
            continue
    return positions, time.perf_counter() - started


@contextlib.contextmanager
def python_rollout_candidates():
    """Rollouts through the Python reference of the rollout policy's candidates while inside."""
    chosen = rollout.candidates
    rollout.candidates = rollout.IMPLEMENTATIONS.python.candidates
    try:
        yield
    finally:
        rollout.candidates = chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="SGF archive, folder or file")
    parser.add_argument("--games", type=int, default=300, help="records in the sample")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--workers", type=int, default=2, help="processes for the pipeline measurement")
    parser.add_argument("--cores", type=int, default=16, help="cores of the machine the projection is for")
    parser.add_argument("--archive-positions", type=int, default=GO19_POSITIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ownership-playouts", type=int, default=0,
                        help="rollouts judging counted games' dead stones, as ingest --ownership-playouts")
    args = parser.parse_args(argv)

    records = sample_records(args.source, args.games, args.seed)
    config = sgf_ingest.IngestConfig(size=args.size, workers=args.workers, shard_samples=50_000,
                                     ownership_playouts=args.ownership_playouts)
    replayed, replay_s = replay_rate(records, args.size)
    encoded, encode_s = samples_rate(records, config)
    print(f"sample: {len(records)} records; replay (reference) {replayed / replay_s:,.0f} positions/s; "
          f"game_samples {encoded / encode_s:,.0f} positions/s per core; ratio ingest/replay time "
          f"{(encode_s / max(encoded, 1)) / (replay_s / max(replayed, 1)):.2f}")
    if args.ownership_playouts:
        with python_rollout_candidates():
            _, python_s = samples_rate(records, config)
        chosen = "Python" if rollout.IMPLEMENTATIONS.compiled is None else "compiled"
        print(f"ownership rollouts {args.ownership_playouts} a counted game, rollout candidates {chosen}: "
              f"game_samples {encode_s:.1f} s against {python_s:.1f} s with the Python candidates "
              f"(ratio {python_s / encode_s:.2f})")

    with tempfile.TemporaryDirectory(prefix="bench_ingest-") as tmp:
        folder = Path(tmp) / "sgf"
        folder.mkdir()
        for number, (name, data) in enumerate(records):
            (folder / f"{number:06d}.sgf").write_bytes(data)
        started = time.perf_counter()
        sidecar = sgf_ingest.ingest([folder], Path(tmp) / "shards", config, progress=False)
        pipeline_s = time.perf_counter() - started
        shutil.rmtree(folder)
        loaded = dataset.load_shard(Path(tmp) / "shards" / sidecar["shards"][0]["file"])
        memory_per_sample = sum(value.nbytes for key, value in loaded.items() if key in dataset.SAMPLE_FIELDS) \
            / len(loaded["move"])
    samples = sidecar["samples"]["train"] + sidecar["samples"]["val"]
    per_sample = sidecar["bytes"] / max(samples, 1)
    per_core = encoded / encode_s
    projected = args.archive_positions / (per_core * args.cores)
    print(f"pipeline, {args.workers} workers: {samples:,} samples in {pipeline_s:.1f} s "
          f"({samples / pipeline_s:,.0f}/s, {samples / pipeline_s / (per_core * args.workers):.2f} of the workers' "
          f"per-core rate: process start-up, reading, dedup and compression); {per_sample:.1f} bytes a sample on disk")
    print(f"projection for {args.archive_positions:,} positions on {args.cores} cores of this speed: "
          f"{projected / 60:.1f} min of replay and encoding; shards {args.archive_positions * per_sample / 1e6:,.0f} MB "
          f"on disk, {args.archive_positions * memory_per_sample / 1e9:.1f} GB in memory when loaded whole")
    return 0


if __name__ == "__main__":
    sys.exit(main())
