"""Engine configuration: typed, frozen values, built once (in __main__) from a config file and command-line flags.

Terms:
- option: one setting, named by its long flag ("--resign-threshold"); a config file uses the same names
  without the dashes as keys ("resign-threshold = 0.05", underscores also accepted). Flags win over the file.
- search option: an option of the search itself (PUCT, stopping, move choice, noise: search.SearchConfig). It
  sets the genmove search and, unless overridden, the analysis search too.
- move limits: --visits, --playouts and --time (player.MoveLimits): what ends one genmove's search besides
  the game clock; they are not search options.
- analysis override: a search option in the config file's [analysis] table (or a flag --analysis-NAME) sets it
  for analysis alone (lz-analyze, kata-analyze, the gogui analysis commands), as KataGo keeps separate values.
- EngineConfig: everything the composition root needs, grouped by the part that uses it; player is the
  Player's own typed config (player.PlayerConfig), so every search setting is reachable from here.
- KataGo GTP key: a key of KataGo's GTP config file (maxVisits, ponderingEnabled, rules, ...; KATAGO_GTP_KEYS and
  the rule keys); from_katago_gtp turns the ones with a meaning here into options, for `gtp-engine gtp -config`.
Nothing here reads flags or files by itself: load_file(), from_katago_gtp() and build() are called by __main__.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from gtp_engine.game import Rules
from gtp_engine.player import MoveLimits, PlayerConfig
from gtp_engine.search import network_threads, strength

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """A bad option name or value; the message names the option."""


@dataclass(frozen=True)
class NetworkConfig:
    weights: str | None = None  # ONNX file; None: the network in weights_dir for the board size
    weights_dir: str | None = None  # where networks named <W>x<H>.onnx / default.onnx are found; None: shipped ones
    value_weights: str | None = None  # a separate value network (ONNX); None: the value of `weights`
    device: str = "auto"  # auto (the first of tensorrt, cuda, cpu that loads), cpu, cuda, tensorrt
    threads: int | None = None  # CPU threads of the network (onnxruntime); None: onnxruntime's choice
    precision: str = "auto"  # auto (the quantized sibling X.int8.onnx where one exists), fp32, int8 (that sibling)


@dataclass(frozen=True)
class RolloutOptions:
    mix: float = 0.0  # λ: weight of rollout results in a leaf's value (mixed_evaluator.py); 0: none (AlphaGo Zero)
    weights: str | None = None  # rollout policy (.npz); None: rollout-<W>x<H>.npz where the networks are found
    count: int = 1  # rollouts per leaf


@dataclass(frozen=True)
class PlayOptions:
    rules: str = "chinese"  # a rule set name or KataGo's JSON rules object, see game.Rules.from_katago
    ponder: bool = False  # think on the opponent's time; any input stops it
    lag_buffer: float | None = None  # seconds kept back from every limit for delay; None: timecontrol.kept_back


@dataclass(frozen=True)
class EngineConfig:
    network: NetworkConfig = field(default_factory=NetworkConfig)
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    move_limits: MoveLimits = field(default_factory=MoveLimits)
    player: PlayerConfig = field(default_factory=PlayerConfig)
    play: PlayOptions = field(default_factory=PlayOptions)
    seed: int | None = None  # fixes every random choice: search, symmetries, rollouts (tests, reproducible matches)
    log_level: str = "warning"
    name: str = "gtp_engine"  # what GTP's name command answers

    def network_threads(self, cores: int | None = None) -> int:
        """onnxruntime's CPU threads per run (0: its own choice): the configured number, else, when the search
        has evaluation threads, the cores shared by them and the search thread, which runs the network too."""
        if self.network.threads:
            return self.network.threads
        cores = cores or os.cpu_count() or 1
        return network_threads(self.player.search.evaluation_threads_for(cores), cores)


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()):
        raise ValueError(f"expected a positive integer, got {value!r}")
    number = int(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _seed(value: Any) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()) or int(value) < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")  # a TOML integer may be negative
    return int(value)


def _number(value: Any, what: str, valid: Callable[[float], bool]) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or not valid(number):
        raise ValueError(f"expected {what}, got {value!r}")
    return number


def _seconds(value: Any) -> float:
    return _number(value, "a positive number of seconds", lambda t: t > 0)


def _lag(value: Any) -> float:
    return _number(value, "seconds >= 0", lambda t: t >= 0)


def _non_negative(value: Any) -> float:
    return _number(value, "a number >= 0", lambda x: x >= 0)


def _positive(value: Any) -> float:
    return _number(value, "a number > 0", lambda x: x > 0)


def _count(value: Any) -> int:
    return _seed(value)  # an integer >= 0


def _fraction(value: Any) -> float:
    return _number(value, "a number in [0, 1)", lambda p: 0 <= p < 1)


def _weight(value: Any) -> float:
    return _number(value, "a number in [0, 1]", lambda w: 0 <= w <= 1)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "on", "yes", "1"):
        return True
    if text in ("false", "off", "no", "0"):
        return False
    raise ValueError(f"expected on or off, got {value!r}")


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value.strip()


def _rules(value: Any) -> str:
    """A rule set name or KataGo's rules object (JSON text, or a TOML table), as text Rules.from_katago reads."""
    text = json.dumps(value) if isinstance(value, dict) else _text(value)
    Rules.from_katago(text)  # ValueError naming the name or the field
    return text


