"""Strength of a 19x19 network, measured the way issue 16 states its targets, each figure with its 95% interval.

Terms:
- held-out top-1: how often the network's largest policy output is the move played, over the validation split of
  a shard folder (games held out by game key at ingest, never trained on), with no symmetry, as train.py's
  validation counts it (no legality mask). Positions of one game are not independent, so the interval is the
  normal one with the variance taken over games (a cluster-robust standard error), not over positions.
- measurement: a match of our engine with the network (--weights) against GNU Go 3.8 level 10, Chinese rules,
  komi 7.5, GNU Go as referee, colours alternating (gtp_engine/match.py's play_match):
    raw       19x19, raw policy: --visits 1 --threads 1 (the network's first choice, no search)
    search19  19x19, byo-yomi 2 s a move (time_settings 0 2 1), default options
    search13  13x13, the same network, byo-yomi 2 s a move, default options
  The network is given with --weights, which the engine plays as given: to measure the engine as it ships (its
  int8 sibling, --precision auto), name the int8 file (weights/default.int8.onnx).
- target: the issue's bar for each figure (top-1 52%; raw 85% of 50 games; search19 19 of 20; search13 18 of 20).
- earlier games: with --sgf-dir, a measurement's folder keeps its games (game-N.sgf) and MEASUREMENT_FILE, which
  names the network (SHA-256), the measurement's settings and the opponent. A later run with the same folder counts
  the games already there and plays on from the next one (colours alternating as if it had not stopped) up to
  --games in all, so a measurement can span sessions; a folder of another network, measurement or opponent is
  refused.

Usage (from the repository root):
  python -m tools.strength19 top1 weights/default.onnx --data data/go19
  python -m tools.strength19 match weights/default.onnx raw search19 search13 --games 50 20 20 --sgf-dir runs/s19
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gtp_engine import match, match_stats, sgf_io
from gtp_engine.network_evaluator import ModelLoadError
from gtp_engine.onnx_evaluator import open_session, read_info

GNUGO = "gnugo --mode gtp --level 10 --chinese-rules"
REFEREE = "gnugo --mode gtp --chinese-rules"
MEASUREMENT_FILE = "measurement.json"  # in each measurement's --sgf-dir folder: what its games measured
KOMI = 7.5
TOP1_TARGET = 0.52


@dataclass(frozen=True)
class Measurement:
    size: int
    engine_options: str
    time_settings: str | None
    target: float  # the score the issue asks for
    games: int  # the games the figure is over


MEASUREMENTS = {
    "raw": Measurement(19, "--visits 1 --threads 1", None, 0.85, 50),
    "search19": Measurement(19, "", "0 2 1", 19 / 20, 20),
    "search13": Measurement(13, "", "0 2 1", 18 / 20, 20),
}


# ---- held-out top-1 -------------------------------------------------------------------------------------------

def held_out_top1(network: str, data: list[str], samples: int, batch: int = 256, threads: int = 0) -> dict:
    """Top-1 of the ONNX network on the first `samples` validation samples of the shard folders, with its 95%
    interval over games; also the mean policy cross-entropy."""
    import torch  # the shards expand with torch; only this measurement needs it

    from gtp_engine.training import dataset

    session, provider = open_session(network, "cpu", threads)
    read_info(session, network, provider)  # refuses a network that does not fit the engine's features
    val = dataset.Shards(data, "val")
    if not val.samples:
        raise dataset.DatasetError(f"no validation samples in {', '.join(data)}")
    arrays = val.head(samples)
    count = len(arrays["move"])
    hits = np.zeros(count, bool)
    loss = np.zeros(count)
    with torch.no_grad():
        for start in range(0, count, batch):
            index = np.arange(start, min(start + batch, count))
            spatial, global_, targets = dataset.expand(dataset.to_device(dataset.take(arrays, index), "cpu"),
                                                       val.height, val.width)
            policy = session.run(["policy"], {"spatial": spatial.numpy(), "global": global_.numpy()})[0]
            move = targets["move"].numpy()
            hits[index] = policy.argmax(axis=1) == move
            shifted = policy - policy.max(axis=1, keepdims=True)
            log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            loss[index] = -log_softmax[np.arange(len(index)), move]
    games = arrays["game"][:count]
    top1 = float(hits.mean())
    low, high = _clustered_interval(hits, games)
    return {"network": network, "samples": count, "games": int(len(np.unique(games))), "top1": top1,
            "low": low, "high": high, "policy_loss": float(loss.mean())}


def _clustered_interval(hits: np.ndarray, games: np.ndarray) -> tuple[float, float]:
    """95% interval of the mean of hits when the samples of one game are correlated: the variance of the
    per-game sums of residuals (the cluster-robust standard error of a mean)."""
    mean = hits.mean()
    _, cluster = np.unique(games, return_inverse=True)
    residuals = np.bincount(cluster, weights=hits - mean)
    clusters = len(residuals)
    if clusters < 2:
        return 0.0, 1.0
    se = math.sqrt(clusters / (clusters - 1) * float((residuals ** 2).sum())) / len(hits)
    return max(0.0, mean - match_stats.Z95 * se), min(1.0, mean + match_stats.Z95 * se)


# ---- matches against GNU Go -----------------------------------------------------------------------------------

def engine_command(network: str, measurement: Measurement) -> str:
    return " ".join([shlex.quote(sys.executable), "-m gtp_engine --weights", shlex.quote(network),
                     measurement.engine_options, "--log-level error"]).replace("  ", " ")


def run_match(network: str, name: str, games: int, sgf_dir: Path | None, deadline: float | None,
              gnugo: str = GNUGO, referee: str = REFEREE, max_moves: int = 0) -> dict:
    """Plays one measurement up to `games` games, those an earlier run left in sgf_dir/name included; returns
    its counts, score with 95% interval, Elo interval and the target."""
    measurement = MEASUREMENTS[name]
    folder = sgf_dir / name if sgf_dir else None
    earlier = earlier_games(folder, identity(network, name, gnugo)) if folder else []
    if earlier:
        print(f"{name}: {len(earlier)} games of an earlier run in {folder}", flush=True)

    def report(number: int, black: match.Program, white: match.Program, result: match.GameResult) -> None:
        print(f"{name} game {number}: {black.name} (B) vs {white.name} (W): {result.result} in {result.moves} moves",
              flush=True)

    played = []
    if len(earlier) < games:
        _, _, played = match.play_match(
            engine_command(network, measurement), gnugo, games, measurement.size, KOMI, referee=referee,
            max_moves=max_moves, time_settings=measurement.time_settings, sgf_dir=folder, deadline=deadline,
            on_game=report, first_game=len(earlier) + 1)
    return summarize(name, [g.score_for_a for g in earlier + played])


def identity(network: str, name: str, gnugo: str) -> dict:
    """What a measurement's games depend on: the network's bytes, the measurement's settings, the opponent."""
    measurement = MEASUREMENTS[name]
    return {"measurement": name, "network_sha256": hashlib.sha256(Path(network).read_bytes()).hexdigest(),
            "size": measurement.size, "engine_options": measurement.engine_options,
            "time_settings": measurement.time_settings, "komi": KOMI, "opponent": gnugo}


