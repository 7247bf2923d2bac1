"""Network loader: options in, a Player per board size out, for every front end (GTP, the JSON analysis engine,
the game review); and the rule that a network that cannot be used ends the process.

Terms:
- weights folder: where the network of a board size is found, <W>x<H>.onnx else default.onnx (shipped_weights),
  and its rollout policy, rollout-<W>x<H>.npz else rollout-19x19.npz (shipped_rollout): --weights-dir, else
  WEIGHTS_DIRS (the shipped networks). --weights names one network for every size instead.
- files of a size: the network (its int8 sibling at --precision, network_evaluator.with_precision), the value
  network of --value-weights, the rollout policy where rollouts are mixed in. One load (a background thread) and
  one Player per distinct files; network evaluations go through caches (CACHE_POSITIONS) that clear_cache empties.
- no network for a size: none given and none in the weights folder. Not an error in itself: where the folder has
  networks for other sizes that size is refused; where it has none at all the front end keeps the rules and the
  record (a referee, a test) and says why it cannot play when asked to.
- unusable network: a network file that exists or is named but cannot be used (missing, unreadable, a folder, not
  ONNX, against the network contract, a --device that cannot run here, no int8 sibling at --precision int8). Its
  explanation is one line, "cannot use network FILE: REASON; FIX", given to on_unusable: the front ends pass
  exit_process, which ends the process with it as the last line on stderr. A network that accepts other board
  sizes only is not unusable: that size is refused.
- start-up load: each front end prepares its first board size at once (GTP and the analysis engine 19x19, the
  review the game's), so an unusable network --weights names, or the one found for that size, ends the process
  within seconds of the start, while the handshake answers meanwhile.
- load line: one line that says what a load made ready: each network file, the board sizes it was trained on (its
  metadata), the device it runs on (the provider onnxruntime actually took) and its precision, and whether the
  compiled twins run (native.describe); given to on_loaded (GTP and the analysis engine show it at start-up).
"""

from __future__ import annotations

import logging
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, NamedTuple, NoReturn

from gtp_engine import log as log_lib
from gtp_engine import native
from gtp_engine.config import EngineConfig
from gtp_engine.network_evaluator import DeviceUnavailable, ModelLoadError, with_precision
from gtp_engine.rollout import RolloutPolicy

log = logging.getLogger(__name__)

WEIGHTS_DIRS = (
    Path(__file__).resolve().parent.parent / "weights",  # a source checkout or an editable install
    Path(sys.prefix) / "share" / "gtp_engine" / "weights",  # pip install . (data files)
)
EXPORT = "python -m gtp_engine.training export"
DEVICE_FIX = ("install the CUDA and cuDNN libraries onnxruntime-gpu needs (TensorRT too for --device tensorrt: "
              "onnxruntime.ai/docs/execution-providers; --log-level debug shows what is missing), or use --device cpu")
PRECISION_FIX = "or use --precision auto or fp32"


class NetworkUnavailable(Exception):
    """No Player for this board size; str() says why (no weights file, an unusable network, a size the network
    refuses)."""


class Files(NamedTuple):
    """The files of a board size (see the module docstring)."""

    network: Path
    value_network: Path | None
    rollout: Path | None


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


def load_line(networks: list) -> str:
    """The load line (module docstring) of these networks (OnnxEvaluators: the network, then the value network)."""
    parts = []
    for onnx, what in zip(networks, ("network", "value network")):
        info = onnx.info
        sizes = " and ".join(f"{n}x{n}" for n in info.trained_sizes) or "sizes it does not record"
        parts.append(f"{what} {info.path} ({info.preset}, trained on {sizes}) on {info.provider}, {info.precision}")
    return "; ".join(parts) + f"; core: {native.describe()}"


def exit_process(program: str) -> Callable[[str], NoReturn]:
    """The on_unusable of a front end: the queued log records written, then `program: LINE` as the last line on
    stderr, and the process ends with status 1 at once, from whichever thread found the network unusable (the
    first of two at once: the other waits for the end)."""
    ending = threading.Lock()

    def end(line: str) -> NoReturn:
        ending.acquire()
        try:
            log_lib.flush()  # the queued records before the line, which is the last
            sys.stderr.write(f"{program}: {line}\n")
        finally:
            log_lib.end_process(1)

    return end