def _device(value: Any) -> str:
    text = _text(value).lower()
    if text not in ("auto", "cpu", "cuda", "tensorrt"):
        raise ValueError(f"expected auto, cpu, cuda or tensorrt, got {value!r}")
    return text


def _precision(value: Any) -> str:
    text = _text(value).lower()
    if text not in ("auto", "fp32", "int8"):
        raise ValueError(f"expected auto, fp32 or int8, got {value!r}")
    return text


def _strength(value: Any) -> strength.Rank | None:
    return strength.parse_rank(_text(str(value)))


def _log_level(value: Any) -> str:
    text = _text(value).lower()
    if text not in ("debug", "info", "warning", "error"):
        raise ValueError(f"expected debug, info, warning or error, got {value!r}")
    return text


@dataclass(frozen=True)
class Option:
    name: str  # the long flag without dashes
    target: tuple[str, ...]  # where the value goes in EngineConfig
    parse: Callable[[Any], Any]
    help: str
    metavar: str | None = None


OPTIONS: tuple[Option, ...] = (
    Option("weights", ("network", "weights"), _text,
           "ONNX network file: policy, and value unless --value-weights (default: the shipped one for the board size)",
           "FILE"),
    Option("weights-dir", ("network", "weights_dir"), _text,
           "folder of networks named <W>x<H>.onnx or default.onnx (default: the shipped weights/)", "DIR"),
    Option("value-weights", ("network", "value_weights"), _text,
           "separate value network (ONNX; its policy is ignored), as in AlphaGo (default: the value of --weights)",
           "FILE"),
    Option("device", ("network", "device"), _device, "auto, cpu, cuda or tensorrt (default: auto)", "DEVICE"),
    Option("threads", ("network", "threads"), _positive_int,
           "CPU threads for each network run (default: the cores shared by the evaluation threads and the search "
           "thread when batches overlap, else onnxruntime's choice)", "N"),
    Option("precision", ("network", "precision"), _precision,
           "fp32; int8: the quantized sibling NAME.int8.onnx of the network; auto: that sibling where it exists "
           "beside the network, one named by --weights too (default: auto)", "P"),
    Option("lambda", ("rollout", "mix"), _weight,
           "weight of rollouts in a leaf's value: (1 - lambda) * value + lambda * rollout result "
           "(default: 0, no rollouts)", "LAMBDA"),
    Option("rollout-weights", ("rollout", "weights"), _text,
           "rollout policy for --lambda (default: rollout-<W>x<H>.npz, else rollout-19x19.npz, beside the "
           "networks)", "FILE"),
    Option("rollouts", ("rollout", "count"), _positive_int, "rollouts per leaf with --lambda (default: 1)", "N"),
    Option("visits", ("move_limits", "visits"), _positive_int, "root visits per move, reused ones included", "N"),
    Option("playouts", ("move_limits", "playouts"), _positive_int, "new playouts per move", "N"),
    Option("time", ("move_limits", "time_per_move"), _seconds, "at most this many seconds per move", "SECONDS"),
    Option("resign-threshold", ("player", "resign", "winrate"), _fraction,
           "resign below this winrate, 0 never resigns (default: 0.05)", "P"),
    Option("resign-consecutive", ("player", "resign", "consecutive"), _positive_int,
           "resign only after this many of its searches in a row below the threshold (default: 1)", "N"),
    Option("resign-after-moves", ("player", "resign", "after_moves"), _count,
           "no resignation before this move number (default: a quarter of the board's points)", "N"),
    Option("resign-lead-share", ("player", "resign", "hopeless_lead_share"), _weight,
           "from half the board's points in moves on, also resign below 5 times the threshold where the score "
           "lead is behind by this share of the board's points (right after the opponent's pass by a tenth at "
           "most), 0 never (default: 0.25)", "P"),
    Option("resign-lead-winrate-factor", ("player", "resign", "hopeless_winrate_factor"), _positive,
           "the winrate bound of --resign-lead-share, this many times the threshold (default: 5)", "F"),
    Option("strength", ("player", "strength"), _strength,
           "play at this rank, 12k (weakest) to 1d, or max, full strength (default: max); the ranks are "
           "calibrated against GNU Go, see the README", "LEVEL"),
    Option("resign-after-share", ("player", "resign", "after_moves_share"), _weight,
           "without --resign-after-moves, no resignation before this share of the board's points in moves "
           "(default: 0.25; at a --strength level at least 0.5)", "P"),
    Option("ownership-playouts", ("player", "ownership_playouts"), _positive_int,
           "playouts of the search that judges dead stones when no search covered the position (default: 100)",
           "N"),
    Option("seed", ("seed",), _seed, "random seed for reproducible play", "N"),
    Option("rules", ("play", "rules"), _rules, "rule set: chinese, japanese, korean, aga, new-zealand, tromp-taylor, "
           "stone-scoring, ancient-territory, KataGo's names, or KataGo's JSON rules object (default: chinese)",
           "NAME|JSON"),
    Option("ponder", ("play", "ponder"), _bool, "think on the opponent's time: on or off (default: off)", "on|off"),
    Option("lag-buffer", ("play", "lag_buffer"), _lag, "your delay, kept back from every limit (default: a fifth, at most 1)", "SECONDS"),
    Option("log-level", ("log_level",), _log_level, "debug, info, warning or error (default: warning)", "LEVEL"),
    Option("name", ("name",), _text,
           "what the GTP name command answers (default: gtp_engine); --name KataGo makes Lizzie and LizzieYzy "
           "use their KataGo mode (kata-analyze, score and ownership)", "NAME"),
)