def earlier_games(folder: Path, expected: dict) -> list[match.GameResult]:
    """The games an earlier run of the same measurement left in folder (game-1.sgf on, in order); [] for a folder
    without games, which is then marked as this measurement's. Raises ValueError naming the folder when its games are
    another measurement's, network's or opponent's, or are not numbered 1 to N."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MEASUREMENT_FILE
    numbers = sorted(int(found.group(1)) for path in folder.glob("game-*.sgf")
                     if (found := re.fullmatch(r"game-(\d+)\.sgf", path.name)))
    if not numbers:
        marker.write_text(json.dumps(expected, indent=1) + "\n")
        return []
    if not marker.exists():
        raise ValueError(f"{folder}: holds games but no {MEASUREMENT_FILE} to say what they measured; give another "
                         f"--sgf-dir")
    try:
        stored = json.loads(marker.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{marker}: not readable JSON ({error})") from None
    differing = sorted(key for key in expected if stored.get(key) != expected[key])
    if differing:
        raise ValueError(f"{folder}: its games were played with another {', '.join(differing)}; give another "
                         f"--sgf-dir")
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"{folder}: the games are not game-1.sgf to game-{len(numbers)}.sgf without a gap")
    results = []
    for number in numbers:
        record = sgf_io.load_sgf_file(folder / f"game-{number}.sgf")
        if not record.result:
            raise ValueError(f"{folder / f'game-{number}.sgf'}: no result (RE)")
        results.append(match.GameResult(match.a_plays_black(number), record.result, len(record.moves)))
    return results


def summarize(name: str, results: list[float]) -> dict:
    measurement = MEASUREMENTS[name]
    row = {"measurement": name, "games": len(results), "wins": results.count(1.0), "draws": results.count(0.5),
           "losses": results.count(0.0), "target": measurement.target, "target_games": measurement.games}
    if results:
        score, low, high = match_stats.score_interval(results)
        row.update(score=score, low=low, high=high, elo=match_stats.elo_interval(results),
                   met=score >= measurement.target and len(results) >= measurement.games)
    return row


def format_row(row: dict) -> str:
    if "top1" in row:
        return (f"held-out top-1: {row['top1']:.1%} (95% {row['low']:.1%} .. {row['high']:.1%}) over "
                f"{row['samples']:,} positions of {row['games']:,} games; policy loss {row['policy_loss']:.3f}; "
                f"target {TOP1_TARGET:.0%}: {'met' if row['low'] >= TOP1_TARGET else 'not met'}")
    head = f"{row['measurement']}: {row['wins']} wins, {row['draws']} draws, {row['losses']} losses"
    if not row["games"]:
        return head + " (no game played)"
    elo, elo_low, elo_high = row["elo"]
    return (f"{head} in {row['games']} games; score {row['score']:.3f} (95% {row['low']:.3f} .. "
            f"{row['high']:.3f}), Elo vs GNU Go 10 {elo:+.0f} ({elo_low:+.0f} .. {elo_high:+.0f}); target "
            f"{row['target']:.0%} of {row['target_games']}: {'met' if row['met'] else 'not met'}")


# ---- command line ---------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    top1 = commands.add_parser("top1", help="held-out top-1 on the validation split of shard folders")
    top1.add_argument("network", help="ONNX network")
    top1.add_argument("--data", nargs="+", required=True, help="shard folders (python -m gtp_engine.training ingest)")
    top1.add_argument("--samples", type=int, default=50_000)
    top1.add_argument("--threads", type=int, default=0, help="onnxruntime threads (default: its choice)")
    games = commands.add_parser("match", help="matches against GNU Go 3.8 level 10")
    games.add_argument("network", help="ONNX network")
    games.add_argument("measurements", nargs="+", choices=sorted(MEASUREMENTS))
    games.add_argument("--games", type=int, nargs="+", help="games of each measurement (default: the issue's)")
    games.add_argument("--sgf-dir", type=Path, help="write <measurement>/game-N.sgf here; games an earlier run of the "
                                                    "same measurement left there count, and the match goes on")
    games.add_argument("--max-minutes", type=float, help="start no game after this many minutes in all")
    games.add_argument("--gnugo", default=GNUGO, help="the opponent's command")
    args = parser.parse_args(argv)
    if args.command == "top1":
        from gtp_engine.training.dataset import DatasetError
        try:
            print(format_row(held_out_top1(args.network, args.data, args.samples, threads=args.threads)))
        except (ModelLoadError, DatasetError) as error:
            print(f"strength19: {error}", file=sys.stderr)
            return 1
        return 0
    try:
        counts = args.games or [MEASUREMENTS[name].games for name in args.measurements]
        if len(counts) == 1:
            counts = counts * len(args.measurements)
        if len(counts) != len(args.measurements):
            parser.error("--games takes one count, or one for each measurement")
        deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
        rows = []
        for name, count in zip(args.measurements, counts):
            rows.append(run_match(args.network, name, count, args.sgf_dir, deadline, gnugo=args.gnugo))
            print(format_row(rows[-1]), flush=True)
        print("\n".join(["summary:"] + [format_row(row) for row in rows]))
    except (match.GtpError, OSError, ValueError) as error:
        print(f"strength19: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
