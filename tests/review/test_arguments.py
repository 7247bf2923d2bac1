"""Arguments and paths are checked before anything is loaded or searched: one line on stderr, exit status 2. The
network named does not exist, so a check that came after the network's load would answer otherwise."""

from __future__ import annotations

import pytest
from review_support import OGS_GAME, run_review


@pytest.mark.parametrize(("args", "said"), [
    (["{tmp}/missing.sgf"], "cannot read {tmp}/missing.sgf: No such file or directory"),
    (["{game}", "--visits", "0"], "--visits and --threads take a positive integer"),
    (["{game}", "--visits", "many"], "argument --visits: invalid int value: 'many'"),
    (["{game}", "--threads", "-2"], "--visits and --threads take a positive integer"),
    (["{game}", "--seed", "-1"], "--seed takes an integer >= 0"),
    (["{game}", "-o", "{game}"], "{game} is the game itself: the review is written to another file (-o)"),
    (["{game}", "-o", "{tmp}/no/such/out.sgf"], "-o {tmp}/no/such/out.sgf: no folder {tmp}/no/such"),
    (["{game}", "-o", "{tmp}"], "-o {tmp} is a folder; give a file name"),
    (["{game}", "-o", "{tmp}/out.sgf", "--plot", "{tmp}/graph.svg"], "--plot {tmp}/graph.svg: the graph is a PNG file, "
                                                                     "named .png"),
    (["{game}", "-o", "{tmp}/out.sgf", "--plot", "{tmp}/none/graph.png"], "--plot {tmp}/none/graph.png: no folder "
                                                                          "{tmp}/none"),
    (["{game}", "-o", "{tmp}/out.png", "--plot", "{tmp}/out.png"], "--plot {tmp}/out.png is the output"),
    (["{tmp}/bad.sgf", "-o", "{tmp}/out.sgf"], "{tmp}/bad.sgf: not SGF"),
    (["{tmp}/illegal.sgf", "-o", "{tmp}/out.sgf"], "{tmp}/illegal.sgf: illegal move (occupied): move 2 W E5"),
])
def test_a_bad_argument_is_refused_in_one_line_before_the_network_loads(args, said, tmp_path):
    (tmp_path / "bad.sgf").write_text("this is no game")
    (tmp_path / "illegal.sgf").write_text("(;GM[1]SZ[9];B[ee];W[ee])")
    fill = {"tmp": str(tmp_path), "game": str(OGS_GAME)}
    done = run_review(*(arg.format(**fill) for arg in args), "--weights", str(tmp_path / "missing.onnx"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"gtp-engine review: {said.format(**fill)}")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.sgf", "illegal.sgf"]  # nothing written