_SEARCH = ("player", "search")  # where search options go; analysis overrides go to ("player", "analysis")
SEARCH_OPTIONS: tuple[Option, ...] = (
    Option("batch", _SEARCH + ("batch_size",), _positive_int, "leaves per network call (default: 8)", "N"),
    Option("batches-in-flight", _SEARCH + ("batches_in_flight",), _positive_int,
           "batches gathered before the oldest is finished, evaluated while the search selects the next; 1 does "
           "one at a time (default: 4)", "N"),
    Option("evaluation-threads", _SEARCH + ("evaluation_threads",), _count,
           "threads that run the network beside the search thread, which runs it too while it would wait "
           "(default: the cores but one, at most batches-in-flight - 1)", "N"),
    Option("c-puct", _SEARCH + ("tree", "c_puct"), _non_negative,
           "PUCT exploration at the start of a search (default: 1.0)", "C"),
    Option("c-puct-log", _SEARCH + ("tree", "c_puct_log"), _non_negative,
           "growth of exploration with the log of a node's visits (default: 0.45)", "C"),
    Option("c-puct-base", _SEARCH + ("tree", "c_puct_base"), _positive,
           "visits at which that growth reaches c-puct-log * ln 2 (default: 500)", "N"),
    Option("fpu-reduction", _SEARCH + ("tree", "fpu_reduction"), _non_negative,
           "first-play urgency reduction below the root (default: 0.25)", "X"),
    Option("root-fpu-reduction", _SEARCH + ("tree", "root_fpu_reduction"), _non_negative,
           "first-play urgency reduction at the root (default: 0.1)", "X"),
    Option("virtual-loss", _SEARCH + ("tree", "virtual_loss"), _non_negative,
           "lost visits a pending leaf adds to its path (default: 1)", "N"),
    Option("score-utility", _SEARCH + ("tree", "score_utility"), _non_negative,
           "weight of the score lead in what the search maximises, 0 winrate only (default: 0.1)", "W"),
    Option("score-scale", _SEARCH + ("tree", "score_scale"), _positive,
           "points at which the score's utility saturates (default: half the square root of the area)", "POINTS"),
    Option("early-stop", _SEARCH + ("stop", "early_stop"), _bool,
           "stop once the best move cannot be overtaken: on or off (default: on)", "on|off"),
    Option("default-visits", _SEARCH + ("stop", "default_visits"), _positive_int,
           "visits per move when nothing else limits a search (default: 800)", "N"),
    Option("max-tree-visits", _SEARCH + ("stop", "max_tree_visits"), _positive_int,
           "no search grows the tree past this many visits (memory; default: 200000)", "N"),
    Option("reuse-tree", _SEARCH + ("reuse_tree",), _bool,
           "keep the subtree of the moves played since the last search: on or off (default: on)", "on|off"),
    Option("lcb", _SEARCH + ("choice", "lcb"), _bool,
           "choose the move by lower confidence bound, off: by visits (default: on)", "on|off"),
    Option("lcb-z", _SEARCH + ("choice", "lcb_z"), _positive,
           "standard errors below the mean for the LCB (default: 3)", "Z"),
    Option("lcb-min-visits-ratio", _SEARCH + ("choice", "lcb_min_visits_ratio"), _weight,
           "moves with fewer visits than this share of the best's are not chosen by LCB (default: 0.1)", "P"),
    Option("temperature", _SEARCH + ("choice", "temperature"), _non_negative,
           "draw moves by visits ** (1 / T) in the first --temperature-moves moves, 0 never (default: 0)", "T"),
    Option("temperature-moves", _SEARCH + ("choice", "temperature_moves"), _count,
           "moves of the game played with the temperature (default: 0)", "N"),
    Option("noise-fraction", _SEARCH + ("noise", "fraction"), _weight,
           "weight of Dirichlet noise in the root's priors (default: 0)", "P"),
    Option("noise-alpha-total", _SEARCH + ("noise", "alpha_total"), _positive,
           "Dirichlet alpha times the number of legal moves (default: 10.83)", "A"),
    Option("root-policy-temperature", _SEARCH + ("noise", "root_policy_temperature"), _positive,
           "the root's priors ** (1 / T) before the search, > 1 searches wider (KataGo's rootPolicyTemperature; "
           "default: 1)", "T"),
)
ANALYSIS_TABLE = "analysis"
OPTIONS = OPTIONS + SEARCH_OPTIONS
_BY_KEY = {option.name: option for option in OPTIONS} | {option.name.replace("-", "_"): option for option in OPTIONS}
_SEARCH_KEYS = {key: option for key, option in _BY_KEY.items() if option in SEARCH_OPTIONS}


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file's values; raises ConfigError naming the file and the problem (the training command line
    reads its config files here too)."""
    try:
        with open(path, "rb") as file:
            return tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:  # TOML files are UTF-8
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None


def load_file(path: str | Path) -> dict[str, Any]:
    """Reads a TOML config file of option = value lines and an optional [analysis] table of search options;
    raises ConfigError with the reason."""
    values = read_toml(path)
    for key, value in values.items():
        if key == ANALYSIS_TABLE and isinstance(value, dict):
            for name, item in value.items():
                if name not in _SEARCH_KEYS:
                    raise ConfigError(f"config file {path}: [analysis] takes search options only, not {name!r}")
                _parse(_SEARCH_KEYS[name], item, f"config file {path}: [analysis] {name}")
        elif key not in _BY_KEY:
            raise ConfigError(f"config file {path}: unknown option {key!r}")
        else:
            _parse(_BY_KEY[key], value, f"config file {path}: {key}")
    return values


def build(*layers: Mapping[str, Any]) -> EngineConfig:
    """Applies option layers (later ones win) to the defaults; raises ConfigError for a bad name or value.

    A layer maps option names to values; its "analysis" entry (a mapping of search options) holds the analysis
    overrides, as do keys "analysis-NAME" (the flags)."""
    values: dict[tuple[str, ...], Any] = {}
    analysis: dict[tuple[str, ...], Any] = {}
    for layer in layers:
        for key, raw in layer.items():
            if key == ANALYSIS_TABLE and isinstance(raw, Mapping):
                for name, item in raw.items():
                    option = _SEARCH_KEYS.get(name)
                    if option is None:
                        raise ConfigError(f"[analysis] takes search options only, not {name!r}")
                    analysis[option.target[len(_SEARCH):]] = _parse(option, item, f"--analysis-{option.name}")
                continue
            name = key.replace("_", "-")
            if name.startswith("analysis-") and name[len("analysis-"):] in _SEARCH_KEYS:
                option = _SEARCH_KEYS[name[len("analysis-"):]]
                analysis[option.target[len(_SEARCH):]] = _parse(option, raw, f"--analysis-{option.name}")
                continue
            option = _BY_KEY.get(key)
            if option is None:
                raise ConfigError(f"unknown option {key!r}")
            values[option.target] = _parse(option, raw)
    engine = EngineConfig()
    for target, value in values.items():
        engine = _replaced(engine, target, value)
    player = engine.player
    search = dataclasses.replace(player.search, seed=engine.seed)
    player = dataclasses.replace(player, search=search)
    if analysis:
        overridden = search
        for target, value in analysis.items():
            overridden = _replaced(overridden, target, value)
        player = dataclasses.replace(player, analysis=overridden)
    return dataclasses.replace(engine, player=player)


def _parse(option: Option, raw: Any, where: str | None = None) -> Any:
    """The option's value; ConfigError naming `where` it was given (default: its flag) for a bad one."""
    try:
        return option.parse(raw)
    except ValueError as error:
        raise ConfigError(f"{where or '--' + option.name}: {error}") from None


