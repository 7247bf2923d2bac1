"""Game review (`gtp-engine review GAME.sgf`): every position of a game analysed, the SGF written back annotated.

Terms:
- position t: the position after the first t moves of the main line (0: the start, with setup stones), the
  opponent of the last mover to move (at 0: the first mover, else PL, else White after handicap stones; setup
  stones of Black alone, two or more, count as handicap), as the JSON analysis engine (analysis/) sets up a game.
  Each position is searched until its root has the visits asked for, with the analysis search settings
  (search.SearchConfig.for_analysis).
- stretch: a run of consecutive positions that one thread searches in order, each search starting from the
  subtree of the move played in the one before (the searcher's tree reuse), so the visits that search gave the
  played move count towards the next position's; a stretch starts from a fresh tree. `workers` threads take
  stretches in the game's order, each with its own Searcher, sharing the network evaluator (and its cache)
  through a batching evaluator (batching.py) that gathers their batches into shared network calls; a progress
  bar on stderr counts the finished positions.
- rules and komi: the game's (RU, KM); without RU Chinese rules, without KM the rules' komi for the game's
  handicap (Rules.default_komi); the root comment says which.
- views: winrates and score leads are Black's (Black's winrate, Black's lead in points), as Sabaki and KaTrain
  show them; a lead is written B+x or W+x and counted in tenths of a point, as written.
- best move: the search's choice in the position before a move (its first visited move), its lead that move's
  own lead in that search.
- played lead: the mover's lead after the move played, taken from the search of the position before where the
  move has visits there, else from the root of the next position's search. The search before is the more
  trustworthy judge: it weighs the best move and the one played in one tree, with the same noise and depth, where
  the next position's root is another search whose own noise, at a few visits, is as large as the losses measured.
- points lost by move t: the mover's lead after the best move minus the played lead, so the comment's numbers add
  up to it (at most 0.1 apart from the leads' own difference). The best move played loses 0. Negative: the move
  did better than the best move, by the search's measure.
- node comment: the move's winrate and score lead after it (the next position's root), the points it lost with
  the two leads they come from. A move that lost at least VARIATION points also gets the best move's principal
  variation (PV) as an SGF variation beside it, commented.
- properties (on every move node): SBKV, Black's winrate in percent, read by Sabaki for its winrate graph; V, the
  SGF standard's node value, here Black's score lead; BM (bad move, 1 or 2 for a very bad one) where it lost at
  least MISTAKE or BLUNDER points. The root comment states the engine, network, visits, rules and komi and lists
  the worst moves.
- own text: the review's comments, known by their first lines (OWN_FIRST_LINE, which those of earlier versions
  match too): a second review replaces them, their variations and the properties written with them (SBKV and V;
  BM where the comment's points lost reach MISTAKE) through sgf_io.annotate_main_line, and keeps the rest, so
  reviewing a reviewed game gives what reviewing the game gives. A BM of the game's own on a move the review
  marks is replaced for good.
- graph: Black's winrate and score lead per move, as a PNG (matplotlib, the optional plot extra). The players'
  names in its title are drawn in the regular style of fonts that have their characters; characters that no
  installed font draws (matplotlib's Last Resort font has boxes only) are left out.
- staging: the reviewed SGF and the graph are written to hidden files beside their places (staging_path) and
  renamed into place once both are whole, so no reader ever sees half a file.
- stopping: SIGTERM or SIGINT (Ctrl-C) ends the review at once: the staged files are removed, stderr says how many
  positions were done ("review stopped after 37 of 120 positions; nothing written"), and the status is 128 plus the
  signal's number (130 for Ctrl-C, 143 for SIGTERM), the shell's for a command a signal ended: no file was written.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

import gtp_engine
from gtp_engine import config as config_lib
from gtp_engine import coords, sgf_io
from gtp_engine import log as log_lib
from gtp_engine.batching import BatchingEvaluator
from gtp_engine.board import BLACK, WHITE, IllegalMoveError
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import GameState, Rules
from gtp_engine.network_loader import NetworkLoader, NetworkUnavailable, exit_process
from gtp_engine.search import SearchConfig, Searcher, Snapshot, StopCondition

MISTAKE = 3.0  # points lost for BM[1]
BLUNDER = 8.0  # points lost for BM[2]
VARIATION = 1.0  # points lost for the best move's line as a variation
WORST_LISTED = 10
STRETCHES_PER_WORKER = 4  # a game is cut into this many stretches a thread (module docstring)
# The first line of each own text (module docstring): the root comment, a move's, a variation's.
OWN_FIRST_LINE = re.compile(r"Reviewed by gtp_engine |Move \d+ \((?:Black|White) \w+\): Black's winrate "
                            r"|Best at move \d+ \((?:Black|White) \w+\), by gtp_engine's search")
_LOSS = re.compile(r"^(?:Black|White) lost (\d+\.\d) points", re.MULTILINE)  # in a move's comment
# matplotlib's Last Resort fonts: a box naming the Unicode block for every character, not the character itself.
_PLACEHOLDER_FONT = "Last Resort"
_RULES_NAMES = {"aga": "AGA", "new-zealand": "New Zealand", "tromp-taylor": "Tromp-Taylor"}

EvaluatorFor = Callable[[int, int], Evaluator]  # (width, height) -> evaluator; raises with a message if none


class ReviewError(Exception):
    """The game cannot be reviewed; the message names the file and the problem."""


@dataclass(frozen=True)
class MoveReview:
    number: int  # 1 for the first move
    color: int
    point: int
    winrate: float  # Black's, after the move (the next position's root)
    score_lead: float  # Black's, after the move (the next position's root)
    best: int | None  # the best move (module docstring); None where the search visited no move
    best_lead: float  # Black's lead after the best move; the root's where there is none
    played_lead: float  # Black's, the played lead (module docstring)
    played_searched: bool  # the played lead is the move's own in the search before it, not the next root's
    points_lost: float  # by the mover, see the module docstring
    line: list[int]  # the best move's principal variation, from the best move


@dataclass(frozen=True)
class Review:
    record: sgf_io.GameRecord
    visits: int
    rules: Rules  # as searched
    komi: float
    start_winrate: float  # Black's, position 0
    start_lead: float
    moves: list[MoveReview]

    def worst(self, count: int = WORST_LISTED) -> list[MoveReview]:
        return sorted((m for m in self.moves if m.points_lost > 0), key=lambda m: -m.points_lost)[:count]


@dataclass(frozen=True)
class PositionReview:
    """What the search of one position found, Black's view."""

    winrate: float  # Black's, the root
    score_lead: float  # Black's, points, the root
    best: int | None  # the best move (module docstring); None if no move was visited
    best_lead: float | None  # Black's lead after that move, as the search saw it
    line: list[int]  # the best move's principal variation; empty without one
    leads: dict[int, float]  # Black's lead after each visited move, as the search saw it


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
    return _review(record, positions[0], visits, results)


