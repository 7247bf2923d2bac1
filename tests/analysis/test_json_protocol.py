"""Transcripts of the JSON analysis engine over pipes, on the real onnxruntime and the tiny test network: every
query field, actions, reports during search, terminate, errors and warnings, the reporting side, many queries at
once, and the end of input."""

from __future__ import annotations

import json

import pytest
from analysis_support import position
from engine_process import start_engine

from gtp_engine import coords


def test_actions_are_echoed_with_their_answers(analysis):
    engine = analysis()
    engine.send({"id": "v", "action": "query_version"})
    version = engine.next()
    assert version["id"] == "v" and version["action"] == "query_version"
    assert version["version"] and version["git_hash"]
    engine.send({"id": "c", "action": "clear_cache"})
    assert engine.next() == {"id": "c", "action": "clear_cache"}
    engine.send({"id": "m", "action": "query_models"})
    models = engine.next()["models"]
    assert len(models) == 1 and models[0]["name"].endswith("tiny.onnx")
    engine.send({"id": "t", "action": "terminate_all"})
    assert engine.next() == {"id": "t", "action": "terminate_all"}
    assert engine.close() == 0
    assert all(json.loads(line) is not None for line in engine.raw.splitlines())  # stdout carries JSON lines only


def test_a_result_has_every_field_asked_for(analysis):
    engine = analysis()
    moves = ["E5", "C3", "G7"]
    result = engine.ask(position("a", moves, maxVisits=40, includeOwnership=True, includePolicy=True,
                                 includeMovesOwnership=True, includePVVisits=True, analysisPVLen=3))
    assert result["turnNumber"] == 3 and result["isDuringSearch"] is False
    root = result["rootInfo"]
    assert root["visits"] == 40 and root["currentPlayer"] == "W"
    assert 0 <= root["winrate"] <= 1 and root["scoreStdev"] >= 0
    infos = result["moveInfos"]
    assert [m["order"] for m in infos] == list(range(len(infos)))
    assert sum(m["visits"] for m in infos) == 39  # every visit but the root's own evaluation
    for m in infos:
        assert {"move", "visits", "edgeVisits", "winrate", "scoreLead", "scoreMean", "scoreStdev", "prior",
                "utility", "lcb", "order", "pv", "pvVisits", "ownership"} <= set(m)
        assert m["move"] not in moves and m["pv"][0] == m["move"] and 1 <= len(m["pv"]) <= 3
        assert m["pvVisits"][0] == m["visits"] and len(m["pvVisits"]) == len(m["pv"])
        assert m["scoreMean"] == m["scoreLead"] and len(m["ownership"]) == 81
    assert len(result["ownership"]) == 81 and all(-1 <= v <= 1 for v in result["ownership"])
    policy = result["policy"]
    assert len(policy) == 82
    g = coords.grid(9)
    for vertex in moves:  # occupied points are illegal: -1
        assert policy[g.flat(coords.from_gtp(g, vertex))] == -1
    assert sum(p for p in policy if p >= 0) == pytest.approx(1.0, abs=1e-3)


def test_analyze_turns_initial_stones_and_initial_player(analysis):
    engine = analysis()
    query = position("t", ["D4", "F6"], analyzeTurns=[0, 1, 2], initialStones=[["B", "C3"], ["W", "G7"]],
                     initialPlayer="B", maxVisits=10)
    engine.send(query)
    finals, seen = engine.until_final("t", count=3)
    assert not [r for r in seen if "error" in r]
    by_turn = {r["turnNumber"]: r for r in finals}
    assert sorted(by_turn) == [0, 1, 2]
    assert [by_turn[t]["rootInfo"]["currentPlayer"] for t in (0, 1, 2)] == ["B", "W", "B"]
    played = {m["move"] for r in finals for m in r["moveInfos"]}
    assert not played & {"C3", "G7"}  # setup stones are on the board in every turn
    assert "D4" not in {m["move"] for m in by_turn[1]["moveInfos"]}

    white_first = engine.ask(position("w", [], initialPlayer="W", maxVisits=5))
    assert white_first["rootInfo"]["currentPlayer"] == "W"


