"""Player: turns a position it is handed into a move, with a searcher and the rules for the move; what GTP calls.

Terms:
- position: a GameState the caller owns (the GTP Session's game record). The Player never changes it: searches
  work on copies, genmove only says which move to play, and the Player keeps no game of its own. Tree reuse
  and the last search's result are keyed on positions, so nothing has to follow the game.
- judgement: dead stones, territory, seki and the pass rules are endgame.py's; the Player runs the searches
  they read (the ownership is the search's, or the network's when there was no search).
- ended game: a position after two passes. Its ownership comes from a search in which the side to move may not
  pass at the root: a pass would end the search's game at once, scored with every stone alive, where a referee
  removes the stones that play on from the position would capture.
- a pass that may come up: after the opponent's pass, or where the raw count decides the game
  (endgame.pass_may_come_up). Elsewhere no pass rule passes, so the move's search leaves pass out at the root and
  spends its visits on moves that can be played, however much the network values a pass.
- pass checks: the searches the pass rules ask for (endgame.PassSearches), inside the move's time. Where a pass
  may come up, the move's search leaves PASS_CHECK_SHARE of its time to them, and goes on with that time, its tree
  kept, where no rule will search again. The search after our pass stops at the move's hard deadline (the
  network's own evaluation when no time is left): for rule 1 it is ownership_playouts playouts, leaving the rest
  to the search without pass, which has the move's time left (or its visits once more); for rule 2, which decides
  the move, it has all the time to the move's own deadline.
- resignation: when the chosen move's winrate (the network's for the root when the move has no visits, as in a
  1-visit search) has been below config.resign.winrate for resign.consecutive genmoves in a row of that colour,
  from move resign.after_moves on (search.ResignCounter); never in cleanup (kgs-genmove_cleanup).
- strength level (search/strength.py; config.strength, a rank, None at full strength): genmove's searches (the
  move's and the pass rules' search without pass) play at the rank's level on the game's board: its playouts per
  move at most, whatever else limits the move, and its move choice; the resignation rule is the level's
  (PlayerConfig.resign_rule, see strength.py). Pondering, analysis and the searches that judge a position
  (ownership, dead stones, the count after a pass) are at full strength.
- search settings: genmove, pondering and scoring search with config.search; analysis (lz-/kata-analyze, the
  gogui analysis commands) with config.analysis, as KataGo keeps separate settings for the two.
- move limits: what ends one genmove's search besides the clock (--visits, --playouts, --time); with the
  clock's budget they make the move's StopCondition (MoveLimits.stop).
- background search: pondering or analysis in a thread; every other call stops it first. Pondering after our
  move searches on for the opponent until any input arrives, PONDER_VISIT_FACTOR times the move's visits, or
  PONDER_SECONDS.
- white view: the network's value, lead and ownership of a position turned from the side to move's view to
  White's, as KataGo's kata-raw-nn reports them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from gtp_engine import endgame
from gtp_engine.board import BLACK, opponent
from gtp_engine.coords import PASS
from gtp_engine.evaluator import EvaluationBatch, Evaluator, legal_policy
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter
from gtp_engine.search import (
    BackgroundSearch,
    Rank,
    ReportSchedule,
    ResignConfig,
    ResignCounter,
    SearchConfig,
    Searcher,
    SearchResult,
    SnapshotCallback,
    StopCondition,
    StrengthLevel,
    strength,
)
from gtp_engine.timecontrol import Budget

log = logging.getLogger(__name__)

PASS_CHECK_SHARE = 1 / 3  # of a move's time where a pass may come up: the search after our pass, the one without
PONDER_SECONDS = 600.0  # pondering stops by itself after this long, or after PONDER_VISIT_FACTOR x the move limit
PONDER_VISIT_FACTOR = 20


@dataclass(frozen=True)
class MoveChoice:
    point: int  # board point or PASS; meaningless when resign
    resign: bool = False
    winrate: float | None = None  # of the mover, from the search
    score_lead: float | None = None
    visits: int = 0  # of the root


@dataclass(frozen=True)
class PlayerConfig:
    search: SearchConfig = SearchConfig()  # genmove, pondering, scoring
    analysis: SearchConfig | None = None  # lz-/kata-analyze and gogui analysis; None: the same as search
    resign: ResignConfig = ResignConfig()
    ownership_playouts: int = 100  # playouts for an ownership estimate when no search has covered the position
    strength: Rank | None = None  # genmove's rank (see strength level); None: full strength

    @property
    def resign_rule(self) -> ResignConfig:
        """The resignation rule genmove follows: the configured one, or the level's."""
        if self.strength is None:
            return self.resign
        return replace(self.resign, consecutive=max(self.resign.consecutive, strength.RESIGN_CONSECUTIVE),
                       after_moves_share=max(self.resign.after_moves_share, strength.RESIGN_MOVES_SHARE))

    @property
    def analysis_search(self) -> SearchConfig:
        return self.analysis if self.analysis is not None else self.search


