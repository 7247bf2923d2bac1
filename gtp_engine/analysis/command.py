"""`gtp-engine analysis`: KataGo's command line for the JSON analysis engine, and the parts it builds.

Terms:
- command line: KataGo's, as its clients build it: -model NET -config FILE [-override-config k=v,...]
  [-analysis-threads N] [-quit-without-waiting] (settings.py reads the config keys).
- KataGo network (katago_config.py): a -model file this engine cannot read; it says so on stderr and uses its
  shipped network for each board size, so that pointing KaTrain's "KataGo executable" at gtp-engine works with
  KaTrain's other settings unchanged. Any other -model file that cannot be used (missing, not ONNX, ...) ends the
  process with one line on stderr (network_loader.py), as does a broken shipped network.
- workers: -analysis-threads, else numAnalysisThreads, at most the CPU count.
- ready line: KataGo's "Started, ready to begin handling requests" (READY_LINE) on stderr, at every log level, once
  the start-up network (19x19's, or the one -model names for every size) has loaded, after its load line (what
  runs where, network_loader.py). Clients wait for it before they send queries; queries sent earlier wait for the
  network. A start with no network for 19x19 is ready at once.
- stopping: SIGTERM and SIGINT end the engine at once (log.end_at_stop_signals), with whatever is queued or
  running; the end of input first finishes the queued queries (engine.py), as KataGo does.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from gtp_engine import config as config_lib
from gtp_engine import katago_config
from gtp_engine import log as log_lib
from gtp_engine.analysis import settings as settings_lib
from gtp_engine.analysis.engine import Engine, Writer, serve
from gtp_engine.analysis.scheduler import Scheduler
from gtp_engine.network_loader import NetworkLoader, NetworkUnavailable, exit_process

log = logging.getLogger(__name__)

READY_LINE = "Started, ready to begin handling requests"  # KataGo's words, which clients wait for


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine analysis",
        description="KataGo's JSON analysis protocol on stdin/stdout, with KataGo's command line, so that KaTrain, "
                    "Ogatak and analysis scripts can use this engine (README, 'KaTrain').")
    katago_config.add_arguments(p, "maxVisits, maxTime, numSearchThreads, reportAnalysisWinratesAs")
    p.add_argument("-analysis-threads", metavar="N", type=int, help="positions searched at once "
                                                                    "(default: numAnalysisThreads, at most the CPU count)")
    p.add_argument("-quit-without-waiting", action="store_true",
                   help="at the end of input, drop queued queries instead of finishing them")
    p.add_argument("-log-level", default="warning", choices=("debug", "info", "warning", "error"))
    return p


def main(argv: list[str]) -> None:
    """gtp-engine analysis ARGS."""
    p = parser()
    args = p.parse_args(argv)
    out = log_lib.protocol_stdout()  # before anything (the network load) can write to file descriptor 1
    log_lib.setup(args.log_level)
    values: dict[str, Any] = {}
    try:
        if args.config:
            values.update(katago_config.read_config_file(args.config))
        values.update(katago_config.parse_overrides(args.override_config))
        analysis_settings, ignored = settings_lib.apply(settings_lib.AnalysisSettings(), values)
    except katago_config.SettingError as error:
        p.error(str(error))
    if ignored:
        log.warning("config keys that do not apply to gtp_engine, ignored: %s", ", ".join(ignored))
    if args.human_model:
        log.warning("-human-model %s ignored: gtp_engine has no human-style network", args.human_model)
    if args.analysis_threads is not None and args.analysis_threads < 1:
        p.error("-analysis-threads: expected a positive integer")
    weights = args.model
    if weights is not None and katago_config.is_katago_network(weights):
        log.warning("%s", katago_config.katago_network_warning(weights))
        weights = None
    engine_config = config_lib.build({"weights": weights} if weights else {})
    loader = NetworkLoader(engine_config, on_unusable=exit_process("gtp-engine analysis"), weights_flag="-model",
                           on_loaded=lambda line: log_lib.announce(f"gtp-engine analysis: {line}"))
    loader.prepare(19, 19)  # what most queries ask for; other sizes load on their first query

    def announce_ready() -> None:
        try:
            loader.wait_loaded(19, 19)
        except NetworkUnavailable:  # no network for 19x19: ready for the sizes there are
            pass
        log_lib.announce(READY_LINE, always=True)

    threading.Thread(target=announce_ready, name="ready", daemon=True).start()
    cores = os.cpu_count() or 1
    workers = args.analysis_threads or min(analysis_settings.analysis_threads or cores, cores)

    def evaluator_for(width: int, height: int):
        return loader.get(width, height).evaluator  # the scheduler reports a failure to the query

    def models() -> list[dict[str, Any]]:
        if weights is not None:  # the one network of every size: wait for its load
            try:
                loader.wait_loaded(19, 19)
            except NetworkUnavailable:  # a network that does not load is listed as not loaded
                pass
        return [{"name": onnx.info.path, "internalName": onnx.info.describe(), "maxBatchSize": onnx.max_batch,
                 "usesHumanSLProfile": False} for onnx in loader.networks()]

    write = Writer(out)
    base = engine_config.player.analysis_search  # numSearchThreads, when set, changes its batch size per query
    scheduler = Scheduler(evaluator_for, base, write, workers, loader.size_warning)
    serve(sys.stdin.buffer, Engine(scheduler, write, analysis_settings, loader.clear_cache, models), write,
          args.quit_without_waiting)
    log_lib.end_process(0)  # every response was flushed as it was written (engine.Writer)
