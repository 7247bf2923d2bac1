"""Compiled twins: the C extensions that do, faster, exactly what a Python reference in this package does.

Terms:
- twin: a C extension built with the package when a C compiler is present (setup.py; optional, so an install
  without one succeeds). _tree_core.c is tree_core.py's node fields, selection, descent, candidate moves, expansion
  and backup; _rules_core.c is the board's and the game's play and legality (board.py, game.py), and the compiled
  search positions whose reference is GameState itself (position.py); _features_core.c is features.py's planes,
  global inputs and position key.
  Each reference stays in Python, and tests/unit hold every twin to it: the same boards, trees and inputs, bit
  for bit.
- pure Python: GTP_ENGINE_PURE_PYTHON=1 in the environment when the package is imported makes every module use its
  Python reference even where a twin is built (to measure it, or to rule the C code out).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

TWINS = ("_tree_core", "_rules_core", "_features_core")
PURE_PYTHON = os.environ.get("GTP_ENGINE_PURE_PYTHON") == "1"


def built(name: str) -> ModuleType | None:
    """The compiled twin `name` (one of TWINS) when it was built, else None; whatever the environment says."""
    try:
        return importlib.import_module(f"gtp_engine.{name}")
    except ImportError:
        return None


def load(name: str) -> ModuleType | None:
    """The twin the package should use: built(name), unless GTP_ENGINE_PURE_PYTHON=1."""
    return None if PURE_PYTHON else built(name)


def describe() -> str:
    """Which twins run, for the engine's log and the benchmarks' reports."""
    if PURE_PYTHON:
        return "Python (GTP_ENGINE_PURE_PYTHON=1)"
    present = [name for name in TWINS if built(name) is not None]
    missing = [name for name in TWINS if name not in present]
    if not missing:
        return "compiled (" + ", ".join(f"{name}.c" for name in present) + ")"
    return "Python for " + ", ".join(missing) + " (not built)" + (
        "; compiled " + ", ".join(present) if present else "")