def test_rules_by_name_and_json_and_a_rectangular_board(analysis):
    engine = analysis()
    for rules in ("japanese", "tromp-taylor", "new zealand", "aga",
                  {"ko": "SITUATIONAL", "scoring": "AREA", "suicide": False, "tax": "NONE", "hasButton": False,
                   "whiteHandicapBonus": "N"}):
        result = engine.ask({**position("r", ["C3"], maxVisits=5), "rules": rules})
        assert result["rootInfo"]["visits"] == 5
    result = engine.ask({**position("rect", ["C3"], maxVisits=5, includeOwnership=True, includePolicy=True),
                         "boardXSize": 9, "boardYSize": 7})
    assert len(result["ownership"]) == 63 and len(result["policy"]) == 64


def test_katago_rules_played_only_approximately_warn_and_run(analysis):
    engine = analysis()
    for rules in ("aga-button", {"scoring": "AREA", "hasButton": True}, {"ko": "SPIGHT"}):
        engine.send({**position("s", ["C3"], maxVisits=5), "rules": rules})
        finals, seen = engine.until_final("s")
        assert [r["field"] for r in seen if "warning" in r] == ["rules"], rules
        assert finals[0]["rootInfo"]["visits"] == 5
    for rules in ("bga", "chinese_ogs", "Tromp Taylor", "stone_scoring", {"scoring": "AREA", "tax": "ALL"},
                  {"ko": "SIMPLE", "scoring": "TERRITORY", "tax": "SEKI", "suicide": False,
                   "friendlyPassOk": True}):
        engine.send({**position("e", ["C3"], maxVisits=5), "rules": rules})
        finals, seen = engine.until_final("e")
        assert seen == finals, rules  # the same rules: no warning


def test_a_record_is_replayed_where_only_superko_forbids_a_move(analysis):
    # White's D5 at move 3 retakes a ko and repeats the position after Black's E5 a whole cycle earlier.
    engine = analysis()
    engine.send(position("sk", ["E5", "pass", "pass", "D5"], initialStones=[
        ["B", "C5"], ["B", "D6"], ["B", "D4"], ["W", "D5"], ["W", "E6"], ["W", "E4"], ["W", "F5"]], maxVisits=5))
    finals, seen = engine.until_final("sk")
    warnings = [r for r in seen if "warning" in r]
    assert [w["field"] for w in warnings] == ["moves"] and "superko" in warnings[0]["warning"]
    assert finals[0]["rootInfo"]["currentPlayer"] == "B" and finals[0]["rootInfo"]["visits"] == 5


def test_each_query_searches_a_fresh_tree(analysis):
    engine = analysis("-analysis-threads", "1")
    assert engine.ask(position("big", ["E5", "C3"], maxVisits=60))["rootInfo"]["visits"] == 60
    assert engine.ask(position("small", ["E5", "C3"], maxVisits=8))["rootInfo"]["visits"] == 8


def test_side_to_move_after_handicap_stones_and_at_turn_zero(analysis):
    engine = analysis()
    handicap = engine.ask(position("h", [], initialStones=[["B", "C3"], ["B", "G7"]], maxVisits=5))
    assert handicap["rootInfo"]["currentPlayer"] == "W"
    engine.send(position("ip", ["E5"], initialPlayer="W", analyzeTurns=[0, 1, 1], maxVisits=5))
    finals, _ = engine.until_final("ip", count=2)
    assert {r["turnNumber"]: r["rootInfo"]["currentPlayer"] for r in finals} == {0: "W", 1: "W"}
    engine.send(position("next", [], maxVisits=5))
    _, seen = engine.until_final("next")
    assert not [r for r in seen if r.get("id") == "ip"]  # a turn listed twice is analysed once


