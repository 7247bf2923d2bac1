"""KataGo's configuration as its clients hand it over: config files, -override-config and network files, read the
same way by `gtp-engine gtp` and `gtp-engine analysis` (what each key means is theirs: config.from_katago_gtp and
analysis/settings.py).

Terms:
- config file: KataGo's key = value lines; `#` starts a comment, blank lines are skipped, later lines win.
- overrides: -override-config "k=v,k=v", which win over the file.
- KataGo network: a -model file in KataGo's own format (KATAGO_NETWORK_SUFFIXES: .bin.gz, ...), which this engine
  cannot read: the front ends say so on stderr and use the shipped network for each board size instead, so that a
  client's KataGo command line works unchanged. Any other file is taken as an ONNX network.
"""

from __future__ import annotations

import argparse
from pathlib import Path

KATAGO_NETWORK_SUFFIXES = (".bin.gz", ".txt.gz", ".bin", ".txt")


class SettingError(ValueError):
    """A config file that cannot be read, or a bad value for a known key; the message names the file or the key."""


def add_arguments(p: argparse.ArgumentParser, config_keys: str) -> None:
    """KataGo's -model, -config and -override-config, and -human-model (ignored), on a front end's parser;
    config_keys: the keys that front end reads, for the help."""
    p.add_argument("-model", metavar="NET", help="ONNX network (a KataGo network is not readable: the shipped "
                                                  "network for each board size is used instead, with a warning)")
    p.add_argument("-config", metavar="FILE", help=f"KataGo config file; the keys that apply here are read "
                                                   f"({config_keys}, ...), the rest ignored with a warning")
    p.add_argument("-override-config", metavar="K=V,...", default="", help="config keys that win over the file")
    p.add_argument("-human-model", metavar="NET", help="KataGo's human-style network: not supported, ignored")


def is_katago_network(path: str) -> bool:
    return path.lower().endswith(KATAGO_NETWORK_SUFFIXES)


def katago_network_warning(path: str) -> str:
    """What a front end logs when -model names a KataGo network."""
    return (f"-model {path} is a KataGo network, which gtp_engine cannot read; using the shipped network for each "
            "board size instead (give an ONNX network with -model to choose one)")


def read_config_file(path: str | Path) -> dict[str, str]:
    """The key = value lines of a KataGo config file; raises SettingError naming the file and line for anything
    else."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise SettingError(f"cannot read config file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SettingError(f"config file {path} is not UTF-8 text") from None
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise SettingError(f"config file {path}, line {number}: expected key = value, got {line!r}")
        values[key.strip()] = value.strip()
    return values


def parse_overrides(text: str) -> dict[str, str]:
    """-override-config "k=v,k=v" -> {k: v}; raises SettingError."""
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise SettingError(f"-override-config: expected key=value, got {item!r}")
        values[key.strip()] = value.strip()
    return values