def _positions(record: sgf_io.GameRecord) -> list[GameState]:
    """Positions 0 to the number of moves (see position t)."""
    game = GameState(record.width, record.height, komi=0.0 if record.komi is None else record.komi,
                     rules=record.game_rules())
    for color in (BLACK, WHITE):
        points = [p for c, p in record.setup if c == color]
        if points:
            game.place_setup(color, points)
    black = sum(1 for c, _ in record.setup if c == BLACK)
    if black >= 2 and black == len(record.setup):
        game.handicap_stones = black
    if record.komi is None:  # no KM: the rules' komi for the game
        game.komi = game.rules.default_komi(game.handicap_stones)
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
    length = -(-total // (max(1, workers) * STRETCHES_PER_WORKER))  # of a stretch (module docstring)
    waiting = iter(range(0, total, length))
    lock = threading.Lock()
    failed = threading.Event()  # interrupts the other searches

    # as many network calls at once as one search makes: its evaluation threads and itself
    shared = BatchingEvaluator(evaluator, parallel=config.evaluation_threads_for() + 1)

    def work() -> None:
        with shared.client():  # between its searches too: it starts the next one at once
            search_each()

    def search_each() -> None:
        searcher = Searcher(shared, config)
        while not failed.is_set():
            with lock:
                first = next(waiting, None)
            if first is None:
                return
            searcher.reset()  # a fresh tree for each stretch, kept from one position to the next within it
            for t in range(first, min(first + length, total)):
                stop = StopCondition.for_limits(searcher.clock(), visits=visits, interrupt=failed)
                try:
                    snapshot = searcher.search(positions[t], stop).snapshot
                except Exception as error:  # noqa: BLE001 - raised in the calling thread once every thread stopped
                    with lock:
                        errors.append(error)
                    failed.set()
                    return
                with lock:
                    if failed.is_set():
                        return
                    results[t] = _position_review(positions[t], snapshot)
                    progress(len(results), total)

    threads = [threading.Thread(target=work, name=f"review-{i}", daemon=True) for i in range(max(1, workers))]
    progress(0, total)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    shared.close()
    if errors:
        raise errors[0]
    return results


def _position_review(state: GameState, snapshot: Snapshot) -> PositionReview:
    """A snapshot, from the side to move's view, turned to Black's."""
    black = snapshot.to_play == BLACK
    sign = 1.0 if black else -1.0
    visited = [m for m in snapshot.moves if m.visits > 0]
    best = visited[0] if visited else None
    return PositionReview(
        winrate=snapshot.winrate if black else 1.0 - snapshot.winrate, score_lead=sign * snapshot.score_lead,
        best=best.point if best is not None else None, best_lead=sign * best.score_lead if best is not None else None,
        line=list(best.pv) if best is not None else [], leads={m.point: sign * m.score_lead for m in visited},
    )


def _review(record: sgf_io.GameRecord, start: GameState, visits: int, results: dict[int, PositionReview]) -> Review:
    return Review(record, visits, start.rules, start.komi, results[0].winrate, results[0].score_lead,
                  [_move_review(t, color, point, results[t - 1], results[t])
                   for t, (color, point) in enumerate(record.moves, 1)])


def _move_review(number: int, color: int, point: int, before: PositionReview, after: PositionReview) -> MoveReview:
    """Move `number`, played in the position `before` was searched in, leading to the one of `after`."""
    best_lead = before.best_lead if before.best is not None else before.score_lead
    played_searched = point in before.leads
    played_lead = best_lead if point == before.best else before.leads.get(point, after.score_lead)
    sign = 1.0 if color == BLACK else -1.0
    points_lost = round(sign * (round(best_lead, 1) - round(played_lead, 1)), 1) + 0.0  # + 0.0: no -0.0
    return MoveReview(number=number, color=color, point=point, winrate=after.winrate, score_lead=after.score_lead,
                      best=before.best, best_lead=best_lead, played_lead=played_lead, played_searched=played_searched,
                      points_lost=points_lost, line=before.line)


# ---- writing -------------------------------------------------------------------------------------------------


def _side(color: int) -> str:
    return "Black" if color == BLACK else "White"


def _lead_text(lead: float) -> str:
    return f"{'B' if round(lead, 1) >= 0 else 'W'}+{abs(lead):.1f}"


def _loss_text(review: Review, move: MoveReview) -> str:
    """The points the move lost and the two leads they come from, as one line."""
    g = review.record.grid
    played, side = coords.to_gtp(g, move.point), _side(move.color)
    if move.point == move.best:
        return f"{side} lost 0.0 points: {played} was the search's best move ({_lead_text(move.best_lead)})"
    if move.points_lost >= 0:
        grade = ", a blunder" if move.points_lost >= BLUNDER else ", a mistake" if move.points_lost >= MISTAKE else ""
        head = f"{side} lost {move.points_lost:.1f} points{grade}"
    else:
        head = f"{side} gained {-move.points_lost:.1f} points on the best move"
    best = f"best {coords.to_gtp(g, move.best)}" if move.best is not None else "before it"
    source = "" if move.played_searched else " (from the search after it: the search before gave it no visits)"
    return f"{head}: {best} {_lead_text(move.best_lead)}, played {played} {_lead_text(move.played_lead)}{source}"


def move_comment(review: Review, move: MoveReview) -> str:
    played = coords.to_gtp(review.record.grid, move.point)
    return (f"Move {move.number} ({_side(move.color)} {played}): Black's winrate {100 * move.winrate:.1f}%, "
            f"score {_lead_text(move.score_lead)}\n{_loss_text(review, move)}")


def _rules_text(review: Review) -> str:
    record = review.record
    text = f"{_RULES_NAMES.get(review.rules.name, review.rules.name.capitalize())} rules"
    if not record.rules:
        text += " (the game names none)"
    elif record.rules.strip().lower() != review.rules.name:
        text += f" (for the game's RU[{record.rules}])"
    text += f", komi {review.komi:g}"
    return text + (" (the game gives none: the rules' default)" if record.komi is None else "")


def root_comment(review: Review, network: str) -> str:
    lines = [f"Reviewed by gtp_engine {gtp_engine.__version__} with {network}, {review.visits} visits per position, "
             f"{_rules_text(review)}",
             "Black's winrate and score lead after every move (SBKV: Sabaki's winrate graph; V: the score lead). "
             "Points lost: the mover's lead after the search's best move minus that after the move played, both as "
             "the search of the position before saw them."]
    worst = review.worst()
    if worst:
        g = review.record.grid
        lines.append("Worst moves:")
        lines += [f"{i}. Move {m.number} ({_side(m.color)} {coords.to_gtp(g, m.point)}): lost {m.points_lost:.1f} "
                  f"points ({'best ' + coords.to_gtp(g, m.best) if m.best is not None else 'before it'} "
                  f"{_lead_text(m.best_lead)}, played {_lead_text(m.played_lead)})" for i, m in enumerate(worst, 1)]
    else:
        lines.append("No move lost points by the search's measure.")
    return "\n".join(lines)


def own_properties(paragraph: str) -> tuple[str, ...] | None:
    """sgf_io.OwnText of the review: the properties written with a paragraph of own text, None for other text. BM
    goes with a move's comment where the points it names reach MISTAKE."""
    if not OWN_FIRST_LINE.match(paragraph):
        return None
    loss = _LOSS.search(paragraph)
    return ("SBKV", "V", "BM") if loss and float(loss.group(1)) >= MISTAKE else ("SBKV", "V")


def move_properties(review: Review, move: MoveReview) -> dict[str, str]:
    properties = {"C": move_comment(review, move), "SBKV": f"{100 * move.winrate:.2f}",
                  "V": f"{move.score_lead:.1f}"}
    if move.points_lost >= BLUNDER:
        properties["BM"] = "2"
    elif move.points_lost >= MISTAKE:
        properties["BM"] = "1"
    return properties


def variation(review: Review, move: MoveReview) -> sgf_io.Variation | None:
    """The best move's line beside a move that lost at least VARIATION points; None for the others."""
    if move.points_lost < VARIATION or move.best is None or move.best == move.point or not move.line:
        return None
    g = review.record.grid
    colors = [move.color, BLACK + WHITE - move.color]
    line = [(colors[i % 2], point) for i, point in enumerate(move.line)]
    comment = (f"Best at move {move.number} ({_side(move.color)} {coords.to_gtp(g, move.best)}), by gtp_engine's "
               f"search: score {_lead_text(move.best_lead)}, against {_lead_text(move.played_lead)} after "
               f"{coords.to_gtp(g, move.point)}, the move played\n"
               f"The search's line: {' '.join(coords.to_gtp(g, point) for point in move.line)}")
    return sgf_io.Variation(line, comment)


def annotated_sgf(data: bytes, review: Review, network: str) -> bytes:
    """The game's SGF with the review's annotations, in place of any earlier review's (own text); `network`: the
    file name of the network searched with."""
    root = {"C": root_comment(review, network), "SBKV": f"{100 * review.start_winrate:.2f}",
            "V": f"{review.start_lead:.1f}"}
    variations = {i: v for i, v in enumerate(variation(review, m) for m in review.moves) if v is not None}
    return sgf_io.annotate_main_line(data, review.record, root, [move_properties(review, m) for m in review.moves],
                                     variations, own_properties)


def network_name(loader: NetworkLoader) -> str:
    """The file names of the networks the loader has loaded, for the root comment."""
    return " + ".join(Path(network.info.path).name for network in loader.networks()) or "no network"


def _title_fonts(text: str) -> tuple[set[str], list[str]]:
    """The characters of the text that no installed font draws (a placeholder font's boxes do not count), and the
    font families to draw the rest with: matplotlib's default, then the first fonts that have the characters it
    lacks (matplotlib falls back through them, one character at a time)."""
    import matplotlib
    from matplotlib import font_manager

    families = list(matplotlib.rcParams["font.family"])
    missing = {c for c in text if not c.isspace()} - _characters(font_manager.findfont(font_manager.FontProperties()))
    for font in font_manager.fontManager.ttflist:
        if not missing:
            break
        if font.name.startswith(_PLACEHOLDER_FONT) or font.name in families or not _regular(font):
            continue
        found = missing & _characters(font.fname)
        if found:
            families.append(font.name)
            missing -= found
    return missing, families


def _regular(font) -> bool:
    """Whether a font_manager entry is its family's regular style, the one the title is drawn in."""
    return font.style == "normal" and font.weight in (400, "normal", "regular") and font.stretch == "normal"


@functools.lru_cache(maxsize=None)
def _characters(font_file: str) -> frozenset[str]:
    """The characters a font file has; none where FreeType cannot read it."""
    from matplotlib import ft2font

    try:
        return frozenset(chr(code) for code in ft2font.FT2Font(font_file).get_charmap())
    except (OSError, RuntimeError):
        return frozenset()


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
    missing, families = _title_fonts(f"{record.black or ''}{record.white or ''}{record.result or ''}")
    black, white, result = ("".join(c for c in text or "" if c not in missing).strip()
                            for text in (record.black, record.white, record.result))
    winrate_axis.set_title(f"{black or 'Black'} vs {white or 'White'}" + (f", {result}" if result else ""),
                           fontsize=9, fontfamily=families)
    with warnings.catch_warnings():  # a glyph that the fonts chosen lack all the same (a font's charmap misleads)
        warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)
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


