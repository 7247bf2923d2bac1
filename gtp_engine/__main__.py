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
from gtp_engine.config import ConfigError, EngineConfig
from gtp_engine.game import Rules
from gtp_engine.gtp import commands, protocol
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

    def prepare(self, width: int, height: int) -> None:
        try:
            paths = self._paths(width, height)
        except commands.NetworkUnavailable:
            return
        with self._lock:
            if paths in self._loads:
                return
            future: Future = Future()
            self._loads[paths] = future
        threading.Thread(target=self._load, args=(paths, future), name="network-load", daemon=True).start()

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
        files = [path] + ([Path(network.value_weights)] if network.value_weights is not None else [])
        networks = [OnnxEvaluator(f, device=network.device, threads=network.threads or 0, seed=seed)
                    for f in files]
        caches = [CachedEvaluator(onnx, self.CACHE_POSITIONS) for onnx in networks]
        for onnx in networks:
            log.info("network %s loaded", onnx.info.describe())
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


KATAGO_NETWORK_SUFFIXES = (".bin.gz", ".txt.gz", ".bin", ".txt")


def analysis_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine analysis",
        description="KataGo's JSON analysis protocol on stdin/stdout, with KataGo's command line, so that KaTrain, "
                    "Ogatak and analysis scripts can use this engine (README, 'KaTrain').")
    p.add_argument("-model", metavar="NET", help="ONNX network (a KataGo network is not readable: the shipped "
                                                  "network for each board size is used instead, with a warning)")
    p.add_argument("-config", metavar="FILE", help="KataGo config file; the keys that apply here are read "
                                                   "(maxVisits, maxTime, numSearchThreads, reportAnalysisWinratesAs, "
                                                   "...), the rest ignored with a warning")
    p.add_argument("-override-config", metavar="K=V,...", default="", help="config keys that win over the file")
    p.add_argument("-analysis-threads", metavar="N", type=int, help="positions searched at once "
                                                                    "(default: numAnalysisThreads, at most the CPU count)")
    p.add_argument("-quit-without-waiting", action="store_true",
                   help="at the end of input, drop queued queries instead of finishing them")
    p.add_argument("-human-model", metavar="NET", help="KataGo's human-style network: not supported, ignored")
    p.add_argument("-log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def analysis_main(argv: list[str]) -> None:
    """gtp-engine analysis: the composition root of the JSON analysis engine (gtp_engine/analysis/)."""
    from gtp_engine.analysis import settings as settings_lib
    from gtp_engine.analysis.engine import Engine, Writer, serve
    from gtp_engine.analysis.scheduler import Scheduler

    p = analysis_parser()
    args = p.parse_args(argv)
    out = _protocol_stdout()  # before anything (the network load) can write to file descriptor 1
    log_lib.setup(args.log_level)
    values: dict[str, Any] = {}
    try:
        if args.config:
            values.update(settings_lib.read_config_file(args.config))
        values.update(settings_lib.parse_overrides(args.override_config))
        analysis_settings, ignored = settings_lib.apply(settings_lib.AnalysisSettings(), values)
    except settings_lib.SettingError as error:
        p.error(str(error))
    if ignored:
        log.warning("config keys that do not apply to gtp_engine, ignored: %s", ", ".join(ignored))
    if args.human_model:
        log.warning("-human-model %s ignored: gtp_engine has no human-style network", args.human_model)
    if args.analysis_threads is not None and args.analysis_threads < 1:
        p.error("-analysis-threads: expected a positive integer")
    weights = args.model
    if weights is not None and not Path(weights).is_file():
        p.error(f"-model {weights}: no such file")
    if weights is not None and weights.lower().endswith(KATAGO_NETWORK_SUFFIXES):
        log.warning("-model %s is a KataGo network, which gtp_engine cannot read; using the shipped network for "
                    "each board size instead (give an ONNX network with -model to choose one)", weights)
        weights = None
    engine_config = config_lib.build({"weights": weights} if weights else {})
    loader = NetworkLoader(engine_config)
    loader.prepare(19, 19)  # what most queries ask for; other sizes load on their first query
    cores = os.cpu_count() or 1
    workers = args.analysis_threads or min(analysis_settings.analysis_threads or cores, cores)

    def evaluator_for(width: int, height: int):
        try:
            return loader.get(width, height).evaluator
        except commands.NetworkUnavailable as error:
            raise commands.NetworkUnavailable(f"no network for a {width}x{height} board: {error}") from None

    def models() -> list[dict[str, Any]]:
        if weights is not None:  # the one network of every size: wait for its load
            try:
                loader.get(19, 19)
            except commands.NetworkUnavailable:
                pass
        return [{"name": onnx.info.path, "internalName": onnx.info.describe(), "maxBatchSize": onnx.max_batch,
                 "usesHumanSLProfile": False} for onnx in loader.networks()]

    write = Writer(out)
    base = engine_config.player.analysis_search  # numSearchThreads, when set, changes its batch size per query
    scheduler = Scheduler(evaluator_for, base, write, workers)
    serve(sys.stdin.buffer, Engine(scheduler, write, analysis_settings, loader.clear_cache, models),
          args.quit_without_waiting)
    log_lib.flush()
    out.flush()
    os._exit(0)  # without waiting for onnxruntime threads


def review_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine review",
        description="Analyses every position of a game and writes the SGF back with each move's winrate, score lead "
                    "and points lost in its comment (SBKV for Sabaki's graph), the worst moves in the root comment.")
    p.add_argument("game", metavar="GAME.sgf")
    p.add_argument("-o", "--output", metavar="OUT.sgf", help="where to write the reviewed game "
                                                             "(default: GAME-review.sgf beside the game)")
    p.add_argument("--visits", type=int, default=200, metavar="N", help="visits per position (default: 200)")
    p.add_argument("--plot", metavar="GRAPH.png", help="also draw Black's winrate and score lead per move "
                                                       "(needs matplotlib: pip install 'gtp_engine[plot]')")
    p.add_argument("--weights", metavar="FILE", help="ONNX network (default: the shipped one for the board size)")
    p.add_argument("--threads", type=int, metavar="N", help="positions searched at once (default: the CPU count)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def review_main(argv: list[str]) -> None:
    """gtp-engine review: the composition root of the game review (review.py)."""
    from gtp_engine import review, sgf_io

    p = review_parser()
    args = p.parse_args(argv)
    log_lib.setup(args.log_level)
    if args.visits < 1 or (args.threads is not None and args.threads < 1):
        p.error("--visits and --threads take a positive integer")
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - checked before the analysis, not after it
        except ImportError:
            p.error("--plot needs matplotlib, which is not installed: pip install 'gtp_engine[plot]'")
    try:
        data = Path(args.game).read_bytes()
        record = sgf_io.load_sgf(data, source=args.game)
    except OSError as error:
        p.error(f"cannot read {args.game}: {error.strerror}")
    except sgf_io.SgfError as error:
        p.error(str(error))
    output = Path(args.output) if args.output else Path(args.game).with_name(Path(args.game).stem + "-review.sgf")
    engine_config = config_lib.build({"weights": args.weights} if args.weights else {})
    loader = NetworkLoader(engine_config)

    def evaluator_for(width: int, height: int):
        return loader.get(width, height).evaluator

    base = engine_config.player.analysis_search
    try:
        result = review.analyse(record, evaluator_for, base, args.visits, args.threads or os.cpu_count() or 1,
                                review.ProgressBar(sys.stderr))
        output.write_bytes(review.annotated_sgf(data, result))
        if args.plot:
            review.plot(result, args.plot)
    except (review.ReviewError, OSError) as error:
        sys.stderr.write(f"gtp-engine review: {error}\n")
        sys.exit(1)
    sys.stderr.write(f"reviewed game written to {output}" + (f", graph to {args.plot}" if args.plot else "") + "\n")
    log_lib.flush()
    os._exit(0)  # without waiting for onnxruntime threads


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["analysis"]:
        return analysis_main(argv[1:])
    if argv[:1] == ["review"]:
        return review_main(argv[1:])
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
    session = commands.Session(NetworkLoader(engine_config), engine_config.search, engine_config.play,
                               Rules.named(engine_config.play.rules))
    ending = protocol.serve(session.handler, reader, protocol.Writer(gtp_out))
    log.info("session ended (%s)", ending)
    session.stop_pondering()
    log_lib.flush()
    gtp_out.flush()
    os._exit(0)  # without waiting for search or onnxruntime threads


if __name__ == "__main__":
    main()
