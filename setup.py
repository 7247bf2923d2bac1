"""The compiled search core (gtp_engine/_tree_core.c; see gtp_engine/tree_core.py). Everything else is in pyproject.toml.

optional=True: where no C compiler is found the install goes on without it, and the search runs its Python
reference (slower, the same tree).
"""

import numpy
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "gtp_engine._tree_core", ["gtp_engine/_tree_core.c"], optional=True, include_dirs=[numpy.get_include()],
    # No fused multiply-add: the compiled arithmetic must round as Python's does, to grow the same tree.
    extra_compile_args=["-O2", "-ffp-contract=off"],
)])
