"""Network evaluator: positions in, the network contract's inputs and outputs, an EvaluationBatch back, whatever
runs the network (onnxruntime in onnx_evaluator.py, torch in training/torch_evaluator.py).

Terms:
- raw outputs: what the network contract (training/model.py) returns for inputs "spatial" [N, C, H, W] and
  "global" [N, G]: policy logits [N, H*W + 1], (win, loss, draw) logits [N, 3], score [N], ownership [N, H, W].
  A subclass's forward(spatial, global_) computes them as float32 numpy arrays for at most max_batch
  positions; run() splits larger inputs into such chunks, and everything else is here too.
- model info: what a network says about itself (features version, channels, accepted and trained sizes, trained
  rules, preset, precision: fp32, or int8 for a quantized network) and where it runs (provider: "cpu", "cuda",
  "tensorrt", "torch-cuda", ...).
- symmetry mode: "random" (one random board symmetry per position and evaluation), "average" (the mean over all
  symmetries of the board, 8 or 4 times the work), "none", or a fixed symmetry number 0..7 (symmetry.py).
- quantized sibling: the int8 version of a network file X.onnx, written by training/quantize.py as
  X.int8.onnx (INT8_SUFFIX) beside it. Precision "auto" takes it where it exists, "fp32" never, "int8" always
  (with_precision).
- rule inputs (RuleInputs): the rules as a network reads them among its global inputs (features.GLOBAL): the
  scoring, the ko rule and whether suicide is allowed. The handicap bonus reaches the network only as part of the
  compensation.
- trained rules: the rule inputs a network learnt from its training samples (ModelInfo.trained_rules): its
  metadata's "trained_rules"; for a file without the field, the rules its training data is known to have had in
  enough games to be learnt (SHIPPED_RULES, by the data fingerprint of its provenance); None where neither says,
  and then every rule input goes to the network as the game's.
- fed rules: what the network is given for a game's rule inputs: the game's own where it was trained on them,
  else the nearest trained ones (nearest_trained: the same scoring first, then the same ko rule, then the same
  suicide rule). A change of scoring changes the compensation too, by the stone difference: at the end of a game,
  Black's lead by area counting less Black's lead by territory counting is exactly the stones Black has put on the
  board (handicap and setup stones included) less those White has, each counted whether it stands, was captured or
  is dead. A territory komi k is fed as an area compensation of k + the difference so far + one point more when
  Black is to move (the last stone of the alternation to come, the usual point between Japanese 6.5 and Chinese
  7.5); the other way round for an area game fed as territory. So a pass moves the fed compensation by a point:
  after the opponent's pass, a stone played inside one's own territory costs the point there that it costs under
  the game's rules. The prisoner balance is given under territory scoring only, as always. KataGo, for a network
  without a rule input, changes the rules but not the komi. The tax (game.Rules) is no input: a network sees a
  taxed game as the same rules untaxed. The map is fixed per network; its trained rules are logged at info level
  when it loads, and the first time a game's rules are fed as others, the log says so at warning level, naming
  both. Only the network's inputs change: the game, its legality and the search's scoring keep the game's rules.
- ModelLoadError: the one error for a network that cannot be used (missing, corrupt, built for other features,
  or for another board size); its message names the file and the reason. DeviceUnavailable, a ModelLoadError:
  the device asked for cannot run it here (the file may be fine).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from gtp_engine import features, symmetry
from gtp_engine.board import BLACK, WHITE
from gtp_engine.evaluator import EvaluationBatch
from gtp_engine.game import KO_RULES, RULE_SETS, SCORINGS, Rules

if TYPE_CHECKING:
    from gtp_engine.game import GameState

log = logging.getLogger(__name__)

SYMMETRY_MODES = ("random", "average", "none")
PRECISIONS = ("auto", "fp32", "int8")
SYMMETRY_BLOCK = 4096  # random symmetries drawn at a time (see NetworkEvaluator._random_symmetries)
INT8_SUFFIX = ".int8.onnx"


class ModelLoadError(Exception):
    """A model file that cannot be used; str() is '<file>: <reason>'."""

    def __init__(self, path: str | os.PathLike, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self):  # pickled from a process that opened the file (a gate's parts) to the one that reports it
        return type(self), (self.path, self.reason)


class DeviceUnavailable(ModelLoadError):
    """The device asked for (--device cuda or tensorrt) cannot run networks here: no such provider in this
    onnxruntime build, or its libraries (CUDA, cuDNN, TensorRT) or the GPU are missing."""


def is_int8_name(path: str | os.PathLike) -> bool:
    return str(path).endswith(INT8_SUFFIX)


def with_precision(path: str | os.PathLike, precision: str) -> Path:
    """The file to load for network `path` at `precision` (see quantized sibling in the module docstring).

    A path that already names an int8 file is kept; "int8" without a sibling is a ModelLoadError.
    """
    path = Path(path)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "fp32" or is_int8_name(path):
        return path
    sibling = path.with_name(path.name.removesuffix(".onnx") + INT8_SUFFIX)
    if sibling.is_file():
        return sibling
    if precision == "int8":
        raise ModelLoadError(sibling, f"no int8 version of {path.name} (write one with python -m "
                                      f"gtp_engine.training quantize {path} --calibration GAMES)")
    return path


@dataclass(frozen=True)
class RuleInputs:
    """The rule inputs of a network (see the module docstring)."""

    scoring: str = "area"
    ko: str = "positional"
    suicide_allowed: bool = False

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS or self.ko not in KO_RULES or not isinstance(self.suicide_allowed, bool):
            raise ValueError(f"bad rule inputs {self}")

    @staticmethod
    def of(rules: Rules) -> "RuleInputs":
        return RuleInputs(rules.scoring, rules.ko, rules.suicide_allowed)

    @staticmethod
    def from_json(value: dict) -> "RuleInputs":
        """From the metadata's form, {"scoring": "area", "ko": "positional", "suicide": false}."""
        if not isinstance(value, dict) or set(value) != {"scoring", "ko", "suicide"}:
            raise ValueError(f"a trained rule set must be {{\"scoring\", \"ko\", \"suicide\"}}, not {value!r}")
        return RuleInputs(value["scoring"], value["ko"], value["suicide"])

    def to_json(self) -> dict:
        return {"scoring": self.scoring, "ko": self.ko, "suicide": self.suicide_allowed}

    @property
    def code(self) -> int:
        """The rule inputs as one number, as _rule_codes reads them from the global inputs."""
        return (8 * (self.scoring == "territory") + 4 * (self.ko == "simple") + 2 * (self.ko == "situational")
                + self.suicide_allowed)

    def describe(self) -> str:
        """The rule sets with these inputs ("japanese/korean"), or the inputs themselves."""
        names = [name for name, rules in RULE_SETS.items() if RuleInputs.of(rules) == self]
        suicide = "suicide allowed" if self.suicide_allowed else "no suicide"
        return "/".join(names) if names else f"{self.scoring} scoring, {self.ko} ko, {suicide}"