def _replaced(config: Any, target: tuple[str, ...], value: Any) -> Any:
    """`config` (a frozen dataclass) with the field at the path `target` set to `value`."""
    head, *rest = target
    return dataclasses.replace(config, **{head: _replaced(getattr(config, head), tuple(rest), value) if rest else value})


# KataGo GTP key -> the option it sets, its value read by that option's parser.
KATAGO_GTP_KEYS = {
    "maxVisits": "visits", "maxPlayouts": "playouts", "maxTime": "time", "ponderingEnabled": "ponder",
    "lagBuffer": "lag-buffer", "resignConsecTurns": "resign-consecutive",
    "numSearchThreads": "batch",  # KataGo's threads gather leaves under virtual loss, as one batch does here
    "cpuctExploration": "c-puct", "cpuctExplorationLog": "c-puct-log", "cpuctExplorationBase": "c-puct-base",
    "fpuReductionMax": "fpu-reduction", "rootFpuReductionMax": "root-fpu-reduction",
    "rootPolicyTemperature": "root-policy-temperature",
    "useLcbForSelection": "lcb", "lcbStdevs": "lcb-z", "minVisitPropForLCB": "lcb-min-visits-ratio",
}
# KataGo's single-rule keys, used where the file has no `rules` key -> the field of KataGo's rules object.
KATAGO_RULE_KEYS = {"koRule": "ko", "scoringRule": "scoring", "taxRule": "tax", "multiStoneSuicideLegal": "suicide",
                    "hasButton": "hasButton", "whiteHandicapBonus": "whiteHandicapBonus",
                    "friendlyPassOk": "friendlyPassOk"}
