"""GTP extras that Lizzie, LizzieYzy, q5Go and Ogatak read: kata-analyze with scoreStdev, pvVisits and
movesOwnership, kata-raw-nn, kata-get-param / kata-set-param, and a version Lizzie can parse; the engine as a
subprocess on the tiny test network."""

from __future__ import annotations

import math
import re

from test_network_session import KATA_BLOCK, analysis_lines


def test_kata_analyze_moves_ownership_and_pv_visits(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 7")
    gtp.ok("play b d4")
    lines, _ = analysis_lines(gtp, "kata-analyze w interval 20 movesOwnership true pvVisits true maxmoves 2", 0.5,
                              stop="name")
    assert gtp.response(10).text == "gtp_engine"
    blocks = re.split(r" (?=info )", lines[-1])
    for block in blocks:
        info, _, owned = block.partition(" movesOwnership ")
        head, _, visits = info.partition(" pvVisits ")
        match = KATA_BLOCK.fullmatch(head)
        assert match, head
        pv, counts = match.group(12).split(), [int(v) for v in visits.split()]
        assert len(counts) == len(pv) and counts[0] == int(match.group(2))
        assert all(a >= b for a, b in zip(counts, counts[1:]))
        values = [float(v) for v in owned.split()]
        assert len(values) == 49 and all(-1 <= v <= 1 for v in values)
        assert match.group(6) == match.group(8)  # scoreMean is KataGo's older name for scoreLead
        assert math.isfinite(float(match.group(7)))  # scoreStdev (the pattern admits no sign)


def test_kata_raw_nn_writes_katagos_layout(engine, net_args):
    gtp = engine(*net_args)
    gtp.ok("boardsize 5")
    gtp.ok("play b c3")
    lines = gtp.ok("kata-raw-nn 0").split("\n")
    assert lines[0] == "symmetry cached"
    values = dict(line.split(" ", 1) for line in lines[1:5])
    assert math.isclose(float(values["whiteWin"]) + float(values["whiteLoss"]), 1.0, abs_tol=1e-5)
    policy_at = lines.index("policy")
    policy = [row.split() for row in lines[policy_at + 1: policy_at + 6]]
    assert all(len(row) == 5 for row in policy) and policy[2][2] == "NAN"  # C3 is occupied
    probabilities = [float(v) for row in policy for v in row if v != "NAN"]
    pass_line = lines[policy_at + 6]
    assert pass_line.startswith("policyPass ")
    assert math.isclose(sum(probabilities) + float(pass_line.split()[1]), 1.0, abs_tol=1e-4)
    owned_at = lines.index("whiteOwnership")
    assert len(lines) == owned_at + 6 and all(len(row.split()) == 5 for row in lines[owned_at + 1:])
    assert not gtp("kata-raw-nn 9").ok and not gtp("kata-raw-nn").ok and not gtp("kata-raw-nn 0123").ok


def test_kata_get_and_set_param(engine, net_args):
    gtp = engine(*net_args, "--visits", "40")
    assert gtp.ok("kata-get-param maxVisits") == "40"
    assert gtp.ok("kata-get-param maxTime") == "-1"
    gtp.ok("kata-set-param maxVisits 3")
    assert gtp.ok("kata-get-param maxVisits") == "3"
    gtp.ok("kata-set-param maxTime 2.5")
    assert gtp.ok("kata-get-param maxTime") == "2.5"
    gtp.ok("kata-set-param maxTime -1")
    assert gtp.ok("kata-get-param maxTime") == "-1"
    gtp.ok("boardsize 7")
    assert re.fullmatch(r"[A-G][1-7]|pass", gtp.ok("genmove b"))  # a 3-visit search
    assert gtp("kata-set-param maxVisits 0").text == "syntax error"
    assert "unknown parameter" in gtp("kata-set-param humanSLModel x").text
    assert all(name in gtp.ok("list_commands").split() for name in ("kata-raw-nn", "kata-get-param", "kata-set-param"))


def test_strength_from_the_command_line_kata_set_param_and_lz_setoption(engine, net_args):
    gtp = engine(*net_args, "--strength", "12k")
    assert gtp.ok("kata-get-param strength") == "12k"
    gtp.ok("boardsize 9")
    assert re.fullmatch(r"[A-HJ][1-9]", gtp.ok("genmove b"))  # at the level: never a pass on an empty board
    gtp.ok("kata-set-param strength 3k")
    assert gtp.ok("kata-get-param strength") == "3k"
    gtp.ok("kata-set-param humanSLProfile rank_20k")  # KataGo's profile name: the nearest level
    assert gtp.ok("kata-get-param humanSLProfile") == "12k"
    gtp.ok("kata-set-param humanSLProfile proyear_1990")
    assert gtp.ok("kata-get-param strength") == "max"
    assert gtp("kata-set-param strength 25k").text == "expected a rank from 12k to 1d or max, got '25k'"
    assert "unknown humanSLProfile" in gtp("kata-set-param humanSLProfile pro").text
    gtp.ok("lz-setoption name strength value 10k")
    assert "option name Strength type string default 10k" in gtp.ok("lz-setoption").split("\n")
    assert re.fullmatch(r"[A-HJ][1-9]", gtp.ok("genmove w"))
    assert {"strength", "humanSLProfile"} <= set(gtp.ok("kata-list-params").split())


def test_lizzie_reads_our_version(engine, net_args):
    """Lizzie (featurecat/lizzie, Leelaz.java) switches to KataGo mode only for a name starting with "KataGo";
    otherwise it reads `version` as Leela Zero's: params[1].split("\\\\.") and Integer.parseInt of the second part.
    An answer without a dot or with a non-numeric minor part would throw in its reader thread."""
    gtp = engine(*net_args)
    assert not gtp.ok("name").startswith("KataGo")
    parts = gtp.ok("version").split(".")
    assert len(parts) >= 2 and parts[1].isdigit()