def test_reporting_side_black_white_and_side_to_move(analysis):
    engine = analysis("-analysis-threads", "1")
    moves = ["E5"]  # White to move
    results = {side: engine.ask(position(side, moves, maxVisits=30, includeOwnership=True,
                                         overrideSettings={"reportAnalysisWinratesAs": side}))
               for side in ("BLACK", "WHITE", "SIDETOMOVE")}
    black, white, mover = (results[s] for s in ("BLACK", "WHITE", "SIDETOMOVE"))
    assert black["rootInfo"]["winrate"] == pytest.approx(1 - white["rootInfo"]["winrate"])
    assert black["rootInfo"]["scoreLead"] == pytest.approx(-white["rootInfo"]["scoreLead"])
    assert mover["rootInfo"] == white["rootInfo"]
    assert black["ownership"] == [-v for v in white["ownership"]]
    for b, w in zip(black["moveInfos"], white["moveInfos"]):
        assert b["move"] == w["move"] and b["winrate"] == pytest.approx(1 - w["winrate"])
        assert b["utility"] == pytest.approx(-w["utility"])


def test_avoid_and_allow_moves(analysis):
    engine = analysis()
    avoided = ["E5", "D4", "F6", "pass"]
    result = engine.ask(position("avoid", [], maxVisits=60, avoidMoves=[
        {"player": "B", "moves": avoided, "untilDepth": 1}]))
    assert not {m["move"] for m in result["moveInfos"]} & set(avoided)
    result = engine.ask(position("allow", [], maxVisits=30, allowMoves=[
        {"player": "B", "moves": ["C3", "G7"], "untilDepth": 1}]))
    assert {m["move"] for m in result["moveInfos"]} <= {"C3", "G7"}


def test_override_settings_and_unknown_fields_warn_but_run(analysis):
    engine = analysis()
    engine.send(position("o", ["E5"], maxVisits=20, someNewField=1, includeOwnershipStdev=True,
                         overrideSettings={"wideRootNoise": 0.04, "maxTime": 30, "playoutDoublingAdvantage": 0.5,
                                           "numAnalysisThreads": 3}))
    finals, seen = engine.until_final("o")
    warnings = [r for r in seen if "warning" in r]
    assert {w["field"] for w in warnings} == {"someNewField", "includeOwnershipStdev", "overrideSettings"}
    assert all(w["id"] == "o" for w in warnings)
    assert sum(w["field"] == "overrideSettings" for w in warnings) == 2  # the unknown key and the engine-only one
    assert finals[0]["rootInfo"]["visits"] == 20


def test_human_profile_answers_the_levels_move_distribution(analysis):
    """humanSLProfile picks the nearest strength level; its distribution comes as humanPolicy, in the policy's
    layout, for includeHumanPolicy and (as KaTrain asks) for includePolicy; stderr says once what it is."""
    engine = analysis()
    result = engine.ask(position("h", ["E5", "C3"], maxVisits=40, includeHumanPolicy=True,
                                 overrideSettings={"humanSLProfile": "rank_12k"}))
    human = result["humanPolicy"]
    assert "policy" not in result and len(human) == 82
    assert human[coords.grid(9).flat(coords.from_gtp(coords.grid(9), "E5"))] == -1  # occupied: illegal
    assert sum(p for p in human if p > 0) == pytest.approx(1.0, abs=1e-4)
    visited = {info["move"] for info in result["moveInfos"]}
    g = coords.grid(9)
    assert {coords.to_gtp(g, g.from_flat(i)) for i, p in enumerate(human) if p > 0} <= visited
    assert len([p for p in human if p > 0]) <= 10
    katrain = engine.ask(position("k", ["E5"], maxVisits=20, includePolicy=True,
                                  overrideSettings={"humanSLProfile": "proyear_1990"}))
    best = katrain["moveInfos"][0]["move"]
    assert [coords.to_gtp(g, g.from_flat(i)) for i, p in enumerate(katrain["humanPolicy"]) if p > 0] == [best]
    plain = engine.ask(position("p", [], maxVisits=5, includePolicy=True))
    assert "humanPolicy" not in plain
    engine.send(position("w", [], maxVisits=5, includeHumanPolicy=True))
    _, seen = engine.until_final("w")
    assert [r["field"] for r in seen if "warning" in r] == ["includeHumanPolicy"]
    assert engine.close() == 0
    assert engine.stderr_text().count("not a human-trained model") == 1


