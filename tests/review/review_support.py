"""Helpers of the review tests: the command as a subprocess, the main line of a written game, a deterministic
network, and reviews made from given search results (no search)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sgfmill import sgf

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
OGS_GAME = FIXTURES / "ogs_20803642.sgf"  # a real 9x9 game between dan players, 77 moves
COMMENTED_GAME = FIXTURES / "commented_game.sgf"  # 14 moves, comments, a BM, a variation, CJK names
REVIEWED_GAME = FIXTURES / "commented_game_reviewed_by_0.1.0.sgf"  # COMMENTED_GAME as gtp_engine 0.1.0 reviewed it


def run_review(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m gtp_engine review ARGS`; env may add EXTRA_PATH in front of the import path."""
    path = os.pathsep.join(filter(None, [*(env or {}).get("EXTRA_PATH", "").split(os.pathsep), str(ROOT),
                                         os.environ.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "gtp_engine", "review", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, timeout=600)


def main_line(game: sgf.Sgf_game) -> list:
    """The move nodes of the main line."""
    return [node for node in game.get_main_sequence() if node.get_move()[0] is not None]


class CountingEvaluator:
    """A network that counts: the side to move's lead by area, its value a squashed lead (deterministic)."""

    def evaluate(self, states):
        import numpy as np

        from gtp_engine.board import BLACK
        from gtp_engine.evaluator import UniformEvaluator

        batch = UniformEvaluator().evaluate(states)
        leads = [s.area_score() * (1 if s.to_play == BLACK else -1) for s in states]
        batch.score = np.array(leads, np.float32)
        batch.value = np.tanh(np.array(leads, np.float32) / 5)
        return batch


def position(lead: float, best: str | None = None, best_lead: float | None = None, line: str = "",
             **leads: float):
    """A PositionReview on 9x9, Black's view: the root's lead (winrate 50%), the best move and its lead, the best
    line (GTP vertices, spaces between) and the leads of other visited moves by vertex (C3=-2.0)."""
    from gtp_engine import coords
    from gtp_engine.review import PositionReview

    g = coords.grid(9, 9)
    visited = {coords.from_gtp(g, vertex): value for vertex, value in leads.items()}
    point = coords.from_gtp(g, best) if best else None
    if point is not None:
        visited[point] = best_lead
    return PositionReview(0.5, lead, point, best_lead, [coords.from_gtp(g, v) for v in line.split()], visited)


def review_of(game: bytes, positions: list, visits: int = 10):
    """The Review of an SGF game from its positions' PositionReviews (position 0 first)."""
    from gtp_engine import review as review_lib
    from gtp_engine.sgf_io import load_sgf

    record = load_sgf(game)
    return review_lib._review(record, review_lib._positions(record)[0], visits, dict(enumerate(positions)))
