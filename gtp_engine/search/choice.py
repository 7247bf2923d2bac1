"""Choosing a move from a tree: the move pickers, the root's noise, and when to resign.

Terms:
- move pickers: choose_edge (LCB or visits), draw_edge (by visits with a temperature), pick_edge (the two by
  move number), add_noise, ResignCounter. They are the one place where a move is chosen from a tree: the
  Searcher (genmove, analysis), self-play and gating all use them.
- LCB: lower confidence bound of a move's utility, Q - lcb_z * standard error; the move is chosen by LCB among
  moves with at least lcb_min_visits_ratio of the most visited move's visits (Leela Zero 0.17).
- root policy temperature: the root's priors are raised to 1 / T and renormalised before the search (KataGo's
  rootPolicyTemperature; T > 1 widens the search at the root). Noise, if any, mixes into the result.
- strength level (strength.py): a weaker player's choice. restrict_root keeps the level's search to its
  candidates and gives each a first visit before PUCT (forced playouts at a k so small that they force only that
  visit); level_edge draws the move from the level's distribution over the root's statistics.
- noise, temperature: self-play exploration. Dirichlet noise mixes into the root priors; with a temperature T,
  the move is drawn with probability proportional to visits ** (1 / T) for the first temperature_moves moves,
  never a pass.
"""

from __future__ import annotations

import numpy as np

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.mcts import Node, Tree
from gtp_engine.search.settings import (
    HOPELESS_MOVES_SHARE,
    PASSED_HOPELESS_LEAD_SHARE,
    ChoiceConfig,
    NoiseConfig,
    ResignConfig,
)
from gtp_engine.search.strength import StrengthLevel, candidate_edges, distribution

_PRIOR_VARIANCE = 0.25  # of utilities, as if one extra visit had seen it: keeps one-visit moves uncertain
FIRST_VISIT_K = 1e-9  # forced playouts' k for restrict_root: sqrt(k * P * sum N) < 1 for any search's visits


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


def level_prior(tree: Tree) -> np.ndarray:
    """The root's priors a strength level chooses by: tree.level_prior where the search set it, else the root's."""
    return tree.root.prior if tree.level_prior is None else tree.level_prior


def restrict_root(tree: Tree, level: StrengthLevel) -> None:
    """The expanded root searched as the level searches it: its candidates alone, drawn from the edges not excluded
    already (others excluded), each given a first visit before PUCT chooses."""
    root = tree.root
    prior = level_prior(tree)
    if tree.root_excluded is not None:
        prior = np.where(tree.root_excluded, -np.inf, prior)
    outside = np.ones(len(root.moves), dtype=bool)
    outside[candidate_edges(prior)] = False
    excluded = outside if tree.root_excluded is None else outside | tree.root_excluded
    if not excluded.all():
        tree.root_excluded = excluded if excluded.any() else None
        tree.root_forced_k = FIRST_VISIT_K


def level_edge(tree: Tree, choice: ChoiceConfig, level: StrengthLevel, rng: np.random.Generator) -> int:
    """The root edge the level plays: drawn from its distribution (strength.py) over the root's priors
    and leads, around choose_edge's choice; never an excluded edge."""
    root = tree.root
    count = len(root.moves)
    visits = root.N[:count]
    with np.errstate(divide="ignore", invalid="ignore"):
        lead = np.where(visits > 0, root.S[:count] / visits, np.nan)
    best = choose_edge(tree, choice)
    probability = distribution(level, level_prior(tree), lead, best, np.array(root.moves) == PASS,
                               tree.root_state.grid.area)
    if tree.root_excluded is not None:
        probability[tree.root_excluded] = 0.0
        probability[best] += 1.0 - probability.sum()  # a share the exclusion took goes to the search's choice
    return int(rng.choice(count, p=probability / probability.sum()))


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
    """Per colour, the searches in a row below the threshold (ResignConfig); says when to resign."""

    def __init__(self, config: ResignConfig):
        self.config = config
        self.below = {BLACK: 0, WHITE: 0}

    def update(self, color: int, winrate: float, move_number: int, area: int, count: bool = True,
               lead: float | None = None, opponent_passed: bool = False) -> bool:
        """Counts one search of `color` (winrate and score lead: its own; lead None: not known) at `move_number`,
        opponent_passed: right after the opponent's pass; True when it should resign now. count=False: the answer
        counting it would give, with nothing counted (a move asked for and not played)."""
        cfg = self.config
        after = cfg.after_moves if cfg.after_moves is not None else int(area * cfg.after_moves_share)
        low = bool(cfg.winrate) and move_number >= after and (
            winrate < cfg.winrate or self._hopeless(winrate, lead, move_number, area, opponent_passed))
        below = self.below[color] + 1 if low else 0
        if count:
            self.below[color] = below
        return below >= cfg.consecutive

    def _hopeless(self, winrate: float, lead: float | None, move_number: int, area: int,
                  opponent_passed: bool) -> bool:
        """Whether a search that is not below the threshold counts as below by its lead (ResignConfig's
        hopeless_lead_share, less after the opponent's pass): far behind, a winrate near the threshold, and late
        enough in the game."""
        cfg = self.config
        share = min(cfg.hopeless_lead_share, PASSED_HOPELESS_LEAD_SHARE) if opponent_passed else cfg.hopeless_lead_share
        return (share > 0 and lead is not None and lead < -share * area
                and winrate < cfg.hopeless_winrate_factor * cfg.winrate and move_number >= HOPELESS_MOVES_SHARE * area)