@dataclass(frozen=True)
class MoveLimits:
    """What ends one genmove's search besides the game clock (the --visits, --playouts and --time options)."""

    visits: int | None = None  # visits of the root per move, counting visits kept from earlier searches
    playouts: int | None = None  # new playouts per move
    time_per_move: float | None = None  # seconds; a cap per move, on top of what the game clock allows

    def stop(self, started: float, interrupt: threading.Event | None, default_visits: int,
             budget: Budget | None = None) -> StopCondition:
        """What ends a search begun at `started` (on the searcher's clock): the clock's `budget` (None: no time
        limit) within these limits; with neither a budget nor any limit, `default_visits`."""
        if budget is None:
            visits = self.visits
            if visits is None and self.playouts is None and self.time_per_move is None:
                visits = default_visits
            return StopCondition.for_limits(started, visits, self.playouts, self.time_per_move, interrupt)
        seconds = [budget.minimum, budget.recommended, budget.maximum]
        if self.time_per_move is not None:
            seconds = [min(t, self.time_per_move) for t in seconds]
        return StopCondition.for_budget(started, *seconds, interrupt=interrupt, visits=self.visits,
                                        playouts=self.playouts)


@dataclass(frozen=True)
class WhiteView:
    """The network's own evaluation of a position, without search, from White's view (see white view)."""

    value: float  # -1 (White loses) .. 1 (White wins)
    lead: float  # points
    ownership: np.ndarray  # flat: +1 White's

    @property
    def win(self) -> float:
        return (1 + self.value) / 2

    @property
    def loss(self) -> float:
        return (1 - self.value) / 2


def white_view(state: GameState, batch: EvaluationBatch) -> WhiteView:
    """The evaluation of `state` in the first row of `batch` (the network speaks for the side to move), from
    White's view."""
    white = -1.0 if state.to_play == BLACK else 1.0
    return WhiteView(white * float(batch.value[0]), white * float(batch.score[0]),
                     white * np.asarray(batch.ownership[0], dtype=np.float64))


