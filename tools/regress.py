"""Tactical regression tests: GNU Go's and Fuego's GTP regression suites and tsumego problems, answered by any
GTP engine (ours by default) and scored with a 95% interval, as gogui-regress runs GNU Go's suites.

Matches against GNU Go say how often a network wins; these say which kinds of position it gets wrong (life and
death, semeai, ladders, endgame), in minutes instead of hours, so that a network or a search change can be
checked where games are lost.

Terms:
- test: one question and the answers it accepts. In a .tst file, a numbered reg_genmove command (`30 reg_genmove
  black`) and the `#? [PATTERN]` line after it; in a tsumego file (JSON: AB, AW, SZ, C "Black to play", SOL), the
  position, the side to play and the first moves of the solutions. Reported by file; tsumego, one to a file, by
  their folder (their collection).
- pattern: GNU Go's: `[E5|E6|E3]` the answer must be one of these, `[!D5]` anything else; a regular expression
  matched against the whole answer, case ignored. A trailing `*` marks a test GNU Go 3.8 itself fails; such tests
  count like the others and are reported apart.
- setup: what a test needs before its question: in a .tst file, the unnumbered commands since the last one
  that sets a new position (loadsgf, clear_board, boardsize), that one included; every test carries its own, so
  any sample of tests can be run in any order. loadsgf paths are made absolute. Numbered commands other than
  reg_genmove ask for GNU Go's internals (owl_attack, dragon_status, ...) and are not tests here; setup commands
  the engine does not know (Fuego's go_rules, uct_param_player) are left out and listed.
- region (tsumego only, --region M): the points within M of the problem's stones (their box, widened by M). The
  question is lz-genmove_analyze's (Leela Zero, KataGo and ours take it), with avoid clauses that keep both
  players' moves in the region for the whole search and forbid the side to play a first pass (a tsumego always
  asks for a move; unframed problems get that clause too).
- tsumego frame (with --region): every point outside the region is filled with settled stones, as KataGo's and
  Lizgoban's tsumego frames do, so that the problem decides the game. A tsumego stands alone in a corner of an
  otherwise empty 19x19 board, where a network trained on whole games rightly sees bigger moves elsewhere:
  unframed, with only the first move kept in the region, the shipped 19x19 network answered 24% of 300 beginner
  problems right by its raw policy and 8% at 800 visits, the search drifting to the region's edge toward the
  open board; framed, 14% and 35%: the search then reads the problem. The attacker (the colour with more stones
  on the problem's sides that face the open board) walls the region in; beyond the wall, the points farthest
  from the region go to the defender, the nearer ones to the attacker, both masses with an eye on every point
  of even row and column whose neighbours are all theirs, so every frame group is alive. Komi makes the game the
  defender's exactly when it holds ALIVE_AT points of the region or more (a living group holds more, a dead one
  none): with attacker frame area A, defender frame area D and R region points, the attacker's lead at that
  balance is A + R - D - 2 * ALIVE_AT, and komi gives the game to the defender there by half a point; the split
  between A and D is chosen to bring komi near FRAME_KOMI.
- suite: a .tst or tsumego .json file, a folder of them (searched recursively), or an archive of them (.tar.xz,
  .tar.gz, .tgz, .tar, .zip), unpacked to a temporary folder; --include picks files by a glob on their path.

Usage (from the repository root):
  python -m tools.regress ../shared/data/go_problems.tar.xz --include '*gnugo*/9x9.tst' \\
      --engine "python -m gtp_engine --log-level error --visits 800"
  python -m tools.regress ../shared/data/go_problems.tar.xz --include '*Tsumego Beginner*' --max-tests 200 \\
      --region 2 --engine "python -m gtp_engine --log-level error --visits 800" --failures
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import random
import re
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from gtp_engine import coords, match_stats
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState
from gtp_engine.match import GtpError, Program

ENGINE = "python -m gtp_engine --log-level error"
RESET_COMMANDS = ("loadsgf", "clear_board", "boardsize")
REGION_PLIES = 1000  # a tsumego's region holds the whole search
ALIVE_AT = 4  # region points the defender must hold for a framed tsumego's game to be its
FRAME_KOMI = 7.0  # the komi a frame's split aims at: the networks know komi near it
MAX_FRAME_KOMI = 20.0  # a problem whose region leaves no split nearer FRAME_KOMI than this stays unframed
FRAME_BANDS = 3  # the fewest bands of the frame a defender's mass takes (see tsumego_frame)
ARCHIVE_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar", ".zip")
_TEST_LINE = re.compile(r"^(\d+)\s+(\S+)\s*(.*)$")
_PATTERN_LINE = re.compile(r"^#\?\s*\[(.*)\]\s*([*&]?)\s*$")


class SuiteError(Exception):
    """A suite that cannot be read: the message names the file and the problem."""


@dataclass(frozen=True)
class Pattern:
    """The answers a test accepts (see the module docstring)."""

    regex: str
    negated: bool = False

    @classmethod
    def parse(cls, text: str) -> Pattern:
        negated = text.startswith("!")
        body = text[1:] if negated else text
        try:
            re.compile(body)
        except re.error as error:
            raise ValueError(f"pattern [{text}]: {error}") from None
        return cls(body, negated)

    def accepts(self, answer: str) -> bool:
        matched = re.fullmatch(self.regex, answer.strip(), flags=re.IGNORECASE) is not None
        return matched != self.negated

    def __str__(self) -> str:
        return ("!" if self.negated else "") + self.regex


@dataclass(frozen=True)
class Test:
    source: str  # the file, relative to its suite
    ident: str  # the test number in a .tst file, the problem's file name for a tsumego
    setup: tuple[str, ...]  # GTP commands that set the position
    color: str  # "black" or "white": who moves
    pattern: Pattern
    gnugo_fails: bool = False  # marked * in the suite
    avoid: tuple[str, ...] = ()  # tsumego: lz-genmove_analyze's avoid clauses (see region), asked, not reg_genmove
    region: tuple[str, ...] = ()  # tsumego: the vertices of the region (empty: no region)

    @property
    def name(self) -> str:
        return f"{self.source}:{self.ident}"


def parse_tst(text: str, source: str, base: Path) -> list[Test]:
    """The reg_genmove tests of a .tst file; relative loadsgf paths are taken from `base`."""
    tests: list[Test] = []
    setup: list[str] = []
    pending: tuple[str, str] | None = None  # (number, color) of a reg_genmove awaiting its #? line
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        expected = _PATTERN_LINE.match(line)
        if expected:
            if pending is not None:
                try:
                    pattern = Pattern.parse(expected.group(1))
                except ValueError as error:
                    raise SuiteError(f"{source}, line {number}: {error}") from None
                tests.append(Test(source, pending[0], tuple(setup), pending[1], pattern,
                                  gnugo_fails=expected.group(2) == "*"))
            pending = None
            continue
        if line.startswith("#"):
            continue
        numbered = _TEST_LINE.match(line)
        if numbered:
            ident, name, args = numbered.groups()
            pending = (ident, _color(args.split()[0], source, number)) if name == "reg_genmove" and args else None
            continue
        pending = None
        command = _absolute_loadsgf(line, base)
        if command.split()[0] in RESET_COMMANDS:
            setup = []
        setup.append(command)
    return tests


def _color(text: str, source: str, line: int) -> str:
    color = {"b": "black", "black": "black", "w": "white", "white": "white"}.get(text.lower())
    if color is None:
        raise SuiteError(f"{source}, line {line}: reg_genmove of {text!r}, not a colour")
    return color


def _absolute_loadsgf(command: str, base: Path) -> str:
    parts = command.split()
    if parts[0] != "loadsgf" or len(parts) < 2:
        return command
    path = Path(parts[1])
    return " ".join(["loadsgf", str(path if path.is_absolute() else (base / path).resolve()), *parts[2:]])


def parse_tsumego(text: str, source: str, work: Path, region_margin: int | None) -> Test:
    """A tsumego problem as a test: its position (framed, with a region margin) written to an SGF file in `work`,
    loaded with loadsgf."""
    try:
        problem = json.loads(text)
        size = int(problem["SZ"])
        black, white = list(problem.get("AB", [])), list(problem.get("AW", []))
        color = "white" if problem.get("C", "").lower().startswith("white") else "black"
        first_moves = {m[1] for m in problem["SOL"] if m[0].upper() == color[0].upper()}
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise SuiteError(f"{source}: not a tsumego problem (AB, AW, SZ, C, SOL): {error}") from None
    if not 2 <= size <= coords.MAX_SIZE or not first_moves:
        raise SuiteError(f"{source}: board size {size} or no solution for {color}")
    g = coords.grid(size)
    try:
        vertices = [coords.to_gtp(g, coords.from_sgf(g, move)) for move in sorted(first_moves)]
        stones = {BLACK: [coords.from_sgf(g, p) for p in black], WHITE: [coords.from_sgf(g, p) for p in white]}
    except ValueError as error:
        raise SuiteError(f"{source}: {error}") from None
    region: set[int] = set()
    komi = 0.0
    if region_margin is not None and stones[BLACK] + stones[WHITE]:
        rows, cols = zip(*(g.row_col(p) for p in stones[BLACK] + stones[WHITE]))
        row_span = range(max(0, min(rows) - region_margin), min(size, max(rows) + region_margin + 1))
        col_span = range(max(0, min(cols) - region_margin), min(size, max(cols) + region_margin + 1))
        region = {g.point(r, c) for r in row_span for c in col_span}
        frame = tsumego_frame(g, stones, region)
        if frame is not None:
            for c in (BLACK, WHITE):
                stones[c] = stones[c] + frame.stones[c]
            komi = frame.komi
    sgf = (f"(;GM[1]FF[4]SZ[{size}]KM[{komi:g}]PL[{color[0].upper()}]"
           + "".join(tag + "".join(f"[{coords.to_sgf(g, p)}]" for p in stones[c])
                     for tag, c in (("AB", BLACK), ("AW", WHITE)) if stones[c]) + ")")
    path = work / (re.sub(r"[^\w.-]+", "_", source) + ".sgf")
    path.write_text(sgf)
    pattern = Pattern("|".join(re.escape(v) for v in vertices))
    collection = str(Path(source).parent)  # one problem a file: the report groups them by their folder
    outside = ",".join(coords.to_gtp(g, p) for p in g.points if region and p not in region)
    avoid = tuple(f"avoid {c} {outside} {REGION_PLIES}" for c in ("black", "white") if outside)
    return Test(collection, Path(source).stem, (f"boardsize {size}", f"loadsgf {path}"), color, pattern,
                avoid=avoid + (f"avoid {color} pass 1",), region=tuple(coords.to_gtp(g, p) for p in sorted(region)))


@dataclass(frozen=True)
class Frame:
    stones: dict[int, list[int]]  # colour -> the frame's stones
    komi: float


def tsumego_frame(g: coords.Grid, stones: dict[int, list[int]], region: set[int]) -> Frame | None:
    """Settled stones on every point outside the region (see tsumego frame); None when nothing is outside or when
    no split leaves every chain of the frame two eyes with a komi the networks know (MAX_FRAME_KOMI)."""
    outside = [p for p in g.points if p not in region]
    if not outside:
        return None
    rows, cols = zip(*(g.row_col(p) for p in region))
    top, bottom, left, right = min(rows), max(rows), min(cols), max(cols)
    centre = ((top + bottom) / 2, (left + right) / 2)

    def band(p: int) -> int:  # Chebyshev distance to the region's box: 1 is the wall
        r, c = g.row_col(p)
        return max(top - r, r - bottom, left - c, c - right)

    def along(p: int) -> float:  # the angle around the region: points of a band in the order they lie
        r, c = g.row_col(p)
        return math.atan2(r - centre[0], c - centre[1])

    attacker = _attacker(g, stones)
    defender = WHITE if attacker == BLACK else BLACK
    sign = 1 if attacker == BLACK else -1
    total, area = len(outside), len(region)
    target = (total + area - 2 * ALIVE_AT + 0.5 - sign * FRAME_KOMI) / 2  # the defender's share for FRAME_KOMI
    # The defender takes the points farthest from the region, band by band, each band in order along it, at least
    # FRAME_BANDS whole bands (a thinner mass has no room for eyes) or none; the share nearest the target wins
    # among those that leave every chain of the frame two eyes.
    beyond = sorted((p for p in outside if band(p) >= 2), key=lambda p: (-band(p), along(p)))
    thinnest = sum(1 for p in beyond if band(p) > band(beyond[0]) - FRAME_BANDS) if beyond else 0
    shares = sorted([0] + list(range(thinnest, len(beyond) + 1)), key=lambda n: abs(n - target))
    for share in shares:
        owner = {p: attacker for p in outside}
        owner.update({p: defender for p in beyond[:share]})
        frame: dict[int, list[int]] = {BLACK: [], WHITE: []}
        for p in outside:
            r, c = g.row_col(p)
            hole = (r % 2 == 0 and c % 2 == 0 and band(p) >= 2
                    and all(owner.get(n) == owner[p] for n in g.neighbors[p]))
            if not hole:
                frame[owner[p]].append(p)
        komi = sign * ((total - share) + area - share - 2 * ALIVE_AT + 0.5)
        if abs(komi) <= MAX_FRAME_KOMI and _settled(g, stones, frame, region):
            return Frame(frame, komi)
    return None


def _settled(g: coords.Grid, stones: dict[int, list[int]], frame: dict[int, list[int]], region: set[int]) -> bool:
    """Whether the problem and the frame make a legal position in which every chain of the frame has two eyes."""
    game = GameState(g.width, g.height)
    try:
        for color in (BLACK, WHITE):
            game.place_setup(color, stones[color] + frame[color])
    except ValueError:
        return False
    board = game.board
    seen: set[int] = set()
    for p in frame[BLACK] + frame[WHITE]:
        if p not in seen:
            seen.update(board.chain(p))
            if sum(1 for lib in board.chain_liberty_points(p) if lib not in region) < 2:
                return False
    return True


def _attacker(g: coords.Grid, stones: dict[int, list[int]]) -> int:
    """The colour that surrounds: more stones on the sides of the problem's box that face the open board; ties go
    to the colour with more stones, then White."""
    everything = stones[BLACK] + stones[WHITE]
    rows, cols = zip(*(g.row_col(p) for p in everything))
    top, bottom, left, right = min(rows), max(rows), min(cols), max(cols)

    def facing_open(p: int) -> bool:
        r, c = g.row_col(p)
        return ((r == top and top > 0) or (r == bottom and bottom < g.height - 1)
                or (c == left and left > 0) or (c == right and right < g.width - 1))

    def weight(color: int) -> tuple[int, int]:
        return sum(map(facing_open, stones[color])), len(stones[color])

    return BLACK if weight(BLACK) > weight(WHITE) else WHITE


# ---- reading suites -------------------------------------------------------------------------------------------

def suite_files(root: Path, include: str | None, unpacked: bool = False) -> Iterator[tuple[str, Path]]:
    """(name, path) of every .tst and .json file of a folder, or the file itself. Names are relative to the
    folder's parent (they start with the folder's name), or to the folder an archive was unpacked to."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".tst", ".json"))
    for path in files:
        name = path.name if root.is_file() else str(path.relative_to(root if unpacked else root.parent))
        if include is None or fnmatch.fnmatch(name, include):
            yield name, path


