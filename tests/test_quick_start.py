"""The README's quick start as a new user runs it: `pip install .` (a real, non-editable install, shipped networks
included), then `gtp-engine` plays over pipes. The install goes into a fresh virtual environment that sees this
interpreter's packages, so that nothing is downloaded; it builds the package and its C extensions (about half a
minute)."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

from test_packaging import ROOT, readme_commands


def test_the_quick_start_installs_and_plays(tmp_path):
    install_and_start = readme_commands()[0]
    assert install_and_start.split("&&")[0].strip() == "pip install ."
    environment = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True).create(environment)
    python = environment / "bin" / "python"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "GTP_ENGINE_PURE_PYTHON")}
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                              str(ROOT)], capture_output=True, text=True, env=env, timeout=600)
    if install.returncode != 0 and "No module named 'setuptools'" in install.stderr:
        pytest.skip("this interpreter has no setuptools to build the package with")
    assert install.returncode == 0, install.stderr[-2000:]
    engine = environment / "bin" / "gtp-engine"
    # Run from elsewhere: the checkout must not be what gets imported.
    result = subprocess.run([str(engine), "--visits", "8"], input="boardsize 9\ngenmove b\nquit\n",
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    answers = [line for line in result.stdout.split("\n") if line]
    assert answers[0] == "=" and answers[1].startswith("= ") and answers[-1] == "="
    imported = subprocess.run([str(python), "-c", "import gtp_engine; print(gtp_engine.__file__)"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert Path(imported.stdout.strip()).is_relative_to(environment), imported.stdout