class Player:
    def __init__(self, evaluator: Evaluator, config: PlayerConfig = PlayerConfig(),
                 clock: Callable[[], float] = time.monotonic):
        self.evaluator = evaluator
        self.config = config
        self.searcher = Searcher(evaluator, config.search, clock)  # clock: what the search's deadlines are on
        self._resign = ResignCounter(config.resign_rule)
        self._configured_resign = config.resign
        self._background: BackgroundSearch | None = None
        self._last: tuple[tuple, SearchResult] | None = None  # (position of a search, its result)
        self._lock = threading.Lock()
        self._said: set[tuple[Rank, str]] = set()  # (rank, the level it plays) said in the log

    def reset(self) -> None:
        """Forgets the search tree and the last result (clear_cache)."""
        self.stop_background()
        self.searcher.reset()
        self._resign = ResignCounter(self.config.resign_rule)
        self._last = None

    def resign_below(self, winrate: float | None) -> None:
        """Resigns below this winrate from now on (0: never; None: as configured); a change restarts the count."""
        resign = self._configured_resign if winrate is None else replace(self._configured_resign, winrate=winrate)
        if resign != self.config.resign:
            self.config = replace(self.config, resign=resign)
            self._resign = ResignCounter(self.config.resign_rule)

    def set_strength(self, rank: Rank | None) -> None:
        """Plays genmove at this rank from now on (None: full strength); a change restarts the resign count."""
        if rank != self.config.strength:
            self.config = replace(self.config, strength=rank)
            self._resign = ResignCounter(self.config.resign_rule)

    def _level(self, area: int) -> StrengthLevel | None:
        """The level genmove plays at on a board of `area` points (None: full strength); says once in the log when
        the rank is above the strongest level calibrated for the board and plays that one (strength, table), or
        when matches have not placed the level at its rank (strength, placed)."""
        rank = self.config.strength
        if rank is None:
            return None
        level = rank.level(area)
        if (rank, level.name) not in self._said:
            self._said.add((rank, level.name))
            if level.name != rank.name:
                log.warning("strength %s: the strongest level calibrated for this board is %s, which it plays "
                            "(max plays at full strength)", rank.name, level.name)
            elif not level.placed:
                log.warning("strength %s: not yet placed at this rank by matches on this board (the README's "
                            "Strength levels); it may play weaker, most of all giving handicap stones", rank.name)
        return level

    # ---- searching ------------------------------------------------------------------------------------

    def genmove(self, game: GameState, color: int, stop: StopCondition, on_snapshot: SnapshotCallback | None = None,
                reports: ReportSchedule | None = None, cleanup: bool = False,
                move_filter: MoveFilter = MoveFilter(), trial: bool = False) -> MoveChoice:
        """The move for `color` (to play or not) in `game`: a search, then the pass and resign rules. Plays
        nothing: the move is legal for `color` in `game` and the caller plays it. trial: the move is only asked
        for (reg_genmove): the searches in a row counted for resignation stay as they were.

        move_filter restricts the search (see mcts.MoveFilter) and the move: one its first ply permits, unless
        it permits no legal move.
        """
        self.stop_background()
        state = game.with_to_play(color)
        level = self._level(state.grid.area)
        if level is not None:
            stop = replace(stop, playouts=min(stop.playouts or level.playouts, level.playouts))

        def allowed(point: int) -> bool:  # by the filter, at the root
            return move_filter.permits(color, point, 1)

        dead_opponent = cleanup and bool(endgame.dead_stones_of(state, opponent(color), self._quick_ownership(state)))
        pass_may_come_up = endgame.pass_may_come_up(state)
        may_pass = allowed(PASS) and not dead_opponent
        hard_deadline = stop.max_deadline if stop.max_deadline is not None else stop.deadline
        move_stop = stop
        if pass_may_come_up:
            stop = self._leaving_time(stop, PASS_CHECK_SHARE)  # for the search after our pass (rules 1 and 2)

        def search(stop: StopCondition) -> SearchResult:
            return self._search(state, stop, on_snapshot, reports,
                                exclude=(PASS,) if dead_opponent or not pass_may_come_up else (),
                                move_filter=move_filter, strength=level)

        result = search(stop)
        time_to_check = True
        if stop != move_stop and not endgame.pass_in_question(state, result, may_pass):
            # No pass rule will search again: the move's search gets its time back, its tree kept. Should it come
            # to prefer pass, no time is left to check a pass: that waits for the next move.
            result = search(_the_rest(move_stop, result))
            time_to_check = False

        def search_without_pass() -> SearchResult:  # the rest of the move's time, or its visits once more
            budget = move_stop.playouts if move_stop.playouts is not None else move_stop.visits
            return self._search(state, replace(move_stop, visits=None, playouts=budget), on_snapshot,
                                reports, exclude=(PASS,), move_filter=move_filter, strength=level)

        choice = result.choice
        snapshot = result.snapshot
        if not cleanup and self._resign.update(color, choice.winrate, state.move_number, state.grid.area,
                                               count=not trial, lead=choice.score_lead,
                                               opponent_passed=endgame.opponent_passed(state)):
            return MoveChoice(PASS, resign=True, winrate=choice.winrate, score_lead=choice.score_lead,
                              visits=snapshot.visits)
        searches = endgame.PassSearches(
            after_passing=lambda after: self._searched(after, hard_deadline),
            after_passing_to_the_deadline=lambda after: self._searched(
                after, _earliest(move_stop.deadline, hard_deadline), to_the_deadline=True),
            without_pass=search_without_pass)
        point, result = endgame.choose_move(state, result, allowed, may_pass, searches, time_to_check)
        choice, snapshot = result.choice, result.snapshot
        if not game.is_legal(point, color):  # the colour not to play, where superko differs: passing is legal
            log.warning("search chose an illegal move for the colour not to play; passing")
            point = PASS
        info = next((m for m in snapshot.moves if m.point == point), choice)
        return MoveChoice(point, winrate=info.winrate, score_lead=info.score_lead, visits=snapshot.visits)

    def analyze(self, game: GameState, color: int, stop: StopCondition, on_snapshot: SnapshotCallback,
                reports: ReportSchedule | None = None, ownership: bool = False,
                move_filter: MoveFilter = MoveFilter()) -> None:
        """Searches `game` for `color` until `stop` (an interrupt alone is enough), reporting snapshots."""
        self.stop_background()
        self._search(game.with_to_play(color), stop, on_snapshot, reports, ownership=ownership,
                     move_filter=move_filter, config=self.config.analysis_search)

    def start_analysis(self, game: GameState, color: int, stop: StopCondition, on_snapshot: SnapshotCallback | None,
                       reports: ReportSchedule | None = None, ownership: bool = False) -> None:
        """Like analyze, in a background thread; any later call (or stop_background) ends it."""
        self._start_background(game.with_to_play(color), stop, on_snapshot, reports, ownership,
                               self.config.analysis_search)

    def ponder(self, game: GameState, stop: StopCondition | None = None) -> None:
        """Thinks on the opponent's time, for the side to move in `game`, until the next call (or `stop`), with
        the genmove settings: the next genmove reuses the tree."""
        self._start_background(game.copy(), stop or StopCondition(interrupt=threading.Event()), None, None, False,
                               self.config.search)

    def ponder_after(self, game: GameState, move_stop: StopCondition, input_arrived: threading.Event) -> None:
        """Ponders `game` after our move, whose search `move_stop` ended, until `input_arrived` is set (any input
        line, also one that is no command) or the ponder limits (see background search)."""
        limit = move_stop.visits or move_stop.playouts or self.config.search.stop.default_visits
        interrupt = threading.Event()
        self.ponder(game, StopCondition(visits=PONDER_VISIT_FACTOR * limit,
                                        deadline=self.searcher.clock() + PONDER_SECONDS, interrupt=interrupt))

        def watch_input() -> None:
            input_arrived.wait()
            interrupt.set()

        threading.Thread(target=watch_input, name="ponder-input", daemon=True).start()

    def _start_background(self, state: GameState, stop: StopCondition, on_snapshot: SnapshotCallback | None,
                          reports: ReportSchedule | None, ownership: bool, config: SearchConfig) -> None:
        self.stop_background()
        self._background = BackgroundSearch(self.searcher, state, stop, on_snapshot, reports, ownership, config)

    def stop_background(self) -> None:
        with self._lock:
            background, self._background = self._background, None
        if background is not None:
            result = background.stop()
            if result is not None:
                self._last = (_key(background.state), result)

    # ---- judging a position -----------------------------------------------------------------------------

    def policy(self, game: GameState, color: int) -> np.ndarray:
        """The network's move probabilities for `color` in `game` (flat, pass last) over the legal moves
        (evaluator.legal_policy), 0 on illegal moves."""
        self.stop_background()
        state = game.with_to_play(color)
        return legal_policy(self.evaluator.evaluate([state]).policy[0], state)

    def ownership(self, game: GameState, deadline: float | None = None) -> np.ndarray:
        """Ownership of `game`'s position, flat, Black's view (+1 Black's), from a search (ending at `deadline`, on
        the searcher's clock, if it comes first; the network's ownership when it has passed); in a game two passes
        ended, the side to move may not pass at the root (see ended game)."""
        self.stop_background()
        return self._searched(game, deadline).snapshot.ownership

    def dead_stones(self, game: GameState) -> list[int]:
        """Points of the stones the ownership judges dead, both colours, for final_status_list and final_score."""
        return endgame.dead_stones(game, self.ownership(game))

    def final_score(self, game: GameState) -> float:
        """The game's score (Black's view, per its rules) with the dead stones removed."""
        return game.score(self.dead_stones(game))

    def chain_statuses(self, game: GameState) -> dict[str, list[list[int]]]:
        """Every chain of `game` as "alive", "dead" or "seki" (endgame.chain_statuses), by the same ownership as
        dead_stones."""
        return endgame.chain_statuses(game, self.ownership(game))

    # ---- searches for the move ----------------------------------------------------------------------------

    def _search(self, state: GameState, stop: StopCondition, on_snapshot=None, reports=None, exclude=(),
                ownership: bool = False, move_filter: MoveFilter = MoveFilter(),
                config: SearchConfig | None = None, strength: StrengthLevel | None = None) -> SearchResult:
        result = self.searcher.search(state, stop, on_snapshot, reports, exclude, ownership_in_snapshots=ownership,
                                      move_filter=move_filter, config=config, strength=strength)
        self._last = (_key(state, move_filter), result)
        return result

    def _searched(self, game: GameState, deadline: float | None = None, to_the_deadline: bool = False) -> SearchResult:
        """The last search's result where it was of `game`'s position, else a search of ownership_playouts, or to
        the deadline where there is one (see ownership())."""
        if self._last is not None and self._last[0] == _key(game):
            return self._last[1]
        playouts = None if to_the_deadline and deadline is not None else self.config.ownership_playouts
        return self._search(game.copy(), StopCondition(playouts=playouts, deadline=deadline),
                            exclude=(PASS,) if game.is_over else ())

    def _quick_ownership(self, state: GameState) -> np.ndarray:
        """Ownership from the last search of this position, else from one network evaluation."""
        if self._last is not None and self._last[0] == _key(state):
            return self._last[1].snapshot.ownership
        sign = 1.0 if state.to_play == BLACK else -1.0
        return sign * self.evaluator.evaluate([state]).ownership[0].astype(np.float64)

    def _leaving_time(self, stop: StopCondition, share: float) -> StopCondition:
        """`stop` with each of its deadlines moved closer, so that `share` of the time to it is left after it."""
        now = self.searcher.clock()

        def sooner(deadline: float | None) -> float | None:
            return None if deadline is None else deadline - share * max(0.0, deadline - now)

        return replace(stop, deadline=sooner(stop.deadline), max_deadline=sooner(stop.max_deadline),
                       min_deadline=sooner(stop.min_deadline))


def _key(state: GameState, move_filter: MoveFilter = MoveFilter()) -> tuple:
    """Tells apart the positions whose search results Player keeps; a filtered search judges its position only
    for its own filter."""
    return state.width, state.height, state.to_play, state.komi, state.rules, tuple(state.moves), state.board.hash, \
        move_filter


def _earliest(*deadlines: float | None) -> float | None:
    """The first of the deadlines given (None ones left out); None when none is."""
    return min((d for d in deadlines if d is not None), default=None)


def _the_rest(stop: StopCondition, searched: SearchResult) -> StopCondition:
    """`stop` for a search that goes on from `searched`, a search of the same position: its playouts count."""
    if stop.playouts is None:
        return stop
    return replace(stop, playouts=max(0, stop.playouts - searched.snapshot.playouts))
