"""Endgame judgement: dead stones, our territory, seki, and the rules that decide when to pass, read from a
position, its ownership and a search's result. Nothing here searches: where a pass rule needs another search,
the caller hands it in (PassSearches).

Terms:
- ownership: flat, Black's view (+1 Black's), from a search or from the network alone.
- dead stones: chains whose mean ownership is on the opponent's side, and chains the ownership is unsure of (their
  mean below UNSURE_ALIVE_OWNERSHIP for their owner) whose mean over their stones and liberties is on the opponent's
  side: a lone stone in a framework, its liberties the framework's, which a network may half hold alive. (One such
  stone counted alive turns the whole framework into dame.) The score "by the count" is the game's
  score after removing them, per its rules; the "raw count" is the same with every stone alive (Tromp-Taylor
  under area scoring).
- seki stones: the rules' seki stones (GameState.seki_stones: chains beside a point neither colour can fill, which
  the count under the seki tax follows), and living chains without a point of their own: every liberty is neutral
  (|ownership| below NEUTRAL_OWNERSHIP) and touches a living opponent chain.
- neutral points: the points area counting gives to nobody: dame, seki liberties, empty regions touching both
  colours (and so the areas around dead stones), the whole board while it is empty.
- own territory: an empty point that area counting gives to the side to move (its empty region touches only our
  stones) and that the ownership gives us with confidence; whatever the ownership, an eye (an empty point whose
  neighbours are all our stones), and under territory scoring, once the opponent has passed, every empty point
  of our area as the count has it, the opponent's dead stones off the board: there each filling costs a point,
  the capture of a dead stone too (the count takes it as a prisoner all the same), and a network unsure of its
  own area must not fill it point by point, its eyes last. Where captures are owed (cleanup, or rule 1 below
  finds that the count after passing does not win), the points around dead stones are not ours. Playing in our
  own territory usually gains nothing and may spoil eyes.
- needed filling: a move in our own territory that does gain: it is the last liberty of a chain of ours (the
  filling connects it, where the opponent's move there would capture it), or the search is sure it is better
  than any other move it looked at (its LCB above their winrates: a shortage of liberties, a throw-in to
  prevent). It is no filling of our territory for the pass rules.
  Under territory scoring, once the opponent has passed and while we are behind by the count even with every
  stone of ours alive, only the connection is needed: a filling there costs a point, no stone it saves can turn
  the game, and a search whose network does not charge that point may still be sure of it.
- rescue: the move that saves the largest chain of ours the count keeps alive and that is in atari: its last
  liberty, else the capture of an opponent chain in atari beside it, where that leaves our chain two liberties
  or more.
- count after passing: the count of the position our pass leaves, the opponent to move, with the dead stones
  judged by a search of that position; winrate after passing: ours, by the same search. A chain that lives only
  if we move first is alive in the search of our move and dead there, as it is to a referee who scores the game
  our pass ends.
- time to check: whether the move's time still holds the searches the pass rules ask for. Without it no rule
  passes or searches again: the move plays on rather than pass unchecked.
- pass rules, area and territory scoring alike (Leela Zero's "pass only if passing wins", made safe against a
  network that is wrong and sure of itself):
  1. After the opponent's pass, passing ends the game: pass exactly when the count and the count after passing
     both win and there is no rescue (which is then played whatever move the search chose). Where the search
     chose pass and this rule does not pass, the move comes from a second search with pass excluded at the root:
     the search scores the game its pass ends by its own count (mcts.py, terminal node), so it puts its visits
     on pass and the other moves keep few. Our territory stays the first search's, the one that had pass among its
     moves.
  2. Passing first leaves the game to the opponent, so it needs a decided, settled game: the search prefers
     pass (it chose pass, or a move that only fills our own territory), no chain of ours the count keeps alive
     is in atari, the count and the count after passing win, the raw count wins even if the opponent got every
     neutral point, the ownership of every point that is not neutral is at least SETTLED_OWNERSHIP sure, and the
     winrate after passing is at most PASS_FIRST_WINRATE_LOSS below the chosen move's. The raw count asks
     nothing of the network, so the engine never passes first in the opening, and it captures dead stones and
     fills dame before it passes first. Where only the search after our pass stands in the way (its count or
     its winrate), the move the search chose in our own territory is played: it answers what that search found
     the opponent could do.
  3. Otherwise, where the search prefers pass and there is a rescue, play it.
  4. Otherwise play the search's best move that is neither pass nor a filling of our own territory; pass only
     when no other move is left. So: never pass while behind, never fill our own territory.
  In cleanup (kgs-genmove_cleanup) the opponent's dead stones must be captured first: no pass while any remain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from gtp_engine.board import BLACK, EMPTY, WHITE, Board, opponent
from gtp_engine.coords import PASS
from gtp_engine.game import GameState

OWN_TERRITORY_OWNERSHIP = 0.8  # how sure the ownership must be before a point counts as our territory
SETTLED_OWNERSHIP = 0.6  # how sure the ownership of every non-neutral point must be before we pass first
NEUTRAL_OWNERSHIP = 0.5  # a liberty whose |ownership| is below this belongs to nobody (seki, dame)
PASS_FIRST_WINRATE_LOSS = 0.2  # the most our winrate may fall, from the move's search to the search after our pass
SURE_DEAD_OWNERSHIP = 0.5  # how far on the other side a chain is (dead stones) where the search's count takes it off
UNSURE_ALIVE_OWNERSHIP = 0.7  # below this mean for its owner, a chain's liberties join its stones in judging it


class SearchedMove(Protocol):
    """What the rules read of a move a search looked at (search.MoveInfo)."""

    point: int
    visits: int
    winrate: float  # of the side to move
    lcb: float


class SearchedPosition(Protocol):
    """What the rules read of a search's snapshot (search.Snapshot)."""

    moves: Sequence[SearchedMove]  # the chosen move first, then the other visited moves by visits
    ownership: np.ndarray


