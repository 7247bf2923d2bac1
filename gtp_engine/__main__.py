"""The composition root: command line and config file -> EngineConfig -> network, Player, GTP session -> serve.

Start-up order matters for controllers: the GTP reader starts at once and the network loads on a background thread,
so protocol_version, name and list_commands answer within a second however long the load takes. stdout is kept for
GTP alone: file descriptor 1 is duplicated for the GTP writer and then pointed at stderr, so a stray print or a
library's message cannot corrupt the protocol stream. quit, the end of input, SIGTERM and SIGINT end the process.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import gtp_engine
from gtp_engine import config as config_lib
from gtp_engine import log as log_lib
from gtp_engine import native
from gtp_engine.config import ConfigError, EngineConfig
from gtp_engine.game import Rules
from gtp_engine.gtp import commands, protocol
from gtp_engine.network_evaluator import ModelLoadError, with_precision
from gtp_engine.rollout import RolloutPolicy

log = logging.getLogger("gtp_engine")

WEIGHTS_DIRS = (
    Path(__file__).resolve().parent.parent / "weights",  # a source checkout or an editable install
    Path(sys.prefix) / "share" / "gtp_engine" / "weights",  # pip install . (data files)
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine",
        description="A Go engine speaking GTP on stdin/stdout (logs on stderr). "
                    "Options may also come from a TOML file (--config); flags win over the file.",
        epilog="Also: gtp-engine analysis ... (KataGo's JSON analysis protocol, for KaTrain and Ogatak) and "
               "gtp-engine review GAME.sgf ... (a game review); each takes -h.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML file of option = value lines, e.g. visits = 800")
    p.add_argument("--version", action="version", version=f"gtp_engine {gtp_engine.__version__}")
    for option in config_lib.OPTIONS:
        p.add_argument(f"--{option.name}", dest=option.name, metavar=option.metavar, help=option.help,
                       default=argparse.SUPPRESS)
    for option in config_lib.SEARCH_OPTIONS:  # listed once in the README rather than twice in --help
        p.add_argument(f"--analysis-{option.name}", dest=f"analysis-{option.name}", metavar=option.metavar,
                       help=argparse.SUPPRESS, default=argparse.SUPPRESS)
    return p


def load_config(argv: list[str] | None) -> EngineConfig:
    """Parses flags and the config file; exits with status 2 and a message naming the problem."""
    p = parser()
    args = vars(p.parse_args(argv))
    file_path = args.pop("config", None)
    try:
        file_values: dict[str, Any] = config_lib.load_file(file_path) if file_path else {}
        engine_config = config_lib.build(file_values, args)
        Rules.named(engine_config.play.rules)
        rollout = engine_config.rollout
        if rollout.mix > 0 and rollout.weights is not None:
            RolloutPolicy.load(rollout.weights)  # small: a bad file is refused now rather than at the first genmove
    except (ConfigError, ValueError) as error:
        p.error(str(error))
    return engine_config


def shipped_weights(width: int, height: int, directories: tuple[Path, ...] = WEIGHTS_DIRS) -> Path | None:
    """The network for this board size in the first folder that has one: <W>x<H>.onnx, else default.onnx."""
    for directory in directories:
        for name in (f"{width}x{height}.onnx", "default.onnx"):
            if (directory / name).is_file():
                return directory / name
    return None


def shipped_rollout(width: int, height: int, directories: tuple[Path, ...] = WEIGHTS_DIRS) -> Path | None:
    """The rollout policy for this board size in the first folder that has one: rollout-<W>x<H>.npz, else the
    19x19 one (its features are local, so it plays other sizes too)."""
    for directory in directories:
        for name in (f"rollout-{width}x{height}.npz", "rollout-19x19.npz"):
            if (directory / name).is_file():
                return directory / name
    return None


class NetworkLoader:
    """commands.PlayerSource: loads a network on a background thread and builds the Player over it.

    One Player per network file and rollout policy; network evaluations go through caches (CACHE_POSITIONS) that
    clear_cache empties. A value network (--value-weights) or rollouts (--lambda) put a MixedEvaluator on top.
    """

    CACHE_POSITIONS = 20_000  # about 60 MB on 19x19

    def __init__(self, engine_config: EngineConfig):
        self.config = engine_config
        self._lock = threading.Lock()
        self._loads: dict[tuple, Future] = {}  # (network, rollout policy) -> (Player, networks, caches)

    def _directories(self) -> tuple[Path, ...]:
        weights_dir = self.config.network.weights_dir
        return (Path(weights_dir),) if weights_dir is not None else WEIGHTS_DIRS

    def _paths(self, width: int, height: int) -> tuple[Path, Path | None]:
        """(network file, rollout policy file or None without rollouts) for this size; NetworkUnavailable if none."""
        network, rollout = self.config.network, self.config.rollout
        path = self._file(network.weights, shipped_weights, width, height, "network", "give one with --weights FILE")
        path = self._with_precision(path, explicit=network.weights is not None)
        if rollout.mix == 0:
            return path, None
        return path, self._file(rollout.weights, shipped_rollout, width, height, "rollout policy",
                                "give one with --rollout-weights FILE, or play without rollouts (--lambda 0)")

    def _file(self, given: str | None, shipped, width: int, height: int, what: str, hint: str) -> Path:
        """The file given by a flag, else the shipped one for this size; NetworkUnavailable with `hint` if none."""
        path = Path(given) if given is not None else shipped(width, height, self._directories())
        if path is None:
            raise commands.NetworkUnavailable(
                f"no {what} for {width}x{height} boards in {', '.join(map(str, self._directories()))}; {hint}")
        return path

    def _with_precision(self, path: Path, explicit: bool) -> Path:
        """The file to load for network `path` at --precision: a file named on the command line is used as
        given unless int8 is asked for; one found in the weights folder gives way to its int8 sibling under
        auto (network_evaluator.with_precision)."""
        precision = self.config.network.precision
        try:
            return with_precision(path, "fp32" if explicit and precision == "auto" else precision)
        except ModelLoadError as error:
            raise commands.NetworkUnavailable(str(error)) from None

    def prepare(self, width: int, height: int) -> str | None:
        try:
            paths = self._paths(width, height)
        except commands.NetworkUnavailable as error:
            # A size the engine has no network for, where it has some: refused. With none at all it still keeps
            # the rules and the record (a referee, a test), and genmove says why it cannot play.
            has_some = any(any(folder.glob("*.onnx")) for folder in self._directories() if folder.is_dir())
            return str(error) if has_some else None
        with self._lock:
            future = self._loads.get(paths)
            if future is None:
                future = self._loads[paths] = Future()
                threading.Thread(target=self._load, args=(paths, future), name="network-load", daemon=True).start()
        if future.done() and future.exception() is None:
            for onnx in future.result()[1]:
                try:
                    onnx.check_size(width, height)
                except ModelLoadError as error:
                    return str(error)
        return None

    def _load(self, paths: tuple[Path, Path | None], future: Future) -> None:
        try:
            future.set_result(self._build(*paths))
        except Exception as error:  # noqa: BLE001 - reported to the command that needs the network
            log.error("cannot load network %s: %s", paths[0], error)
            future.set_exception(error)

    def _build(self, path: Path, rollout_path: Path | None):
        from gtp_engine.evaluator import CachedEvaluator
        from gtp_engine.mixed_evaluator import MixedEvaluator
        from gtp_engine.onnx_evaluator import OnnxEvaluator  # imports onnxruntime: a second or two
        from gtp_engine.player import Player

        network, rollout, seed = self.config.network, self.config.rollout, self.config.seed
        rollout_policy = RolloutPolicy.load(rollout_path) if rollout_path is not None else None
        value_weights = network.value_weights
        files = [path] + ([self._with_precision(Path(value_weights), True)] if value_weights is not None else [])
        networks = [OnnxEvaluator(f, device=network.device, threads=self.config.network_threads(), seed=seed)
                    for f in files]
        caches = [CachedEvaluator(onnx, self.CACHE_POSITIONS) for onnx in networks]
        for onnx in networks:
            log.info("network %s loaded", onnx.info.describe())
        log.info("compiled twins: %s", native.describe())
        evaluator = caches[0]
        if len(caches) > 1 or rollout_policy is not None:
            evaluator = MixedEvaluator(caches[0], caches[1] if len(caches) > 1 else None, rollout_policy,
                                       rollout.mix, rollout.count, seed=seed)
        return Player(evaluator, self.config.player), networks, caches

    def get(self, width: int, height: int):
        paths = self._paths(width, height)
        self.prepare(width, height)
        with self._lock:
            future = self._loads[paths]
        try:
            player, networks, _ = future.result()
            for onnx in networks:
                onnx.check_size(width, height)
        except Exception as error:  # noqa: BLE001 - a load error, or a size this network cannot play
            raise commands.NetworkUnavailable(str(error)) from None
        return player

    def networks(self) -> list:
        """The networks loaded so far (OnnxEvaluators)."""
        with self._lock:
            loaded = [f.result() for f in self._loads.values() if f.done() and f.exception() is None]
        return [onnx for _, networks, _ in loaded for onnx in networks]

    def clear_cache(self) -> None:
        with self._lock:
            loaded = [f.result() for f in self._loads.values() if f.done() and f.exception() is None]
        for player, _, caches in loaded:
            for cache in caches:
                cache.clear()
            player.reset()


def _protocol_stdout():
    """A binary stream on the real stdout for the protocol; file descriptor 1 then points at stderr."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return out


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["analysis"]:  # KataGo's JSON analysis protocol (analysis/command.py)
        from gtp_engine.analysis import command as analysis_command
        return analysis_command.main(argv[1:], NetworkLoader, _protocol_stdout)
    if argv[:1] == ["review"]:  # a game review (review.py)
        from gtp_engine import review
        return review.main(argv[1:], NetworkLoader)
    engine_config = load_config(argv)
    gtp_out = _protocol_stdout()
    log_lib.setup(engine_config.log_level)

    def end(signum, frame):
        log.info("signal %d: exiting", signum)
        log_lib.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)

    reader = protocol.Reader(sys.stdin.buffer).start()
    session = commands.Session(NetworkLoader(engine_config), engine_config.move_limits, engine_config.play,
                               Rules.named(engine_config.play.rules))
    ending = protocol.serve(session.handler, reader, protocol.Writer(gtp_out))
    log.info("session ended (%s)", ending)
    session.stop_pondering()
    log_lib.flush()  # every response was flushed as it was written (protocol.Writer)
    os._exit(0)  # without waiting for search or onnxruntime threads


if __name__ == "__main__":
    main()