class _Parser(argparse.ArgumentParser):
    """Refuses arguments with one line on stderr, "gtp-engine review: PROBLEM", and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gtp-engine review",
        description="Analyses every position of a game and writes the SGF back with each move's winrate, score lead "
                    "and points lost in its comment (SBKV for Sabaki's graph), the best line beside the moves that "
                    "lost points, the worst moves in the root comment. A reviewed game reviewed again has its "
                    "review replaced.")
    p.add_argument("game", metavar="GAME.sgf")
    p.add_argument("-o", "--output", metavar="OUT.sgf", help="where to write the reviewed game "
                                                             "(default: GAME-review.sgf beside the game)")
    p.add_argument("--visits", type=int, default=200, metavar="N", help="visits per position (default: 200)")
    p.add_argument("--plot", metavar="GRAPH.png", help="also draw Black's winrate and score lead per move "
                                                       "(needs matplotlib: pip install 'gtp_engine[plot]')")
    p.add_argument("--weights", metavar="FILE", help="ONNX network (default: the shipped one for the board size)")
    p.add_argument("--threads", type=int, metavar="N", help="positions searched at once (default: the CPU count)")
    p.add_argument("--seed", type=int, metavar="N", help="random seed: with --threads 1, the same review each time")
    p.add_argument("--rules", metavar="NAME|JSON", help="the rules to review the game under: a rule set name or "
                                                       "KataGo's JSON rules (default: the game's RU, else chinese)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def _checked(p: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[bytes, sgf_io.GameRecord, Path]:
    """The game's bytes, its record and the output path, once every argument is checked (p.error otherwise): before
    the network is loaded or anything searched."""
    if args.visits < 1 or (args.threads is not None and args.threads < 1):
        p.error("--visits and --threads take a positive integer")
    if args.seed is not None and args.seed < 0:
        p.error("--seed takes an integer >= 0")
    try:
        data = Path(args.game).read_bytes()
    except OSError as error:
        p.error(f"cannot read {args.game}: {error.strerror}")
    output = Path(args.output) if args.output else Path(args.game).with_name(Path(args.game).stem + "-review.sgf")
    if output.resolve() == Path(args.game).resolve():
        p.error(f"{output} is the game itself: the review is written to another file (-o)")
    _check_writable(p, output, "-o")
    if args.plot:
        graph = Path(args.plot)
        if graph.suffix.lower() != ".png":
            p.error(f"--plot {graph}: the graph is a PNG file, named .png")
        for other, name in ((Path(args.game), "the game"), (output, "the output")):
            if graph.resolve() == other.resolve():
                p.error(f"--plot {graph} is {name}")
        _check_writable(p, graph, "--plot")
        try:
            import matplotlib  # noqa: F401 - checked before the analysis, not after it
        except ImportError:
            p.error("--plot needs matplotlib, which is not installed: pip install 'gtp_engine[plot]'")
    try:
        record = sgf_io.load_sgf(data, source=args.game)
    except sgf_io.SgfError as error:
        p.error(str(error))
    if args.rules:
        try:
            Rules.from_katago(args.rules)
        except ValueError as error:
            p.error(f"--rules: {error}")
        record.rules = args.rules  # what the record's positions are replayed under (GameRecord.game_rules)
    try:
        record.to_game()  # an illegal move is refused now, not after the network is loaded
    except sgf_io.SgfError as error:
        p.error(str(error))
    return data, record, output


def _check_writable(p: argparse.ArgumentParser, path: Path, flag: str) -> None:
    """p.error unless a file can be written at `path`: a folder that exists and takes files, no folder there."""
    folder = path.parent
    if path.is_dir():
        p.error(f"{flag} {path} is a folder; give a file name")
    if not folder.is_dir():
        p.error(f"{flag} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        p.error(f"{flag} {path}: not writable")


def main(argv: list[str]) -> None:
    """gtp-engine review ARGS."""
    p = parser()
    args = p.parse_args(argv)
    log_lib.setup(args.log_level)
    data, record, output = _checked(p, args)
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
    engine_config = config_lib.build({key: value for key, value in (("weights", args.weights), ("seed", args.seed))
                                      if value is not None})
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
        staged[output].write_bytes(annotated_sgf(data, result, network_name(loader)))
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