_CODES = {inputs.code: inputs for inputs in (RuleInputs(scoring, ko, suicide) for scoring in SCORINGS
                                             for ko in KO_RULES for suicide in (False, True))}

# The trained rules of networks exported before the metadata said them, by their provenance's data fingerprint.
SHIPPED_RULES = {
    # weights/9x9.onnx (and its int8 sibling): self-play under the loop's rules, chinese, for its last 118
    # generations (its start, go9_curated's records, also held japanese games: self-play replaced them).
    "56504f3a4457b6fa/ac531bed851da0ac": (RuleInputs(),),
    # weights/default.onnx up to the sixth GPU run (the files since name their trained rules): go19_curated's
    # records as their RU names them: 18,313 Japanese, 1,512 Chinese, 353 AGA, 2 NZ; the ~47,000 without RU
    # replayed under the default, chinese. AGA's 353 did not teach its input: under it the winrate moved up to
    # 0.27 from the Chinese one on positions both count alike, so AGA and NZ games are given Chinese rules
    # (docs/measurements.md, Rules).
    "6e2747e32571256d/7672d1be2859ec04": (RuleInputs(), RuleInputs("territory", "simple")),
}


def trained_rules_of(metadata: dict) -> tuple[RuleInputs, ...] | None:
    """A network's trained rules from its metadata (see the module docstring); ValueError for a bad field."""
    listed = metadata.get("trained_rules")
    if listed is not None:
        if not isinstance(listed, list) or not listed:
            raise ValueError("trained_rules must be a non-empty list")
        return tuple(RuleInputs.from_json(item) for item in listed)
    training = metadata.get("training")
    fingerprint = training.get("data_fingerprint") if isinstance(training, dict) else None
    return SHIPPED_RULES.get(fingerprint)


