"""Matches over GTP: engines in subprocesses play each other as gogui-twogtp plays them, a referee checks and
scores. tools/match.py is the command line; the training loop plays its GNU Go matches here.

Terms:
- the two engines: any GTP commands; A is the first, B the second. Colours alternate: A has Black in games 1, 3,
  5, ..., except in a handicap match.
- handicap match: one engine, A unless B is named, takes Black with N stones (GTP's fixed_handicap layout) in
  every game, so that the weaker is measured against the stronger at the handicap that should even them; no
  openings. A handicap of 1 is Go's: the taker plays Black in every game without stones, at the komi given (a
  rank on small boards, where a stone is worth several); its games start from the openings, each game from the
  next one, as the colours do not swap.
- rules: the rule set of the match (game.Rules): the engines that know kata-set-rules are told it before each
  game, the match's own record refuses moves it forbids (the mover then loses), and the game is counted by it.
- referee: a third GTP program that sees every move, refuses illegal ones (the mover then loses: result B+F or
  W+F) and scores the finished game (as twogtp's -referee). Under the rule sets GNU Go counts itself (chinese with
  --chinese-rules, japanese and korean with --japanese-rules: REFEREES) its final_score is the result; under the
  others the rules core counts the final position without the stones the referee's final_status_list calls dead.
- engine scores: after a game ended by two passes, each engine's own final_score, to compare with the referee's.
- own-territory move: a move played right after the opponent passed on an empty point that was already the
  mover's territory (an empty region bordered by the mover's stones alone, once the stones dead at the end of
  the game are off the board), other than the last liberty of one of the mover's chains (a connection the
  opponent's move there would punish); under territory scoring each one costs its mover a point.
- result, score, Elo with its 95% interval, SPRT: as match_stats.py defines them; with an SPRT the match stops
  when it decides.
- opening: the first moves of a game, played to both engines and the referee before the first genmove (as
  twogtp's -openings). Two deterministic engines (ours at fixed visits with a warm evaluation cache, GNU Go)
  otherwise replay the same two games; with openings, games 2k-1 and 2k start from opening k (in turn, again
  from the first when the match outlasts them), colours swapped, so a pair of games compares the engines on
  one position. load_openings takes them from game records.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from gtp_engine import coords, match_stats, sgf_io
from gtp_engine.board import BLACK, EMPTY, PASS, WHITE
from gtp_engine.game import KOMI, RULE_SETS, GameState, Rules, fixed_handicap_points, format_result

log = logging.getLogger(__name__)

CHINESE = RULE_SETS["chinese"]
# GNU Go's own count for the rule sets it knows (it counts korean as japanese: the same territory count).
REFEREES = {"chinese": "gnugo --mode gtp --chinese-rules", "japanese": "gnugo --mode gtp --japanese-rules",
            "korean": "gnugo --mode gtp --japanese-rules"}
REFEREE = REFEREES["chinese"]


def referee_for(rules: Rules) -> str:
    """GNU Go with the rules it counts by: its own for the rule sets it knows, else Japanese rules under
    territory scoring and Chinese rules under area scoring (its dead stones serve the rules core's count)."""
    return REFEREES.get(rules.name, REFEREES["japanese" if rules.scoring == "territory" else "chinese"])
MAX_VOID_GAMES = 3  # games in a row voided by a program's death before the match gives up


class GtpError(Exception):
    """A program that cannot start, ends, refuses a command or answers what is no result."""


EXTRA_PATH = "/usr/games"  # where Debian installs GNU Go, often not on PATH


class Program:
    """A GTP program in a subprocess; stderr goes to this process's stderr only when verbose."""

    def __init__(self, command: str, verbose: bool = False):
        self.command = command
        argv = shlex.split(command)
        if argv and shutil.which(argv[0]) is None and shutil.which(argv[0], path=EXTRA_PATH):
            argv[0] = shutil.which(argv[0], path=EXTRA_PATH)
        try:
            self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=None if verbose else subprocess.DEVNULL, text=True)
        except OSError as error:
            raise GtpError(f"cannot start {command!r}: {error.strerror or error}") from None
        self.ended = False  # its output ended: it died or quit
        self.name = self.send("name")
        self.version = self.send("version", check=False)
        self.commands = set(self.send("list_commands", check=False).split())

    def knows(self, command: str) -> bool:
        return command in self.commands

    def send(self, command: str, check: bool = True) -> str:
        """The answer's text; a failure raises GtpError when check, else answers ""."""
        succeeded, text = self.exchange(command)
        if not succeeded:
            if check:
                raise GtpError(f"{self.command!r}: {command!r} failed: {text}")
            return ""
        return text

    def exchange(self, command: str) -> tuple[bool, str]:
        """Whether the program carried the command out, and its answer's text (the reason, where it did not);
        GtpError where it has ended."""
        try:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        except OSError:  # its end of the pipe is closed: it has ended
            self.ended = True
            raise GtpError(f"{self.command!r} ended before {command!r}") from None
        lines = []
        while True:
            line = self.process.stdout.readline()
            if not line:
                self.ended = True
                raise GtpError(f"{self.command!r} ended while answering {command!r}")
            line = line.rstrip("\r\n")
            if not line and lines:
                break
            if line:
                lines.append(line)
        head, _, rest = lines[0].partition(" ")
        return not head.startswith("?"), "\n".join([rest] + lines[1:]).strip()

    def close(self) -> None:
        try:
            self.send("quit", check=False)
        except (GtpError, OSError):
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class GameResult:
    a_is_black: bool
    result: str  # SGF RE: B+3.5, W+R, B+F (forfeit by an illegal move), 0
    moves: int
    engine_scores: tuple[str | None, str | None] = (None, None)  # A's and B's final_score after two passes
    own_territory_moves: tuple[int, int] = (0, 0)  # A's and B's (see the module docstring)

    @property
    def score_for_a(self) -> float:
        if self.result == "0":
            return 0.5
        black_won = self.result.startswith("B+")
        return 1.0 if black_won == self.a_is_black else 0.0


