"""Player: turns a position it is handed into a move, with a searcher and the rules for the move; what GTP calls.

Terms:
- position: a GameState the caller owns (the GTP Session's game record). The Player never changes it: searches
  work on copies, genmove only says which move to play, and the Player keeps no game of its own. Tree reuse
  and the last search's result are keyed on positions, so nothing has to follow the game.
- dead stones: chains whose mean ownership (from the search, or the network when there was no search) is on
  the opponent's side. The score "by the count" is the game's score after removing them, per its rules; the
  "raw count" is the same with every stone alive (Tromp-Taylor under area scoring).
- seki stones: living chains without a point of their own: every liberty is neutral (|ownership| below
  NEUTRAL_OWNERSHIP) and touches a living opponent chain. final_status_list reads alive, dead and seki here.
- neutral points: the points area counting gives to nobody: dame, seki liberties, empty regions touching both
  colours (and so the areas around dead stones), the whole board while it is empty.
- own territory: an empty point that area counting gives to us (its empty region touches only our stones) and
  that the ownership gives us with confidence. Playing there usually gains nothing and may spoil eyes.
- needed filling: a move in our own territory that does gain: it is the last liberty of a chain of ours (the
  filling connects it, where the opponent's move there would capture it), or the search is sure it is better
  than any other move it looked at (its LCB above their winrates: a shortage of liberties, a throw-in to
  prevent). Such a move is no filling of our territory for the pass rules below. Against GNU Go on 9x9 a game
  was lost when the rules skipped the connection of a stone whose last liberty was a point of our area: the
  search had put 99% of its visits there, the engine played a useless move elsewhere, and the capture that
  followed turned a won game.
- ended game: a position after two passes. Its ownership comes from a search in which the side to move may not
  pass at the root: a pass would end the search's game at once, scored with every stone alive, where a referee
  removes the stones that play on from the position would capture.
- count after passing: the count of the position our pass leaves, the opponent to move, with the dead stones
  judged as final_score judges them there; winrate after passing: ours, by the same search (the opponent's best
  move there, seen from our side). That search runs only when a pass is in question, inside the move's time: the
  move's search leaves it PASS_CHECK_SHARE of the time after the opponent's pass (rule 1) and where rule 2's
  raw count holds (about 2 of our moves a game on 9x9), and goes on with that time, its tree kept, where no
  rule will search again (after the opponent's pass the search chose a move and we are behind by the count or
  have a chain to rescue; otherwise rule 2 finds no pass in question; a move then plays on, unchecked passes
  being what lost games); it stops at the move's hard deadline, the network's own
  evaluation of the position when no time is left. For rule 1 it is ownership_playouts playouts (4-17 ms on 9x9
  with the int8 network, 100-300 ms on 19x19 on 2 busy cores), leaving the rest to the search without pass; for
  rule 2, which decides the move, all the time left (with none reserved, it had one network evaluation, whose
  winrate alone caught the 9x9 case below by luck). A chain that lives
  only if we move first (an unsettled semeai, a group one move short of two eyes) is alive in the search's
  ownership, where we are to move, and dead here, as it is to a referee who scores the game our pass ends (GNU
  Go's final_score, a human opponent). Games against GNU Go were lost this way: on 13x13 the count said B+10.5
  with Black to move, Black passed, and the game ended W+13.5 by GNU Go's count and by our own final_score.
- pass rules, area and territory scoring alike (Leela Zero's "pass only if passing wins", made safe against a
  network that is wrong and sure of itself):
  1. After the opponent's pass, passing ends the game: pass exactly when the count and the count after passing
     both win and no chain of ours the count keeps alive is in atari where we can save it (rule 3's rescue,
     which is then played whatever move the search chose). Where the search chose pass and this rule does not
     pass, the move comes from a second search with pass excluded at the root, in the move's time left (or its
     visits once more): the search scores the game its pass ends with every
     stone alive, so it puts its visits on pass and the other moves keep few. Against GNU Go on 9x9, 1600 visits,
     the engine then played barely searched moves after GNU Go's pass, filled its own eye and resigned. Our
     territory (rule 4) is still judged by the first search, the one that had pass among its moves.
  2. Passing first leaves the game to the opponent, so it needs a decided, settled game: the search prefers
     pass (it chose pass, or a move that only fills our own territory), no chain of ours the count keeps alive
     is in atari (against GNU Go on 9x9 the engine passed first with one, and the capture that followed lost
     the game), the count and the count after passing win, the raw count wins even
     if the opponent got every neutral point, the ownership of every point that is not neutral is at least
     SETTLED_OWNERSHIP sure, and the winrate after passing is at most PASS_FIRST_WINRATE_LOSS below the chosen
     move's. The raw-count condition asks nothing of the network: on an empty board, after
     one stone, or while most points are neutral it fails, whatever a network claims; so the engine never
     passes first in the opening, and it captures dead stones and fills dame before it passes first. Where
     only the search after our pass stands in the way (its count or its winrate), the move the search chose in
     our own territory is played: it is the answer to what that search found the opponent could do. Against
     GNU Go on 9x9 (1 s a move) the engine passed first with the vital point of its biggest group open, sure by
     the count of a 25-point lead; the search after the pass gave the opponent 73% at 100 playouts, where the
     count there still kept the group alive, and GNU Go killed it.
  3. Otherwise, where the search prefers pass and a living chain of ours is in atari, play its rescue: the
     chain's last liberty, or else the capture of an opponent chain in atari beside it, where that leaves our
     chain two liberties or more (the largest such chain first). A network sure of a false eye counted a group
     alive that GNU Go killed by capturing the chain in atari next to it, after the engine had passed (9x9, 1 s
     a move); on 13x13 the engine passed after GNU Go's pass with two stones in atari inside Black's area that
     only a capture beside them could save (their own liberty was suicide), and GNU Go's count took them and
     the stones around them as dead (B+3.5).
  4. Otherwise play the search's best move that is neither pass nor a filling of our own territory; pass only
     when no other move is left. So: never pass while behind, never fill our own territory.
  In cleanup (kgs-genmove_cleanup) the opponent's dead stones must be captured first: no pass while any
  remain, and no resignation.
- resignation: when the chosen move's winrate (the network's for the root when the move has no visits, as in a
  1-visit search) has been below config.resign.winrate for resign.consecutive genmoves in a row of that colour,
  from move resign.after_moves on (search.ResignCounter).
- search settings: genmove, pondering and scoring search with config.search; analysis (lz-/kata-analyze, the
  gogui analysis commands) with config.analysis, as KataGo keeps separate settings for the two.
- background search: pondering or analysis in a thread; every other call stops it first.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np

from gtp_engine.board import BLACK, EMPTY, WHITE, Board, opponent
from gtp_engine.coords import PASS
from gtp_engine.evaluator import Evaluator, legal_policy
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter
from gtp_engine.search import (
    BackgroundSearch,
    ReportSchedule,
    ResignConfig,
    ResignCounter,
    SearchConfig,
    Searcher,
    SearchResult,
    SnapshotCallback,
    StopCondition,
)

log = logging.getLogger(__name__)

OWN_TERRITORY_OWNERSHIP = 0.8  # how sure the ownership must be before a point counts as our territory
SETTLED_OWNERSHIP = 0.6  # how sure the ownership of every non-neutral point must be before we pass first
NEUTRAL_OWNERSHIP = 0.5  # a liberty whose |ownership| is below this belongs to nobody (seki, dame)
PASS_CHECK_SHARE = 1 / 3  # of a move's time where a pass is in question: the search after our pass, the one without
PASS_FIRST_WINRATE_LOSS = 0.2  # the most our winrate may fall, from the move's search to the search after our pass


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

    @property
    def analysis_search(self) -> SearchConfig:
        return self.analysis if self.analysis is not None else self.search


class Player:
    def __init__(self, evaluator: Evaluator, config: PlayerConfig = PlayerConfig(),
                 clock: Callable[[], float] = time.monotonic):
        self.evaluator = evaluator
        self.config = config
        self.searcher = Searcher(evaluator, config.search, clock)  # clock: what the search's deadlines are on
        self._resign = ResignCounter(config.resign)
        self._background: BackgroundSearch | None = None
        self._last: tuple[tuple, SearchResult] | None = None  # (position of a search, its result)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forgets the search tree and the last result (clear_cache)."""
        self.stop_background()
        self.searcher.reset()
        self._resign = ResignCounter(self.config.resign)
        self._last = None

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
        dead_opponent = cleanup and bool(self._dead_stones_of(state, opponent(color), self._quick_ownership(state)))
        hard_deadline = stop.max_deadline if stop.max_deadline is not None else stop.deadline
        move_stop = stop
        if state.moves[-1:] == [(opponent(color), PASS)] or _decided_by_the_raw_count(state):
            stop = self._leaving_time(stop, PASS_CHECK_SHARE)  # for the search after our pass (rules 1 and 2)

        def search(stop: StopCondition) -> SearchResult:
            return self._search(state, stop, on_snapshot, reports,
                                exclude=(PASS,) if dead_opponent else (), move_filter=move_filter)

        result = search(stop)
        time_to_check = True
        if stop != move_stop and not self._pass_in_question(state, result, cleanup, dead_opponent, move_filter):
            # No pass rule will search again: the move's search gets its time back, its tree kept. Should it come
            # to prefer pass, no time is left to check a pass: that waits for the next move.
            result = search(_the_rest(move_stop, result))
            time_to_check = False

        def search_without_pass() -> SearchResult:  # the rest of the move's time, or its visits once more
            budget = move_stop.playouts if move_stop.playouts is not None else move_stop.visits
            return self._search(state, replace(move_stop, visits=None, playouts=budget), on_snapshot,
                                reports, exclude=(PASS,), move_filter=move_filter)

        choice = result.choice
        snapshot = result.snapshot
        if not cleanup and self._resign.update(color, choice.winrate, state.move_number, state.grid.area,
                                               count=not trial):
            return MoveChoice(PASS, resign=True, winrate=choice.winrate, score_lead=choice.score_lead,
                              visits=snapshot.visits)
        point, result = self._apply_pass_rules(state, result, cleanup, dead_opponent, move_filter, hard_deadline,
                                               move_stop.deadline, search_without_pass, time_to_check)
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
        ownership = self.ownership(game)
        return self._dead_stones_of(game, BLACK, ownership) + self._dead_stones_of(game, WHITE, ownership)

    def final_score(self, game: GameState) -> float:
        """The game's score (Black's view, per its rules) with the dead stones removed."""
        return game.score(self.dead_stones(game))

    def chain_statuses(self, game: GameState) -> dict[str, list[list[int]]]:
        """Every chain of `game` as "alive" or "dead" by the same judgement as dead_stones; "seki" lists the
        living chains in seki (see the module docstring). Chains as sorted points."""
        dead = set(self.dead_stones(game))
        ownership = self.ownership(game)  # the last search's: no second search
        board, g = game.board, game.grid
        chains: list[list[int]] = []
        seen: set[int] = set()
        for point in g.points:
            if board.colors[point] in (BLACK, WHITE) and point not in seen:
                chain = sorted(board.chain(point))
                seen.update(chain)
                chains.append(chain)
        statuses: dict[str, list[list[int]]] = {"alive": [], "dead": [], "seki": []}
        living = {p: board.colors[p] for chain in chains if chain[0] not in dead for p in chain}
        for chain in chains:
            if chain[0] in dead:
                statuses["dead"].append(chain)
                continue
            statuses["alive"].append(chain)
            enemy = opponent(board.colors[chain[0]])
            liberties = board.chain_liberty_points(chain[0])
            if liberties and all(abs(float(ownership[g.flat(lib)])) < NEUTRAL_OWNERSHIP
                                 and any(living.get(n) == enemy for n in g.neighbors[lib]) for lib in liberties):
                statuses["seki"].append(chain)
        return statuses

    # ---- rules for the move -------------------------------------------------------------------------------

    def _search(self, state: GameState, stop: StopCondition, on_snapshot=None, reports=None, exclude=(),
                ownership: bool = False, move_filter: MoveFilter = MoveFilter(),
                config: SearchConfig | None = None) -> SearchResult:
        result = self.searcher.search(state, stop, on_snapshot, reports, exclude, ownership_in_snapshots=ownership,
                                      move_filter=move_filter, config=config)
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

    def _apply_pass_rules(self, state: GameState, result: SearchResult, cleanup: bool, dead_opponent: bool,
                          move_filter: MoveFilter, deadline: float | None = None, move_deadline: float | None = None,
                          search_without_pass: Callable[[], SearchResult] | None = None,
                          time_to_check: bool = True) -> tuple[int, SearchResult]:
        """The move to play for the search's result, and the result it was chosen from: see the pass rules in the
        module docstring. deadline: when the count after passing must be known (the move's hard deadline);
        move_deadline: the move's own (recommended) one, where rule 2's search after our pass ends.
        search_without_pass: the search again with pass excluded at the root (rule 1's veto). time_to_check: False
        where the move's search took the time kept for the searches of the pass rules: no pass, no second search,
        the move plays on."""
        me = state.to_play
        ownership = result.snapshot.ownership
        chosen = result.choice.point
        territory = self._territory_of_the_choice(state, result)
        flat = state.grid.flat
        if self._may_pass(move_filter, me, cleanup, dead_opponent):
            opponent_passed = state.moves[-1:] == [(opponent(me), PASS)]
            # After the opponent's pass the rescue comes first whatever the search chose: the count, by which we
            # pass or play on, keeps that chain alive, and the opponent's next move or a referee takes it.
            rescue = (self._rescue(state, ownership) if opponent_passed or chosen == PASS or territory[flat(chosen)]
                      else None)
            if opponent_passed:
                if (time_to_check and self._rule_1_may_pass(state, ownership, rescue)
                        and self._after_passing(state, deadline)[0] > 0):
                    return PASS, result
                if rescue is None and chosen == PASS and search_without_pass is not None and time_to_check:
                    # Our territory stays the first search's: without pass among its moves, the second finds
                    # fillings of it better than the rest where every move loses, and filled our eyes one by one.
                    result = search_without_pass()
                    chosen = result.choice.point
            elif self._passing_first_in_question(state, result, territory):
                if time_to_check:
                    lead, winrate = self._after_passing(state, _earliest(move_deadline, deadline),
                                                        to_the_deadline=True)
                    if lead > 0 and winrate >= result.choice.winrate - PASS_FIRST_WINRATE_LOSS:
                        return PASS, result
                if chosen != PASS:  # the move that stops what our pass would let the opponent do
                    return chosen, result
            if rescue is not None and move_filter.permits(me, rescue, 1):
                return rescue, result
        for point in [chosen] + [m.point for m in result.snapshot.moves] + result.root_moves:
            if point != PASS and move_filter.permits(me, point, 1) and not territory[flat(point)]:
                return point, result
        if move_filter.permits(me, PASS, 1):
            return PASS, result
        return chosen, result  # a move of the filtered search, or any move where the filter left none

    @staticmethod
    def _may_pass(move_filter: MoveFilter, me: int, cleanup: bool, dead_opponent: bool) -> bool:
        """Whether the pass rules may pass at all: the filter permits it, and no cleanup capture is owed."""
        return move_filter.permits(me, PASS, 1) and not (cleanup and dead_opponent)

    def _territory_of_the_choice(self, state: GameState, result: SearchResult) -> np.ndarray:
        """Our own territory by the search's ownership, less the chosen move where it is a needed filling."""
        territory = self._own_territory(state, result.snapshot.ownership)
        chosen, flat = result.choice.point, state.grid.flat
        if chosen != PASS and territory[flat(chosen)] and self._is_needed_filling(state, chosen, result, territory):
            territory[flat(chosen)] = False
        return territory

    def _pass_in_question(self, state: GameState, result: SearchResult, cleanup: bool, dead_opponent: bool,
                          move_filter: MoveFilter) -> bool:
        """Whether the pass rules will search again for this result, in the time kept for them: after the
        opponent's pass, where the search chose pass (rule 1's search without pass) or rule 1 may pass (its count
        after passing); otherwise where rule 2 searches after our pass (the search prefers pass, in a decided and
        settled game). It searches nothing itself: the searcher's tree stays the move's, to go on with."""
        me, chosen, ownership = state.to_play, result.choice.point, result.snapshot.ownership
        if not self._may_pass(move_filter, me, cleanup, dead_opponent):
            return False
        if state.moves[-1:] == [(opponent(me), PASS)]:
            return chosen == PASS or self._rule_1_may_pass(state, ownership, self._rescue(state, ownership))
        return self._passing_first_in_question(state, result, self._territory_of_the_choice(state, result))

    def _rule_1_may_pass(self, state: GameState, ownership: np.ndarray, rescue: int | None) -> bool:
        """After the opponent's pass, what rule 1 asks before its count after passing: no chain of ours to rescue
        (`rescue`, _rescue's answer), and the count wins."""
        return rescue is None and self._margin(state, ownership) > 0

    def _passing_first_in_question(self, state: GameState, result: SearchResult, territory: np.ndarray) -> bool:
        """Rule 2's question before its search after our pass: the search prefers pass (it chose pass, or a move in
        our own `territory`, _territory_of_the_choice's), in a decided and settled game."""
        chosen = result.choice.point
        return ((chosen == PASS or bool(territory[state.grid.flat(chosen)]))
                and self._decided_and_settled(state, result.snapshot.ownership))

    @staticmethod
    def _is_needed_filling(state: GameState, point: int, result: SearchResult, territory: np.ndarray) -> bool:
        """Whether the move at `point`, in our own territory, gains all the same (see needed filling)."""
        board, me = state.board, state.to_play
        if any(board.colors[n] == me and board.chain_liberties(n) == 1 for n in state.grid.neighbors[point]):
            return True
        moves = result.snapshot.moves
        chosen = next((m for m in moves if m.point == point), None)
        flat = state.grid.flat
        others = [m.winrate for m in moves if m.point != point and (m.point == PASS or not territory[flat(m.point)])]
        return chosen is not None and chosen.visits > 0 and bool(others) and chosen.lcb > max(others)

    def _margin(self, state: GameState, ownership: np.ndarray) -> float:
        """Our lead by the count: the score with the dead stones (by ownership) removed."""
        score = state.score(self._dead_stones_of(state, BLACK, ownership) +
                            self._dead_stones_of(state, WHITE, ownership))
        return score if state.to_play == BLACK else -score

    def _after_passing(self, state: GameState, deadline: float | None = None,
                       to_the_deadline: bool = False) -> tuple[float, float]:
        """(our lead by the count, our winrate) after passing, from the one search of that position (see count
        after passing in the module docstring); to_the_deadline: that search takes all the time to the deadline,
        where there is one, instead of ownership_playouts."""
        after = state.copy()
        after.play(PASS, state.to_play)
        result = self._searched(after, deadline, to_the_deadline)
        return -self._margin(after, result.snapshot.ownership), 1.0 - result.choice.winrate

    def _decided_and_settled(self, state: GameState, ownership: np.ndarray) -> bool:
        """Rule 2's conditions on the position itself, before the search after our pass."""
        neutral = state.area_ownership() == 0
        return (self._margin(state, ownership) > 0
                and _decided_by_the_raw_count(state, neutral)
                and bool(np.all(np.abs(ownership[~neutral]) >= SETTLED_OWNERSHIP))
                and not self._living_chain_in_atari(state, ownership))

    def _rescue(self, state: GameState, ownership: np.ndarray) -> int | None:
        """The move that saves the largest chain of ours the count keeps alive and that is in atari: its last
        liberty, else the last liberty of an opponent chain in atari beside it (the capture), where playing it is
        legal and leaves our chain two liberties or more; None if none."""
        best, best_size = None, 0
        for chain, liberty in self._living_chains_in_atari(state, ownership):
            if len(chain) <= best_size:
                continue
            for move in [liberty] + _captures_beside(state.board, chain):
                if state.is_legal(move):
                    after = state.copy()
                    after.play(move)
                    if after.board.chain_liberties(chain[0]) >= 2:
                        best, best_size = move, len(chain)
                        break
        return best

    def _living_chain_in_atari(self, state: GameState, ownership: np.ndarray) -> bool:
        """Whether a chain of the side to move that the count keeps alive has a single liberty."""
        return next(self._living_chains_in_atari(state, ownership), None) is not None

    def _living_chains_in_atari(self, state: GameState, ownership: np.ndarray) -> Iterator[tuple[list[int], int]]:
        """(chain, its last liberty) for every chain of the side to move that the count keeps alive and that has a
        single liberty."""
        board, me = state.board, state.to_play
        dead = set(self._dead_stones_of(state, me, ownership))
        seen: set[int] = set()
        for point in board.stones(me):
            if point in seen or point in dead:
                continue
            chain = board.chain(point)
            seen.update(chain)
            liberties = board.chain_liberty_points(point)
            if len(liberties) == 1:
                yield chain, next(iter(liberties))

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


