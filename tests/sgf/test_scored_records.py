"""Real finished games scored under their own rules: the rules core's count of each final position, without the
stones GNU Go (the referee) calls dead, equals the recorded result (tools/score_records.py; the fixtures are
described in scored_games/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_process import gnugo_path

from gtp_engine import sgf_io
from gtp_engine.game import Rules, format_result
from tools import score_records

SCORED = Path(__file__).resolve().parent / "scored_games"
# Records whose count under the other scoring (area for territory rules, territory for area rules) is not their
# result: the rules decide them.
DECIDED_BY_THE_RULES = {"ogs_10212984", "ogs_10328609", "ogs_1056556", "ogs_11233478", "ogs_10293941",
                        "ogs_24791496", "ogs_22870053", "ogs_25357556"}
SEKI = {"ogs_135962", "ogs_6719973"}  # Japanese games with an eye in seki, which the count leaves out


@pytest.fixture(scope="module")
def scored():
    if gnugo_path() is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    referees = {}
    try:
        yield {Path(name).stem: (game, score_records.score(name, game, recorded, referees))
               for name, game, recorded in score_records.scored_records(str(SCORED), None, 100)}
    finally:
        for referee in referees.values():
            referee.close()


def test_every_fixture_is_a_scored_record_under_its_own_rules(scored):
    assert len(scored) == len(list(SCORED.glob("*.sgf"))) == 13
    assert {s.rules for _, s in scored.values()} == {"japanese", "korean", "aga", "new-zealand"}


def test_the_count_of_each_final_position_is_the_recorded_result(scored):
    wrong = {name: (s.recorded, s.count) for name, (_, s) in scored.items() if s.count != s.recorded}
    assert not wrong


def test_the_other_scoring_would_have_given_another_result(scored):
    for name in DECIDED_BY_THE_RULES:
        game, s = scored[name]
        other = Rules.named("chinese" if game.rules.scoring == "territory" else "japanese")
        record = sgf_io.load_sgf_file(SCORED / f"{name}.sgf")
        assert format_result(record.to_game(rules=other).score(s.dead)) != s.recorded, name


def test_eyes_in_seki_are_no_territory_under_japanese_rules(scored):
    for name in SEKI:
        game, s = scored[name]
        assert game.seki_stones(s.dead) and s.count == s.recorded
        untaxed = sgf_io.load_sgf_file(SCORED / f"{name}.sgf").to_game(rules=Rules("territory", "simple", tax="none"))
        assert format_result(untaxed.score(s.dead)) != s.recorded, name


def test_a_ko_the_record_plays_is_legal_only_under_its_own_ko_rule():
    record = sgf_io.load_sgf_file(SCORED / "ogs_12081362.sgf")
    record.to_game()  # japanese: simple ko
    with pytest.raises(sgf_io.SgfError, match="superko"):
        record.to_game(rules=Rules.named("chinese"))


def test_the_command_line_reports_the_agreement_by_rule_set(capsys):
    if gnugo_path() is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    assert score_records.main([str(SCORED), "--rules", "korean", "--rules", "aga"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("aga: 2 scored records; the count agrees with the result in 2 (100.0%)")
    assert lines[1].startswith("korean: 2 scored records; the count agrees with the result in 2 (100.0%)")
    assert score_records.main([str(SCORED), "--rules", "tromp-taylor"]) == 1
