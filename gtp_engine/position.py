"""Search positions: what the tree's descents play their lines on, and the two kinds there are.

Terms:
- leaf position: the position a descent reaches, played from the tree's root position; it goes to the evaluator.
- position kind (PositionKind): what a tree does with its leaf positions: make the root's from the tree's
  GameState, copy one, play a line on it, tell why a move is illegal there (GameState.illegal_reason, for the side
  to move), list the candidate moves of a batch (tree_core.candidates), and give the GameState it stands for.
- GAME_STATES: the kind whose positions are GameStates themselves, the reference; every evaluator takes them.
  IMPLEMENTATIONS (native.py) holds it as python and the compiled search positions' kind as compiled.
- compiled search position (_rules_core.Position, layout in _position.h): the root's board, counts and recent
  moves plus the line played from it, in one allocation, so that a descent makes no Python object but the position
  and plays without reading attributes. What every position of a tree shares (grid, Zobrist keys, the root's
  superko history, the rules' numbers) is one context, made with the root's position. It answers to_play,
  consecutive_passes, grid, hash, move_number, captures (as Board.captures), line (the points played from the
  root) and root_state, and
  features.encode and features.position_key read it as the GameState it stands for (the same inputs, the same
  key). IMPLEMENTATIONS.compiled is its kind, None where _rules_core or _features_core is not built (or
  GTP_ENGINE_PURE_PYTHON=1).
- accepting evaluator: one whose evaluate() (and prepare()) takes compiled search positions as it takes GameStates,
  because it reads them only through features.encode and position_key: its accepts_positions is True (read as
  evaluator.accepts_positions reads it; this module sits on the evaluator's layer, so it cannot import that). kind_for
  gives a tree the compiled kind only for such an evaluator: the choice is per tree, not chosen once.
tests/unit/test_position.py holds the compiled positions to GameState: the same boards, legality, inputs and keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, Sequence

import numpy as np

from gtp_engine import features, native
from gtp_engine.game import COPY, ILLEGAL_REASON, PLAY_LINE, GameState


@dataclass(frozen=True)
class PositionKind:
    """The operations on one kind of leaf position (see the module docstring)."""

    name: str
    root: Callable[[GameState], Any]  # the root's position; the tree never changes it
    copy: Callable[[Any], Any]
    play_line: Callable[[Any, Sequence[int]], None]
    illegal_reason: Callable[[Any, int], str | None]
    # tree_core.candidates for these positions, (positions, point_of_flat, out); None: the tree core's own, which
    # reads GameStates
    candidates: Callable[[Sequence[Any], np.ndarray, np.ndarray], None] | None
    game_state: Callable[[Any], GameState]  # the GameState a position stands for (a new one for a compiled one)


GAME_STATES = PositionKind("GameState", lambda state: state, COPY, PLAY_LINE, ILLEGAL_REASON, None,
                           lambda state: state)


def _search_positions(twin: ModuleType) -> PositionKind | None:
    """The compiled search positions' kind, made by _rules_core; None where the features' twin, which reads them, is
    not built."""
    if features.IMPLEMENTATIONS.compiled is None:
        return None

    def root(state: GameState) -> Any:
        rules = state.rules
        return twin.position_root(state, features.white_compensation(state), rules.scoring == "territory",
                                  rules.ko.encode(), rules.ko == "simple", rules.ko == "situational",
                                  rules.suicide_allowed)

    def game_state(position: Any) -> GameState:
        state = position.root_state.copy()
        PLAY_LINE(state, position.line)
        return state

    return PositionKind("compiled", root, twin.position_copy, twin.position_play_line, twin.position_illegal_reason,
                        twin.position_candidates, game_state)


IMPLEMENTATIONS = native.implementations("_rules_core", GAME_STATES, _search_positions)


def kind_for(evaluator: object) -> PositionKind:
    """The compiled search positions' kind for an accepting evaluator where it is built, else GAME_STATES."""
    compiled = IMPLEMENTATIONS.compiled
    if compiled is not None and getattr(evaluator, "accepts_positions", False):
        return compiled
    return GAME_STATES