class Searched(Protocol):
    """What the rules read of a search's result (search.SearchResult)."""

    choice: SearchedMove
    snapshot: SearchedPosition
    root_moves: Sequence[int]  # every legal root move, by falling prior


@dataclass(frozen=True)
class PassSearches:
    """The searches the pass rules may ask for, run by the caller inside the move's time."""

    after_passing: Callable[[GameState], Searched]  # rule 1's search of the position our pass leaves
    after_passing_to_the_deadline: Callable[[GameState], Searched]  # rule 2's: that position, with the time left
    without_pass: Callable[[], Searched] | None = None  # the move's position again, pass excluded at the root


# ---- the count ----------------------------------------------------------------------------------------------

def dead_stones_of(state: GameState, color: int, ownership: np.ndarray, margin: float = 0.0) -> list[int]:
    """Stones of `color` in dead chains (see dead stones): on the other side by more than `margin`."""
    board, g = state.board, state.grid
    sign = 1.0 if color == BLACK else -1.0
    dead, seen = [], set()
    for point in board.stones(color):
        if point in seen:
            continue
        chain = board.chain(point)
        seen.update(chain)
        owned = sign * ownership[g.flat_of[chain]]
        mean = float(owned.mean())
        if mean < -margin:
            dead.extend(chain)
        elif mean < UNSURE_ALIVE_OWNERSHIP:
            liberties = g.flat_of[list(board.chain_liberty_points(point))]
            if (owned.sum() + sign * ownership[liberties].sum()) / (len(chain) + len(liberties)) < -margin:
                dead.extend(chain)
    return dead


def dead_stones(state: GameState, ownership: np.ndarray, margin: float = 0.0) -> list[int]:
    """The dead stones of both colours, Black's first (by more than `margin`, see dead_stones_of); none where the
    rules count the board as it stands (Tromp-Taylor: no friendly pass), so that the count is the raw count and the
    pass rules capture first."""
    if state.rules.counts_the_board_as_it_stands:
        return []
    return dead_stones_of(state, BLACK, ownership, margin) + dead_stones_of(state, WHITE, ownership, margin)


def lead_by_the_count(state: GameState, ownership: np.ndarray) -> float:
    """The side to move's lead by the count: the score with the dead stones removed."""
    return lead_without(state, dead_stones(state, ownership))


def lead_without(state: GameState, dead: Sequence[int]) -> float:
    """The side to move's lead by the game's rules with the stones on the points `dead` removed."""
    score = state.score(dead)
    return score if state.to_play == BLACK else -score


def decided_by_the_raw_count(state: GameState, neutral: np.ndarray | None = None) -> bool:
    """Whether the side to move wins by the count with every stone alive even if the opponent got every neutral
    point (rule 2; known before any search). neutral: the neutral points, where the caller has them."""
    if neutral is None:
        neutral = state.area_ownership() == 0
    sign = 1 if state.to_play == BLACK else -1
    return sign * state.score() - np.count_nonzero(neutral) > 0


def chain_statuses(state: GameState, ownership: np.ndarray) -> dict[str, list[list[int]]]:
    """Every chain as "alive" or "dead" by the ownership; "seki" lists the living chains in seki. Chains as sorted
    points, in board order."""
    dead = set(dead_stones(state, ownership))
    seki = state.seki_stones(dead)
    board, g = state.board, state.grid
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
        if chain[0] in seki or liberties and all(abs(float(ownership[g.flat(lib)])) < NEUTRAL_OWNERSHIP
                                                 and any(living.get(n) == enemy for n in g.neighbors[lib])
                                                 for lib in liberties):
            statuses["seki"].append(chain)
    return statuses


