"""Self-play: games of one network against itself, many at once in one process, saved as SGF files and as
training shards (dataset.py) with soft policy targets.

Terms:
- round: over the trees of the games in progress (search.play_games): each selects up to leaves_per_game leaves
  under virtual loss, their positions go to the evaluator, and each tree expands and backs up its share.
  parallel_games sets how many games are in progress, and so the batch sizes.
- pipelining: with evaluation_threads = t > 0 (1 by default), the games are in two lanes whose rounds alternate
  (search/rounds.py's games in lanes): while one lane's positions are in the network, in t + 1 calls, the playing
  thread finishes the other lane's round, plays its moves and gathers its next round; each call runs on
  cores // (t + 1) threads (network_threads). With 0, every round takes all games, one call, and nothing
  overlaps.
- search: the tree of the position to move, grown round by round until its root has the visits of its kind
  (kept visits included); then the move is played and the subtree under it becomes the next search's tree
  (tree reuse). Tree parameters (c_puct, FPU, virtual loss, score utility) are mcts.TreeConfig's defaults.
- playout cap randomization (KataGo): each search is full with probability full_search_fraction (full_visits,
  Dirichlet noise at the root, and its visit distribution becomes a policy target) or else fast (fast_visits,
  no noise, no policy target: its sample trains value, score and ownership only, policy_mask False).
- forced playouts (KataGo): in a full search with forced_playouts = k > 0, each root move gets at least
  sqrt(k * P * sum N) visits, P its noisy prior (mcts.Tree.root_forced_k); with them, the policy target is always
  pruned and the moves drawn at temperature are drawn from the pruned visits, so that the forced visits train
  nothing and play nothing.
- noise: Dirichlet(alpha) mixed into the root priors with weight noise_fraction, alpha = noise_alpha_total /
  the number of legal moves (KataGo: 10.83 = 0.03 * 361, whatever the board size): search.add_noise.
- move choice (search.pick_edge): the first temperature_moves moves of a game are drawn in proportion to the
  root's visits (temperature 1; never a pass); later moves are the search's choice (LCB among well-visited moves).
- policy target: the root's visits per move divided by their sum, flat order, pass last; it sums to 1. With
  prune_policy_target (the default) the visits are first pruned (prune_visits): the noise and the virtual loss
  send visits to moves that the network's own prior would not have searched, and a network taught those
  visits learns to spread its policy over whatever moves noise might pick (docs/training.md).
- winrate of a search: (root value + 1) / 2 for the player to move. Resignation: a player resigns when its
  winrate stays below resign_winrate for resign_consecutive of its searches in a row (search.ResignCounter).
  A share no_resign_fraction
  of games (evenly spread over game numbers) never resigns. In such a game the first player that would have
  resigned is noted; if that player goes on to win, the game counts as a false resignation.
- setup: each game's rules, komi and handicap stones, drawn from the config's rule sets, komi spread and handicap
  share (game_setups.py) by a generator of its own, seeded by the run's seed and the game's number.
- ending: "passes" (two passes in a row: the final position is counted exactly by the game's rules with every
  stone alive, as the search's terminal nodes are (GameState.score); the score target, and the area ownership as
  the ownership target), "resign" (the winner is known, nothing else: value target only) or "cut" (max_moves
  reached: counted so as it stands, value target only).
- value target: the game's winner from each sample's side to move (a draw where the count is exactly 0); and
  the search value (dataset.py), the root's mean value when the move was chosen, full or fast search alike.
- output folder: the shards and index.json (all games to "train" except a val_fraction of them by game key, as
  splits.py says), sgf/game-N.sgf for game number N (0-based), report.json (SelfPlayReport.to_dict).
- evaluations: positions sent to the evaluator (a leaf selected twice in a round counts once).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from gtp_engine import features, sgf_io
from gtp_engine.board import BLACK, WHITE, opponent
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import KOMI, GameState, format_result
from gtp_engine.mcts import Tree, TreeConfig
from gtp_engine.search import (ChoiceConfig, NoiseConfig, ResignConfig, ResignCounter, add_noise, network_threads,
                               pick_edge, play_games)
from gtp_engine.training import dataset, splits
from gtp_engine.training.files import replacing
from gtp_engine.training.game_setups import SetupDistribution

log = logging.getLogger(__name__)

REPORT = "report.json"
SGF_DIR = "sgf"
PLAYER = "gtp_engine selfplay"


@dataclass(frozen=True)
class SelfPlayConfig:
    size: int = 9
    komi: float = KOMI  # the first rule set's; another scoring's a point apart (game_setups.py)
    rules: str = "chinese"  # a rule set, or several separated by commas, one drawn for each game
    komi_stdev: float = 0.0  # spread of an even game's komi around its rule set's (0: none)
    handicap_share: float = 0.0  # share of games in which Black has 2 .. max_handicap handicap stones
    max_handicap: int = 4
    full_visits: int = 160  # playout cap randomization (KataGo): a full search, a policy target
    fast_visits: int = 32  # a fast search: plays the move, no policy target
    full_search_fraction: float = 0.25
    parallel_games: int = 32  # games advanced together; their leaves go to the evaluator in one call
    leaves_per_game: int = 8  # leaves each tree contributes per round (virtual loss)
    evaluation_threads: int = 1  # pipelining (see the module docstring); 0: none, one round of all games at a time
    noise_alpha_total: float = 10.83  # Dirichlet alpha times the number of legal moves (KataGo: 0.03 * 361)
    noise_fraction: float = 0.25  # full searches only
    prune_policy_target: bool = True  # prune_visits before a full search's visits become its policy target
    forced_playouts: float = 0.0  # k of KataGo's forced playouts in full searches (KataGo: 2); 0: none
    temperature_moves: int | None = None  # moves drawn in proportion to visits; None: area // 8 (10 on 9x9)
    resign_winrate: float = 0.05  # 0: never resign
    resign_consecutive: int = 3  # searches in a row of the same player below resign_winrate
    no_resign_fraction: float = 0.1  # games played out without resignation (false-resignation check)
    max_moves: int = 0  # 0: 3 * area; a game cut there is scored as it stands
    val_fraction: float = 0.05  # games (by game key) written to the validation split
    shard_samples: int = 250_000
    seed: int = 0

    def __post_init__(self) -> None:
        if not 2 <= self.size <= 19:
            raise ValueError("size must be in 2..19")
        self.setups().check_board(self.size)
        if not 1 <= self.fast_visits <= self.full_visits:
            raise ValueError("visits must satisfy 1 <= fast_visits <= full_visits")
        if min(self.parallel_games, self.leaves_per_game, self.resign_consecutive, self.shard_samples) < 1:
            raise ValueError("parallel_games, leaves_per_game, resign_consecutive and shard_samples must be positive")
        if self.forced_playouts < 0:
            raise ValueError("forced_playouts must not be negative")
        for name in ("full_search_fraction", "noise_fraction", "no_resign_fraction", "resign_winrate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError("val_fraction must be in [0, 1)")
        if self.evaluation_threads < 0:
            raise ValueError("evaluation_threads must not be negative")
        if self.max_moves < 0 or (self.temperature_moves is not None and self.temperature_moves < 0):
            raise ValueError("max_moves and temperature_moves must not be negative")

    def network_threads(self, cores: int | None = None) -> int:
        """onnxruntime's CPU threads per call when none are given (search.network_threads)."""
        return network_threads(self.evaluation_threads, cores)

    def setups(self) -> SetupDistribution:
        """What each game's rules, komi and handicap are drawn from."""
        return SetupDistribution(self.rules, self.komi, self.komi_stdev, self.handicap_share, self.max_handicap)

    @property
    def move_limit(self) -> int:
        return self.max_moves or 3 * self.size * self.size

    @property
    def temperature_limit(self) -> int:
        return self.size * self.size // 8 if self.temperature_moves is None else self.temperature_moves


