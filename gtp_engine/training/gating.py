"""Gating: a candidate network plays the current best in process, and a fixed rule says whether it replaces it.

Terms:
- gate match: games between the candidate and the best at equal visits per move, colours alternating (the
  candidate has Black in games 0, 2, 4, ...); with candidate_visits the candidate searches that many playouts a
  move instead: equal time for networks whose visits cost differently (visits scaled by measured throughput).
  parallel_games games are in progress at once (search.play_games): each round gathers a few leaves from every
  game's search tree, evaluates those of each network together, and finishes them. With evaluation_threads (1 by
  default) the games are in two lanes whose rounds overlap (search/rounds.py's games in lanes); with 0, one round takes
  every game, one call for each network.
- game: from the empty board, under the rules of its pair of games (setup_of: with several rule sets, the pairs
  take them in turn, each at its komi); every move is a fresh search of `visits` playouts (the candidate's own
  number with candidate_visits) by the mover's network (no tree reuse, so each side spends exactly the effort it
  is given).
  The first opening_moves moves are drawn with probability proportional to the visits (never a pass), so that the
  games differ; later moves are the search's (LCB) choice: both through search.pick_edge, as in self-play. A game
  ends at two passes and is counted by its rules with every stone alive (GameState.score: what the search
  itself scores at its terminal nodes), or when the mover's winrate has stayed below resign_winrate for
  resign_consecutive of its moves (it resigns), or at max_moves (counted so as it stands).
- result for the candidate: 1 win, 0.5 draw, 0 loss; score, Elo and their 95% intervals and the SPRT as
  gtp_engine/match_stats.py defines them.
- decision rule (verdict): from sprt_min_games finished games on, the SPRT of elo0 against elo1 decides as
  soon as it can (H1 promotes, H0 rejects). A match that reaches max_games undecided promotes only when it
  played at least fixed_games games and scored at least fixed_score (">= 55% over >= 100 games"); so a match
  capped below fixed_games promotes only through the SPRT. An SPRT promotion is a significant win (alpha); the
  fixed rule is weaker: at its defaults it promotes an equal candidate about one time in six (simulated, 4%
  draws), so a loop that improves slowly needs a longer cap or a higher fixed_score to keep its curve honest.
- match folder: games.jsonl (one line per finished game, written as it ends, so an interrupted match resumes
  with the games it has), sgf/game-N.sgf, and result.json, written last: a match is complete when it exists.
  tally (the CLI's gate-score) scores the finished games of a match stopped before then.
- start window: with start_window > 0, no game starts once that many seconds of this call have passed; the games
  in progress play to their end, and the match stops there, unfinished (no result.json: the folder resumes). A
  match under a hard time limit then ends with every game it began finished, an unbiased sample, where one cut by
  a kill keeps only its games that ended first, the shortest.
- parts (processes > 1): the match's games split into consecutive blocks, one per process, each played to its end
  in its own match folder out/part-KK (the games are the ones a single process plays: a game's openings and
  colours follow from its index); out/parts.json lists the blocks, and result.json in out pools them. Such a
  match is of fixed length: the SPRT and the fixed rule judge all max_games games together. Processes are what
  use a machine of many cores and one GPU (each has its own evaluators, so its own network calls); one process
  leaves most of such a machine idle.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import multiprocessing
import sys
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from gtp_engine import match_stats, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import KOMI, format_result
from gtp_engine.mcts import Tree, TreeConfig
from gtp_engine.search import ChoiceConfig, ResignConfig, ResignCounter, network_threads, pick_edge, play_games
from gtp_engine.training.files import replacing
from gtp_engine.training.game_setups import GameSetup, SetupDistribution, rule_sets

log = logging.getLogger(__name__)

GAMES = "games.jsonl"
RESULT = "result.json"
PART = "part-{:02d}"
PARTS = "parts.json"  # a match in processes: the (first game, games) of each part
WINDOW_CLOSED = "window-closed.json"  # a match (or part) that stopped at its start window: every game begun finished
_TREE = TreeConfig()  # tree parameters: the engine's defaults, as in self-play


@dataclass(frozen=True)
class GateConfig:
    size: int = 9
    komi: float = KOMI
    rules: str = "chinese"  # a rule set, or several separated by commas, taken in turn by the pairs of games
    visits: int = 64  # playouts per move, both networks
    candidate_visits: int = 0  # the candidate's playouts per move when not `visits` (0: `visits`)
    max_games: int = 200  # the match never plays more
    sprt_elo0: float = 0.0  # H0: the candidate is this much stronger (rejected: not promoted)
    sprt_elo1: float = 35.0  # H1: the candidate is this much stronger (accepted: promoted)
    sprt_alpha: float = 0.05  # chance of promoting a candidate that is only elo0 stronger
    sprt_beta: float = 0.05  # chance of rejecting one that is elo1 stronger
    sprt_min_games: int = 20  # the SPRT decides nothing before this many games
    fixed_games: int = 100  # at max_games undecided: promote on at least this many games ...
    fixed_score: float = 0.55  # ... and at least this score
    parallel_games: int = 16
    leaves_per_game: int = 8  # leaves gathered per game and round (the search's batch)
    evaluation_threads: int = 1  # pipelining, as in self-play (selfplay.py); 0: none, one round of all games
    opening_moves: int = 4  # moves drawn by visits at the start of each game, for variety
    resign_winrate: float = 0.05  # 0: never resign
    resign_consecutive: int = 3
    max_moves: int = 0  # 0: twice the board's area
    seed: int = 0
    processes: int = 1  # processes playing the match, each its part (see the module docstring); > 1: fixed length
    start_window: float = 0.0  # seconds of a call after which no game starts (the start window); 0: none

    def __post_init__(self) -> None:
        if min(self.visits, self.max_games, self.parallel_games, self.leaves_per_game, self.processes) < 1:
            raise ValueError("visits, max_games, parallel_games, leaves_per_game and processes must be positive")
        if self.candidate_visits < 0:
            raise ValueError("candidate_visits must not be negative")
        if self.start_window < 0:
            raise ValueError("start_window must not be negative")
        if self.evaluation_threads < 0:
            raise ValueError("evaluation_threads must not be negative")
        rule_sets(self.rules)
        if not self.sprt_elo0 < self.sprt_elo1:
            raise ValueError("sprt_elo0 must be below sprt_elo1")

    def network_threads(self, cores: int | None = None) -> int:
        """onnxruntime's CPU threads per call when none are given (search.network_threads)."""
        return network_threads(self.evaluation_threads, cores)

    def fixed_length(self) -> GateConfig:
        """This match played to its last game: the SPRT waits for all max_games (a part, the pooled parts)."""
        return dataclasses.replace(self, sprt_min_games=self.max_games)