Opening = Sequence[tuple[int, int]]  # (color, point) moves


def a_plays_black(number: int) -> bool:
    """Whether A has Black in game `number` (from 1) of a match: the odd games, so colours alternate."""
    return number % 2 == 1


def load_openings(path: str | Path, size: int, moves: int) -> list[Opening]:
    """The first `moves` moves of every game record in path (an SGF file, folder or archive: sgf_io's
    read_sgf_files) on a size x size board without handicap or setup stones, in name order; records that are
    shorter, illegal or unreadable are left out. Raises ValueError when none is left."""
    openings, skipped = [], 0
    for name, data in sgf_io.read_sgf_files(path):
        try:
            record = sgf_io.load_sgf(data, source=name)
            if (record.width, record.height) != (size, size) or record.setup or len(record.moves) < moves:
                continue
            game = record.to_game(max_moves=moves)
        except sgf_io.SgfError as error:
            log.debug("opening left out: %s", error)
            skipped += 1
            continue
        openings.append(list(game.moves))
    if not openings:
        raise ValueError(f"{path}: no {size}x{size} game record without setup stones and with at least {moves} "
                         f"moves" + (f" ({skipped} unreadable)" if skipped else ""))
    return openings


def play_game(black: Program, white: Program, referee: Program, size: int, komi: float = KOMI,
              max_moves: int = 0, time_settings: str | Mapping[Program, str | None] | None = None,
              opening: Opening = (), rules: Rules = CHINESE, handicap: int = 0) -> tuple[str, GameState, list[int]]:
    """Plays one game from `opening` under `rules`, Black with `handicap` stones where above 1 (max_moves: scored
    after this many moves; 0: three times the area); returns the SGF result, the game record and the stones the
    referee called dead at the end (none after a resignation or a forfeit).

    time_settings ("main byoyomi stones", GTP's time_settings arguments) goes to both players before the game, as
    twogtp's -time does, or to each player its own (a mapping: time odds); each player keeps its own clock (the match
    does not forfeit on time)."""
    max_moves = max_moves or 3 * size * size
    for program in (black, white, referee):
        program.send(f"boardsize {size}")
        program.send("clear_board")
        program.send(f"komi {komi:g}", check=program is referee)
        if program.knows("kata-set-rules"):
            program.send(f"kata-set-rules {rules.name}")
        clock = time_settings.get(program) if isinstance(time_settings, Mapping) else time_settings
        if clock is not None and program is not referee:
            program.send(f"time_settings {clock}", check=False)
    game = GameState(size, komi=komi, rules=rules)
    players = {BLACK: black, WHITE: white}
    letters = {BLACK: "B", WHITE: "W"}
    if handicap > 1:
        stones = fixed_handicap_points(game.grid, handicap)
        game.place_handicap(stones)
        expected = {coords.to_gtp(game.grid, point) for point in stones}
        for program in (black, white, referee):
            placed = {vertex.upper() for vertex in program.send(f"fixed_handicap {handicap}").split()}
            if placed != expected:
                raise GtpError(f"{program.name} placed {handicap} handicap stones on {' '.join(sorted(placed))}, "
                               f"not on {' '.join(sorted(expected))}")
    for color, point in opening:
        game.play(point, color)
        for program in (black, white, referee):
            program.send(f"play {letters[color]} {coords.to_gtp(game.grid, point)}")
    while not game.is_over and game.move_number < max_moves:
        color = game.to_play
        answer = players[color].send(f"genmove {letters[color].lower()}").lower()
        if answer == "resign":
            return f"{letters[3 - color]}+R", game, []
        try:
            point = coords.from_gtp(game.grid, answer)
            game.play(point, color)
        except ValueError as error:
            log.warning("%s played %r, which is illegal: %s", players[color].name, answer, error)
            return f"{letters[3 - color]}+F", game, []
        for program in (referee, players[3 - color]):
            if not program.exchange(f"play {letters[color]} {answer}")[0]:
                _load_position(program, game)
    dead = [coords.from_gtp(game.grid, vertex) for vertex in referee.send("final_status_list dead").split()]
    if rules.name in REFEREES or referee.knows("kata-set-rules"):
        return normalized_result(referee.send("final_score")), game, dead
    return format_result(game.score(dead)), game, dead


