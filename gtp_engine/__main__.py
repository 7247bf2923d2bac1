"""The composition root: command line and config file -> EngineConfig -> network loader, GTP session -> serve.

Command lines: our own (options and a TOML --config), which also takes Leela Zero's flags (-w, -t, -v, -p, -g,
--noponder, -r, --lagbuffer, -q: LEELA_ZERO_SHORT and leela_zero_options), and KataGo's, `gtp-engine gtp -model
NET -config FILE -override-config k=v,...` (katago_config.py reads the file, config.from_katago_gtp the keys),
which our options may follow. Either way a GUI made for Leela Zero or KataGo starts this engine unchanged.

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
from gtp_engine import katago_config
from gtp_engine import log as log_lib
from gtp_engine.config import ConfigError, EngineConfig
from gtp_engine.game import Rules
from gtp_engine.gtp import commands, protocol
from gtp_engine.network_loader import NetworkLoader, exit_process
from gtp_engine.rollout import RolloutPolicy

log = logging.getLogger("gtp_engine")


# Leela Zero's spellings of options this engine has: option -> its short flag.
LEELA_ZERO_SHORT = {"weights": "-w", "threads": "-t", "visits": "-v", "playouts": "-p", "seed": "-s"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine",
        description="A Go engine speaking GTP on stdin/stdout (logs on stderr). "
                    "Options may also come from a TOML file (--config); flags win over the file.",
        epilog="Also: gtp-engine gtp -model NET -config FILE [-override-config k=v,...] (KataGo's command line), "
               "gtp-engine analysis ... (KataGo's JSON analysis protocol, for KaTrain and Ogatak) and "
               "gtp-engine review GAME.sgf ... (a game review); each takes -h.",
    )
    p.add_argument("--config", metavar="FILE", help="TOML file of option = value lines, e.g. visits = 800")
    p.add_argument("--version", action="version", version=f"gtp_engine {gtp_engine.__version__}")
    for option in config_lib.OPTIONS:
        flags = [LEELA_ZERO_SHORT[option.name]] if option.name in LEELA_ZERO_SHORT else []
        p.add_argument(*flags, f"--{option.name}", dest=option.name, metavar=option.metavar, help=option.help,
                       default=argparse.SUPPRESS)
    for option in config_lib.SEARCH_OPTIONS:  # listed once in the README rather than twice in --help
        p.add_argument(f"--analysis-{option.name}", dest=f"analysis-{option.name}", metavar=option.metavar,
                       help=argparse.SUPPRESS, default=argparse.SUPPRESS)
    leela = p.add_argument_group("Leela Zero's flags", "so that a Leela Zero command line works unchanged; "
                                                       "-w, -t, -v, -p and -s are the options above")
    leela.add_argument("-g", "--gtp", action="store_true", help="accepted: this engine always speaks GTP")
    leela.add_argument("--noponder", action="store_true", help="--ponder off")
    leela.add_argument("-r", "--resignpct", metavar="PERCENT", type=float,
                       help="--resign-threshold PERCENT / 100; -1 keeps the default")
    leela.add_argument("--lagbuffer", metavar="CENTISECONDS", type=float, help="--lag-buffer CENTISECONDS / 100")
    leela.add_argument("-q", "--quiet", action="store_true", help="--log-level error")
    return p


def katago_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gtp-engine gtp", allow_abbrev=False,
        description="GTP with KataGo's command line, so that tools made for KataGo can start this engine "
                    "unchanged. Any gtp-engine option may follow (e.g. --name KataGo) and wins over the config.")
    katago_config.add_arguments(p, "maxVisits, maxPlayouts, maxTime, numSearchThreads, ponderingEnabled, rules, "
                                   "resignThreshold")
    return p


def load_config(argv: list[str] | None, *layers: dict[str, Any]) -> EngineConfig:
    """Parses flags and the config file, over `layers` of option values (the KataGo command line's); exits with
    status 2 and a message naming the problem."""
    p = parser()
    args = vars(p.parse_args(argv))
    file_path = args.pop("config", None)
    try:
        file_values: dict[str, Any] = config_lib.load_file(file_path) if file_path else {}
        engine_config = config_lib.build(file_values, *layers, leela_zero_options(args), args)
        rollout = engine_config.rollout
        if rollout.mix > 0 and rollout.weights is not None:
            RolloutPolicy.load(rollout.weights)  # small: a bad file is refused now rather than at the first genmove
    except (ConfigError, ValueError) as error:
        p.error(str(error))
    return engine_config


def leela_zero_options(args: dict[str, Any]) -> dict[str, Any]:
    """The options Leela Zero's own flags stand for, taken out of the parsed `args`."""
    options: dict[str, Any] = {}
    del args["gtp"]
    if args.pop("noponder"):
        options["ponder"] = False
    percent = args.pop("resignpct")
    if percent is not None and percent != -1:
        options["resign-threshold"] = percent / 100
    lag = args.pop("lagbuffer")
    if lag is not None:
        options["lag-buffer"] = lag / 100
    if args.pop("quiet"):
        options["log-level"] = "error"
    return options


def load_katago_config(argv: list[str]) -> tuple[EngineConfig, list[str]]:
    """gtp-engine gtp ARGS: KataGo's command line, then any of our flags; the config and the warnings to log."""
    p = katago_parser()
    args, rest = p.parse_known_args(argv)
    try:
        values = katago_config.read_config_file(args.config) if args.config else {}
        values.update(katago_config.parse_overrides(args.override_config))
        options, ignored, notes = config_lib.from_katago_gtp(values)
    except (katago_config.SettingError, ConfigError) as error:
        p.error(str(error))
    if ignored:
        notes.append(f"config keys that do not apply to gtp_engine, ignored: {', '.join(ignored)}")
    if args.human_model:
        notes.append(f"-human-model {args.human_model} ignored: gtp_engine has no human-style network")
    if args.model is not None and katago_config.is_katago_network(args.model):
        notes.append(katago_config.katago_network_warning(args.model))
    elif args.model is not None:
        options["weights"] = args.model
    return load_config(rest, options), notes


def main(argv: list[str] | None = None) -> None:
    log_lib.end_at_stop_signals()  # the review says more at a stop signal (review.py)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["analysis"]:  # KataGo's JSON analysis protocol (analysis/command.py)
        from gtp_engine.analysis import command as analysis_command
        return analysis_command.main(argv[1:])
    if argv[:1] == ["review"]:  # a game review (review.py)
        from gtp_engine import review
        return review.main(argv[1:])
    notes: list[str] = []
    if argv[:1] == ["gtp"]:  # KataGo's command line
        engine_config, notes = load_katago_config(argv[1:])
    else:
        engine_config = load_config(argv)
    gtp_out = log_lib.protocol_stdout()
    log_lib.setup(engine_config.log_level)
    for note in notes:
        log.warning("%s", note)

    reader = protocol.Reader(sys.stdin.buffer).start()
    players = NetworkLoader(engine_config, on_unusable=exit_process("gtp-engine"),
                            on_loaded=lambda line: log_lib.announce(f"gtp-engine: {line}"))
    session = commands.Session(players, engine_config.move_limits, engine_config.play,
                               Rules.from_katago(engine_config.play.rules), name=engine_config.name,
                               strength=engine_config.player.strength)
    ending = protocol.serve(session.handler, reader, protocol.Writer(gtp_out))
    log.info("session ended (%s)", ending)
    session.stop_pondering()
    log_lib.end_process(0)  # every response was flushed as it was written (protocol.Writer)


if __name__ == "__main__":
    main()
