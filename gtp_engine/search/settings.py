"""How a search is configured: SearchConfig and its parts, by concern, and the players' resignation rule.

Terms:
- config: SearchConfig, by concern: tree (mcts.TreeConfig: PUCT, FPU, virtual loss, utility), stop
  (StoppingPolicy: early stop, the default visits, the tree's size limit), choice (ChoiceConfig: LCB,
  temperature), noise (NoiseConfig); ResignConfig is the players' resignation rule (choice.ResignCounter).
- stopping policy: when a search ends beyond its stop condition (limits.StopCondition). Early stop: when the
  most visited move cannot be overtaken within the playouts left, searching on cannot change the answer.
- analysis settings: a config as analysis searches with it (SearchConfig.for_analysis): to the visits asked for,
  since the other moves' numbers matter too (no early stop), the best move (no temperature), and no noise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from gtp_engine.mcts import TreeConfig


@dataclass(frozen=True)
class StoppingPolicy:
    """When a search ends beyond its StopCondition."""

    early_stop: bool = True  # stop once the most visited move cannot be overtaken
    default_visits: int = 800  # visits when a stop condition sets no limit at all (no visits, playouts or time)
    max_tree_visits: int = 200_000  # no search grows the tree past this (memory: ~8 kB a 19x19 visit)


@dataclass(frozen=True)
class ChoiceConfig:
    """How the move is chosen from the root's statistics (choice.pick_edge)."""

    lcb: bool = True  # choose the move by lower confidence bound; False: by visits
    lcb_z: float = 3.0  # standard errors below the mean for the LCB (Leela Zero ~4, KataGo 5 with its own errors)
    lcb_min_visits_ratio: float = 0.1  # moves with fewer visits than this share of the most visited are not chosen
    temperature: float = 0.0  # draw by visits ** (1 / temperature) (never a pass); 0 picks the best move
    temperature_moves: int = 0  # moves of the game (by move number) played with the temperature


@dataclass(frozen=True)
class NoiseConfig:
    """Exploration at the root (choice.add_noise): a policy temperature (analysis) and Dirichlet noise (self-play)."""

    fraction: float = 0.0  # weight of the noise (self-play: 0.25; play: 0)
    alpha_total: float = 10.83  # Dirichlet alpha times the number of legal moves (0.03 on 19x19, KataGo)
    root_policy_temperature: float = 1.0  # the root's priors ** (1 / T), renormalised; > 1 searches wider


HOPELESS_MOVES_SHARE = 0.5  # and its move number at least this share of the board's points
PASSED_HOPELESS_LEAD_SHARE = 0.1  # after the opponent's pass, a lead behind by this share is hopeless already


@dataclass(frozen=True)
class ResignConfig:
    """When a player gives up (a ResignCounter keeps the count). A search counts as below the threshold where its
    winrate is, or where it is hopeless: its score lead below minus hopeless_lead_share of the board's points, its
    winrate below hopeless_winrate_factor times the threshold, from HOPELESS_MOVES_SHARE of the board's points in
    moves on (a value head that never gets sure of a loss, as a network trained on human games, still resigns a
    game lost by a quarter of the board's points; before half the game such a lead may be the stones a handicap
    gave, not yet caught up). Right after the opponent's pass, which our pass would answer with the count, the lead
    is nearly final: there PASSED_HOPELESS_LEAD_SHARE of the board's points behind is hopeless (at most
    hopeless_lead_share), so that a lost game ends instead of being played on move after move while the
    opponent passes."""

    winrate: float | None = 0.05  # resign when the search's winrate is below this; None or 0: never
    consecutive: int = 1  # searches in a row of the same player below it
    after_moves: int | None = None  # no resignation before this move number; None: after_moves_share of the area
    after_moves_share: float = 0.25  # the first move number that may resign, a share of the board's points
    hopeless_lead_share: float = 0.25  # see the docstring; 0: the winrate alone decides
    hopeless_winrate_factor: float = 5.0  # see the docstring

    def __post_init__(self) -> None:
        if self.consecutive < 1:
            raise ValueError("consecutive must be at least 1")


@dataclass(frozen=True)
class SearchConfig:
    """Everything a Searcher needs, by concern."""

    tree: TreeConfig = TreeConfig()  # selection and utility (mcts.py)
    stop: StoppingPolicy = StoppingPolicy()
    choice: ChoiceConfig = ChoiceConfig()
    noise: NoiseConfig = NoiseConfig()
    batch_size: int = 8  # leaves per evaluator call
    batches_in_flight: int = 4  # gathered batches not yet finished (1: no overlap)
    evaluation_threads: int | None = None  # beside the search thread; None: evaluation_threads_for(the cores)
    reuse_tree: bool = True  # keep the subtree of the moves played since the last search
    seed: int | None = None  # random seed for noise and temperature

    def evaluation_threads_for(self, cores: int | None = None) -> int:
        """Evaluation threads (0: none, each batch evaluated as it is gathered): as configured, else the cores but
        one, the search thread's, which evaluates too while it waits; never more than the batches that can wait
        for one (batches in flight but one). On 2 cores, one evaluation thread and the search thread helping gave
        9,100-9,900 visits/s on 9x9 (int8) against 7,600-8,100 for two evaluation threads, which left the search
        thread too little of a core, and 7,200-7,300 for one thread without help."""
        limit = max(0, self.batches_in_flight - 1)
        if self.evaluation_threads is not None:
            return min(self.evaluation_threads, limit)
        return min(max(1, (cores or os.cpu_count() or 1) - 1), limit)

    def for_analysis(self, root_policy_temperature: float = 1.0) -> SearchConfig:
        """These settings as analysis searches with them (see analysis settings), the root's priors at this
        policy temperature."""
        return replace(self, stop=replace(self.stop, early_stop=False), choice=replace(self.choice, temperature=0.0),
                       noise=NoiseConfig(root_policy_temperature=root_policy_temperature))
