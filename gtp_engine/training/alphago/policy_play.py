"""Policy play: many games of Go advanced together, every move sampled from a policy network without search.

Terms:
- agent: what chooses a move in one game at one ply: a policy network (model.GoNet, its policy head) or RANDOM
  (uniform over the candidates). A schedule, schedule(game, ply) -> index into the agent list, says which agent
  moves where, so two networks can play each other with colours per game, or one game can switch agents
  midway (the value network's data, value_net.py).
- candidates: the legal moves of the side to move (GameState.legal_mask, superko included) that do not fill one
  of its own eyes; pass is a candidate only when nothing else is. A game therefore goes on until neither side
  has anything left but eye filling, dead stones get captured on the way, and area counting of the final
  position (game.py) is the game's real result.
- own eye: an empty point whose on-board neighbours are all stones of the side to move, with at most one
  opponent stone on its diagonals, and none when the point is on the edge (the usual rollout rule).
- policy: softmax(logits / temperature) over the candidates, logits from the network's policy head for inputs
  encoded by features.encode, exactly as the engine feeds it.
- batch: the games advance in lockstep; at each ply every network agent gets one forward pass over all the
  games in which it is to move.
- move cap: a game still running after max_moves plies is scored as it stands.
- record: record(game, ply, agent) -> bool picks the positions to keep as Steps: the network's inputs there,
  the candidates and the move played (what policy_gradient.py trains on, and value_net.py's one position).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from gtp_engine import features, match_stats
from gtp_engine.board import BLACK, EDGE, EMPTY, WHITE
from gtp_engine.game import KOMI, GameState, Rules
from gtp_engine.training import model as model_lib

RANDOM = "random"
Agent = model_lib.GoNet | str
Schedule = Callable[[int, int], int]
Recorder = Callable[[int, int, int], bool]


@dataclass(frozen=True)
class PlayConfig:
    size: int = 9
    komi: float = KOMI
    rules: str = "chinese"
    temperature: float = 1.0
    max_moves: int = 0  # 0: three times the board's area

    def __post_init__(self) -> None:
        Rules.named(self.rules)
        if not self.temperature > 0:
            raise ValueError("temperature must be positive")
        if self.max_moves < 0:
            raise ValueError("max_moves must be 0 (three times the area) or positive")

    def move_cap(self) -> int:
        return self.max_moves or 3 * self.size * self.size


@dataclass
class Step:
    """A recorded position: the network's inputs there (spatial as uint8, it holds only 0 and 1), the colour to
    move, the candidates in flat order (pass last), and the flat index of the move played."""

    ply: int
    agent: int
    spatial: np.ndarray
    global_: np.ndarray
    to_play: int
    candidates: np.ndarray
    move: int


@dataclass
class GameResult:
    state: GameState  # the final position
    score: float  # area score, Black's lead (komi included)
    plies: int
    steps: list[Step] = field(default_factory=list)

    @property
    def winner(self) -> int:
        """BLACK, WHITE, or EMPTY for a draw."""
        return BLACK if self.score > 0 else WHITE if self.score < 0 else EMPTY

    def reward(self, color: int) -> float:
        """+1 if color won, -1 if it lost, 0 for a draw."""
        return 0.0 if self.winner == EMPTY else 1.0 if self.winner == color else -1.0


def alternating(game: int, ply: int) -> int:
    """The schedule of a two-agent match: agent 0 has Black in even games, White in odd ones."""
    return (game + ply) % 2


def play(agents: Sequence[Agent], games: int, config: PlayConfig, rng: np.random.Generator,
         schedule: Schedule = alternating, record: Recorder | None = None,
         device: torch.device | str = "cpu") -> list[GameResult]:
    """Plays `games` games from the empty board to the end and scores them by area counting."""
    rules = Rules.named(config.rules)
    states = [GameState(config.size, komi=config.komi, rules=rules) for _ in range(games)]
    steps: list[list[Step]] = [[] for _ in range(games)]
    cap = config.move_cap()
    for ply in range(cap):
        active = [i for i in range(games) if not states[i].is_over]
        if not active:
            break
        by_agent: dict[int, list[int]] = {}
        for i in active:
            by_agent.setdefault(schedule(i, ply), []).append(i)
        for agent_index, group in sorted(by_agent.items()):
            group_states = [states[i] for i in group]
            candidates = candidate_masks(group_states)
            agent = agents[agent_index]
            if isinstance(agent, str):
                if agent != RANDOM:
                    raise ValueError(f"unknown agent {agent!r}")
                logits = np.zeros(candidates.shape)
                spatial = global_ = None
            else:
                spatial, global_ = features.encode(group_states)
                logits = policy_logits(agent, spatial, global_, device)
            moves = sample(logits, candidates, config.temperature, rng)
            for row, (i, state) in enumerate(zip(group, group_states)):
                if record is not None and record(i, ply, agent_index):
                    if spatial is None:
                        spatial, global_ = features.encode(group_states)
                    steps[i].append(Step(ply, agent_index, spatial[row].astype(np.uint8), global_[row],
                                         state.to_play, candidates[row], int(moves[row])))
                state.play_unchecked(state.grid.from_flat(int(moves[row])))
    return [GameResult(state, state.area_score(), state.move_number, game_steps)
            for state, game_steps in zip(states, steps)]


def policy_logits(net: model_lib.GoNet, spatial: np.ndarray, global_: np.ndarray,
                  device: torch.device | str) -> np.ndarray:
    """The policy head's logits [B, area + 1] as float64, the network in eval mode and without gradients."""
    was_training = net.training
    net.eval()
    with torch.inference_mode():
        logits = net(torch.from_numpy(spatial).to(device), torch.from_numpy(global_).to(device))[0]
    net.train(was_training)
    return logits.double().cpu().numpy()