def test_max_time_ends_a_search_that_has_visits_left(analysis):
    engine = analysis()
    result = engine.ask(position("t", [], maxVisits=10_000_000, overrideSettings={"maxTime": 0.5}))
    assert 1 <= result["rootInfo"]["visits"] < 10_000_000


BAD_QUERIES = [
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9}', "boardYSize"),
    ('{"id": "x", "moves": [["B", "E5"], ["W", "E5"]], "rules": "chinese", "boardXSize": 9, "boardYSize": 9}',
     "moves"),
    ('{"id": "x", "moves": [["B", "Z9"]], "rules": "chinese", "boardXSize": 9, "boardYSize": 9}', "moves"),
    ('{"id": "x", "moves": [["X", "E5"]], "rules": "chinese", "boardXSize": 9, "boardYSize": 9}', "moves"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 29, "boardYSize": 29}', "boardXSize"),
    ('{"id": "x", "moves": [], "rules": "backgammon", "boardXSize": 9, "boardYSize": 9}', "rules"),
    ('{"id": "x", "moves": [], "rules": {"scoring": "AREA", "ko": "NONE"}, "boardXSize": 9, "boardYSize": 9}',
     "rules"),
    ('{"id": "x", "moves": [], "rules": "chinese", "komi": 7.3, "boardXSize": 9, "boardYSize": 9}', "komi"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, "analyzeTurns": [1]}',
     "analyzeTurns"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, "maxVisits": 0}',
     "maxVisits"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, "includePolicy": "yes"}',
     "includePolicy"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, '
     '"avoidMoves": [{"player": "B", "moves": ["A1"]}]}', "avoidMoves"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, '
     '"overrideSettings": {"reportAnalysisWinratesAs": "GREEN"}}', "overrideSettings"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, '
     '"initialStones": [["B", "C3"], ["W", "C3"]]}', "initialStones"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, '
     '"overrideSettings": {"humanSLProfile": "rank_42x"}}', "overrideSettings"),
    ('{"id": "x", "moves": [], "rules": "chinese", "boardXSize": 9, "boardYSize": 9, '
     '"includeHumanPolicy": 1}', "includeHumanPolicy"),
]


def test_a_bad_query_gets_an_error_naming_its_id_and_field(analysis):
    engine = analysis()
    for i, (line, field) in enumerate(BAD_QUERIES):
        engine.send(line.replace('"id": "x"', f'"id": "x{i}"'))
        response = engine.next()
        assert response["id"] == f"x{i}" and response["field"] == field and response["error"], (line, response)
    engine.ask(position("after", [], maxVisits=3))  # the engine goes on


def test_lines_that_are_not_queries_never_end_the_engine(analysis):
    engine = analysis()
    for line in ("not json", "[1, 2]", "42", '{"moves": []}', '{"id": 7}', '{"id": "a", "action": "dance"}',
                 '{"id": "b", "action": "terminate"}', '{"id": "n", "komi": NaN}', "\x00\xff"):
        engine.send(line)
        response = engine.next()
        assert "error" in response, (line, response)
    assert engine.ask(position("ok", [], maxVisits=3))["rootInfo"]["visits"] == 3
    assert engine.close() == 0


def test_reports_during_search_then_terminate(analysis):
    engine = analysis("-analysis-threads", "1")
    engine.send(position("p", ["E5"], maxVisits=10_000_000, reportDuringSearchEvery=0.05))
    reports = []
    while len(reports) < 3:
        response = engine.next()
        assert response["id"] == "p" and response["isDuringSearch"] is True, response
        reports.append(response)
    engine.send({"id": "stop", "action": "terminate", "terminateId": "p"})
    finals, seen = engine.until_final("p")
    assert {"id": "stop", "action": "terminate", "terminateId": "p"} in seen
    visits = [r["rootInfo"]["visits"] for r in reports + seen if r.get("id") == "p"]
    assert visits == sorted(visits) and finals[0]["rootInfo"]["visits"] < 10_000_000
    assert finals[0]["moveInfos"]  # a terminated search reports what it found


