"""Game review (`gtp-engine review GAME.sgf`): every position of a game analysed, the SGF written back annotated.

Terms:
- position t: the position after the first t moves of the main line (0: the start, with setup stones), the
  opponent of the last mover to move (at 0: the first mover, else PL, else White after handicap stones; setup
  stones of Black alone, two or more, count as handicap), as the JSON analysis engine (analysis/) sets up a game.
  Each position is searched to the visits asked for, with the analysis search settings
  (search.SearchConfig.for_analysis) and a fresh tree. `workers` threads search positions at once, each with
  its own Searcher, sharing the network evaluator (and its cache); a progress bar on stderr counts the finished
  ones.
- views: winrates and score leads are Black's (Black's winrate, Black's lead in points), as Sabaki and KaTrain
  show them.
- points lost by move t (played in position t - 1): how much the mover's score lead fell from position t - 1,
  where the search's best move stands, to position t, after the move; KaTrain's measure. Negative: the move did
  better than the search expected before it.
- node comment: the move's winrate and score lead after it, the points it lost, and the best move in its stead.
- properties (on every move node): SBKV, Black's winrate in percent, read by Sabaki for its winrate graph; V, the
  SGF standard's node value, here Black's score lead; BM (bad move, 1 or 2 for a very bad one) where it lost at
  least MISTAKE or BLUNDER points. The root comment lists the worst moves.
- graph: Black's winrate and score lead per move, as a PNG (matplotlib, the optional plot extra).
- staging: the reviewed SGF and the graph are written to hidden files beside their places (staging_path) and
  renamed into place once both are whole, so no reader ever sees half a file.
- stopping: SIGTERM or SIGINT (Ctrl-C) ends the review at once: the staged files are removed, stderr says how many
  positions were done ("review stopped after 37 of 120 positions; nothing written"), and the status is 128 plus the
  signal's number (130 for Ctrl-C, 143 for SIGTERM), the shell's for a command a signal ended: no file was written.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

import gtp_engine
from gtp_engine import config as config_lib
from gtp_engine import coords, sgf_io
from gtp_engine import log as log_lib
from gtp_engine.board import BLACK, WHITE, IllegalMoveError
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import GameState
from gtp_engine.search import SearchConfig, Searcher, Snapshot, StopCondition
from gtp_engine.network_loader import NetworkLoader, NetworkUnavailable, exit_process

MISTAKE = 3.0  # points lost for BM[1]
BLUNDER = 8.0  # points lost for BM[2]
WORST_LISTED = 10

EvaluatorFor = Callable[[int, int], Evaluator]  # (width, height) -> evaluator; raises with a message if none


class ReviewError(Exception):
    """The game cannot be reviewed; the message names the file and the problem."""


@dataclass(frozen=True)
class MoveReview:
    number: int  # 1 for the first move
    color: int
    point: int
    winrate: float  # Black's, after the move
    score_lead: float  # Black's, after the move
    points_lost: float  # by the mover, see the module docstring
    best: str | None  # the search's best move in the position before, GTP vertex
    best_lead: float | None  # Black's lead after that move, as the search saw it


@dataclass(frozen=True)
class Review:
    record: sgf_io.GameRecord
    visits: int
    start_winrate: float  # Black's, position 0
    start_lead: float
    moves: list[MoveReview]

    def worst(self, count: int = WORST_LISTED) -> list[MoveReview]:
        return sorted((m for m in self.moves if m.points_lost > 0), key=lambda m: -m.points_lost)[:count]


@dataclass(frozen=True)
class PositionReview:
    """What the search of one position found, Black's view."""

    winrate: float  # Black's
    score_lead: float  # Black's, points
    best: str | None  # the search's best move (the first visited in its order), GTP vertex; None if none visited
    best_lead: float | None  # Black's lead after that move, as the search saw it