def sample(logits: np.ndarray, candidates: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """One flat move per row from softmax(logits / temperature) restricted to the row's candidates."""
    scaled = np.where(candidates, logits / temperature, -np.inf)
    weights = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    cumulative = np.cumsum(weights, axis=1)
    threshold = rng.random(len(logits)) * cumulative[:, -1]
    moves = (cumulative <= threshold[:, None]).sum(axis=1)
    # Rounding can land past the last candidate; take the last one then.
    last = candidates.shape[1] - 1 - np.argmax(candidates[:, ::-1], axis=1)
    return np.minimum(moves, last)


def log_policy(logits: torch.Tensor, candidates: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / temperature) over the candidates (bool, same shape), -inf elsewhere: the log of
    exactly the distribution sample() draws from."""
    return torch.log_softmax((logits / temperature).masked_fill(~candidates, -math.inf), dim=1)


def candidate_masks(states: Sequence[GameState]) -> np.ndarray:
    """bool [B, area + 1]: the candidates of each position (see the module docstring)."""
    masks = np.stack([state.legal_mask() for state in states])
    masks[:, :-1] &= ~own_eyes(states)
    masks[:, -1] = ~masks[:, :-1].any(axis=1)
    return masks


def own_eyes(states: Sequence[GameState]) -> np.ndarray:
    """bool [B, area]: the own eyes of the side to move in each position, in flat order."""
    g = states[0].grid
    count = len(states)
    # One EDGE in front of each padded board, so that every diagonal of an on-board point is an index.
    colors = np.full((count, g.array_size + 1), EDGE, np.uint8)
    colors[:, 1:] = np.frombuffer(b"".join([s.board.colors for s in states]), np.uint8).reshape(count, -1)
    points = g.point_of + 1
    own = np.array([s.to_play for s in states], np.uint8)[:, None]
    s = g.stride
    eye = colors[:, points] == EMPTY
    for d in (-s, -1, 1, s):
        around = colors[:, points + d]
        eye &= (around == own) | (around == EDGE)
    diagonals = [colors[:, points + d] for d in (-s - 1, -s + 1, s - 1, s + 1)]
    opponent_stones = sum((c == 3 - own).astype(np.int8) for c in diagonals)
    on_edge = np.any([c == EDGE for c in diagonals], axis=0)
    return eye & (opponent_stones + on_edge < 2)


def match(a: Agent, b: Agent, games: int, config: PlayConfig, rng: np.random.Generator, batch: int = 100,
          device: torch.device | str = "cpu") -> dict:
    """Policy-only games of a against b, colours alternating (a is Black in even games), `batch` at a time.

    Returns counts for a (wins, losses, draws, wins_as_black, wins_as_white), its win rate (a draw counts half)
    with the 95% interval of match_stats, and the mean game length in plies.
    """
    if games < 1 or batch < 2 or batch % 2:
        raise ValueError("games must be positive and batch a positive even number")
    rewards, plies = [], []
    for start in range(0, games, batch):
        for game, result in enumerate(play([a, b], min(batch, games - start), config, rng, device=device)):
            rewards.append(result.reward(BLACK if game % 2 == 0 else WHITE))
            plies.append(result.plies)
    score, low, high = match_stats.score_interval([(r + 1) / 2 for r in rewards])
    rewards = np.array(rewards)
    return {"games": games, "wins": int((rewards > 0).sum()), "losses": int((rewards < 0).sum()),
            "draws": int((rewards == 0).sum()), "wins_as_black": int((rewards[0::2] > 0).sum()),
            "wins_as_white": int((rewards[1::2] > 0).sum()), "win_rate": score, "interval_95": [low, high],
            "mean_plies": float(np.mean(plies))}