def test_first_report_after_delays_the_first_report(analysis):
    engine = analysis()
    engine.send(position("f", [], maxVisits=50, reportDuringSearchEvery=0.01, firstReportDuringSearchAfter=1000))
    finals, seen = engine.until_final("f")
    assert seen == finals  # the search ended long before its first report was due


def test_first_report_after_alone_asks_for_one_report(analysis):
    engine = analysis("-analysis-threads", "1")
    engine.send(position("one", [], maxVisits=100, firstReportDuringSearchAfter=0))
    finals, seen = engine.until_final("one")
    during = [r for r in seen if r.get("isDuringSearch")]
    assert len(during) == 1 and during[0]["rootInfo"]["visits"] < 100 and finals[0]["rootInfo"]["visits"] == 100


def test_terminate_by_turn_numbers_and_terminate_all(analysis):
    engine = analysis("-analysis-threads", "1")
    engine.send(position("g", ["E5", "C3"], analyzeTurns=[0, 1, 2], maxVisits=10_000_000,
                         reportDuringSearchEvery=0.05))
    engine.send({"id": "t1", "action": "terminate", "terminateId": "g", "turnNumbers": [1, 2]})
    seen = []
    while not any(r.get("action") == "terminate" for r in seen):
        seen.append(engine.next())
    # Turn 0 runs (the highest priority ties go to the first turn); 1 and 2 waited and answer noResults. Wait for
    # a report of turn 0 too: terminated before its search started (a slow network load), it would have none.
    no_results, running = [], False
    while len(no_results) < 2 or not running:
        response = engine.next()
        if response.get("noResults"):
            no_results.append(response)
        running = running or (response.get("turnNumber") == 0 and response.get("isDuringSearch") is True)
    assert sorted(r["turnNumber"] for r in no_results) == [1, 2]
    assert all(r["isDuringSearch"] is False and r["id"] == "g" for r in no_results)
    engine.send({"id": "all", "action": "terminate_all"})
    finals, seen = engine.until_final("g")
    assert finals[0]["turnNumber"] == 0 and finals[0]["rootInfo"]["visits"] >= 1


def test_priority_orders_the_waiting_queries(analysis):
    engine = analysis("-analysis-threads", "1")
    engine.send(position("busy", [], maxVisits=10_000_000))
    engine.send(position("low", ["E5"], maxVisits=5, priority=-1))
    engine.send(position("mid", ["C3"], maxVisits=5))
    engine.send(position("high", ["G7"], maxVisits=5, priority=10))
    engine.send({"id": "t", "action": "terminate", "terminateId": "busy"})
    order = []
    while len(order) < 4:
        response = engine.next()
        if response.get("isDuringSearch") is False:
            order.append(response["id"])
    assert order == ["busy", "high", "mid", "low"]


def test_many_queries_at_once(analysis):
    engine = analysis("-analysis-threads", "2")
    ids = [f"q{i}" for i in range(24)]
    for i, query_id in enumerate(ids):
        engine.send(position(query_id, ["E5", "C3", "G7"][: i % 4], maxVisits=8))
    results = {}
    while len(results) < len(ids):
        response = engine.next()
        assert "error" not in response, response
        assert response["id"] not in results
        results[response["id"]] = response
    assert all(results[i]["rootInfo"]["visits"] == 8 for i in ids)


def test_end_of_input_finishes_the_queued_queries(analysis):
    engine = analysis("-analysis-threads", "1")
    for i in range(5):
        engine.send(position(f"e{i}", ["E5"] * (i % 2), maxVisits=20))
    assert engine.close(timeout=120) == 0
    answered = []
    while (response := engine.next()) is not None:
        answered.append(response["id"])
    assert sorted(answered) == [f"e{i}" for i in range(5)]


def test_a_client_that_stops_reading_ends_the_engine_quietly(tiny_onnx_model, tmp_path):
    # KaTrain going away closes its end of our stdout: the answers that follow cannot be written, and the engine
    # ends at the end of its input without a traceback.
    process = start_engine(["analysis", "-model", str(tiny_onnx_model)], cwd=tmp_path)
    process.stdin.write(b'{"id": "v", "action": "query_version"}\n')
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == "v"
    process.stdout.close()
    process.stdin.write((json.dumps(position("after", [], maxVisits=20)) + "\n").encode())
    process.stdin.write(b'{"id": "v2", "action": "query_version"}\n')
    process.stdin.close()
    process.wait(120)
    stderr = process.stderr.read().decode()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr, stderr