def analyse(record: sgf_io.GameRecord, evaluator_for: EvaluatorFor, search_config: SearchConfig, visits: int,
            workers: int, progress: Callable[[int, int], None] = lambda done, total: None) -> Review:
    """Searches every position of the record with `visits` visits, `workers` positions at once; progress(done,
    total) after each one (and once before the first); raises ReviewError."""
    try:
        record.to_game()  # the record's legality as loadsgf judges it, its moves numbered from 1
    except sgf_io.SgfError as error:
        raise ReviewError(str(error)) from None
    positions = _positions(record)
    try:
        evaluator = evaluator_for(record.width, record.height)
    except Exception as error:  # noqa: BLE001 - no network for this size: the message says why
        raise ReviewError(f"{record.source}: no network for a {record.width}x{record.height} board: "
                          f"{error}") from None
    try:
        results = _search_positions(positions, evaluator, search_config.for_analysis(), visits, workers, progress)
    except Exception as error:  # noqa: BLE001 - a search failed: the message says why
        raise ReviewError(f"{record.source}: analysis failed: {error}") from None
    return _review(record, visits, results)


def _positions(record: sgf_io.GameRecord) -> list[GameState]:
    """Positions 0 to the number of moves (see position t)."""
    game = GameState(record.width, record.height, komi=record.komi or 0.0, rules=record.game_rules())
    for color in (BLACK, WHITE):
        points = [p for c, p in record.setup if c == color]
        if points:
            game.place_setup(color, points)
    black = sum(1 for c, _ in record.setup if c == BLACK)
    if black >= 2 and black == len(record.setup):
        game.handicap_stones = black
    if record.moves:
        first = record.moves[0][0]
    elif record.first_player is not None:
        first = record.first_player
    else:
        first = WHITE if game.handicap_stones else BLACK
    if first != game.to_play:
        game.set_to_play(first)
    positions = [game.copy()]
    for number, (color, point) in enumerate(record.moves, 1):
        try:
            game.play(point, color)
        except IllegalMoveError as error:
            raise ReviewError(f"{record.source}: move {number}: {error}") from None
        positions.append(game.copy())
    return positions


def _search_positions(positions: list[GameState], evaluator: Evaluator, config: SearchConfig, visits: int,
                      workers: int, progress: Callable[[int, int], None]) -> dict[int, PositionReview]:
    """Each position's review by number, from `workers` threads with a Searcher each; raises the first error a
    search raised, once the other searches have stopped."""
    total = len(positions)
    results: dict[int, PositionReview] = {}
    errors: list[Exception] = []
    waiting = iter(range(total))
    lock = threading.Lock()
    failed = threading.Event()  # interrupts the other searches

    def work() -> None:
        searcher = Searcher(evaluator, config)
        while not failed.is_set():
            with lock:
                t = next(waiting, None)
            if t is None:
                return
            searcher.reset()  # a fresh tree for each position
            stop = StopCondition.for_limits(searcher.clock(), visits=visits, interrupt=failed)
            try:
                snapshot = searcher.search(positions[t], stop).snapshot
            except Exception as error:  # noqa: BLE001 - raised in the calling thread once every thread has stopped
                with lock:
                    errors.append(error)
                failed.set()
                return
            with lock:
                if not failed.is_set():
                    results[t] = _position_review(positions[t], snapshot)
                    progress(len(results), total)

    threads = [threading.Thread(target=work, name=f"review-{i}", daemon=True) for i in range(max(1, workers))]
    progress(0, total)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def _position_review(state: GameState, snapshot: Snapshot) -> PositionReview:
    """A snapshot, from the side to move's view, turned to Black's."""
    black = snapshot.to_play == BLACK
    sign = 1.0 if black else -1.0
    best = next((m for m in snapshot.moves if m.visits > 0), None)
    return PositionReview(
        winrate=snapshot.winrate if black else 1.0 - snapshot.winrate, score_lead=sign * snapshot.score_lead,
        best=coords.to_gtp(state.grid, best.point) if best is not None else None,
        best_lead=sign * best.score_lead if best is not None else None,
    )


def _review(record: sgf_io.GameRecord, visits: int, results: dict[int, PositionReview]) -> Review:
    moves = []
    for t, (color, point) in enumerate(record.moves, 1):
        before, after = results[t - 1], results[t]
        sign = 1.0 if color == BLACK else -1.0
        moves.append(MoveReview(
            number=t, color=color, point=point, winrate=after.winrate, score_lead=after.score_lead,
            points_lost=sign * (before.score_lead - after.score_lead), best=before.best, best_lead=before.best_lead,
        ))
    return Review(record, visits, results[0].winrate, results[0].score_lead, moves)


# ---- writing -------------------------------------------------------------------------------------------------


def _side(color: int) -> str:
    return "Black" if color == BLACK else "White"


def _lead_text(lead: float) -> str:
    return f"{'B' if lead >= 0 else 'W'}+{abs(lead):.1f}"


