"""What a user and CI meet first: the README's commands, the CI script, the console script, the node package."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the package depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [line.split("#")[0].strip() for line in block.strip().split("\n")]


def test_ci_runs_the_readme_test_command():
    install_and_start, install_and_test = readme_commands()[:2]
    assert install_and_start.startswith("pip install . && gtp-engine")
    assert install_and_test.startswith("pip install -e ")
    test_command = install_and_test.split("&&")[1].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().split("\n")[-1] == test_command
    assert "set -euo pipefail" in ci and os.access(ROOT / ".ci" / "run", os.X_OK)
    extras = re.search(r'pip install -e "\.\[(.*?)\]"', ci).group(1).split(",")
    assert set(extras) >= set(re.search(r'"\.\[(.*?)\]"', install_and_test).group(1).split(","))


def test_ci_runs_the_tests_without_torch_and_on_the_pure_python_path():
    """Besides the README's command, .ci/run holds the README's promise that the test extra alone runs every test
    outside tests/training (a venv's python runs them), and runs the compiled twins' Python references as a whole."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]"' in ci and re.search(r'/bin/python" -m pytest$', ci, re.M)
    assert "GTP_ENGINE_PURE_PYTHON=1 python -m pytest tests/unit" in ci


def test_console_script_and_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"gtp-engine": "gtp_engine.__main__:main"}
    from gtp_engine.__main__ import main

    assert callable(main)
    assert {"train", "test"} <= set(project["optional-dependencies"])


def test_node_client_is_pinned():
    package = json.loads((ROOT / "tests" / "js" / "package.json").read_text())
    lock = json.loads((ROOT / "tests" / "js" / "package-lock.json").read_text())
    version = package["dependencies"]["@sabaki/gtp"]
    assert lock["packages"]["node_modules/@sabaki/gtp"]["version"] == version
    assert "node_modules/" in (ROOT / ".gitignore").read_text().split("\n")
