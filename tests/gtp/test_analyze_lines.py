"""The analyze commands' requests and info lines, in-process: the formats clients parse, from hand-made snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from gtp_engine import coords
from gtp_engine.board import BLACK, WHITE
from gtp_engine.gtp import analyze_lines
from gtp_engine.gtp.protocol import GtpError
from gtp_engine.gtp.values import IllegalVertex, parse_float, parse_vertex
from gtp_engine.mcts import MoveClause, MoveFilter
from gtp_engine.search import MoveInfo, ReportSchedule, Snapshot

G = coords.grid(3)


def point(vertex: str) -> int:
    return coords.from_gtp(G, vertex)


def snapshot(to_play=BLACK, ownership=None) -> Snapshot:
    moves = [
        MoveInfo(point("B2"), 30, 0.61234567, 2.5, 0.4, 0.58, 0, [point("B2"), point("A1"), coords.PASS]),
        MoveInfo(point("C3"), 10, 0.4, -1.25, 0.2, -0.1, 1, [point("C3")]),
        MoveInfo(point("A3"), 0, 0.5, 0.0, 0.1, 0.0, 2, []),  # unvisited: not listed
    ]
    return Snapshot(to_play, 41, 41, 0.5, 0.6, 2.0, moves, ownership)


def test_request_grammar_follows_katago():
    assert analyze_lines.parse_request((), G, WHITE, kata=False) == analyze_lines.Request(kata=False, color=WHITE)
    request = analyze_lines.parse_request(("b", "50", "maxmoves", "3", "ownership", "true"), G, WHITE, kata=True)
    assert (request.color, request.interval, request.max_moves, request.ownership) == (BLACK, 0.5, 3, True)
    assert analyze_lines.parse_request(("20",), G, BLACK, kata=False).interval == 0.2  # Lizzie: no colour
    # The interval is the search's report schedule; 0 (or none) reports only when the search ends.
    assert analyze_lines.parse_request(("20",), G, BLACK, kata=False).reports == ReportSchedule.periodic(0.2)
    assert analyze_lines.parse_request(("b", "0"), G, BLACK, kata=False).reports is None
    assert analyze_lines.parse_request(("interval", "100", "rootInfo", "true"), G, BLACK, kata=True).root_info
    for bad in (("ownership", "true"), ("b", "-1"), ("minmoves",), ("b", "10", "foo", "1")):
        with pytest.raises(GtpError, match="syntax error"):
            analyze_lines.parse_request(bad, G, BLACK, kata=False)


def test_avoid_and_allow_become_the_searchs_move_filter():
    request = analyze_lines.parse_request(("w", "10", "avoid", "b", "a1,B2,", "3", "avoid", "black", "pass", "1",
                                      "allow", "w", "A3:B2,c1", "2", "minmoves", "2"), G, BLACK, kata=False)
    assert (request.color, request.interval, request.min_moves) == (WHITE, 0.1, 2)
    assert request.move_filter == MoveFilter((
        MoveClause(BLACK, frozenset([point("A1"), point("B2")]), 3, allow=False),
        MoveClause(BLACK, frozenset([coords.PASS]), 1, allow=False),
        MoveClause(WHITE, frozenset(point(v) for v in ("A3", "B3", "A2", "B2", "C1")), 2, allow=True),
    ))
    assert analyze_lines.parse_request(("b",), G, WHITE, kata=True).move_filter == MoveFilter()
    for bad in (("avoid", "b", "a1", "0"), ("avoid", "b", "a1"), ("avoid", "x", "a1", "1"), ("allow", "b", ",", "1"),
                ("avoid", "b", "d4", "1"), ("avoid", "b", "a1:pass", "1"), ("avoid", "b", "a1;b2", "1")):
        with pytest.raises(GtpError, match="syntax error"):
            analyze_lines.parse_request(bad, G, BLACK, kata=True)
    for bad in (("allow", "b", "a1", "1", "avoid", "b", "b2", "1"), ("allow", "w", "a1", "1", "allow", "w", "b1", "2")):
        with pytest.raises(GtpError, match="avoid clauses or one allow clause"):
            analyze_lines.parse_request(bad, G, BLACK, kata=True)


def test_lz_lines_use_integers_and_end_each_block_with_the_pv():
    line = analyze_lines.info_line(snapshot(), G, analyze_lines.Request(kata=False, color=BLACK))
    assert line == ("info move B2 visits 30 winrate 6123 prior 4000 lcb 5800 order 0 pv B2 A1 pass "
                    "info move C3 visits 10 winrate 4000 prior 2000 lcb -1000 order 1 pv C3")


def test_kata_lines_use_decimals_and_add_root_info_and_ownership_for_the_side_to_move():
    ownership = np.linspace(-1, 1, 9)  # Black's view
    request = analyze_lines.Request(kata=True, color=WHITE, ownership=True, root_info=True, max_moves=1)
    line = analyze_lines.info_line(snapshot(WHITE, ownership), G, request)
    info, _, owned = line.partition(" ownership ")
    assert info == ("info move B2 visits 30 edgeVisits 30 utility 0.000000 winrate 0.612346 scoreMean 2.500000 "
                    "scoreStdev 0.000000 scoreLead 2.500000 prior 0.400000 lcb 0.580000 order 0 pv B2 A1 pass "
                    "rootInfo visits 41 utility 0.000000 winrate 0.600000 scoreLead 2.000000 scoreMean 2.000000 "
                    "scoreStdev 0.000000 rawWinrate 0.500000 rawLead 0.000000")
    assert [float(v) for v in owned.split()] == pytest.approx(list(-ownership))  # White to move: signs flip


def test_minmoves_pads_with_unvisited_moves_by_prior():
    priors = {point("A1"): 0.05, point("C1"): 0.3, point("B2"): 0.4, point("C3"): 0.2}
    line = analyze_lines.info_line(snapshot(), G, analyze_lines.Request(kata=False, color=BLACK, min_moves=4), priors)
    moves = [block.split()[1] for block in line.split("info ")[1:]]
    assert moves == ["B2", "C3", "C1", "A1"]
    assert "info move C1 visits 0 winrate 6000 prior 3000" in line


def test_values():
    assert parse_vertex(G, "b3") == point("B3") and parse_vertex(G, "PASS") == coords.PASS
    for text in ("i2", "b", "22", "b-1", "bb"):
        with pytest.raises(GtpError, match="syntax error"):
            parse_vertex(G, text)
    with pytest.raises(IllegalVertex):
        parse_vertex(G, "d4")
    assert parse_float("-7.5") == -7.5 and parse_float("6") == 6
    for text in ("1e3", "nan", "inf", "7,5", ""):
        with pytest.raises(GtpError):
            parse_float(text)


def test_kata_lines_add_pv_visits_and_moves_ownership_after_the_pv():
    ownership = np.linspace(-1, 1, 9)  # Black's view, after each move
    request = analyze_lines.Request(kata=True, color=WHITE, pv_visits=True, moves_ownership=True)
    asked = []

    def move_ownership(point):
        asked.append(point)
        return ownership
    line = analyze_lines.info_line(snapshot(WHITE), G, request, move_ownership=move_ownership)
    first, second = line.split(" info ")
    assert " pv B2 A1 pass pvVisits 30 movesOwnership " in first
    assert [float(v) for v in first.partition(" movesOwnership ")[2].split()] == pytest.approx(list(-ownership))
    assert " pv C3 pvVisits 10 movesOwnership " in " " + second
    assert asked == [point("B2"), point("C3")]  # never asked for an unvisited move
    request = analyze_lines.parse_request(("movesOwnership", "true", "pvVisits", "true"), G, BLACK, kata=True)
    assert request.moves_ownership and request.pv_visits
    with pytest.raises(GtpError, match="syntax error"):
        analyze_lines.parse_request(("movesOwnership", "true"), G, BLACK, kata=False)