def move_comment(review: Review, move: MoveReview) -> str:
    g = review.record.grid
    played = coords.to_gtp(g, move.point)
    lines = [f"Move {move.number} ({_side(move.color)} {played}): Black's winrate {100 * move.winrate:.1f}%, "
             f"score {_lead_text(move.score_lead)}"]
    if move.points_lost >= 0:
        lines.append(f"{_side(move.color)} lost {move.points_lost:.1f} points")
    else:
        lines.append(f"{_side(move.color)} gained {-move.points_lost:.1f} points on the search's expectation")
    if move.best is not None and move.best != played:
        lines.append(f"Best was {move.best} (score {_lead_text(move.best_lead)})")
    return "\n".join(lines)


def root_comment(review: Review) -> str:
    lines = [f"Reviewed by gtp_engine {gtp_engine.__version__}, {review.visits} visits per position. "
             f"Black's winrate and score lead on every move (SBKV: Sabaki's winrate graph; V: score lead)."]
    worst = review.worst()
    if worst:
        g = review.record.grid
        lines.append("Worst moves:")
        lines += [f"{i}. Move {m.number} ({_side(m.color)} {coords.to_gtp(g, m.point)}): lost {m.points_lost:.1f} "
                  f"points" + (f", best was {m.best}" if m.best else "") for i, m in enumerate(worst, 1)]
    else:
        lines.append("No move lost points by the search's measure.")
    return "\n".join(lines)


def move_properties(review: Review, move: MoveReview) -> dict[str, str]:
    properties = {"C": move_comment(review, move), "SBKV": f"{100 * move.winrate:.2f}",
                  "V": f"{move.score_lead:.1f}"}
    if move.points_lost >= BLUNDER:
        properties["BM"] = "2"
    elif move.points_lost >= MISTAKE:
        properties["BM"] = "1"
    return properties


def annotated_sgf(data: bytes, review: Review) -> bytes:
    root = {"C": root_comment(review), "SBKV": f"{100 * review.start_winrate:.2f}",
            "V": f"{review.start_lead:.1f}"}
    return sgf_io.annotate_main_line(data, review.record.source, root,
                                     [move_properties(review, m) for m in review.moves])


def plot(review: Review, path: str | Path) -> None:
    """Black's winrate and score lead per move as a PNG; ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    numbers = [0] + [m.number for m in review.moves]
    winrates = [100 * review.start_winrate] + [100 * m.winrate for m in review.moves]
    leads = [review.start_lead] + [m.score_lead for m in review.moves]
    figure, winrate_axis = pyplot.subplots(figsize=(8, 3.2), dpi=100)
    winrate_axis.plot(numbers, winrates, color="black", linewidth=1.5, label="Black's winrate")
    winrate_axis.axhline(50, color="grey", linewidth=0.5)
    winrate_axis.set_ylim(0, 100)
    winrate_axis.set_xlim(0, max(numbers) or 1)
    winrate_axis.set_xlabel("move")
    winrate_axis.set_ylabel("Black's winrate (%)")
    lead_axis = winrate_axis.twinx()
    lead_axis.plot(numbers, leads, color="tab:blue", linewidth=1.0, label="Black's score lead")
    bound = max(5.0, max(abs(x) for x in leads))
    lead_axis.set_ylim(-bound, bound)
    lead_axis.set_ylabel("Black's score lead (points)", color="tab:blue")
    for m in review.worst(5):
        winrate_axis.annotate(str(m.number), (m.number, 100 * m.winrate), fontsize=7, color="tab:red",
                              xytext=(0, 6), textcoords="offset points", ha="center")
    record = review.record
    title = f"{record.black or 'Black'} vs {record.white or 'White'}" + (f", {record.result}" if record.result else "")
    winrate_axis.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)


class ProgressBar:
    """A one-line progress bar on a terminal stream (stderr), redrawn in place; done and total: its last count
    (total None before the first)."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 30):
        self.stream = stream
        self.width = width
        self.done, self.total = 0, None
        self._ended = False
        self._lock = threading.RLock()  # end() may run in a signal handler, in the thread that draws

    def __call__(self, done: int, total: int) -> None:
        filled = self.width * done // max(total, 1)
        with self._lock:
            if self._ended:
                return
            self.done, self.total = done, total
            self.stream.write(f"\rreview: [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} positions")
            if done == total:
                self.stream.write("\n")
            self.stream.flush()

    def end(self, line: str) -> None:
        """Writes `line` below the bar; nothing is drawn after it."""
        with self._lock:
            self._ended = True
            self.stream.write(("\n" if self.total is not None and self.done < self.total else "") + line + "\n")
            self.stream.flush()