# ---- our territory ------------------------------------------------------------------------------------------

def own_territory(state: GameState, ownership: np.ndarray, captures_owed: bool = False) -> np.ndarray:
    """Bool per flat point: the side to move's own territory (see the module docstring)."""
    sign, g = (1 if state.to_play == BLACK else -1), state.grid
    colors = state.board.colors
    empty = np.frombuffer(colors, dtype=np.uint8)[g.point_of] == EMPTY
    if state.rules.scoring == "territory" and opponent_passed(state):
        dead = [] if captures_owed else dead_stones_of(state, opponent(state.to_play), ownership)
        return empty & (state.area_ownership(dead) == sign)
    ours = empty & (state.area_ownership() == sign)
    territory = ours & (sign * ownership >= OWN_TERRITORY_OWNERSHIP)
    around = (EMPTY, opponent(state.to_play))  # what an eye has no neighbour of
    for flat in np.flatnonzero(ours & ~territory).tolist():
        if all(colors[n] not in around for n in g.neighbors[g.points[flat]]):
            territory[flat] = True
    return territory


def is_needed_filling(state: GameState, point: int, moves: Sequence[SearchedMove], territory: np.ndarray,
                      ownership: np.ndarray) -> bool:
    """Whether the move at `point`, in our own `territory`, gains all the same, by the searched `moves` and the
    `ownership` the count reads."""
    board, me = state.board, state.to_play
    if any(board.colors[n] == me and board.chain_liberties(n) == 1 for n in state.grid.neighbors[point]):
        return True
    if (state.rules.scoring == "territory" and opponent_passed(state)
            and lead_without(state, dead_stones_of(state, opponent(me), ownership)) <= 0):
        return False  # behind with every stone of ours alive
    chosen = next((m for m in moves if m.point == point), None)
    flat = state.grid.flat
    others = [m.winrate for m in moves if m.point != point and (m.point == PASS or not territory[flat(m.point)])]
    return chosen is not None and chosen.visits > 0 and bool(others) and chosen.lcb > max(others)


def territory_of_the_choice(state: GameState, searched: Searched, captures_owed: bool = False) -> np.ndarray:
    """Our own territory by the search's ownership, less the chosen move where it is a needed filling."""
    territory = own_territory(state, searched.snapshot.ownership, captures_owed)
    chosen, flat = searched.choice.point, state.grid.flat
    if chosen != PASS and territory[flat(chosen)] and is_needed_filling(state, chosen, searched.snapshot.moves,
                                                                        territory, searched.snapshot.ownership):
        territory[flat(chosen)] = False
    return territory


# ---- chains in atari ----------------------------------------------------------------------------------------

def living_chains_in_atari(state: GameState, ownership: np.ndarray) -> Iterator[tuple[list[int], int]]:
    """(chain, its last liberty) for every chain of the side to move that the count keeps alive and that has a
    single liberty."""
    board, me = state.board, state.to_play
    dead = set(dead_stones_of(state, me, ownership))
    seen: set[int] = set()
    for point in board.stones(me):
        if point in seen or point in dead:
            continue
        chain = board.chain(point)
        seen.update(chain)
        liberties = board.chain_liberty_points(point)
        if len(liberties) == 1:
            yield chain, next(iter(liberties))


def captures_beside(board: Board, chain: list[int]) -> list[int]:
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


def rescue(state: GameState, ownership: np.ndarray) -> int | None:
    """The rescue for the side to move (see the module docstring), where playing it is legal; None if none."""
    best, best_size = None, 0
    for chain, liberty in living_chains_in_atari(state, ownership):
        if len(chain) <= best_size:
            continue
        for move in [liberty] + captures_beside(state.board, chain):
            if state.is_legal(move):
                after = state.copy()
                after.play(move)
                if after.board.chain_liberties(chain[0]) >= 2:
                    best, best_size = move, len(chain)
                    break
    return best


# ---- the pass rules -----------------------------------------------------------------------------------------

def opponent_passed(state: GameState) -> bool:
    """Whether the last move was the opponent's pass: passing now ends the game (rule 1)."""
    return state.moves[-1:] == [(opponent(state.to_play), PASS)]


def pass_may_come_up(state: GameState) -> bool:
    """Whether any pass rule may pass here, known before a search: after the opponent's pass (rule 1), or where the
    raw count decides the game (rule 2). Elsewhere the rules pass only when no other move is left."""
    return opponent_passed(state) or decided_by_the_raw_count(state)


