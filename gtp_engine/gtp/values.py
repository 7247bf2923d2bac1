"""GTP value types (spec section 3): colours, vertices and numbers as commands write them.

Terms:
- color: "b", "w", "black" or "white", any case; board.BLACK or board.WHITE inside.
- vertex: a GTP point name such as "D4" or "q16" (any case), or "pass"; a coords point inside.
Every parser raises GtpError("syntax error") for text that is not such a value, so handlers need no checks of
their own. A vertex that is well formed but lies off the board is an IllegalVertex: play answers it with
"illegal move", like any other move it cannot make.
"""

from __future__ import annotations

import math
import re

from gtp_engine import coords
from gtp_engine.board import BLACK, WHITE
from gtp_engine.gtp.protocol import SYNTAX_ERROR, GtpError

_COLORS = {"b": BLACK, "black": BLACK, "w": WHITE, "white": WHITE}
_VERTEX = re.compile(r"[a-hj-z][0-9]{1,2}", re.IGNORECASE)


class IllegalVertex(GtpError):
    """A well-formed vertex off this board."""


def parse_color(text: str) -> int:
    try:
        return _COLORS[text.lower()]
    except KeyError:
        raise GtpError(SYNTAX_ERROR) from None


def is_color(text: str) -> bool:
    return text.lower() in _COLORS


def color_letter(color: int) -> str:
    return "B" if color == BLACK else "W"


def parse_vertex(g: coords.Grid, text: str) -> int:
    if text.lower() == "pass":
        return coords.PASS
    if not _VERTEX.fullmatch(text):
        raise GtpError(SYNTAX_ERROR)
    try:
        return coords.from_gtp(g, text)
    except ValueError:
        raise IllegalVertex(f"{text} is off the {g.width}x{g.height} board") from None


def parse_int(text: str, minimum: int = 0) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < minimum:
        raise GtpError(SYNTAX_ERROR)
    return int(text)


def parse_float(text: str) -> float:
    """A finite decimal number; GTP floats are written like 6.5, -3 or 0."""
    try:
        number = float(text)
    except ValueError:
        raise GtpError(SYNTAX_ERROR) from None
    if not math.isfinite(number) or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", text):
        raise GtpError(SYNTAX_ERROR)
    return number


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise GtpError(SYNTAX_ERROR)
    return lowered == "true"


def arity(args: tuple[str, ...], *counts: int) -> None:
    """Fails with syntax error unless the command has one of these numbers of arguments."""
    if len(args) not in counts:
        raise GtpError(SYNTAX_ERROR)