@dataclass
class GateResult:
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    score_low: float  # 95% interval of the score
    score_high: float
    elo: float
    elo_low: float
    elo_high: float
    llr: float
    llr_low: float  # SPRT bounds
    llr_high: float
    promoted: bool
    reason: str
    seconds: float  # playing time, over all sessions of the match

    def to_dict(self) -> dict:
        return asdict(self)  # json writes an infinite Elo (a score of 0 or 1) as Infinity, and reads it back

    def describe(self) -> str:
        return (f"{self.wins}-{self.draws}-{self.losses} in {self.games} games, score {self.score:.3f} "
                f"(95%: {self.score_low:.3f} .. {self.score_high:.3f}), Elo {self.elo:+.0f} "
                f"(95%: {self.elo_low:+.0f} .. {self.elo_high:+.0f}), LLR {self.llr:.2f} "
                f"({self.llr_low:.2f}, {self.llr_high:.2f}): {'promoted' if self.promoted else 'not promoted'}, "
                f"{self.reason}")


def verdict(results: list[float], config: GateConfig) -> tuple[bool | None, str]:
    """(promoted, reason) for the results so far, in order: True or False once decided, None to play on."""
    n = len(results)
    if n >= config.sprt_min_games:
        decision = match_stats.sprt_decision(results, config.sprt_elo0, config.sprt_elo1, config.sprt_alpha,
                                             config.sprt_beta)
        if decision is not None:
            elo = config.sprt_elo1 if decision == "H1" else config.sprt_elo0
            return decision == "H1", f"SPRT accepted {decision} (Elo {elo:+g}) after {n} games"
    if n >= config.max_games:
        score = match_stats.score(results)
        enough = n >= config.fixed_games
        promoted = enough and score >= config.fixed_score
        return promoted, (f"SPRT undecided at the cap of {n} games; score {score:.3f} "
                          f"{'>=' if score >= config.fixed_score else '<'} {config.fixed_score:g}"
                          + ("" if enough else f", but fewer than {config.fixed_games} games"))
    return None, f"undecided after {n} games"