# ---- the command line ---------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine review",
        description="Analyses every position of a game and writes the SGF back with each move's winrate, score lead "
                    "and points lost in its comment (SBKV for Sabaki's graph), the worst moves in the root comment.")
    p.add_argument("game", metavar="GAME.sgf")
    p.add_argument("-o", "--output", metavar="OUT.sgf", help="where to write the reviewed game "
                                                             "(default: GAME-review.sgf beside the game)")
    p.add_argument("--visits", type=int, default=200, metavar="N", help="visits per position (default: 200)")
    p.add_argument("--plot", metavar="GRAPH.png", help="also draw Black's winrate and score lead per move "
                                                       "(needs matplotlib: pip install 'gtp_engine[plot]')")
    p.add_argument("--weights", metavar="FILE", help="ONNX network (default: the shipped one for the board size)")
    p.add_argument("--threads", type=int, metavar="N", help="positions searched at once (default: the CPU count)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def main(argv: list[str]) -> None:
    """gtp-engine review ARGS."""
    p = parser()
    args = p.parse_args(argv)
    log_lib.setup(args.log_level)
    if args.visits < 1 or (args.threads is not None and args.threads < 1):
        p.error("--visits and --threads take a positive integer")
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - checked before the analysis, not after it
        except ImportError:
            p.error("--plot needs matplotlib, which is not installed: pip install 'gtp_engine[plot]'")
    try:
        data = Path(args.game).read_bytes()
        record = sgf_io.load_sgf(data, source=args.game)
    except OSError as error:
        p.error(f"cannot read {args.game}: {error.strerror}")
    except sgf_io.SgfError as error:
        p.error(str(error))
    output = Path(args.output) if args.output else Path(args.game).with_name(Path(args.game).stem + "-review.sgf")
    if output.resolve() == Path(args.game).resolve():
        p.error(f"{output} is the game itself: the review is written to another file (-o)")
    staged = {output: staging_path(output)}  # place -> where it is written first (see staging)
    if args.plot:
        staged[Path(args.plot)] = staging_path(Path(args.plot))
    progress = ProgressBar(sys.stderr)

    def unstage() -> None:
        for part in staged.values():
            part.unlink(missing_ok=True)

    def stopped(signum: int) -> int:  # see stopping
        unstage()
        progress.end("review stopped " + ("before its analysis began" if progress.total is None else
                                          f"after {progress.done} of {progress.total} positions") + "; nothing written")
        return 128 + signum

    log_lib.end_at_stop_signals(stopped)
    engine_config = config_lib.build({"weights": args.weights} if args.weights else {})
    loader = NetworkLoader(engine_config, on_unusable=exit_process("gtp-engine review"))
    try:  # loaded before the progress bar is drawn: a network that cannot be used ends the process with its line
        loader.get(record.width, record.height)
    except NetworkUnavailable as error:
        sys.stderr.write(f"gtp-engine review: {error}\n")
        log_lib.end_process(1)

    def evaluator_for(width: int, height: int):
        return loader.get(width, height).evaluator

    base = engine_config.player.analysis_search
    try:
        result = analyse(record, evaluator_for, base, args.visits, args.threads or os.cpu_count() or 1, progress)
        staged[output].write_bytes(annotated_sgf(data, result))
        if args.plot:
            plot(result, staged[Path(args.plot)])
        log_lib.ignore_stop_signals()  # the files are whole: the review ends as it is
        for place, part in staged.items():
            os.replace(part, place)
    except (ReviewError, OSError) as error:
        unstage()
        sys.stderr.write(f"gtp-engine review: {error}\n")
        log_lib.end_process(1)
    sys.stderr.write(f"reviewed game written to {output}" + (f", graph to {args.plot}" if args.plot else "") + "\n")
    log_lib.end_process(0)


def staging_path(path: Path) -> Path:
    """Where `path` is written before it is renamed into place (see staging): beside it, so that the rename moves
    no data, hidden, and with its suffix, from which matplotlib takes the graph's format."""
    return path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