class NetworkLoader:
    """Loads the files of a board size on a background thread and builds the Player over them (gtp.commands'
    PlayerSource). A value network (--value-weights) or rollouts (--lambda) put a MixedEvaluator on top.

    on_unusable: called with the one line of an unusable network (module docstring) as soon as it is found; the
    front ends end the process there (exit_process). Without it, get raises NetworkUnavailable with that line.
    weights_flag: the front end's name for the network option, for the fix in that line.
    on_loaded: called with the load line (module docstring) of each load, before get returns its Player.
    """

    CACHE_POSITIONS = 20_000  # about 60 MB on 19x19

    def __init__(self, engine_config: EngineConfig, on_unusable: Callable[[str], object] | None = None,
                 weights_flag: str = "--weights", on_loaded: Callable[[str], object] | None = None):
        self.config = engine_config
        self._on_unusable = on_unusable
        self._weights_flag = weights_flag
        self._on_loaded = on_loaded
        self._lock = threading.Lock()
        self._loads: dict[Files, Future] = {}  # -> (Player, networks, caches)

    def _directories(self) -> tuple[Path, ...]:
        weights_dir = self.config.network.weights_dir
        return (Path(weights_dir),) if weights_dir is not None else WEIGHTS_DIRS

    def _files(self, width: int, height: int) -> Files:
        """The files of this size; NetworkUnavailable where there is no network (or rollout policy) for it."""
        network, rollout = self.config.network, self.config.rollout
        path = self._file(network.weights, shipped_weights, width, height, "network",
                          f"give one with {self._weights_flag} FILE")
        path = self._with_precision(path)
        value_path = None
        if network.value_weights is not None:
            value_path = self._with_precision(Path(network.value_weights))
        rollout_path = None
        if rollout.mix > 0:
            rollout_path = self._file(rollout.weights, shipped_rollout, width, height, "rollout policy",
                                      "give one with --rollout-weights FILE, or play without rollouts (--lambda 0)")
        return Files(path, value_path, rollout_path)

    def _file(self, given: str | None, shipped, width: int, height: int, what: str, hint: str) -> Path:
        """The file given by a flag, else the shipped one for this size; NetworkUnavailable with `hint` if none."""
        path = Path(given) if given is not None else shipped(width, height, self._directories())
        if path is None:
            raise NetworkUnavailable(
                f"no {what} for {width}x{height} boards in {', '.join(map(str, self._directories()))}; {hint}")
        return path

    def _with_precision(self, path: Path) -> Path:
        """The file to load for network `path` at --precision (network_evaluator.with_precision): under auto its
        int8 sibling where one exists, whether the network was named on the command line or found in the weights
        folder."""
        try:
            return with_precision(path, self.config.network.precision)
        except ModelLoadError as error:
            raise self._unusable(error, PRECISION_FIX) from None

    def _unusable(self, error: ModelLoadError, fix: str) -> NetworkUnavailable:
        """The NetworkUnavailable of an unusable network, once on_unusable has had its line."""
        line = f"cannot use network {error.path}: {error.reason}; {fix}"
        if self._on_unusable is not None:
            self._on_unusable(line)
        return NetworkUnavailable(line)

    def _fix(self, error: ModelLoadError, files: Files) -> str:
        """What to do about an unusable network: it depends on where the file came from."""
        network = self.config.network
        if isinstance(error, DeviceUnavailable):
            return DEVICE_FIX
        if files.value_network is not None and error.path == str(files.value_network):
            return f"give a value network exported by {EXPORT}, or omit --value-weights"
        if network.weights is not None:
            return f"give a network exported by {EXPORT}, or omit {self._weights_flag} to use the shipped one"
        if network.weights_dir is not None:
            return f"replace it with a network exported by {EXPORT}, or remove it from {network.weights_dir}"
        return f"reinstall gtp_engine to restore its shipped networks, or give one with {self._weights_flag} FILE"

    def _start(self, width: int, height: int) -> Future:
        """The load of this size's files, started now where it has not been; NetworkUnavailable as _files."""
        files = self._files(width, height)
        with self._lock:
            future = self._loads.get(files)
            if future is None:
                future = self._loads[files] = Future()
                threading.Thread(target=self._load, args=(files, future), name="network-load", daemon=True).start()
        return future

    def prepare(self, width: int, height: int) -> str | None:
        """gtp.commands.PlayerSource.prepare."""
        try:
            future = self._start(width, height)
        except NetworkUnavailable as error:
            # A size the engine has no network for, where it has some: refused. With none at all it still keeps
            # the rules and the record (a referee, a test), and genmove says why it cannot play.
            has_some = any(any(folder.glob("*.onnx")) for folder in self._directories() if folder.is_dir())
            return str(error) if has_some else None
        if future.done() and future.exception() is None:
            for onnx in future.result()[1]:
                try:
                    onnx.check_size(width, height)
                except ModelLoadError as error:
                    return str(error)
        return None

    def _load(self, files: Files, future: Future) -> None:
        try:
            built = self._build(files)
            if self._on_loaded is not None:
                self._on_loaded(load_line(built[1]))
            future.set_result(built)
        except ModelLoadError as error:
            future.set_exception(self._unusable(error, self._fix(error, files)))
        except Exception as error:  # noqa: BLE001 - reported to the command that needs the network
            log.error("cannot load network %s: %s", files.network, error)
            future.set_exception(error)

    def _build(self, files: Files):
        from gtp_engine.evaluator import CachedEvaluator
        from gtp_engine.mixed_evaluator import MixedEvaluator
        from gtp_engine.onnx_evaluator import OnnxEvaluator  # imports onnxruntime: a second or two
        from gtp_engine.player import Player

        network, rollout, seed = self.config.network, self.config.rollout, self.config.seed
        rollout_policy = RolloutPolicy.load(files.rollout) if files.rollout is not None else None
        networks = [OnnxEvaluator(f, device=network.device, threads=self.config.network_threads(), seed=seed)
                    for f in (files.network, files.value_network) if f is not None]
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
        """gtp.commands.PlayerSource.get: the Player for this size, once loaded; NetworkUnavailable."""
        future = self._start(width, height)
        try:
            player, networks, _ = future.result()
            for onnx in networks:
                onnx.check_size(width, height)
        except Exception as error:  # noqa: BLE001 - a load error, or a size this network cannot play
            raise NetworkUnavailable(str(error)) from None
        return player

    def wait_loaded(self, width: int, height: int) -> None:
        """Waits for the load of what a width x height game needs, without asking whether its networks play that
        size (so without their size warnings: the ready line, query_models); NetworkUnavailable where it fails."""
        try:
            self._start(width, height).result()
        except NetworkUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - a load error
            raise NetworkUnavailable(str(error)) from None

    def size_warning(self, width: int, height: int) -> str | None:
        """Why the networks of this size may play it badly (network_evaluator.NetworkEvaluator.size_warning), once
        loaded (waits for the load); None when nothing is known against them."""
        try:
            _, networks, _ = self._start(width, height).result()
        except Exception:  # noqa: BLE001 - a network that does not load is reported by get
            return None
        warnings = [w for w in (onnx.size_warning(width, height) for onnx in networks) if w is not None]
        return "; ".join(warnings) or None

    def networks(self) -> list:
        """The networks loaded so far (OnnxEvaluators)."""
        with self._lock:
            loaded = [f.result() for f in self._loads.values() if f.done() and f.exception() is None]
        return [onnx for _, networks, _ in loaded for onnx in networks]

    def clear_cache(self) -> None:
        """gtp.commands.PlayerSource.clear_cache."""
        with self._lock:
            loaded = [f.result() for f in self._loads.values() if f.done() and f.exception() is None]
        for player, _, caches in loaded:
            for cache in caches:
                cache.clear()
            player.reset()