def summarize(results: list[float], config: GateConfig, seconds: float) -> GateResult:
    promoted, reason = verdict(results, config)
    if not results:
        return GateResult(0, 0, 0, 0, 0.5, 0.0, 1.0, 0.0, -math.inf, math.inf, 0.0,
                          *match_stats.sprt_bounds(config.sprt_alpha, config.sprt_beta), False, reason, seconds)
    return GateResult(
        **_outcome(results),
        llr=match_stats.sprt_llr(results, config.sprt_elo0, config.sprt_elo1),
        llr_low=match_stats.sprt_bounds(config.sprt_alpha, config.sprt_beta)[0],
        llr_high=match_stats.sprt_bounds(config.sprt_alpha, config.sprt_beta)[1],
        promoted=bool(promoted), reason=reason, seconds=round(seconds, 1),
    )


def _outcome(results: list[float]) -> dict:
    """Games, wins, draws, losses, score and Elo with their 95% intervals of (non-empty) results for the candidate."""
    score, low, high = match_stats.score_interval(results)
    wins, draws = results.count(1.0), results.count(0.5)
    return {"games": len(results), "wins": wins, "draws": draws, "losses": len(results) - wins - draws,
            "score": score, "score_low": low, "score_high": high,
            "elo": match_stats.elo(score), "elo_low": match_stats.elo(low), "elo_high": match_stats.elo(high)}