def nearest_trained(game: RuleInputs, trained: Sequence[RuleInputs]) -> RuleInputs:
    """The trained rule inputs closest to a game's: the same scoring first, then the same ko rule, then the same
    suicide rule; among equals the first listed."""
    return min(trained, key=lambda known: (known.scoring != game.scoring, known.ko != game.ko,
                                           known.suicide_allowed != game.suicide_allowed))


@dataclass(frozen=True)
class ModelInfo:
    """What a model file says about itself (metadata), plus the provider it runs on."""

    path: str
    features_version: int
    spatial_channels: int
    global_features: int
    min_size: int
    max_size: int
    preset: str
    trained_sizes: tuple[int, ...]
    provider: str
    metadata: dict
    precision: str = "fp32"  # of the weights and activations: fp32, or int8 (quantized, training/quantize.py)
    trained_rules: tuple[RuleInputs, ...] | None = None  # None: not known; every rule input is fed as it is

    def fed_rules(self, game: RuleInputs) -> RuleInputs:
        """The rule inputs the network is given for a game's (see fed rules in the module docstring)."""
        if self.trained_rules is None or game in self.trained_rules:
            return game
        return nearest_trained(game, self.trained_rules)

    def describe(self) -> str:
        sizes = ", ".join(f"{n}x{n}" for n in self.trained_sizes) if self.trained_sizes else "no recorded sizes"
        return (f"{Path(self.path).name} ({self.preset}, {self.precision}, features v{self.features_version}, "
                f"trained on {sizes})")