@dataclass
class SelfPlayReport:
    games: int = 0
    moves: int = 0
    samples: int = 0
    policy_samples: int = 0  # samples of full searches
    evaluations: int = 0
    evaluator_calls: int = 0
    seconds: float = 0.0
    black_wins: int = 0
    white_wins: int = 0
    draws: int = 0
    endings: dict[str, int] = field(default_factory=lambda: {"passes": 0, "resign": 0, "cut": 0})
    setups: dict[str, int] = field(default_factory=dict)  # games by rule set and handicap ("japanese, 3 stones")
    resigned: int = 0
    no_resign_games: int = 0
    would_resign: int = 0  # no-resign games in which a player would have resigned
    false_resignations: int = 0  # ... and that player went on to win

    @property
    def games_per_hour(self) -> float:
        return 3600.0 * self.games / self.seconds if self.seconds else 0.0

    @property
    def evaluations_per_second(self) -> float:
        return self.evaluations / self.seconds if self.seconds else 0.0

    @property
    def mean_batch(self) -> float:
        return self.evaluations / self.evaluator_calls if self.evaluator_calls else 0.0

    @property
    def false_resignation_rate(self) -> float | None:
        """Share of the would-be resignations (in no-resign games) that would have lost a won game."""
        return self.false_resignations / self.would_resign if self.would_resign else None

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "seconds": round(self.seconds, 2),
                "games_per_hour": round(self.games_per_hour, 1),
                "evaluations_per_second": round(self.evaluations_per_second, 1),
                "mean_batch": round(self.mean_batch, 1), "false_resignation_rate": self.false_resignation_rate}


