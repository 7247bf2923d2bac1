"""tools/rules_consistency.py on the tiny test network and real 9x9 records: the report's shape and its arithmetic."""

from __future__ import annotations

import json

from engine_process import ROOT

from tools import rules_consistency

RECORDS = ROOT / "tests" / "training" / "fixtures"  # real 9x9 games


def test_the_report_compares_every_rule_set_with_chinese_at_the_same_and_the_adjusted_komi(tiny_onnx_model, capsys):
    assert rules_consistency.main([str(tiny_onnx_model), str(RECORDS), "--size", "9", "--positions", "6",
                                   "--per-game", "2", "--val-fraction", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["positions"] == 6
    for mode in ("as given", "fed"):
        rows = report[mode]
        assert set(rows) == set(rules_consistency.RULES)
        assert all(value == 0 for key, value in rows["chinese"].items() if key != "winrate")
        for row in rows.values():
            assert 0 <= row["mean_abs"] <= row["max_abs"] <= 1
            assert abs(row["mean"]) <= row["mean_abs"]
            assert 0 <= row["adjusted_mean_abs"] <= row["adjusted_max_abs"] <= 1
        # Area rule sets have no point to adjust: both columns are the same comparison.
        assert rows["aga"]["adjusted_max_abs"] == rows["aga"]["max_abs"]