def setup_of(config: GateConfig, index: int) -> GameSetup:
    """The rules and komi of game `index` (from 0): the pairs of games take the rule sets in turn, each at its
    komi (game_setups.py), both games of a pair the same."""
    setups = SetupDistribution(config.rules, config.komi)
    rules = setups.choices[index // 2 % len(setups.choices)]
    return GameSetup(rules, setups.komi_of(rules))


def read_result(out: str | Path) -> GateResult | None:
    """The finished match's result in `out`, or None when it has not finished."""
    path = Path(out) / RESULT
    if not path.exists():
        return None
    return GateResult(**json.loads(path.read_text()))


class _Game:
    """One game in progress (a search.RoundGame): the position, the mover's current search tree, and resignation
    counts."""

    def __init__(self, index: int, config: GateConfig, candidate: Evaluator, best: Evaluator):
        self.index = index
        self.candidate_black = index % 2 == 0
        black, white = (candidate, best) if self.candidate_black else (best, candidate)
        self.networks = {BLACK: black, WHITE: white}
        own = config.candidate_visits or config.visits
        self.visits = {BLACK: own, WHITE: config.visits} if self.candidate_black else \
            {BLACK: config.visits, WHITE: own}  # per colour: its playouts a move
        self.state = setup_of(config, index).new_game(config.size)
        self.config = config
        self.choice = ChoiceConfig(temperature=1.0, temperature_moves=config.opening_moves)
        self.rng = np.random.default_rng([config.seed, index])
        self.resign = ResignCounter(ResignConfig(config.resign_winrate, max(1, config.resign_consecutive), 0))
        self.result: str | None = None
        self.tree = self._new_tree()

    def _new_tree(self) -> Tree:
        return Tree(self.networks[self.state.to_play], self.state.copy(), _TREE)

    @property
    def evaluator(self) -> Evaluator:
        return self.networks[self.state.to_play]

    def wants(self) -> int:
        """Leaves to gather this round: what the search lacks, at most leaves_per_game."""
        return min(self.config.leaves_per_game, self.visits[self.state.to_play] - self.tree.root.visits)

    def advance(self) -> None:
        """After a round: the move, once its search has its visits."""
        if self.tree.root.visits >= self.visits[self.state.to_play]:
            self.move()

    @property
    def over(self) -> bool:
        return self.result is not None

    def move(self) -> None:
        """Plays the searched move (or resigns); starts the next search unless the game ended."""
        tree, state, config = self.tree, self.state, self.config
        color = state.to_play
        winrate = (tree.root_value()[0] + 1.0) / 2.0
        if self.resign.update(color, winrate, state.move_number, state.grid.area):
            self.result = f"{'W' if color == BLACK else 'B'}+R"
            return
        state.play(tree.root.moves[pick_edge(tree, self.choice, state.move_number, self.rng)])
        max_moves = config.max_moves or 2 * state.grid.area
        if state.is_over or state.move_number >= max_moves:
            self.result = format_result(state.score())
            return
        self.tree = self._new_tree()

    def score_for_candidate(self) -> float:
        if self.result == "0":
            return 0.5
        return 1.0 if self.result.startswith("B+") == self.candidate_black else 0.0


def play_match(candidate: Evaluator, best: Evaluator, config: GateConfig, out: str | Path, *,
               progress: bool = True, first_game: int = 0, clock: Callable[[], float] = time.monotonic) -> GateResult:
    """Plays (or resumes) the gate match in `out` until the verdict; writes and returns its result. Its games are
    numbered from first_game (a part of a match played in processes: play_parts). Where the start window closes
    first, returns the result so far without writing it (see start window); clock times the window."""
    out = Path(out)
    done = read_result(out)
    if done is not None:
        return done
    if (out / PARTS).exists():
        raise ValueError(f"{out} holds a match begun in processes ({PARTS}); resume it with the same processes, or "
                         f"use another folder")
    (out / "sgf").mkdir(parents=True, exist_ok=True)
    (out / WINDOW_CLOSED).unlink(missing_ok=True)  # going on: games may be begun again
    records = _read_games(out / GAMES)
    with replacing(out / GAMES) as tmp:  # drops a line a kill cut short, so appending starts on a fresh line
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    results = [r["score_for_candidate"] for r in records]
    seconds = sum(r["seconds"] for r in records)
    finished = {r["index"] for r in records}
    upcoming = (i for i in range(first_game, first_game + config.max_games) if i not in finished)
    promoted = verdict(results, config)[0]
    bar = tqdm(total=config.max_games, initial=len(results), unit="game", desc="gate", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    started = time.monotonic()
    window_closes = clock() + config.start_window if config.start_window else math.inf

    def record(game: _Game, journal) -> None:
        nonlocal seconds, started
        now = time.monotonic()
        entry = {"index": game.index, "candidate_black": game.candidate_black, "result": game.result,
                 "moves": game.state.move_number, "score_for_candidate": game.score_for_candidate(),
                 "seconds": round(now - started, 2)}
        seconds += now - started
        started = now
        names = ("candidate", "best") if game.candidate_black else ("best", "candidate")
        sgf = sgf_io.save_sgf(game.state, black=names[0], white=names[1], result=game.result)
        with replacing(out / "sgf" / f"game-{game.index}.sgf") as tmp:  # before the journal counts it
            tmp.write_bytes(sgf)
        journal.write(json.dumps(entry) + "\n")
        journal.flush()
        results.append(entry["score_for_candidate"])
        bar.update(1)

    in_progress = 0  # games started and not yet recorded

    def start(seats: int) -> list[_Game]:
        nonlocal in_progress
        if clock() >= window_closes:
            return []
        room = config.max_games - len(results) - in_progress
        games = [_Game(next(upcoming), config, candidate, best) for _ in range(max(0, min(seats, room)))]
        in_progress += len(games)
        return games

    with (out / GAMES).open("a") as journal:

        def after_round(ended: list[_Game], evaluations: int, calls: int) -> bool:
            nonlocal promoted, in_progress
            for game in ended:
                in_progress -= 1
                record(game, journal)
                promoted = verdict(results, config)[0]
                if promoted is not None:
                    return True
            if results:
                bar.set_postfix(score=f"{match_stats.score(results):.3f}")
            return False

        if promoted is None:
            play_games(start, after_round, config.parallel_games, config.evaluation_threads)
    bar.close()
    result = summarize(results, config, seconds)
    if promoted is None:  # undecided with no game left to start: the start window closed first
        result = dataclasses.replace(result, reason=_window_closed(len(results), config))
        with replacing(out / WINDOW_CLOSED) as tmp:
            tmp.write_text(json.dumps({"games": len(results), "start_window": config.start_window}))
        log.info("gate, unfinished: %s", result.describe())
        return result
    with replacing(out / RESULT) as tmp:
        tmp.write_text(json.dumps(result.to_dict(), indent=1))
    log.info("gate: %s", result.describe())
    return result


def _window_closed(games: int, config: GateConfig) -> str:
    return (f"the start window of {config.start_window:g} s closed with {games} of {config.max_games} games played, "
            f"every game begun finished; the folder resumes")


def part_plan(config: GateConfig) -> list[tuple[int, GateConfig]]:
    """(first game, the part's config) of each process's part: consecutive blocks of the match's games, as even as
    max_games allows, each played to its end (its SPRT waits for its last game) by one process."""
    share, extra = divmod(config.max_games, config.processes)
    plan, first = [], 0
    for part in range(config.processes):
        games = share + (part < extra)
        if games:
            plan.append((first, dataclasses.replace(config, max_games=games, processes=1).fixed_length()))
        first += games
    return plan


def _play_part(open_networks: Callable[[], tuple[Evaluator, Evaluator]], config: GateConfig, out: Path,
               first_game: int) -> GateResult:
    candidate, best = open_networks()
    return play_match(candidate, best, config, out, progress=False, first_game=first_game)


def _logging_setup() -> tuple[dict[str, int], str | None]:
    """(levels of the root and gtp_engine loggers, the root handler's format) of this process."""
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    levels = {name: logging.getLogger(name).level for name in ("", "gtp_engine")}
    return levels, formatter._fmt if formatter else None


def _log_as(levels: dict[str, int], fmt: str | None) -> None:
    """A part's process logs to stderr as its parent does (a spawned process starts with logging unconfigured)."""
    logging.basicConfig(stream=sys.stderr, format=fmt or logging.BASIC_FORMAT)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def play_parts(open_networks: Callable[[], tuple[Evaluator, Evaluator]], config: GateConfig, out: str | Path, *,
               progress: bool = True) -> GateResult:
    """Plays (or resumes) the match in `out` in config.processes processes (the module docstring's parts), each
    opening its own (candidate, best) with open_networks (picklable: it runs in the new process); pools the parts'
    games into out's result.json and returns it. A part that fails ends the match with its error once the other
    parts have played their blocks; every finished game stays, and the same call resumes the match. A folder begun
    with another split of the games (or by one process) is refused: its blocks would not line up."""
    out = Path(out)
    done = read_result(out)
    if done is not None:
        return done
    plan = part_plan(config)
    _check_plan(out, [(first, part.max_games) for first, part in plan])
    folders = [out / PART.format(k) for k in range(len(plan))]
    bar = tqdm(total=config.max_games, unit="game", desc="gate", file=sys.stderr, disable=not progress,
               dynamic_ncols=True)
    # spawn, not fork: a forked process cannot use the CUDA its parent initialised, nor safely inherit threads.
    with ProcessPoolExecutor(len(plan), mp_context=multiprocessing.get_context("spawn"), initializer=_log_as,
                             initargs=_logging_setup()) as pool:
        running = [pool.submit(_play_part, open_networks, part, folder, first)
                   for (first, part), folder in zip(plan, folders)]
        while True:
            finished, pending = wait(running, timeout=5.0, return_when=FIRST_EXCEPTION)
            bar.n = sum(_lines(folder / GAMES) for folder in folders)
            bar.refresh()
            failed = [error for error in map(Future.exception, finished) if error is not None]
            if failed:
                raise failed[0]
            if not pending:
                break
        parts = [f.result() for f in running]
    bar.close()
    records = sorted((r for folder in folders for r in _read_games(folder / GAMES)), key=lambda r: r["index"])
    result = summarize([r["score_for_candidate"] for r in records], config.fixed_length(),
                       max(p.seconds for p in parts))
    if any(read_result(folder) is None for folder in folders):  # a part's start window closed first
        result = dataclasses.replace(result, reason=_window_closed(len(records), config))
        log.info("gate (%d processes), unfinished: %s", len(plan), result.describe())
        return result
    with replacing(out / RESULT) as tmp:
        tmp.write_text(json.dumps(result.to_dict(), indent=1))
    log.info("gate (%d processes): %s", len(plan), result.describe())
    return result


def tally(out: str | Path) -> dict:
    """The finished games of a match folder (one process's, or the parts' of a match in processes), complete or
    stopped before its end, scored for the candidate overall and by its colour. "ended" says how it stopped:
    complete; at its start window, every game it began finished; or cut short (a timeout). Games in progress
    together end in order of length, so a match cut short keeps its shortest, most decisive games: the colour
    split (and the mean of the two colours' scores) shows whether that sample leans on one colour."""
    out = Path(out)
    blocks = json.loads((out / PARTS).read_text()) if (out / PARTS).exists() else None
    folders = [out / PART.format(k) for k in range(len(blocks))] if blocks else [out]
    records = [r for folder in folders for r in _read_games(folder / GAMES)]
    if not records:
        raise ValueError(f"{out}: no finished games (no {GAMES} with a complete line)")

    def scored(rows: list[dict]) -> dict:
        results = [r["score_for_candidate"] for r in rows]
        if not results:
            return {"games": 0}
        score, low, high = match_stats.score_interval(results)
        return {"games": len(results), "score": score, "score_low": low, "score_high": high}

    as_black = scored([r for r in records if r["candidate_black"]])
    as_white = scored([r for r in records if not r["candidate_black"]])
    planned = sum(games for _, games in blocks) if blocks else None
    complete = read_result(out) is not None
    windowed = all((folder / WINDOW_CLOSED).exists() or read_result(folder) is not None for folder in folders)
    ended = "complete" if complete else "start window, every game begun finished" if windowed else "cut short"
    return {"folder": str(out), "complete": complete, "ended": ended, "planned": planned,
            **_outcome([r["score_for_candidate"] for r in records]), "as_black": as_black, "as_white": as_white,
            "colour_mean": ((as_black["score"] + as_white["score"]) / 2
                            if as_black["games"] and as_white["games"] else None),
            "moves_mean": round(sum(r["moves"] for r in records) / len(records), 1),
            "moves_max": max(r["moves"] for r in records)}


def _check_plan(out: Path, blocks: list[tuple[int, int]]) -> None:
    """Writes out/parts.json, the (first game, games) of each part, for a new match; refuses a folder begun with
    other blocks or by a single process."""
    path = out / PARTS
    if (out / GAMES).exists():
        raise ValueError(f"{out} holds a match played in one process; resume it with processes 1, or use another "
                         f"folder")
    if path.exists():
        begun = [tuple(block) for block in json.loads(path.read_text())]
        if begun != blocks:
            raise ValueError(f"{out} was begun in {len(begun)} parts {begun}, not {blocks}; resume it with the same "
                             f"processes and max games, or use another folder")
        return
    out.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(blocks))


def _lines(path: Path) -> int:
    """Finished lines of a journal another process is writing (no warning for the line it is in the middle of)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _read_games(path: Path) -> list[dict]:
    """The journal's complete lines (a line cut short by a kill is dropped)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            log.warning("%s: skipping an incomplete line", path)
    return records
