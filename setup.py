"""The compiled twins (gtp_engine/_tree_core.c, _rules_core.c, _features_core.c, _rollout_core.c; see
gtp_engine/native.py).
Everything else is in pyproject.toml.

optional=True: where no C compiler is found the install goes on without them, and the engine runs their Python
references (slower, the same boards and trees).
"""

import numpy
from setuptools import Extension, setup

# No fused multiply-add: the compiled arithmetic must round as Python's does, to grow the same tree.
FLAGS = ["-O2", "-ffp-contract=off"]

setup(ext_modules=[
    Extension("gtp_engine._tree_core", ["gtp_engine/_tree_core.c"], optional=True,
              include_dirs=[numpy.get_include()], extra_compile_args=FLAGS),
    Extension("gtp_engine._rules_core", ["gtp_engine/_rules_core.c"], depends=["gtp_engine/_position.h"],
              optional=True, extra_compile_args=FLAGS),
    Extension("gtp_engine._features_core", ["gtp_engine/_features_core.c"], depends=["gtp_engine/_position.h"],
              optional=True, extra_compile_args=FLAGS),
    Extension("gtp_engine._rollout_core", ["gtp_engine/_rollout_core.c"], optional=True, extra_compile_args=FLAGS),
])