@dataclass
class _Game:
    """One game in progress: its position, the current search, and the samples so far; search.RoundGame for the
    self-play that plays it."""

    number: int
    state: GameState
    no_resign: bool
    selfplay: _SelfPlay
    tree: Tree | None = None
    full: bool = False  # the current search is a full one
    visits: int = 0  # root visits the current search stops at
    noise_due: bool = False  # a full search whose root gets its noise once expanded
    resign: ResignCounter | None = None
    would_resign: int | None = None  # the colour that would have resigned first (no-resign games)
    winner: int | None = None  # set by a resignation
    ending: str | None = None
    spatial: list[np.ndarray] = field(default_factory=list)
    global_: list[np.ndarray] = field(default_factory=list)
    to_play: list[int] = field(default_factory=list)
    moves: list[int] = field(default_factory=list)  # flat indices
    policy: list[np.ndarray] = field(default_factory=list)
    policy_mask: list[bool] = field(default_factory=list)
    search_value: list[float] = field(default_factory=list)

    def wants(self) -> int:
        return min(self.selfplay.config.leaves_per_game, self.visits - self.tree.root.visits)

    def advance(self) -> None:
        self.selfplay.advance(self)

    @property
    def over(self) -> bool:
        return self.ending is not None


class _SelfPlay:
    def __init__(self, evaluator: Evaluator, config: SelfPlayConfig, out: Path):
        self.evaluator, self.config, self.out = evaluator, config, out
        self.rng = np.random.default_rng(config.seed)
        self.tree_config = TreeConfig()
        self.noise = NoiseConfig(config.noise_fraction, config.noise_alpha_total)
        self.choice = ChoiceConfig(temperature=1.0, temperature_moves=config.temperature_limit)
        self.resign = ResignConfig(config.resign_winrate, config.resign_consecutive, after_moves=0)
        self.setups = config.setups()
        self.area = config.size * config.size
        self.writer = dataset.ShardWriter(out, config.size, config.size, config.shard_samples)
        (out / SGF_DIR).mkdir(exist_ok=True)
        self.report = SelfPlayReport()
        self.unencoded: list[tuple[_Game, GameState]] = []  # positions of this round's samples, in order

    # ---- the rounds ---------------------------------------------------------------------------------------

    def run(self, games: int, progress: bool) -> SelfPlayReport:
        config = self.config
        started = time.monotonic()
        bar = tqdm(total=games, unit="game", desc="selfplay", file=sys.stderr, disable=not progress,
                   mininterval=1.0, dynamic_ncols=True)
        numbers = iter(range(games))

        def start(seats: int) -> list[_Game]:  # range first: zip then draws no number it does not use
            return [self._new_game(number) for _, number in zip(range(seats), numbers)]

        def after_round(ended: list[_Game], evaluations: int, calls: int) -> bool:
            self.report.evaluations += evaluations
            self.report.evaluator_calls += calls
            self._encode_samples()
            for game in ended:
                self._save(game)
                bar.update(1)
            self.report.seconds = time.monotonic() - started
            bar.set_postfix(moves=self.report.moves, evals_s=f"{self.report.evaluations_per_second:.0f}",
                            refresh=False)
            return False

        play_games(start, after_round, config.parallel_games, config.evaluation_threads)
        bar.close()
        report = self.report
        report.seconds = time.monotonic() - started
        sidecar_extra = {"selfplay": {"config": dataclasses.asdict(config), "report": report.to_dict()}}
        self.writer.finish(sidecar_extra)
        with replacing(self.out / REPORT) as tmp:
            tmp.write_text(json.dumps(report.to_dict(), indent=1, sort_keys=True))
        log.info("selfplay: %d games, %d moves, %d samples (%d with a policy target) in %.0f s: %.0f games/h, "
                 "%.0f evaluations/s (mean batch %.0f); resigned %d, false resignations %d of %d",
                 report.games, report.moves, report.samples, report.policy_samples, report.seconds,
                 report.games_per_hour, report.evaluations_per_second, report.mean_batch, report.resigned,
                 report.false_resignations, report.would_resign)
        return report

    # ---- one game -----------------------------------------------------------------------------------------

    def _new_game(self, number: int) -> _Game:
        config = self.config
        fraction = config.no_resign_fraction
        # Evenly spread: exactly floor(n * fraction) of the first n games play without resignation.
        no_resign = math.floor((number + 1) * fraction) > math.floor(number * fraction)
        setup = self.setups.draw(np.random.default_rng([config.seed, number]))
        game = _Game(number, setup.new_game(config.size), no_resign, self, resign=ResignCounter(self.resign))
        self._start_search(game, root=None)
        return game

    def _start_search(self, game: _Game, root) -> None:
        config = self.config
        game.tree = Tree(self.evaluator, game.state.copy(), self.tree_config, root=root)
        game.full = bool(self.rng.random() < config.full_search_fraction)
        game.visits = config.full_visits if game.full else config.fast_visits
        game.noise_due = game.full and config.noise_fraction > 0
        if game.full:
            game.tree.root_forced_k = config.forced_playouts
        self._noise(game)

    def _noise(self, game: _Game) -> None:
        if game.noise_due and game.tree.root.is_expanded:
            game.noise_due = False
            add_noise(game.tree, self.noise, self.rng)

    def advance(self, game: _Game) -> None:
        """After a round: noise for a newly expanded root; the move (and the next search) once a search is done.
        A kept subtree may already have its visits, so one round can play several moves."""
        self._noise(game)
        while game.ending is None and game.tree.root.is_expanded and (
                game.tree.root.visits >= game.visits or len(game.tree.root.moves) == 1):
            self._move(game)

    def _move(self, game: _Game) -> None:
        config, tree, state = self.config, game.tree, game.state
        root = tree.root
        g = state.grid
        color = state.to_play
        root_value = tree.root_value()[0]
        winrate = (root_value + 1.0) / 2.0
        if game.resign.update(color, winrate, state.move_number, self.area):
            if not game.no_resign:
                game.winner, game.ending = opponent(color), "resign"
                return
            if game.would_resign is None:
                game.would_resign = color

        visits = root.N[: len(root.moves)]
        kept = visits
        if game.full and visits.sum() > 0 and (config.prune_policy_target or config.forced_playouts):
            q = root.W[: len(root.moves)] / np.maximum(visits, 1)
            kept = prune_visits(visits, q, root.prior, tree.exploration(float(visits.sum())))
        drawn_from = kept if game.full and config.forced_playouts else None
        edge = pick_edge(tree, self.choice, state.move_number, self.rng, visits=drawn_from)
        point = root.moves[edge]

        self.unencoded.append((game, state.copy()))
        game.to_play.append(color)
        game.moves.append(g.flat(point))
        policy = np.zeros(self.area + 1, np.float32)
        if game.full and visits.sum() > 0:
            policy[[g.flat(p) for p in root.moves]] = kept / kept.sum()
        game.policy.append(policy)
        game.policy_mask.append(bool(policy.any()))
        game.search_value.append(root_value)

        state.play(point)
        self.report.moves += 1
        if state.is_over:
            game.ending = "passes"
        elif state.move_number >= config.move_limit:
            game.ending = "cut"
        else:
            child = root.children.get(edge)
            self._start_search(game, child if child is not None and child.is_expanded else None)

    # ---- output -------------------------------------------------------------------------------------------

    def _encode_samples(self) -> None:
        """The input planes of the positions moved from in this round, in one features.encode call."""
        if not self.unencoded:
            return
        planes, global_values = features.encode([state for _, state in self.unencoded])
        for (game, _), spatial, global_ in zip(self.unencoded, planes, global_values):
            game.spatial.append(spatial)
            game.global_.append(global_)
        self.unencoded = []

    def _save(self, game: _Game) -> None:
        config, state, report = self.config, game.state, self.report
        if game.ending == "resign":
            black_lead = None
            winner = game.winner
            result = ("B" if winner == BLACK else "W") + "+R"
        else:
            black_lead = state.score()
            winner = BLACK if black_lead > 0 else WHITE if black_lead < 0 else None
            result = format_result(black_lead)
        name = f"{SGF_DIR}/game-{game.number}.sgf"
        record = sgf_io.GameRecord.from_game(state, black=PLAYER, white=PLAYER, result=result)
        with replacing(self.out / name) as tmp:
            tmp.write_bytes(record.to_sgf())

        to_play = np.array(game.to_play, np.uint8)
        count = len(to_play)
        arrays = dataset.compact(np.stack(game.spatial), to_play) if count else None
        if arrays is not None:
            exact = game.ending == "passes"
            value = np.full(count, 2, np.int8) if winner is None else np.where(to_play == winner, 0, 1).astype(np.int8)
            lead = black_lead if exact else 0.0
            key = splits.record_key(record)
            arrays.update(
                to_play=to_play, globals=np.stack(game.global_), move=np.array(game.moves, np.int16), value=value,
                score=np.where(to_play == BLACK, lead, -lead).astype(np.float32),
                score_mask=np.full(count, exact), policy=np.stack(game.policy).astype(np.float16),
                policy_mask=np.array(game.policy_mask),
                search_value=np.array(game.search_value, np.float16),
                game_ownership=(state.area_ownership() if exact else np.zeros(self.area, np.int8))[None],
                ownership_mask=np.array([exact]), game_key=np.array([key], np.uint64),
                game_source=np.array([name]))
            self.writer.add(splits.split_of(key, config.val_fraction), arrays)
            report.samples += count
            report.policy_samples += int(arrays["policy_mask"].sum())

        report.games += 1
        report.endings[game.ending] += 1
        setup = state.rules.name + (f", {state.handicap_stones} stones" if state.handicap_stones else "")
        report.setups[setup] = report.setups.get(setup, 0) + 1
        report.black_wins += winner == BLACK
        report.white_wins += winner == WHITE
        report.draws += winner is None
        report.resigned += game.ending == "resign"
        report.no_resign_games += game.no_resign
        if game.would_resign is not None:
            report.would_resign += 1
            report.false_resignations += winner == game.would_resign