def _load_position(program: Program, game: GameState) -> None:
    """Gives the program the game's position as setup stones (loadsgf), where it refused a move that the game's
    rules allow and its own do not (GNU Go refuses every suicide); its ko history and prisoners start again."""
    position = GameState(game.width, game.height, game.komi, game.rules)
    for color in (BLACK, WHITE):
        position.place_setup(color, [p for p in game.grid.points if game.board.colors[p] == color])
    position.set_to_play(game.to_play)
    log.info("%s refused %s's legal move: it gets the position as setup stones", program.name,
             "Black" if game.moves[-1][0] == BLACK else "White")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "position.sgf"
        path.write_bytes(sgf_io.save_sgf(position))
        program.send(f"loadsgf {path}")


def own_territory_moves(game: GameState, dead: Sequence[int]) -> dict[int, int]:
    """Each colour's own-territory moves (see the module docstring) in the record `game`, whose stones on the
    points `dead` were dead at its end."""
    dead_color = {point: game.board.colors[point] for point in dead}
    state = GameState(game.width, game.height, game.komi, game.rules)
    for color in (BLACK, WHITE):
        state.place_setup(color, [point for c, point in game.setup if c == color])
    counts = {BLACK: 0, WHITE: 0}
    previous = None
    for color, point in game.moves:
        if point != PASS and previous == (3 - color, PASS):
            dead_now = [p for p, c in dead_color.items() if state.board.colors[p] == c]
            owner = state.area_ownership(dead_now)[state.grid.flat_of[point]]
            saves_a_chain = any(state.board.colors[n] == color and state.board.chain_liberties(n) == 1
                                for n in state.grid.neighbors[point])
            if state.board.colors[point] == EMPTY and owner == (1 if color == BLACK else -1) and not saves_a_chain:
                counts[color] += 1
        state.play_unchecked(point, color)
        previous = (color, point)
    return counts


def _own_score(program: Program) -> str | None:
    """The program's final_score as an SGF result, None where it has none or answers what is no result."""
    try:
        return normalized_result(program.send("final_score"))
    except GtpError as error:
        if program.ended:
            raise
        log.debug("%s has no final_score: %s", program.name, error)
        return None


def normalized_result(text: str) -> str:
    """A final_score answer as SGF RE (B+3.5, W+12, 0)."""
    text = text.strip().upper()
    if text in ("0", "DRAW", "JIGO"):
        return "0"
    if not (len(text) > 2 and text[0] in "BW" and text[1] == "+"):
        raise GtpError(f"the referee's final_score is not a result: {text!r}")
    return format_result(float(text[2:]) * (1 if text[0] == "B" else -1))


def summary(a: str, b: str, games: list[GameResult]) -> str:
    """One line: A's wins, losses and draws against B, score and Elo with its 95% interval."""
    if not games:
        return f"{a} vs {b}: no game played"
    results = [g.score_for_a for g in games]
    wins, draws = results.count(1.0), results.count(0.5)
    estimate, low, high = match_stats.elo_interval(results)
    return (f"{a} vs {b}: {wins} wins, {len(results) - wins - draws} losses, {draws} draws in "
            f"{len(results)} games; score {sum(results) / len(results):.3f}; "
            f"Elo {estimate:+.0f} (95%: {low:+.0f} .. {high:+.0f})")