def decided_and_settled(state: GameState, ownership: np.ndarray) -> bool:
    """Rule 2's conditions on the position itself, before the search after our pass."""
    neutral = state.area_ownership() == 0
    return (lead_by_the_count(state, ownership) > 0
            and decided_by_the_raw_count(state, neutral)
            and bool(np.all(np.abs(ownership[~neutral]) >= SETTLED_OWNERSHIP))
            and next(living_chains_in_atari(state, ownership), None) is None)


def rule_1_may_pass(state: GameState, ownership: np.ndarray, rescue_move: int | None) -> bool:
    """After the opponent's pass, what rule 1 asks before its count after passing: no rescue (`rescue_move`, as
    rescue() answers), and the count wins."""
    return rescue_move is None and lead_by_the_count(state, ownership) > 0


def passing_first_in_question(state: GameState, searched: Searched, territory: np.ndarray) -> bool:
    """Rule 2's question before its search after our pass: the search prefers pass (it chose pass, or a move in
    our own `territory`, territory_of_the_choice's), in a decided and settled game."""
    chosen = searched.choice.point
    return ((chosen == PASS or bool(territory[state.grid.flat(chosen)]))
            and decided_and_settled(state, searched.snapshot.ownership))


def pass_in_question(state: GameState, searched: Searched, may_pass: bool) -> bool:
    """Whether choose_move will ask for a search for this result, where it has time to check: after the
    opponent's pass, where the search chose pass (the search without pass) or rule 1 may pass (its count after
    passing); otherwise where rule 2 searches after our pass. may_pass: as for choose_move."""
    if not may_pass:
        return False
    ownership = searched.snapshot.ownership
    if opponent_passed(state):
        return searched.choice.point == PASS or rule_1_may_pass(state, ownership, rescue(state, ownership))
    return passing_first_in_question(state, searched, territory_of_the_choice(state, searched))


def count_after_passing(state: GameState, search: Callable[[GameState], Searched]) -> tuple[float, float]:
    """(our lead by the count, our winrate) after passing, from `search` of the position our pass leaves."""
    after = state.copy()
    after.play(PASS, state.to_play)
    searched = search(after)
    return -lead_by_the_count(after, searched.snapshot.ownership), 1.0 - searched.choice.winrate


def choose_move(state: GameState, searched: Searched, allowed: Callable[[int], bool], may_pass: bool,
                searches: PassSearches, time_to_check: bool = True) -> tuple[int, Searched]:
    """The move for the side to move by the pass rules, and the result it was chosen from (`searched`, the move's
    search, or the search without pass that rule 1 asked for).

    allowed: whether a point (or PASS) may be played, by the move filter at the root. may_pass: whether the rules
    may pass at all: pass is allowed, and no cleanup capture is owed. time_to_check: see the module docstring.
    """
    me = state.to_play
    ownership = searched.snapshot.ownership
    chosen = searched.choice.point
    territory = territory_of_the_choice(state, searched, captures_owed=not may_pass)
    flat = state.grid.flat
    if may_pass:
        passed = opponent_passed(state)
        # After the opponent's pass the rescue comes first whatever the search chose: the count, by which we pass
        # or play on, keeps that chain alive, and the opponent's next move or a referee takes it.
        rescue_move = rescue(state, ownership) if passed or chosen == PASS or territory[flat(chosen)] else None
        if passed:
            if time_to_check and rule_1_may_pass(state, ownership, rescue_move):
                if count_after_passing(state, searches.after_passing)[0] > 0:
                    return PASS, searched
                # The count of the game our pass would end, the opponent to move, does not give us what ours does:
                # the opponent's stones in our area may live there, so their capture is owed after all.
                territory = territory_of_the_choice(state, searched, captures_owed=True)
            if rescue_move is None and chosen == PASS and searches.without_pass is not None and time_to_check:
                # Our territory stays the first search's: without pass among its moves, the second finds fillings
                # of it better than the rest where every move loses, and filled our eyes one by one.
                searched = searches.without_pass()
                chosen = searched.choice.point
        elif passing_first_in_question(state, searched, territory):
            if time_to_check:
                lead, winrate = count_after_passing(state, searches.after_passing_to_the_deadline)
                if lead > 0 and winrate >= searched.choice.winrate - PASS_FIRST_WINRATE_LOSS:
                    return PASS, searched
            if chosen != PASS:  # the move that stops what our pass would let the opponent do
                return chosen, searched
        if rescue_move is not None and allowed(rescue_move):
            return rescue_move, searched
    for point in [chosen] + [m.point for m in searched.snapshot.moves] + list(searched.root_moves):
        if point != PASS and allowed(point) and not territory[flat(point)]:
            return point, searched
    if allowed(PASS):
        return PASS, searched
    return chosen, searched  # a move of the filtered search, or any move where the filter left none
