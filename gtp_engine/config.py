"""Engine configuration: typed, frozen values, built once (in __main__) from a config file and command-line flags.

Terms:
- option: one setting, named by its long flag ("--resign-threshold"); a config file uses the same names
  without the dashes as keys ("resign-threshold = 0.05", underscores also accepted). Flags win over the file.
- EngineConfig: everything the composition root needs, grouped by the part that uses it.
Nothing here reads flags or files by itself: load_file() and build() are called by __main__.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

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
    batch: int = 8  # leaves the search collects per network call
    threads: int | None = None  # CPU threads of the network (onnxruntime); None: onnxruntime's choice


@dataclass(frozen=True)
class RolloutOptions:
    mix: float = 0.0  # λ: weight of rollout results in a leaf's value (mixed_evaluator.py); 0: none (AlphaGo Zero)
    weights: str | None = None  # rollout policy (.npz); None: rollout-<W>x<H>.npz where the networks are found
    count: int = 1  # rollouts per leaf


@dataclass(frozen=True)
class SearchOptions:
    visits: int | None = None  # visits of the root per move, counting visits kept from earlier searches
    playouts: int | None = None  # new playouts per move
    time_per_move: float | None = None  # seconds; a cap per move, on top of what the game clock allows
    resign_threshold: float = 0.05  # resign when the winrate stays below this; 0 never resigns
    seed: int | None = None  # fixes the search's random choices (tests, reproducible matches)


@dataclass(frozen=True)
class PlayOptions:
    rules: str = "chinese"  # a rule set name, see game.Rules.named
    ponder: bool = False  # think on the opponent's time; any input stops it
    lag_buffer: float | None = None  # seconds kept back from every limit for delay; None: timecontrol.kept_back


@dataclass(frozen=True)
class EngineConfig:
    network: NetworkConfig = field(default_factory=NetworkConfig)
    rollout: RolloutOptions = field(default_factory=RolloutOptions)
    search: SearchOptions = field(default_factory=SearchOptions)
    play: PlayOptions = field(default_factory=PlayOptions)
    log_level: str = "warning"


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()):
        raise ValueError(f"expected a positive integer, got {value!r}")
    number = int(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _seed(value: Any) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).strip().isdigit()):
        raise ValueError(f"expected an integer >= 0, got {value!r}")
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


def _device(value: Any) -> str:
    text = _text(value).lower()
    if text not in ("auto", "cpu", "cuda", "tensorrt"):
        raise ValueError(f"expected auto, cpu, cuda or tensorrt, got {value!r}")
    return text


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
    Option("batch", ("network", "batch"), _positive_int, "positions per network call (default: 8)", "N"),
    Option("threads", ("network", "threads"), _positive_int,
           "CPU threads for the network (default: onnxruntime's choice); the search itself runs in one", "N"),
    Option("lambda", ("rollout", "mix"), _weight,
           "weight of rollouts in a leaf's value: (1 - lambda) * value + lambda * rollout result "
           "(default: 0, no rollouts)", "LAMBDA"),
    Option("rollout-weights", ("rollout", "weights"), _text,
           "rollout policy for --lambda (default: rollout-<W>x<H>.npz, else rollout-19x19.npz, beside the "
           "networks)", "FILE"),
    Option("rollouts", ("rollout", "count"), _positive_int, "rollouts per leaf with --lambda (default: 1)", "N"),
    Option("visits", ("search", "visits"), _positive_int, "root visits per move, reused ones included", "N"),
    Option("playouts", ("search", "playouts"), _positive_int, "new playouts per move", "N"),
    Option("time", ("search", "time_per_move"), _seconds, "at most this many seconds per move", "SECONDS"),
    Option("resign-threshold", ("search", "resign_threshold"), _fraction,
           "resign below this winrate, 0 never resigns (default: 0.05)", "P"),
    Option("seed", ("search", "seed"), _seed, "random seed for reproducible play", "N"),
    Option("rules", ("play", "rules"), _text, "rule set: chinese, japanese, tromp-taylor, aga, ... (default: chinese)", "NAME"),
    Option("ponder", ("play", "ponder"), _bool, "think on the opponent's time: on or off (default: off)", "on|off"),
    Option("lag-buffer", ("play", "lag_buffer"), _lag, "your delay, kept back from every limit (default: a fifth, at most 1)", "SECONDS"),
    Option("log-level", ("log_level",), _log_level, "debug, info, warning or error (default: warning)", "LEVEL"),
)
_BY_KEY = {option.name: option for option in OPTIONS} | {option.name.replace("-", "_"): option for option in OPTIONS}


def load_file(path: str | Path) -> dict[str, Any]:
    """Reads a TOML config file of option = value lines; raises ConfigError with the reason."""
    try:
        with open(path, "rb") as file:
            values = tomllib.load(file)
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {path} is not valid TOML: {error}") from None
    for key in values:
        if key not in _BY_KEY:
            raise ConfigError(f"config file {path}: unknown option {key!r}")
    return values


def build(*layers: Mapping[str, Any]) -> EngineConfig:
    """Applies option layers (later ones win) to the defaults; raises ConfigError for a bad name or value."""
    sections: dict[str, dict[str, Any]] = {"network": {}, "rollout": {}, "search": {}, "play": {}, "": {}}
    for layer in layers:
        for key, raw in layer.items():
            option = _BY_KEY.get(key)
            if option is None:
                raise ConfigError(f"unknown option {key!r}")
            try:
                value = option.parse(raw)
            except ValueError as error:
                raise ConfigError(f"--{option.name}: {error}") from None
            section, name = (option.target[0], option.target[1]) if len(option.target) == 2 else ("", option.target[0])
            sections[section][name] = value
    return dataclasses.replace(
        EngineConfig(
            network=NetworkConfig(**sections["network"]),
            rollout=RolloutOptions(**sections["rollout"]),
            search=SearchOptions(**sections["search"]),
            play=PlayOptions(**sections["play"]),
        ),
        **sections[""],
    )