def _key(state: GameState, move_filter: MoveFilter = MoveFilter()) -> tuple:
    """Tells apart the positions whose search results Player keeps; a filtered search judges its position only
    for its own filter."""
    return state.to_play, state.komi, state.rules, tuple(state.moves), state.board.hash, move_filter


def _earliest(*deadlines: float | None) -> float | None:
    """The first of the deadlines given (None ones left out); None when none is."""
    return min((d for d in deadlines if d is not None), default=None)


def _the_rest(stop: StopCondition, searched: SearchResult) -> StopCondition:
    """`stop` for a search that goes on from `searched`, a search of the same position: its playouts count."""
    if stop.playouts is None:
        return stop
    return replace(stop, playouts=max(0, stop.playouts - searched.snapshot.playouts))


def _decided_by_the_raw_count(state: GameState, neutral: np.ndarray | None = None) -> bool:
    """Whether the side to move wins by the count with every stone alive even if the opponent got every neutral
    point (rule 2; known before any search). neutral: the neutral points, where the caller has them."""
    if neutral is None:
        neutral = state.area_ownership() == 0
    sign = 1 if state.to_play == BLACK else -1
    return sign * state.score() - np.count_nonzero(neutral) > 0


def _captures_beside(board: Board, chain: list[int]) -> list[int]:
    """The last liberties of the opponent chains in atari that touch `chain` (playing one captures), in board
    order of the stones met first."""
    enemy = opponent(board.colors[chain[0]])
    captures, seen = [], set()
    for point in chain:
        for n in board.grid.neighbors[point]:
            if board.colors[n] == enemy and n not in seen:
                seen.update(board.chain(n))
                liberties = board.chain_liberty_points(n)
                if len(liberties) == 1:
                    captures.append(next(iter(liberties)))
    return captures
