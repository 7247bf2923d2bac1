"""Query parsing and KataGo config keys, without an engine: turns and sides to move, locations, komi, handicap,
rules, settings from config files, -override-config and overrideSettings."""

from __future__ import annotations

import pytest

from gtp_engine import coords, katago_config
from gtp_engine.analysis import settings as settings_lib
from gtp_engine.analysis.query import QueryError, parse_query
from gtp_engine.analysis.settings import AnalysisSettings
from gtp_engine.board import BLACK, WHITE

DEFAULTS = AnalysisSettings()


def query(**fields):
    return {"id": "q", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, **fields}


def test_turns_and_the_side_to_move():
    q, warnings = parse_query(query(moves=[["B", "E5"], ["B", "C3"], ["W", "pass"]], analyzeTurns=[0, 1, 2, 3]),
                              DEFAULTS)
    assert warnings == []
    assert [t.number for t in q.turns] == [0, 1, 2, 3]
    # turn 0: the first move's player; then the opponent of the last mover, as KataGo (not the next move's player)
    assert [t.state.to_play for t in q.turns] == [BLACK, WHITE, WHITE, BLACK]
    assert [t.state.move_number for t in q.turns] == [0, 1, 2, 3]
    last, = parse_query(query(moves=[["B", "E5"]]), DEFAULTS)[0].turns  # default: the last turn
    assert last.number == 1 and last.state.to_play == WHITE


def test_locations_in_both_forms_and_initial_stones():
    q, _ = parse_query(query(initialStones=[["B", "(0,0)"], ["W", "j1"]], moves=[["W", "(4,4)"]]), DEFAULTS)
    state = q.turns[0].state
    g = coords.grid(9)
    assert state.board.colors[coords.from_gtp(g, "A9")] == BLACK  # (x, y) counts rows from the top
    assert state.board.colors[coords.from_gtp(g, "J1")] == WHITE
    assert state.moves == [(WHITE, coords.from_gtp(g, "E5"))]


def test_komi_defaults_and_handicap():
    assert parse_query(query(), DEFAULTS)[0].turns[0].state.komi == 7.5
    assert parse_query(query(rules="japanese"), DEFAULTS)[0].turns[0].state.komi == 6.5
    q, _ = parse_query(query(initialStones=[["B", "C3"], ["B", "G7"]], initialPlayer="W"), DEFAULTS)
    assert q.turns[0].state.handicap_stones == 2 and q.turns[0].state.to_play == WHITE
    assert q.turns[0].state.komi == 0.5  # a handicap game's komi; its rules' white handicap bonus comes on top
    for rules in ("japanese", "aga"):
        q, _ = parse_query(query(rules=rules, initialStones=[["B", "C3"], ["B", "G7"]]), DEFAULTS)
        assert q.turns[0].state.komi == 0.5
    q, _ = parse_query(query(komi=6, initialStones=[["B", "C3"], ["B", "G7"]]), DEFAULTS)
    assert q.turns[0].state.komi == 6  # the query's komi wins


def test_rules_names_json_and_handicap_bonus():
    assert parse_query(query(rules="new zealand"), DEFAULTS)[0].turns[0].state.rules.name == "new-zealand"
    rules = parse_query(query(rules={"ko": "SIMPLE", "scoring": "TERRITORY", "suicide": False}),
                        DEFAULTS)[0].turns[0].state.rules
    assert (rules.scoring, rules.ko) == ("territory", "simple")
    bonus = parse_query(query(whiteHandicapBonus="N-1"), DEFAULTS)[0].turns[0].state.rules
    assert bonus.white_handicap_bonus == "N-1" and bonus.scoring == "area"
    with pytest.raises(QueryError) as error:
        parse_query(query(whiteHandicapBonus="2"), DEFAULTS)
    assert error.value.field == "whiteHandicapBonus"


def test_settings_from_fields_and_override_settings():
    q, warnings = parse_query(query(maxVisits=7, analysisPVLen=99, overrideSettings={
        "maxTime": 2, "wideRootNoise": 0.25, "reportAnalysisWinratesAs": "sidetomove", "unknownKey": 1}), DEFAULTS)
    s = q.settings
    assert (s.max_visits, s.pv_length, s.max_time, s.report_as) == (7, settings_lib.MAX_PV_LENGTH, 2.0, "SIDETOMOVE")
    assert s.policy_temperature == pytest.approx(2.0)  # 1 + 4 * 0.25
    assert warnings == [("overrideSettings", "unknown or unused setting 'unknownKey' ignored")]


def test_config_files_and_overrides(tmp_path):
    path = tmp_path / "a.cfg"
    path.write_text("maxVisits = 80   # comment\n\n# only a comment\nlogDir = logs\nnumSearchThreads=4\n")
    values = katago_config.read_config_file(path)
    assert values == {"maxVisits": "80", "logDir": "logs", "numSearchThreads": "4"}
    values.update(katago_config.parse_overrides("maxVisits=90, homeDataDir=~/.katrain"))
    settings, ignored = settings_lib.apply(AnalysisSettings(), values)
    assert (settings.max_visits, settings.search_threads) == (90, 4)
    assert ignored == ["logDir", "homeDataDir"]
    _, ignored = settings_lib.apply(AnalysisSettings(), {"numSearchThreads": 2}, per_query=True)
    assert ignored == ["numSearchThreads"]  # engine-only in a query
    path.write_text("maxVisits 80\n")
    with pytest.raises(settings_lib.SettingError, match="line 1"):
        katago_config.read_config_file(path)
    with pytest.raises(settings_lib.SettingError, match="maxVisits"):
        settings_lib.apply(AnalysisSettings(), {"maxVisits": "many"})
    with pytest.raises(settings_lib.SettingError, match="rules"):
        settings_lib.apply(AnalysisSettings(), {"rules": "backgammon"})
    with pytest.raises(settings_lib.SettingError, match="cannot read"):
        katago_config.read_config_file(tmp_path / "missing.cfg")
