"""Probe positions: random legal positions on which two runs of one network are compared, torch against
onnxruntime at export (export_onnx.parity) and a file against its rewrite (board_masks.difference).

Terms:
- probe position: a GameState after 0 up to about 70% of the board's points of uniformly random legal moves,
  with one of a few komi values and rules sets, so the global features vary too. A random network's outputs
  on them differ from position to position, which is all a comparison needs.
"""

from __future__ import annotations

import numpy as np

from gtp_engine.game import GameState, Rules

_RULES = ("chinese", "japanese", "tromp-taylor")
_KOMI = (0.5, 6.5, 7.5, -3.0)


def random_positions(size: int, count: int, rng: np.random.Generator) -> list[GameState]:
    """count probe positions on a size x size board, drawn from rng."""
    states = []
    for i in range(count):
        state = GameState(size, komi=float(rng.choice(_KOMI)), rules=Rules.named(_RULES[i % len(_RULES)]))
        for _ in range(int(rng.integers(0, int(0.7 * size * size) + 1))):
            legal = np.flatnonzero(state.legal_mask())
            state.play(state.grid.from_flat(int(rng.choice(legal))))
            if state.is_over:
                break
        states.append(state)
    return states