@dataclass(frozen=True)
class Sprt:
    """Stop when the SPRT of H0 (A is elo0 stronger) against H1 (elo1) decides (alpha = beta = 0.05)."""
    elo0: float
    elo1: float

    def decision(self, games: list[GameResult]) -> str | None:
        return match_stats.sprt_decision([g.score_for_a for g in games], self.elo0, self.elo1) \
            if len(games) >= 2 else None


def _opening_of(number: int, openings: Sequence[Opening], handicap: int) -> Opening:
    """The opening of game `number`: a pair's (colours swapped within it), a game's own under handicap 1 (colours
    fixed), none with handicap stones."""
    if not openings or handicap > 1:
        return ()
    index = number - 1 if handicap == 1 else (number - 1) // 2
    return openings[index % len(openings)]


def play_match(a: str, b: str, games: int, size: int, komi: float = KOMI, *, referee: str = REFEREE,
               max_moves: int = 0, time_settings: str | None = None, sgf_dir: str | Path | None = None,
               sprt: Sprt | None = None, deadline: float | None = None, verbose: bool = False,
               on_game: Callable[[int, Program, Program, GameResult], None] | None = None,
               openings: Sequence[Opening] = (), first_game: int = 1,
               rules: Rules = CHINESE, handicap: int = 0, handicap_to_b: bool = False,
               b_time_settings: str | None = None) -> tuple[str, str, list[GameResult]]:
    """Plays games number first_game to `games` of the commands a and b under `rules` (A Black in odd games; each
    pair from the next of `openings` when given; with a handicap, A (B with handicap_to_b) Black with that many
    stones in every game and no openings, or with handicap 1 without stones, each game from the next opening),
    each with time_settings, B with b_time_settings where given (time odds), game-N.sgf into sgf_dir when given;
    on_game(number, black, white, result) after each. A first_game above 1 goes on with a match whose earlier games
    were played before (its colours and openings as if it had not stopped).
    No game starts once time.monotonic() has passed deadline. Returns the names of A and B and the results. A game
    in which a program dies is void: the program starts again and the game is played again, up to MAX_VOID_GAMES
    times in a row. Raises GtpError when a program fails otherwise (refuses a command, cannot start)."""
    if sgf_dir is not None:
        Path(sgf_dir).mkdir(parents=True, exist_ok=True)
    programs: list[Program] = []
    try:
        for command in (a, b, referee):
            programs.append(Program(command, verbose))
        results: list[GameResult] = []
        number, voided = first_game, 0
        while number <= games:
            if deadline is not None and time.monotonic() >= deadline:
                log.warning("deadline: %d of %d games played", number - 1, games)
                break
            first, second, judge = programs
            clocks = {first: time_settings, second: b_time_settings or time_settings}
            a_is_black = not handicap_to_b if handicap else a_plays_black(number)
            black, white = (first, second) if a_is_black else (second, first)
            opening = _opening_of(number, openings, handicap)
            try:
                result, game, dead = play_game(black, white, judge, size, komi, max_moves, clocks, opening,
                                               rules, handicap)
                scores = {program: _own_score(program) if game.is_over else None for program in (first, second)}
            except GtpError as error:
                ended = [i for i, program in enumerate(programs) if program.ended]
                voided += 1
                if not ended or voided > MAX_VOID_GAMES:
                    raise
                log.warning("game %d is void and played again: %s", number, error)
                for i in ended:  # a program that died (GNU Go 3.8 asserts now and then on 19x19) starts again
                    programs[i].close()
                    programs[i] = Program(programs[i].command, verbose)
                continue
            voided = 0
            filled = own_territory_moves(game, dead)
            a_color, b_color = (BLACK, WHITE) if a_is_black else (WHITE, BLACK)
            results.append(GameResult(a_is_black, result, game.move_number, (scores[first], scores[second]),
                                      (filled[a_color], filled[b_color])))
            if sgf_dir is not None:
                sgf = sgf_io.save_sgf(game, black=black.name, white=white.name, result=result)
                (Path(sgf_dir) / f"game-{number}.sgf").write_bytes(sgf)
            if on_game is not None:
                on_game(number, black, white, results[-1])
            if sprt is not None and sprt.decision(results) is not None:
                break
            number += 1
        return programs[0].name, programs[1].name, results
    finally:
        for program in programs:
            program.close()
