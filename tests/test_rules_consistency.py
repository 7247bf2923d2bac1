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


def test_outcomes_score_both_inputs_on_the_games_played_under_the_rules(tiny_onnx_model, capsys):
    assert rules_consistency.main([str(tiny_onnx_model), str(RECORDS), "--size", "9", "--outcomes", "japanese",
                                   "--per-game", "3", "--val-fraction", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["games"], report["positions"]) == (3, 9)  # the three Japanese records, none of the Chinese
    whole = report["parts"]["0-1"]
    assert whole["positions"] == 9 == sum(row["positions"] for name, row in report["parts"].items() if name != "0-1")
    for row in report["parts"].values():
        if row["positions"]:
            assert row["log_loss_given"] > 0 and row["log_loss_chinese"] > 0
            assert abs(row["difference"] - (row["log_loss_given"] - row["log_loss_chinese"])) <= 2e-4
            assert row["interval"][0] <= row["difference"] + 1e-4 and row["difference"] - 1e-4 <= row["interval"][1]


def test_outcomes_without_such_games_is_a_usage_error(tiny_onnx_model, capsys):
    try:
        rules_consistency.main([str(tiny_onnx_model), str(RECORDS), "--size", "9", "--outcomes", "korean",
                                "--val-fraction", "1"])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("no error")
    assert "no held-out 9x9 game under korean rules" in capsys.readouterr().err


def test_symmetry_spread_compares_each_orientation_with_the_board_as_it_is(tiny_onnx_model, capsys):
    assert rules_consistency.main([str(tiny_onnx_model), str(RECORDS), "--size", "9", "--positions", "6",
                                   "--per-game", "2", "--val-fraction", "1", "--symmetry-spread", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["positions"], report["symmetries"]) == (6, 8)
    assert 0 < report["mean_abs"] <= report["max_abs"] <= 1  # a random network is not symmetric
    assert 0 <= report["beyond_0.15"] <= report["beyond_0.10"] <= 1