class NetworkEvaluator:
    """Evaluator over a network; subclasses set self.info (a ModelInfo) and implement forward. evaluate, prepare
    and result are for one thread at a time; the compute step of several evaluations may run at once in others
    (an onnxruntime session takes concurrent runs)."""

    info: ModelInfo
    accepts_positions = True  # reads states only through features.encode: compiled search positions too (position.py)

    def __init__(self, symmetry_mode: str | int = "random", max_batch: int = 256, seed: int | None = None):
        if not (symmetry_mode in SYMMETRY_MODES or symmetry_mode in symmetry.ALL):
            raise ValueError(f"symmetry mode must be random, average, none or 0..7, not {symmetry_mode!r}")
        self.symmetry_mode = symmetry_mode
        self.max_batch = max_batch
        self._rng = np.random.default_rng(seed)
        self._symmetry_draws: dict[int, tuple[np.ndarray, int]] = {}  # kinds -> (drawn symmetries, next unused)
        self._sizes_checked: set[tuple[int, int]] = set()
        self._sizes_lock = threading.Lock()  # analysis workers ask for a new size at once: one warning
        self._fed_codes: np.ndarray | None = None  # by the rule code of a game: the code fed (fed_rules)
        self._rules_said: set[int] = set()  # the game rule codes whose fed rules the log has said

    @property
    def provider(self) -> str:
        return self.info.provider

    @property
    def splits_batches(self) -> bool:
        """Whether a batch's slices computed at once in several threads beat one call: onnxruntime on CPU cores (one
        thread a call); an accelerator wants the whole batch, and torch shares one thread pool among its calls."""
        return self.info.provider == "cpu"

    def forward(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        """Raw outputs (policy logits, value logits, score, ownership) for at most max_batch prepared inputs."""
        raise NotImplementedError

    def run(self, spatial: np.ndarray, global_: np.ndarray) -> tuple[np.ndarray, ...]:
        """Raw outputs for prepared inputs, computed in chunks of max_batch."""
        step = self.max_batch
        parts = [self.forward(spatial[i:i + step], global_[i:i + step]) for i in range(0, len(spatial), step)]
        return tuple(parts[0]) if len(parts) == 1 else tuple(np.concatenate(column) for column in zip(*parts))

    def check_size(self, width: int, height: int) -> None:
        """Raises ModelLoadError when the network cannot play a width x height board."""
        with self._sizes_lock:
            if (width, height) in self._sizes_checked:
                return
            low, high = self.info.min_size, self.info.max_size
            if not (low <= width <= high and low <= height <= high):
                raise ModelLoadError(self.info.path, f"board size {width}x{height} is outside the sizes this network "
                                                     f"accepts ({low}..{high})")
            warning = self.size_warning(width, height)
            if warning is not None:
                log.warning("%s", warning)  # once per size (at the default log level): it may play that size badly
            self._sizes_checked.add((width, height))

    def size_warning(self, width: int, height: int) -> str | None:
        """Says so when the network was not trained on width x height boards (its metadata's trained sizes, by the
        longer side); None when it was, or when its metadata names no sizes."""
        if self.info.trained_sizes and max(width, height) not in self.info.trained_sizes:
            return f"network {self.info.describe()} was not trained on {width}x{height} boards"
        return None

    def evaluate(self, states: Sequence[GameState]) -> EvaluationBatch:
        evaluation = self.prepare(states)
        evaluation.compute()
        return evaluation.result()

    def evaluate_averaged(self, states: Sequence[GameState]) -> EvaluationBatch:
        """The evaluation averaged over every symmetry of the board, whatever the symmetry mode (evaluator.py,
        averaged evaluation)."""
        evaluation = self._prepare(states, "average")
        evaluation.compute()
        return evaluation.result()

    def prepare(self, states: Sequence[GameState]) -> _NetworkEvaluation:
        """Draws the symmetries and encodes the inputs now; compute() is the forward alone (no GIL needed)."""
        return self._prepare(states, self.symmetry_mode)

    def _prepare(self, states: Sequence[GameState], mode: str | int) -> _NetworkEvaluation:
        count = len(states)
        if not count:
            return _NetworkEvaluation(self, None, None, None, 0, 1)
        g = states[0].grid
        self.check_size(g.width, g.height)
        kinds = len(symmetry.symmetries_for(g.width, g.height))  # symmetries 0..kinds-1 keep the shape
        if mode == "average":
            syms = np.repeat(np.arange(kinds), count)
            states = list(states) * kinds
        elif mode == "random":
            syms = self._random_symmetries(kinds, count)
        elif mode == "none":
            syms = None
        elif mode < kinds:
            syms = np.full(count, mode)
        else:
            raise ValueError(f"symmetry {mode} does not keep a {g.width}x{g.height} board's shape")
        averaged = kinds if mode == "average" else 1
        spatial, global_ = features.encode(states, syms)
        self._feed_trained_rules(states, spatial, global_)
        return _NetworkEvaluation(self, (spatial, global_), g, syms, count, averaged)

    def _feed_trained_rules(self, states: Sequence[GameState], spatial: np.ndarray, global_: np.ndarray) -> None:
        """Rewrites the rule inputs of global_ (one row per state, spatial its planes) to the fed rules, in place."""
        if self._fed_codes is None:
            self._fed_codes = np.arange(16)  # codes no rules make (simple and situational ko) stay
            for code, game in _CODES.items():
                self._fed_codes[code] = self.info.fed_rules(game).code
        codes = _rule_codes(global_)
        fed = self._fed_codes[codes]
        rows = np.flatnonzero(fed != codes)
        if not len(rows):
            return
        for code in set(codes[rows].tolist()) - self._rules_said:
            self._rules_said.add(code)
            game, given = _CODES[code], _CODES[int(self._fed_codes[code])]
            log.warning("network %s was not trained on %s rules; it is given %s rules in their place%s",
                        self.info.describe(), game.describe(), given.describe(),
                        " (the compensation moved by the stones each side has played)"
                        if game.scoring != given.scoring else "")
        for row in rows.tolist():
            game, given = _CODES[int(codes[row])], _CODES[int(fed[row])]
            global_[row, _TERRITORY] = given.scoring == "territory"
            global_[row, _SIMPLE_KO] = given.ko == "simple"
            global_[row, _SITUATIONAL] = given.ko == "situational"
            global_[row, _SUICIDE] = given.suicide_allowed
            if game.scoring != given.scoring:
                state = states[row]
                own, opponent = state.to_play, WHITE + BLACK - state.to_play
                captures = _captures(state)
                # Stones each side has played: those on the board, and those the other side captured.
                own_played = spatial[row, _OWN_STONES].sum() + captures[opponent]
                opponent_played = spatial[row, _OPPONENT_STONES].sum() + captures[own]
                # How much more the side to move will lead by area than by territory (module docstring, fed rules).
                area_less_territory = own_played - opponent_played + (own == BLACK)
                global_[row, _COMPENSATION] += (-area_less_territory if given.scoring == "area"
                                                else area_less_territory) / features.SCALE
                global_[row, _PRISONERS] = ((captures[own] - captures[opponent]) / features.SCALE
                                            if given.scoring == "territory" else 0.0)

    def _random_symmetries(self, kinds: int, count: int) -> np.ndarray:
        """count symmetries drawn uniformly from 0..kinds-1, taken from a block drawn ahead: one draw per batch
        cost a search a microsecond a visit."""
        drawn, used = self._symmetry_draws.get(kinds, (None, SYMMETRY_BLOCK))
        if used + count > SYMMETRY_BLOCK:
            drawn, used = self._rng.integers(0, kinds, max(SYMMETRY_BLOCK, count)), 0
        self._symmetry_draws[kinds] = drawn, used + count
        return drawn[used:used + count]


_COMPENSATION, _TERRITORY, _PRISONERS, _SIMPLE_KO, _SITUATIONAL, _SUICIDE = map(features.GLOBAL.index, (
    "compensation", "territory_scoring", "prisoner_balance", "simple_ko", "situational_superko", "suicide_allowed"))
_OWN_STONES, _OPPONENT_STONES = features.SPATIAL.index("own_stones"), features.SPATIAL.index("opponent_stones")


def _rule_codes(global_: np.ndarray) -> np.ndarray:
    """RuleInputs.code of each row of the global inputs."""
    bits = global_[:, [_TERRITORY, _SIMPLE_KO, _SITUATIONAL, _SUICIDE]] > 0.5
    return bits @ np.array([8, 4, 2, 1])


def rules_in(global_: np.ndarray) -> dict[RuleInputs, int]:
    """The rule inputs of rows of global inputs, each with its number of rows (what a network trained on them was
    trained on, and on how many samples)."""
    codes, counts = np.unique(_rule_codes(global_), return_counts=True)
    return {_CODES[code]: count for code, count in zip(codes.tolist(), counts.tolist()) if code in _CODES}


def _captures(state) -> list[int]:
    """The captures (Board.captures: stones each colour has taken) of a GameState or a compiled search position."""
    return state.board.captures if getattr(state, "root_state", None) is None else state.captures


class _NetworkEvaluation:
    """NetworkEvaluator.prepare's evaluation: encoded inputs; the forward; the decoded batch."""

    def __init__(self, network: NetworkEvaluator, inputs, grid, syms, count: int, averaged: int):
        self._network, self._inputs, self._grid, self._syms = network, inputs, grid, syms
        self._count, self._averaged = count, averaged  # positions; symmetries averaged over (1: none)
        self._outputs = None  # the forward's, when computed whole
        self._parts: list | None = None  # the forwards' of the batch's slices, when computed in parts

    def compute(self) -> None:
        if self._count:
            self._outputs = self._network.run(*self._inputs)

    def compute_parts(self, parts: int) -> list[Callable[[], None]]:
        """The forward as up to `parts` forwards of consecutive slices of the batch, to run at once (on the CPU)."""
        if self._count < 2 or not self._network.splits_batches:
            return [self.compute]
        spatial, global_ = self._inputs
        step = -(-len(spatial) // parts)
        starts = range(0, len(spatial), step)
        self._parts = [None] * len(starts)

        def part(k: int, start: int) -> None:
            self._parts[k] = self._network.run(spatial[start:start + step], global_[start:start + step])

        return [functools.partial(part, k, start) for k, start in enumerate(starts)]

    def result(self) -> EvaluationBatch:
        count, g, syms, kinds = self._count, self._grid, self._syms, self._averaged
        if not count:
            return EvaluationBatch.empty()
        outputs = self._outputs if self._parts is None else tuple(np.concatenate(c) for c in zip(*self._parts))
        policy_logits, value_logits, score, ownership = outputs
        policy, value, ownership = features.decode(policy_logits, value_logits, ownership, g, syms)
        if kinds > 1:  # symmetry "average": the mean over every symmetry
            policy = policy.reshape(kinds, count, -1).mean(axis=0)
            value = value.reshape(kinds, count).mean(axis=0)
            score = score.reshape(kinds, count).mean(axis=0)
            ownership = ownership.reshape(kinds, count, -1).mean(axis=0)
        return EvaluationBatch(policy=policy, value=value, score=score, ownership=ownership)