def test_quit_without_waiting_drops_the_queue(analysis):
    engine = analysis("-analysis-threads", "1", "-quit-without-waiting")
    engine.send(position("long", [], maxVisits=10_000_000))
    for i in range(3):
        engine.send(position(f"w{i}", [], maxVisits=10_000_000))
    engine.send({"id": "v", "action": "query_version"})
    assert engine.next()["action"] == "query_version"  # every line before the end of input was read
    assert engine.close(timeout=120) == 0


def test_a_katago_config_file_and_overrides(analysis, tmp_path):
    config = tmp_path / "analysis.cfg"
    config.write_text("# KataGo style\nmaxVisits = 12\nreportAnalysisWinratesAs = WHITE\nnnCacheSizePowerOfTwo = 20\n"
                      "numAnalysisThreads = 12\nlogDir = analysis_logs\nrules = japanese  # queries without rules\n")
    engine = analysis("-config", str(config), "-override-config", "homeDataDir=/tmp/x,analysisPVLen=2")
    result = engine.ask({k: v for k, v in position("c", ["E5"]).items() if k not in ("maxVisits", "rules")})
    assert result["rootInfo"]["visits"] == 12
    assert all(len(m["pv"]) <= 2 for m in result["moveInfos"])
    black = engine.ask({**{k: v for k, v in position("c2", ["E5"]).items() if k != "rules"}, "maxVisits": 12,
                        "overrideSettings": {"reportAnalysisWinratesAs": "BLACK"}})
    assert black["rootInfo"]["winrate"] == pytest.approx(1 - result["rootInfo"]["winrate"])
    engine.close()
    stderr = engine.stderr_text()
    assert "nnCacheSizePowerOfTwo" in stderr and "logDir" in stderr and "homeDataDir" in stderr


def test_a_katago_network_falls_back_to_the_shipped_one_with_a_warning(tiny_onnx_model, tmp_path):
    from analysis_support import AnalysisEngine

    katago_net = tmp_path / "kata1-b18.bin.gz"
    katago_net.write_bytes(b"not ours")
    engine = AnalysisEngine(["-model", str(katago_net)])
    try:
        engine.send({"id": "v", "action": "query_version"})
        assert engine.next()["id"] == "v"
    finally:
        engine.close()
    assert "KataGo network" in engine.stderr_text()


def test_a_missing_model_file_is_refused_at_start(tmp_path):
    from analysis_support import AnalysisEngine

    engine = AnalysisEngine(["-model", str(tmp_path / "nowhere.onnx")])
    assert engine.process.wait(60) == 1  # with its input still open
    assert engine.stderr_text().endswith(f"gtp-engine analysis: cannot use network {tmp_path / 'nowhere.onnx'}: no "
                                         f"such file; give a network exported by python -m gtp_engine.training "
                                         f"export, or omit -model to use the shipped one\n")


def test_a_network_on_a_size_it_was_not_trained_for_warns_in_the_response(analysis, trained_network):
    engine = analysis("-model", str(trained_network(9)))
    engine.ask(position("nine", size=9, maxVisits=4))
    engine.send(position("thirteen", ["D4"], size=13, maxVisits=4, analyzeTurns=[0, 1]))
    finals, seen = engine.until_final("thirteen", count=2)
    warnings = [r for r in seen if "warning" in r]
    assert warnings == [{"warning": "network trained.onnx (tiny, fp32, features v1, trained on 9x9) was not trained "
                                    "on 13x13 boards", "field": "boardXSize", "id": "thirteen"}]  # once a query
    assert seen.index(warnings[0]) < seen.index(finals[0])
    engine.close()
    stderr = [line for line in engine.stderr_text().splitlines() if "was not trained on" in line]
    assert len(stderr) == 1 and stderr[0].endswith("was not trained on 13x13 boards")