def load_tests(suites: Iterable[Path], include: str | None, work: Path, region_margin: int | None) -> list[Test]:
    tests: list[Test] = []
    for suite in suites:
        if not suite.exists():
            raise SuiteError(f"{suite}: no such file or folder")
        root, unpacked = suite, suite.is_file() and suite.name.endswith(ARCHIVE_SUFFIXES)
        if unpacked:
            root = work / f"suite-{len(list(work.iterdir()))}"
            _unpack(suite, root)
        for name, path in suite_files(root, include, unpacked):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError as error:
                raise SuiteError(f"{path}: {error.strerror or error}") from None
            if path.suffix == ".tst":
                tests.extend(parse_tst(text, name, path.parent))
            elif path.suffix == ".json":
                tests.append(parse_tsumego(text, name, work, region_margin))
            else:
                raise SuiteError(f"{path}: neither a .tst suite nor a tsumego .json file")
    return tests


def _unpack(archive: Path, into: Path) -> None:
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                z.extractall(into)
        else:
            with tarfile.open(archive) as t:
                t.extractall(into, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as error:
        raise SuiteError(f"{archive}: cannot unpack: {error}") from None


# ---- running -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    test: Test
    answer: str  # the engine's move, or what went wrong
    passed: bool
    error: bool = False  # the engine refused the setup or the question: not counted


class Engine:
    """The engine under test; setup commands it does not know (another engine's own: Fuego's uct_param_player,
    go_rules) are left out and listed, where a known command that fails makes its test not counted."""

    def __init__(self, command: str):
        self.program = Program(command)
        self._known: dict[str, bool] = {}
        self.unknown: set[str] = set()

    def setup(self, command: str) -> None:
        name = command.split()[0]
        if name not in self._known:
            self._known[name] = self.program.send(f"known_command {name}", check=False) == "true"
        if self._known[name]:
            self.program.send(command)
        else:
            self.unknown.add(name)


def ask(engine: Engine, test: Test) -> Outcome:
    try:
        for command in test.setup:
            engine.setup(command)
        if test.avoid:
            reply = engine.program.send(f"lz-genmove_analyze {test.color} 0 {' '.join(test.avoid)}")
            plays = [line.split()[1] for line in reply.splitlines() if line.startswith("play ")]
            if not plays:
                raise GtpError(f"lz-genmove_analyze answered no move: {reply!r}")
            answer = plays[-1]
        else:
            answer = engine.program.send(f"reg_genmove {test.color}")
    except GtpError as error:
        return Outcome(test, str(error), False, error=True)
    return Outcome(test, answer.upper(), test.pattern.accepts(answer))


def run(engine_command: str, tests: list[Test], progress: bool = True) -> tuple[list[Outcome], set[str]]:
    """The outcome of every test, and the setup commands the engine did not know."""
    engine = Engine(engine_command)
    outcomes = []
    try:
        for i, test in enumerate(tests, 1):
            outcomes.append(ask(engine, test))
            if progress:
                print(f"\rregress: {i}/{len(tests)} tests", end="", file=sys.stderr, flush=True)
    finally:
        engine.program.close()
        if progress:
            print(file=sys.stderr)
    return outcomes, engine.unknown


def report(outcomes: list[Outcome], failures: bool) -> str:
    """Per file and in all: tests passed, with the 95% interval; GNU Go's known failures apart."""
    counted = [o for o in outcomes if not o.error]
    by_file: dict[str, list[Outcome]] = defaultdict(list)
    for o in counted:
        by_file[o.test.source].append(o)
    lines = []
    for source, group in sorted(by_file.items()):
        lines.append(f"{source}: {_rate([o.passed for o in group])}")
    lines.append(f"all: {_rate([o.passed for o in counted])}")
    marked = [o.passed for o in counted if o.test.gnugo_fails]
    if marked:
        lines.append(f"tests GNU Go 3.8 fails (marked *): {_rate(marked)}")
    errors = [o for o in outcomes if o.error]
    if errors:
        lines.append(f"not counted, the engine refused them: {len(errors)} (first: {errors[0].test.name}: "
                     f"{errors[0].answer})")
    if failures:
        lines += [f"FAIL {o.test.name} {o.test.color}: answered {o.answer}, expected [{o.test.pattern}]"
                  for o in counted if not o.passed]
    return "\n".join(lines)


def _rate(results: list[bool]) -> str:
    if not results:
        return "no tests"
    score, low, high = match_stats.score_interval([float(r) for r in results])
    return f"{sum(results)} of {len(results)} passed, {score:.3f} (95%: {low:.3f} .. {high:.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="+", type=Path, help=".tst or tsumego .json files, folders, archives")
    parser.add_argument("--engine", default=ENGINE, help=f"GTP command of the engine (default: {ENGINE})")
    parser.add_argument("--include", help="only files whose path within the suite matches this glob")
    parser.add_argument("--max-tests", type=int, help="a random sample of this many tests (see --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--region", type=int, metavar="M",
                        help="tsumego: keep the search's moves within M points of the problem's stones")
    parser.add_argument("--failures", action="store_true", help="list every failed test")
    args = parser.parse_args(argv)
    if args.region is not None and args.region < 0:
        parser.error("--region must be at least 0")
    work = Path(tempfile.mkdtemp(prefix="regress-"))
    try:
        tests = load_tests(args.suites, args.include, work, args.region)
        if not tests:
            raise SuiteError("no reg_genmove test or tsumego problem in " + ", ".join(map(str, args.suites))
                             + (f" matching {args.include!r}" if args.include else ""))
        if args.max_tests is not None and args.max_tests < len(tests):
            tests = random.Random(args.seed).sample(tests, args.max_tests)
        start = time.monotonic()
        outcomes, unknown = run(args.engine, tests)
        print(report(outcomes, args.failures))
        if unknown:
            print(f"setup commands the engine does not know, left out: {', '.join(sorted(unknown))}")
        print(f"{len(tests)} tests in {time.monotonic() - start:.0f} s; engine: {args.engine}")
    except (SuiteError, GtpError) as error:
        print(f"regress: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
