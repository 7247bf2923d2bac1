"""Choosing a move from a tree: the move pickers, the root's noise, and when to resign.

Terms:
- move pickers: choose_edge (LCB or visits), draw_edge (by visits with a temperature), pick_edge (the two by
  move number), add_noise, ResignCounter. They are the one place where a move is chosen from a tree: the
  Searcher (genmove, analysis), self-play and gating all use them.
- LCB: lower confidence bound of a move's utility, Q - lcb_z * standard error; the move is chosen by LCB among
  moves with at least lcb_min_visits_ratio of the most visited move's visits (Leela Zero 0.17).
- root policy temperature: the root's priors are raised to 1 / T and renormalised before the search (KataGo's
  rootPolicyTemperature; T > 1 widens the search at the root). Noise, if any, mixes into the result.
- noise, temperature: self-play exploration. Dirichlet noise mixes into the root priors; with a temperature T,
  the move is drawn with probability proportional to visits ** (1 / T) for the first temperature_moves moves,
  never a pass.
"""

from __future__ import annotations

import numpy as np

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.mcts import Node, Tree
from gtp_engine.search.settings import ChoiceConfig, NoiseConfig, ResignConfig

_PRIOR_VARIANCE = 0.25  # of utilities, as if one extra visit had seen it: keeps one-visit moves uncertain


def lower_confidence_bounds(node: Node, z: float) -> np.ndarray:
    """Lower confidence bound of the utility of each edge (-inf where unvisited)."""
    N, W, W2 = node.N, node.W, node.W2
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = W / N
        variance = np.maximum(W2 / N - mean * mean, 0.0)
        variance = (variance * N + _PRIOR_VARIANCE) / (N + 1.0)
        bound = mean - z * np.sqrt(variance / N)
    return np.where(N > 0, bound, -np.inf)


def choose_edge(tree: Tree, choice: ChoiceConfig) -> int:
    """The root edge to play: the best LCB among well-visited moves, or the most visited; respects exclusions."""
    root = tree.root
    N = root.N.copy()
    if tree.root_excluded is not None:
        N[tree.root_excluded] = 0.0
    most = int(N.argmax())
    if N[most] <= 0:  # nothing visited yet: the first move by prior that may be chosen
        return 0 if tree.root_excluded is None else int(np.argmin(tree.root_excluded))
    if not choice.lcb:
        return most
    eligible = N >= max(1.0, choice.lcb_min_visits_ratio * N[most])
    lcb = np.where(eligible, lower_confidence_bounds(root, choice.lcb_z), -np.inf)
    return int(lcb.argmax())


def draw_edge(tree: Tree, temperature: float, rng: np.random.Generator,
              visits: np.ndarray | None = None) -> int | None:
    """A root edge drawn with probability proportional to visits ** (1 / temperature), never a pass (a drawn pass
    gives the game away for nothing) nor an excluded edge; None when no other edge has visits. visits: per root
    edge, the root's own when None (self-play with forced playouts gives its pruned visits)."""
    root = tree.root
    visits = (root.N[: len(root.moves)] if visits is None else np.asarray(visits)).astype(np.float64)
    drawable = np.where(np.array(root.moves) == PASS, 0.0, visits)
    if tree.root_excluded is not None:
        drawable[tree.root_excluded] = 0.0
    if not drawable.sum() > 0:
        return None
    weights = drawable if temperature == 1.0 else (drawable / drawable.max()) ** (1.0 / temperature)
    return int(rng.choice(len(weights), p=weights / weights.sum()))


def pick_edge(tree: Tree, choice: ChoiceConfig, move_number: int, rng: np.random.Generator,
              visits: np.ndarray | None = None) -> int:
    """The root edge to play at `move_number`: drawn with the temperature in the first temperature_moves moves
    (draw_edge, from `visits` when given), otherwise choose_edge's."""
    if choice.temperature > 0 and move_number < choice.temperature_moves:
        edge = draw_edge(tree, choice.temperature, rng, visits)
        if edge is not None:
            return edge
    return choose_edge(tree, choice)


def add_noise(tree: Tree, noise: NoiseConfig, rng: np.random.Generator) -> None:
    """The expanded root's priors for selection (tree.root_prior): the policy temperature applied, then Dirichlet
    noise mixed in; None (the priors themselves) without either."""
    root = tree.root
    tree.root_prior = None
    prior = root.prior
    if noise.root_policy_temperature != 1.0 and len(root.moves) > 1:
        prior = prior ** (1.0 / noise.root_policy_temperature)
        tree.root_prior = prior = prior / prior.sum()
    if noise.fraction > 0 and len(root.moves) > 1:
        dirichlet = rng.dirichlet(np.full(len(root.moves), noise.alpha_total / len(root.moves)))
        tree.root_prior = (1 - noise.fraction) * prior + noise.fraction * dirichlet


class ResignCounter:
    """Per colour, the searches in a row whose winrate was below ResignConfig.winrate; says when to resign."""

    def __init__(self, config: ResignConfig):
        self.config = config
        self.below = {BLACK: 0, WHITE: 0}

    def update(self, color: int, winrate: float, move_number: int, area: int, count: bool = True) -> bool:
        """Counts one search of `color` (winrate: its own) at `move_number`; True when it should resign now.
        count=False: the answer counting it would give, with nothing counted (a move asked for and not played)."""
        cfg = self.config
        after = cfg.after_moves if cfg.after_moves is not None else area // 4
        low = bool(cfg.winrate) and winrate < cfg.winrate and move_number >= after
        below = self.below[color] + 1 if low else 0
        if count:
            self.below[color] = below
        return below >= cfg.consecutive
