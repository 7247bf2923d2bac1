"""tools/bench_visit_cost.py: a short run reports the search's cost per visit beside the network's, its parts, and the
pipelined search."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from gtp_engine import native, position  # noqa: E402
from tools import bench_visit_cost  # noqa: E402


def test_a_short_run_reports_the_costs_their_ratio_and_the_parts(capsys):
    bench_visit_cost.main(["--sizes", "9", "--playouts", "24", "--repeat", "1", "--seconds", "0.3"])
    lines = capsys.readouterr().out.splitlines()
    size, playouts, search, network, ratio = lines[1].split()
    assert (size, playouts) == ("9x9", "24")
    assert float(search) > 0 and float(network) > 0
    assert float(ratio) == pytest.approx(float(search) / float(network), abs=0.006)
    parts = [line.strip() for line in lines[2:]]
    for name in ("copy + play of the descent", "features.encode", "NetworkEvaluator less forward, encode",
                 "CachedEvaluator less inner"):
        assert any(line.startswith(name) and line.endswith("us/position") for line in parts)
    expected_kind = "compiled" if position.IMPLEMENTATIONS.compiled is not None else "GameState"
    assert parts[-3].endswith(f"plies per descent; leaf positions: {expected_kind})")
    assert parts[-1] == f"compiled twins: {native.describe()}"
    pipelined = parts[-2].split()  # "... X us/visit in the search thread beside Y us/position of network; Z visits/s"
    assert parts[-2].startswith("pipelined search, the engine defaults")
    thread, forward = float(pipelined[pipelined.index("us/visit") - 1]), float(pipelined[pipelined.index("beside") + 1])
    rate, cores = float(pipelined[-5].replace(",", "")), float(pipelined[-2])
    assert thread > 0 and forward > 0 and rate > 0 and 0 < cores <= 64
    # the replayed search grew the very tree of the measured one (the tool raises otherwise)
    alone = next(line for line in parts if line.startswith("search without the network between"))
    assert alone.endswith("us/visit") and float(alone.split()[-2]) > 0
    # measured again beside another process that runs the network: the figures and their factors over alone
    beside = next(line for line in parts if line.startswith("beside a busy core: search"))
    found = re.search(r"search +([\d.]+) us/visit \(([\d.]+)x\); network ([\d.]+) us/position \(([\d.]+)x\)$", beside)
    assert found, beside
    search_beside, search_factor, network_beside, network_factor = map(float, found.groups())
    assert search_beside > 0 and network_beside > 0
    assert search_factor == pytest.approx(search_beside / float(search), rel=0.02, abs=0.006)
    assert network_factor == pytest.approx(network_beside / float(network), rel=0.02, abs=0.006)
