"""gtp-engine review on a real 9x9 game (OGS, dan players; tests/review/fixtures), over the real onnxruntime on the
tiny test network: the reviewed SGF reads back with sgfmill, keeps the game, and comments every move."""

from __future__ import annotations

import shutil

import pytest
from review_support import OGS_GAME as GAME
from review_support import CountingEvaluator, main_line
from review_support import run_review as review
from sgfmill import sgf


def test_review_of_a_real_game(tiny_onnx_model, tmp_path):
    out, graph = tmp_path / "reviewed.sgf", tmp_path / "graph.png"
    args = [str(GAME), "-o", str(out), "--visits", "8", "--weights", str(tiny_onnx_model), "--threads", "2"]
    if shutil.which("true") and _has_matplotlib():
        args += ["--plot", str(graph)]
    done = review(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # the review talks on stderr only
    assert "78/78 positions" in done.stderr

    original = sgf.Sgf_game.from_bytes(GAME.read_bytes())
    reviewed = sgf.Sgf_game.from_bytes(out.read_bytes())
    moves = main_line(reviewed)
    assert [n.get_move() for n in moves] == [n.get_move() for n in main_line(original)]
    assert len(moves) == 77
    for number, node in enumerate(moves, 1):
        comment = node.get("C")
        assert comment.startswith(f"Move {number} (") and "winrate" in comment and "points" in comment
        assert 0 <= float(node.get("SBKV")) <= 100
        float(node.get("V"))
    root = reviewed.get_root()
    assert root.get("C").startswith(original.get_root().get("C").strip())  # the game's own comment is kept
    assert ("Worst moves:" in root.get("C") or "No move lost" in root.get("C"))
    assert "Reviewed by gtp_engine" in root.get("C")
    assert "with tiny.onnx, 8 visits per position, Chinese rules, komi 5.5\n" in root.get("C")
    assert (root.get("PB"), root.get("RE"), root.get("KM")) == ("DreamingElephant", "B+3.5", 5.5)
    if "--plot" in args:
        assert graph.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_corrupt_game_is_refused_naming_the_file(tmp_path, tiny_onnx_model):
    bad = tmp_path / "broken.sgf"
    bad.write_text("(;GM[1]SZ[9];B[ee];W[ee])")
    done = review(str(bad), "--weights", str(tiny_onnx_model), "--visits", "2")
    assert done.returncode == 2 and "broken.sgf" in done.stderr and "move 2 W E5" in done.stderr  # as loadsgf
    done = review(str(bad), "-o", str(bad), "--weights", str(tiny_onnx_model))
    assert done.returncode == 2 and "is the game itself" in done.stderr and bad.read_text().endswith("W[ee])")
    done = review(str(tmp_path / "missing.sgf"))
    assert done.returncode == 2 and "missing.sgf" in done.stderr


def test_rules_for_the_review_a_name_or_katagos_json(tmp_path, tiny_onnx_model):
    game = tmp_path / "g.sgf"
    game.write_text("(;GM[1]SZ[9]KM[7]RU[Chinese];B[ee];W[cc])")
    done = review(str(game), "--rules", '{"scoring":"TERRITORY","ko":"SIMPEL"}', "--weights", str(tiny_onnx_model))
    assert done.returncode == 2 and "--rules" in done.stderr and "ko rule 'simpel'" in done.stderr
    done = review(str(game), "--rules", "japanese", "--weights", str(tiny_onnx_model), "--visits", "2")
    assert done.returncode == 0, done.stderr


def test_the_other_games_of_a_collection_are_kept_and_pl_gives_way_to_the_first_move(tmp_path, tiny_onnx_model):
    games = tmp_path / "two.sgf"
    games.write_text("(;GM[1]SZ[9]KM[7]PL[W]C[game one];B[ee];W[cc])(;GM[1]SZ[9]KM[7]C[game two];B[dd];W[ff])")
    done = review(str(games), "-o", str(tmp_path / "out.sgf"), "--weights", str(tiny_onnx_model), "--visits", "4")
    assert done.returncode == 0, done.stderr
    out = (tmp_path / "out.sgf").read_bytes()
    assert b"game two" in out and b"W[ff]" in out
    first = sgf.Sgf_game.from_bytes(out.split(b"\n(;")[0])
    assert "Move 1 (Black E5)" in main_line(first)[0].get("C")  # Black moves first, whatever PL said


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    done = review(str(GAME), "--plot", str(tmp_path / "g.png"), env={"EXTRA_PATH": str(fake.parent)})
    assert done.returncode == 2 and "pip install 'gtp_engine[plot]'" in done.stderr
    assert not (tmp_path / "g.png").exists()


def test_a_game_without_km_is_reviewed_with_the_rules_komi():
    from gtp_engine import review as review_lib
    from gtp_engine.sgf_io import load_sgf

    handicap = load_sgf(b"(;GM[1]SZ[9]RU[Japanese]HA[3]AB[cc][gg][gc];W[ee];B[ce])")
    assert {p.komi for p in review_lib._positions(handicap)} == {0.5}
    even = load_sgf(b"(;GM[1]SZ[9]RU[Japanese];B[ee];W[cc])")
    assert {p.komi for p in review_lib._positions(even)} == {6.5}


def test_each_search_of_a_stretch_starts_from_the_played_moves_subtree(monkeypatch):
    """Every position's root ends with the visits asked for; within a stretch its search adds only what the played
    move lacked of them in the search before, and a stretch starts from a fresh tree."""
    from gtp_engine import review as review_lib
    from gtp_engine.search import SearchConfig
    from gtp_engine.sgf_io import load_sgf_file

    snapshots = {}  # position's move number -> its search's final snapshot

    class RecordingSearcher(review_lib.Searcher):
        def search(self, state, stop, *args, **kwargs):
            result = super().search(state, stop, *args, **kwargs)
            snapshots[state.move_number] = result.snapshot
            return result

    monkeypatch.setattr(review_lib, "Searcher", RecordingSearcher)
    record, visits, workers = load_sgf_file(GAME), 24, 2
    review_lib.analyse(record, lambda width, height: CountingEvaluator(), SearchConfig(seed=0, batch_size=4), visits,
                       workers)
    total = len(record.moves) + 1
    length = -(-total // (workers * review_lib.STRETCHES_PER_WORKER))
    assert sorted(snapshots) == list(range(total)) and length > 1
    carried = 0
    for t in range(total):
        snapshot = snapshots[t]
        assert snapshot.visits == visits
        if t % length == 0:
            assert snapshot.playouts == visits  # a fresh tree
        else:
            point = record.moves[t - 1][1]
            kept = sum(m.visits for m in snapshots[t - 1].moves if m.point == point)
            assert snapshot.playouts == visits - kept
            carried += kept
    assert carried > 0  # the stretches saved visits (few here: the counting network has no policy to follow)


@pytest.mark.parametrize("game", [
    b"(;GM[1]SZ[5]KM[0.5];B[cc];W[bd];B[db];W[dc];B[cd])",
    b"(;GM[1]SZ[5]KM[0.5]RU[Chinese]AB[bb][dd])",  # Black's stones alone: handicap, White to move and its bonus
    b"(;GM[1]SZ[5]KM[2.5]RU[Japanese]AW[cc]PL[W])",
    b"(;GM[1]SZ[5]KM[0.5]AB[bb]AW[dd];W[cc];B[cd])",
])
def test_the_review_finds_what_the_json_analysis_engine_finds_for_its_positions(game):
    from gtp_engine import coords
    from gtp_engine import review as review_lib
    from gtp_engine.analysis.query import parse_query
    from gtp_engine.analysis.scheduler import Scheduler
    from gtp_engine.analysis.settings import AnalysisSettings
    from gtp_engine.search import SearchConfig
    from gtp_engine.sgf_io import load_sgf

    record = load_sgf(game)
    evaluator, config, visits = CountingEvaluator(), SearchConfig(seed=0, batch_size=4), 30
    assert len(record.moves) + 1 <= 2 * review_lib.STRETCHES_PER_WORKER  # each position a stretch: a fresh tree
    progress = []
    review = review_lib.analyse(record, lambda width, height: evaluator, config, visits, workers=2,
                                progress=lambda done, total: progress.append((done, total)))
    total = len(record.moves) + 1
    assert progress[0] == (0, total) and progress[-1] == (total, total) and len(progress) == total + 1

    letter = {1: "B", 2: "W"}
    fields = {"id": "r", "moves": [[letter[c], coords.to_gtp(record.grid, p)] for c, p in record.moves],
              "initialStones": [[letter[c], coords.to_gtp(record.grid, p)] for c, p in record.setup],
              "rules": record.game_rules().to_katago(), "komi": record.komi, "boardXSize": record.width,
              "boardYSize": record.height, "analyzeTurns": list(range(total)), "maxVisits": visits}
    if record.first_player is not None and not record.moves:
        fields["initialPlayer"] = letter[record.first_player]
    query, _ = parse_query(fields, AnalysisSettings(report_as="BLACK"))
    responses = []
    scheduler = Scheduler(lambda width, height: evaluator, config, responses.append, workers=1)
    scheduler.submit(query)
    scheduler.close(wait=True)
    found = {r["turnNumber"]: r for r in responses}
    assert (review.start_winrate, review.start_lead) == (found[0]["rootInfo"]["winrate"],
                                                         found[0]["rootInfo"]["scoreLead"])
    for move in review.moves:
        after, before = found[move.number]["rootInfo"], found[move.number - 1]["moveInfos"][0]
        assert (move.winrate, move.score_lead) == (after["winrate"], after["scoreLead"])
        assert (coords.to_gtp(record.grid, move.best), move.best_lead) == (before["move"], before["scoreLead"])
        played = [m for m in found[move.number - 1]["moveInfos"] if m["move"] == coords.to_gtp(record.grid, move.point)]
        if played:  # the played lead is the move's own, as the search before it saw it
            assert move.played_searched and move.played_lead == played[0]["scoreLead"]