def prune_visits(visits: np.ndarray, q: np.ndarray, prior: np.ndarray, exploration: float) -> np.ndarray:
    """The root's visits less those its own prior does not explain (KataGo's policy target pruning: the visits
    of forced playouts, root noise and virtual loss).

    visits, q (utility per visit), prior (the network's, without noise): per root edge; exploration:
    Tree.exploration of the root's visits. The most visited edge keeps its visits; every other edge keeps at
    most the visits n for which PUCT under the network's prior would still have chosen it against the most
    visited edge's final score S: q + exploration * prior / n >= S, that is n <= exploration * prior / (S - q).
    An edge left with at most one visit keeps none.
    """
    visits = np.asarray(visits, np.float64)
    best = int(visits.argmax())
    best_score = q[best] + exploration * prior[best] / (1.0 + visits[best])
    gap = best_score - np.asarray(q, np.float64)
    with np.errstate(divide="ignore"):
        allowed = np.where(gap > 0, np.floor(exploration * prior / np.maximum(gap, 1e-12)), np.inf)
    kept = np.minimum(visits, allowed)
    kept[kept <= 1] = 0.0
    kept[best] = visits[best]
    return kept


def play(evaluator: Evaluator, games: int, config: SelfPlayConfig, out: str | Path, *,
         progress: bool = True) -> SelfPlayReport:
    """Plays `games` self-play games with `evaluator` and writes them into the empty folder `out` (shards,
    index.json, sgf/, report.json); returns the report."""
    if games < 1:
        raise ValueError("games must be positive")
    return _SelfPlay(evaluator, config, Path(out)).run(games, progress)
