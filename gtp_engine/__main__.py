"""The composition root: command line and config file -> EngineConfig -> network loader, GTP session -> serve.

Start-up order matters for controllers: the GTP reader starts at once and the network of the first board size loads
on a background thread (network_loader.py), so protocol_version, name and list_commands answer within a second
however long the load takes, and a network that cannot be used ends the process as soon as the load finds it out;
once a network has loaded, one line on stderr says which, where it runs and how (network_loader's load line).
stdout is kept for GTP alone (log.protocol_stdout). quit, the end of input, SIGTERM and SIGINT end the process at
once, whatever runs: quit and the end of input ask a running genmove for its answer first (gtp/protocol.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import gtp_engine
from gtp_engine import config as config_lib
from gtp_engine import log as log_lib
from gtp_engine.config import ConfigError, EngineConfig
from gtp_engine.game import Rules
from gtp_engine.gtp import commands, protocol
from gtp_engine.network_loader import NetworkLoader, exit_process
from gtp_engine.rollout import RolloutPolicy

log = logging.getLogger("gtp_engine")


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


def main(argv: list[str] | None = None) -> None:
    log_lib.end_at_stop_signals()  # the review says more at a stop signal (review.py)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["analysis"]:  # KataGo's JSON analysis protocol (analysis/command.py)
        from gtp_engine.analysis import command as analysis_command
        return analysis_command.main(argv[1:])
    if argv[:1] == ["review"]:  # a game review (review.py)
        from gtp_engine import review
        return review.main(argv[1:])
    engine_config = load_config(argv)
    gtp_out = log_lib.protocol_stdout()
    log_lib.setup(engine_config.log_level)
    reader = protocol.Reader(sys.stdin.buffer).start()
    players = NetworkLoader(engine_config, on_unusable=exit_process("gtp-engine"),
                            on_loaded=lambda line: log_lib.announce(f"gtp-engine: {line}"))
    session = commands.Session(players, engine_config.move_limits, engine_config.play,
                               Rules.named(engine_config.play.rules))
    ending = protocol.serve(session.handler, reader, protocol.Writer(gtp_out))
    log.info("session ended (%s)", ending)
    session.stop_pondering()
    log_lib.end_process(0)  # every response was flushed as it was written (protocol.Writer)


if __name__ == "__main__":
    main()
