"""Compiled twins: the C extensions that do, faster, exactly what a Python reference in this package does, and the
one way a module picks which of the two it runs.

Terms:
- twin: a C extension built with the package when a C compiler is present (setup.py; optional, so an install
  without one succeeds). _tree_core.c is tree_core.py's node fields, selection, descent, candidate moves, expansion
  and backup; _rules_core.c is the board's and the game's play and legality (board.py, game.py), and the compiled
  search positions whose reference is GameState itself (position.py); _features_core.c is features.py's planes,
  global inputs, position key and decoding; _rollout_core.c is rollout.py's candidates and their feature indices.
- implementation: the functions of a module that have a twin, as one record of the module's own type
  (board.BoardFunctions, game.GameFunctions, features.FeatureFunctions, rollout.RolloutFunctions, tree_core.Core,
  position.PositionKind),
  built once from the Python reference and once from the twin.
- implementations (Implementations): a module's two, python and compiled, the latter None where the twin is not
  built or GTP_ENGINE_PURE_PYTHON=1; chosen is compiled where there is one, else python.
- pure Python: GTP_ENGINE_PURE_PYTHON=1 in the environment when the package is imported makes every module run its
  Python reference even where a twin is built (to measure it, or to rule the C code out).

The one mechanism: each such module sets IMPLEMENTATIONS = implementations(twin name, its Python record, a function
that makes the compiled record from the loaded twin) and binds chosen's functions to its own names once, at import
(board's _play_unchecked, game's PLAY_LINE, features' encode, tree_core's CORE, which a new tree holds), so that no
call pays for the choice (position.kind_for alone picks per tree, between python and compiled, by the evaluator).
Tests hold compiled to python, bit for bit, through IMPLEMENTATIONS, and make a module run the other one by
monkeypatching those names.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Generic, TypeVar

TWINS = ("_tree_core", "_rules_core", "_features_core", "_rollout_core")
PURE_PYTHON = os.environ.get("GTP_ENGINE_PURE_PYTHON") == "1"

T = TypeVar("T")


@dataclass(frozen=True)
class Implementations(Generic[T]):
    """A module's implementation in Python and in its twin (see the module docstring)."""

    python: T
    compiled: T | None

    @property
    def chosen(self) -> T:
        """What the module runs: compiled where there is one."""
        return self.python if self.compiled is None else self.compiled


def implementations(name: str, python: T, compiled: Callable[[ModuleType], T | None]) -> Implementations[T]:
    """python, and compiled(twin) where the twin `name` (one of TWINS) loads (see load); compiled may itself give
    None where the implementation needs more than that twin."""
    twin = load(name)
    return Implementations(python, None if twin is None else compiled(twin))


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