_KATAGO_SPECIAL = ("rules", "allowResignation", "resignThreshold", "logSearchInfo", "logToStderr")


def from_katago_gtp(values: Mapping[str, str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """The options that KataGo GTP config keys set, the keys with no meaning here (ignored), and notes on rules
    played only approximately; raises ConfigError naming the key of a bad value.

    Besides KATAGO_GTP_KEYS: rules (a KataGo rule set name or JSON), else the single-rule keys; allowResignation
    false (never resign) or resignThreshold (KataGo's utility in [-1, 1): winrate (1 + x) / 2); logSearchInfo and
    logToStderr both true (log level info: KataGo writes its search log to a file unless logToStderr)."""
    options: dict[str, Any] = {}
    ignored: list[str] = []
    for key, raw in values.items():
        if key in KATAGO_GTP_KEYS:
            option = _BY_KEY[KATAGO_GTP_KEYS[key]]
            options[option.name] = _parse(option, raw, f"config key {key}")
        elif key not in _KATAGO_SPECIAL and key not in KATAGO_RULE_KEYS:
            ignored.append(key)
    if "resignThreshold" in values:
        utility = _katago_value(values, "resignThreshold",
                                lambda x: _number(x, "a number in [-1, 1)", lambda u: -1 <= u < 1))
        options["resign-threshold"] = round((1 + utility) / 2, 6)
    if "allowResignation" in values and not _katago_value(values, "allowResignation", _bool):
        options["resign-threshold"] = 0.0
    if all(key in values and _katago_value(values, key, _bool) for key in ("logSearchInfo", "logToStderr")):
        options["log-level"] = "info"
    rules, notes = _katago_rules(values)
    if rules is not None:
        options["rules"] = rules
    return options, ignored, notes


def _katago_rules(values: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The rules option for KataGo's rules keys (None: none given), and where they are played approximately."""
    if "rules" in values:
        key, given = "rules", values["rules"]
    else:
        fields = {KATAGO_RULE_KEYS[k]: v for k, v in values.items() if k in KATAGO_RULE_KEYS}
        if not fields:
            return None, []
        key = ", ".join(k for k in values if k in KATAGO_RULE_KEYS)
        bools = {"true": True, "false": False}
        given = {name: bools.get(v.strip().lower(), v.strip()) if name in ("suicide", "hasButton", "friendlyPassOk")
                 else v.strip() for name, v in fields.items()}
    try:
        rules, notes = Rules.nearest_katago(given)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    return rules.name if rules.name != "custom" else json.dumps(rules.to_katago()), notes


def _katago_value(values: Mapping[str, str], key: str, parse: Callable[[Any], Any]) -> Any:
    try:
        return parse(values[key])
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
