"""Player: one game, a searcher and the rules for turning a search into a move; what GTP and self-play call.

Terms:
- game: the GameState the controller sees; play, undo and genmove change it, searches work on copies.
- dead stones: chains whose mean ownership (from the search, or the network when there was no search) is on
  the opponent's side. The score "by the count" is the game's score after removing them, per its rules.
- own territory: an empty point that area counting gives to us (its empty region touches only our stones) and
  that the ownership gives us with confidence. Playing there gains nothing and may spoil eyes.
- pass rules (area and territory scoring alike): pass when the opponent has just passed and passing wins by
  the count; never pass while the count says we are behind (play the best move that does not fill our own
  territory instead); never fill our own territory (pass instead). In cleanup (kgs-genmove_cleanup) the
  opponent's dead stones must be captured first: no pass while any remain, and no resignation.
- resignation: when the chosen move's winrate is below config.resign_threshold, after resign_after_moves moves.
- background search: pondering or analysis in a thread; every other call stops it first.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import numpy as np

from gtp_engine.board import BLACK, EMPTY, WHITE, IllegalMoveError, opponent
from gtp_engine.coords import PASS
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter
from gtp_engine.search import (
    BackgroundSearch,
    MoveInfo,
    SearchConfig,
    Searcher,
    SearchResult,
    SnapshotCallback,
    StopCondition,
)

log = logging.getLogger(__name__)

OWN_TERRITORY_OWNERSHIP = 0.8  # how sure the ownership must be before a point counts as our territory


@dataclass(frozen=True)
class MoveChoice:
    point: int  # board point or PASS; meaningless when resign
    resign: bool = False
    winrate: float | None = None  # of the mover, from the search
    score_lead: float | None = None
    visits: int = 0  # of the root


class Player:
    def __init__(self, evaluator: Evaluator, config: SearchConfig = SearchConfig(), game: GameState | None = None):
        self.evaluator = evaluator
        self.config = config
        self.searcher = Searcher(evaluator, config)
        self._game = game if game is not None else GameState()
        self._background: BackgroundSearch | None = None
        self._last: tuple[tuple, SearchResult] | None = None  # (position of a search, its result)
        self._lock = threading.Lock()

    @property
    def game(self) -> GameState:
        return self._game

    def reset(self, game: GameState) -> None:
        self.stop_background()
        self._game = game
        self.searcher.reset()
        self._last = None

    def play(self, point: int, color: int) -> None:
        """Plays a checked move; raises IllegalMoveError."""
        self.stop_background()
        self._game.play(point, color)

    def undo(self) -> None:
        self.stop_background()
        self._game.undo()

    # ---- searching ------------------------------------------------------------------------------------

    def genmove(self, color: int, stop: StopCondition, on_snapshot: SnapshotCallback | None = None,
                snapshot_interval: float | None = None, cleanup: bool = False,
                move_filter: MoveFilter = MoveFilter()) -> MoveChoice:
        """Searches for `color` (to play or not), applies the pass and resign rules and plays the move.

        move_filter restricts the search (see mcts.MoveFilter) and the move: one its first ply permits, unless
        it permits no legal move.
        """
        self.stop_background()
        game = self._game
        state = _for_color(game, color)
        dead_opponent = cleanup and bool(self._dead_stones_of(state, opponent(color), self._quick_ownership(state)))
        result = self._search(state, stop, on_snapshot, snapshot_interval, exclude=(PASS,) if dead_opponent else (),
                              move_filter=move_filter)
        choice = result.choice
        snapshot = result.snapshot
        if not cleanup and self._should_resign(state, choice):
            return MoveChoice(PASS, resign=True, winrate=choice.winrate, score_lead=choice.score_lead,
                              visits=snapshot.visits)
        point = self._apply_pass_rules(state, result, cleanup, dead_opponent, move_filter)
        try:
            game.play(point, color)
        except IllegalMoveError:  # only when color was not to play and superko differs: passing is always legal
            log.warning("search chose an illegal move for the colour not to play; passing")
            point = PASS
            game.play(point, color)
        info = next((m for m in snapshot.moves if m.point == point), choice)
        return MoveChoice(point, winrate=info.winrate, score_lead=info.score_lead, visits=snapshot.visits)

    def analyze(self, color: int, stop: StopCondition, on_snapshot: SnapshotCallback,
                snapshot_interval: float | None = None, ownership: bool = False,
                move_filter: MoveFilter = MoveFilter()) -> None:
        """Searches for `color` until `stop` (an interrupt alone is enough), reporting snapshots; plays nothing."""
        self.stop_background()
        self._search(_for_color(self._game, color), stop, on_snapshot, snapshot_interval, ownership=ownership,
                     move_filter=move_filter)

    def start_analysis(self, color: int, stop: StopCondition, on_snapshot: SnapshotCallback | None,
                       snapshot_interval: float | None = None, ownership: bool = False) -> None:
        """Like analyze, in a background thread; any later call (or stop_background) ends it."""
        self.stop_background()
        self._background = BackgroundSearch(self.searcher, _for_color(self._game, color), stop, on_snapshot,
                                            snapshot_interval, ownership)

    def ponder(self, stop: StopCondition | None = None) -> None:
        """Thinks on the opponent's time, for the side to move, until the next call (or `stop`)."""
        self.start_analysis(self._game.to_play, stop or StopCondition(interrupt=threading.Event()), None)

    def stop_background(self) -> None:
        with self._lock:
            background, self._background = self._background, None
        if background is not None:
            result = background.stop()
            if result is not None:
                self._last = (_key(background.state), result)

    def ownership(self) -> np.ndarray:
        """Ownership of the current position, flat, Black's view (+1 Black's), from a search."""
        self.stop_background()
        state = self._game
        if self._last is not None and self._last[0] == _key(state):
            return self._last[1].snapshot.ownership
        result = self._search(state.copy(), StopCondition(playouts=self.config.ownership_playouts))
        return result.snapshot.ownership

    def dead_stones(self) -> list[int]:
        """Points of the stones the ownership judges dead, both colours, for final_status_list and final_score."""
        ownership = self.ownership()
        return self._dead_stones_of(self._game, BLACK, ownership) + self._dead_stones_of(self._game, WHITE, ownership)

    def final_score(self) -> float:
        """The game's score (Black's view, per its rules) with the dead stones removed."""
        return self._game.score(self.dead_stones())

    # ---- rules for the move -------------------------------------------------------------------------------

    def _search(self, state: GameState, stop: StopCondition, on_snapshot=None, interval=None, exclude=(),
                ownership: bool = False, move_filter: MoveFilter = MoveFilter()) -> SearchResult:
        result = self.searcher.search(state, stop, on_snapshot, interval, exclude, ownership_in_snapshots=ownership,
                                      move_filter=move_filter)
        self._last = (_key(state, move_filter), result)
        return result

    def _quick_ownership(self, state: GameState) -> np.ndarray:
        """Ownership from the last search of this position, else from one network evaluation."""
        if self._last is not None and self._last[0] == _key(state):
            return self._last[1].snapshot.ownership
        sign = 1.0 if state.to_play == BLACK else -1.0
        return sign * self.evaluator.evaluate([state]).ownership[0].astype(np.float64)

    def _should_resign(self, state: GameState, choice: MoveInfo) -> bool:
        threshold = self.config.resign_threshold
        if not threshold:
            return False
        after = self.config.resign_after_moves
        if after is None:
            after = state.grid.area // 4
        return state.move_number >= after and choice.visits > 0 and choice.winrate < threshold

    def _apply_pass_rules(self, state: GameState, result: SearchResult, cleanup: bool, dead_opponent: bool,
                          move_filter: MoveFilter) -> int:
        me = state.to_play
        ownership = result.snapshot.ownership
        if cleanup and dead_opponent:
            margin = None  # the count is not what matters until the dead stones are off the board
        else:
            dead = self._dead_stones_of(state, BLACK, ownership) + self._dead_stones_of(state, WHITE, ownership)
            score = state.score(dead)
            margin = score if me == BLACK else -score
        can_pass = move_filter.permits(me, PASS, 1)
        last = state.moves[-1] if state.moves else None
        if can_pass and margin is not None and margin > 0 and last == (opponent(me), PASS):
            return PASS
        territory = self._own_territory(state, ownership)

        def acceptable(point: int) -> bool:
            if not move_filter.permits(me, point, 1):
                return False
            if point == PASS:
                return not (cleanup and dead_opponent) and margin is not None and margin >= 0
            return not territory[state.grid.flat(point)]

        chosen = result.choice.point
        if can_pass and chosen != PASS and territory[state.grid.flat(chosen)] and margin is not None and margin >= 0:
            return PASS  # the game is won and the move only fills our own territory
        for point in [chosen] + [m.point for m in result.snapshot.moves] + result.root_moves:
            if acceptable(point):
                return point
        return PASS if can_pass else chosen  # chosen: a filtered search's move, or any when it filtered them all

    @staticmethod
    def _dead_stones_of(state: GameState, color: int, ownership: np.ndarray) -> list[int]:
        """Stones of `color` in chains whose mean ownership is on the other side."""
        board, g = state.board, state.grid
        sign = 1.0 if color == BLACK else -1.0
        dead, seen = [], set()
        for point in board.stones(color):
            if point in seen:
                continue
            chain = board.chain(point)
            seen.update(chain)
            if sign * float(ownership[g.flat_of[chain]].mean()) < 0:
                dead.extend(chain)
        return dead

    @staticmethod
    def _own_territory(state: GameState, ownership: np.ndarray) -> np.ndarray:
        """Bool per flat point: empty, counted ours by area counting and confidently ours by ownership."""
        me = state.to_play
        sign = 1 if me == BLACK else -1
        empty = np.frombuffer(state.board.colors, dtype=np.uint8)[state.grid.point_of] == EMPTY
        return empty & (state.area_ownership() == sign) & (sign * ownership >= OWN_TERRITORY_OWNERSHIP)


def _for_color(game: GameState, color: int) -> GameState:
    """A copy of the game with `color` to play (GTP may ask either colour for a move)."""
    state = game.copy()
    if color != state.to_play:
        state.set_to_play(color)
    return state


def _key(state: GameState, move_filter: MoveFilter = MoveFilter()) -> tuple:
    """Tells apart the positions whose search results Player keeps; a filtered search judges its position only
    for its own filter."""
    return state.to_play, state.komi, state.rules, tuple(state.moves), state.board.hash, move_filter
