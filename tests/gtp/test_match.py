"""gtp_engine/match.py and its command line tools/match.py: results, the summary line, and a short real match (the
engine against GNU Go, GNU Go referee)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest
from engine_process import ROOT, gnugo_path

from gtp_engine import coords, match, sgf_io
from gtp_engine.board import BLACK, WHITE
from gtp_engine.game import GameState, Rules
from tools import match as match_command


def gnugo_or_skip() -> str:
    """GNU Go's path; the test skips where it is not installed."""
    gnugo = gnugo_path()
    if gnugo is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    return gnugo


def test_the_summary_line_reports_score_and_elo_interval():
    games = [match.GameResult(i % 2 == 0, result, 50)
             for i, result in enumerate(["B+3", "W+R", "0", "B+F", "W+2.5", "B+R", "W+1", "B+0.5"])]
    assert match.summary("A", "B", games) == \
        "A vs B: 2 wins, 5 losses, 1 draws in 8 games; score 0.312; Elo -137 (95%: -720 .. +77)"


def test_results_are_normalized():
    assert match.normalized_result("B+3.0") == "B+3"
    assert match.normalized_result("w+0.5") == "W+0.5"
    assert match.normalized_result("0") == "0"
    with pytest.raises(match.GtpError):
        match.normalized_result("unknown")


def test_a_short_match_writes_sgf_and_an_elo_line(tiny_onnx_model, tmp_path):
    gnugo = gnugo_or_skip()
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 4 --seed 1"
    result = subprocess.run(
        [sys.executable, "-m", "tools.match", "--a", engine, "--b", f"{gnugo} --mode gtp --level 0",
         "--referee", f"{gnugo} --mode gtp", "--size", "7", "--games", "2", "--max-moves", "40",
         "--time-settings", "0 5 1", "--sgf-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().split("\n")
    assert lines[0].startswith("game 1: gtp_engine (B) vs GNU Go (W): ")
    assert lines[1].startswith("game 2: GNU Go (B) vs gtp_engine (W): ")
    assert lines[-1].startswith("gtp_engine vs GNU Go: ") and "Elo " in lines[-1] and "95%" in lines[-1]
    records = [sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf") for n in (1, 2)]
    assert [(r.black, r.white) for r in records] == [("gtp_engine", "GNU Go"), ("GNU Go", "gtp_engine")]
    for record, line in zip(records, lines):
        assert line.split(": ")[2].split(" in ")[0] == record.result
        record.to_game()  # every move legal


def test_time_settings_take_three_whole_numbers():
    with pytest.raises(SystemExit):
        match_command.main(["--a", "x", "--b", "y", "--time-settings", "0 2s 1"])


def test_no_game_starts_after_the_deadline(tiny_onnx_model):
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --visits 1"
    _, _, games = match.play_match(engine, engine, games=4, size=9, referee=engine, deadline=time.monotonic())
    assert games == []


OPENING_RECORDS = ROOT / "tests" / "training" / "fixtures"  # real 9x9 games


def test_openings_are_the_first_moves_of_each_usable_record_in_name_order():
    openings = match.load_openings(OPENING_RECORDS, 9, 6)
    records = [sgf_io.load_sgf(data, name) for name, data in sgf_io.read_sgf_files(OPENING_RECORDS)]
    usable = [r for r in records if (r.width, r.height) == (9, 9) and not r.setup and len(r.moves) >= 6]
    assert len(openings) == len(usable) >= 3
    assert openings == [r.moves[:6] for r in usable]
    with pytest.raises(ValueError, match=r"fixtures: no 13x13 game record"):
        match.load_openings(OPENING_RECORDS, 13, 6)


def test_each_pair_of_games_starts_from_the_next_opening_with_colours_swapped(tiny_onnx_model, tmp_path):
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1 --seed 1"
    openings = match.load_openings(OPENING_RECORDS, 9, 4)[:2]
    _, _, games = match.play_match(engine, engine, games=5, size=9, referee=engine, max_moves=10,
                                   sgf_dir=tmp_path, openings=openings)
    assert [g.a_is_black for g in games] == [True, False, True, False, True]
    played = [sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf").moves for n in range(1, 6)]
    assert [moves[:4] for moves in played] == [openings[0], openings[0], openings[1], openings[1], openings[0]]
    assert all(len(moves) == 10 for moves in played)  # the engines played on from the opening


def test_a_match_goes_on_from_a_later_game_with_its_colours_and_openings(tiny_onnx_model, tmp_path):
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1 --seed 1"
    openings = match.load_openings(OPENING_RECORDS, 9, 4)[:2]
    _, _, games = match.play_match(engine, engine, games=4, size=9, referee=engine, max_moves=6,
                                   sgf_dir=tmp_path, openings=openings, first_game=2)
    assert [g.a_is_black for g in games] == [False, True, False]  # games 2, 3 and 4 of an unbroken match
    assert sorted(p.name for p in tmp_path.glob("game-*.sgf")) == ["game-2.sgf", "game-3.sgf", "game-4.sgf"]
    played = [sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf").moves for n in range(2, 5)]
    assert [moves[:4] for moves in played] == [openings[0], openings[1], openings[1]]


def test_a_handicap_match_gives_a_black_and_its_stones_in_every_game(tiny_onnx_model, tmp_path):
    """The engine takes 4 stones against GNU Go, which places them too (and referees): A is Black in every game,
    White moves first, and the record holds the stones."""
    gnugo = f"{gnugo_or_skip()} --mode gtp --chinese-rules --level 1"
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1 --seed 1"
    openings = match.load_openings(OPENING_RECORDS, 9, 4)[:1]
    _, _, games = match.play_match(engine, gnugo, games=2, size=9, komi=0.5, referee=gnugo, max_moves=6,
                                   sgf_dir=tmp_path, openings=openings, handicap=4)
    assert [g.a_is_black for g in games] == [True, True]
    stones = {coords.from_gtp(coords.grid(9), v) for v in ("C3", "G3", "C7", "G7")}
    for n in (1, 2):
        record = sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf")
        assert record.handicap == 4 and {p for c, p in record.setup if c == BLACK} == stones
        assert record.moves[0][0] == WHITE and len(record.moves) == 6  # no opening: White's first move
    _, _, games = match.play_match(engine, gnugo, games=1, size=9, komi=0.5, referee=gnugo, max_moves=2,
                                   sgf_dir=tmp_path, handicap=2, handicap_to_b=True)  # GNU Go takes them
    record = sgf_io.load_sgf_file(tmp_path / "game-1.sgf")
    assert not games[0].a_is_black and record.handicap == 2 and record.black.startswith("GNU Go")


def test_a_handicap_of_one_gives_black_without_stones_and_each_game_the_next_opening(tiny_onnx_model, tmp_path):
    """Go's handicap 1: the taker (here B) plays Black in every game at the komi given, no stones placed; the colours
    do not swap, so each game starts from the next opening instead of each pair."""
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1 --seed 1"
    openings = match.load_openings(OPENING_RECORDS, 9, 4)[:2]
    _, _, games = match.play_match(engine, engine, games=3, size=9, komi=-1, referee=engine, max_moves=6,
                                   sgf_dir=tmp_path, openings=openings, handicap=1, handicap_to_b=True)
    assert [g.a_is_black for g in games] == [False, False, False]
    records = [sgf_io.load_sgf_file(tmp_path / f"game-{n}.sgf") for n in (1, 2, 3)]
    assert [r.moves[:4] for r in records] == [openings[0], openings[1], openings[0]]
    assert all(not r.setup and r.komi == -1 and r.moves[0][0] == BLACK for r in records)


def test_openings_that_cannot_be_used_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        match_command.main(["--a", "x", "--b", "y", "--size", "13", "--openings", str(OPENING_RECORDS)])
    assert "--openings" in capsys.readouterr().err


# A GTP program that passes every move and dies in its genmove while the file named by its argument is missing
# (creating it first): it dies once, as GNU Go 3.8 now and then dies in a 19x19 game.
DYING_ONCE = """
import pathlib, sys
marker = pathlib.Path(sys.argv[1])
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "genmove" and not marker.exists():
        marker.touch()
        sys.exit(3)
    answer = {"name": "dying", "version": "1", "genmove": "pass"}.get(words[0], "")
    print(f"= {answer}\\n", flush=True)
    if words[0] == "quit":
        break
"""


def test_a_game_in_which_a_program_dies_is_void_and_played_again(tiny_onnx_model, tmp_path, caplog):
    script = tmp_path / "dying.py"
    script.write_text(DYING_ONCE)
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1 --seed 1"
    dying = f"{sys.executable} {script} {tmp_path / 'died'}"
    a, _, games = match.play_match(dying, engine, games=2, size=7, referee=engine, max_moves=6, sgf_dir=tmp_path)
    assert a == "dying" and (tmp_path / "died").exists()
    assert [g.a_is_black for g in games] == [True, False]  # game 1 was played again, with the same colours
    assert "game 1 is void and played again" in caplog.text
    assert sgf_io.load_sgf_file(tmp_path / "game-1.sgf").black == "dying"


def test_a_program_that_keeps_dying_ends_the_match(tiny_onnx_model, tmp_path):
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 1"
    always_dying = f"{sys.executable} -c \"import sys; [print('= x\\\\n', flush=True) for line in sys.stdin " \
                   f"if not line.startswith('genmove') or sys.exit(3)]\""
    with pytest.raises(match.GtpError, match="ended while answering 'genmove b'"):
        match.play_match(always_dying, engine, games=2, size=7, referee=engine)


def _game(size: int, moves: str, rules: str = "japanese") -> GameState:
    """A game record of the moves ("B C1 W D1 B pass ..."), played with legality checks."""
    game = GameState(size, rules=Rules.named(rules))
    words = moves.split()
    for letter, vertex in zip(words[::2], words[1::2]):
        game.play(coords.from_gtp(game.grid, vertex), BLACK if letter == "B" else WHITE)
    return game


WALLS = "B C1 W D1 B C2 W D2 B C3 W D3 B C4 W D4 B C5 W D5"  # Black owns columns A-B, White column E


def test_own_territory_moves_are_moves_inside_ones_own_area_right_after_the_opponents_pass():
    game = _game(5, WALLS + " B pass W E1 B A1 W pass B A2 W pass B pass")
    # White's E1 came after Black's pass, inside White's area; Black's A1 came after White's E1, not a pass; Black's
    # A2 came after White's pass, inside Black's area.
    assert match.own_territory_moves(game, []) == {BLACK: 1, WHITE: 1}
    assert match.own_territory_moves(_game(5, WALLS + " B pass W pass"), []) == {BLACK: 0, WHITE: 0}


def test_an_area_with_dead_stones_in_it_is_territory_for_own_territory_moves():
    game = _game(5, WALLS + " B A5 W B2 B E5 W pass B A1 W pass B pass")
    b2 = coords.from_gtp(game.grid, "B2")
    assert match.own_territory_moves(game, [b2]) == {BLACK: 1, WHITE: 0}  # A1 after White's pass
    assert match.own_territory_moves(game, []) == {BLACK: 0, WHITE: 0}  # White's B2 alive: A1 is not Black's


def test_a_match_under_territory_rules_tells_the_engine_and_writes_the_rules(tiny_onnx_model, tmp_path):
    gnugo = gnugo_or_skip()
    engine = f"{sys.executable} -m gtp_engine --weights {tiny_onnx_model} --device cpu --visits 4 --seed 1"
    result = subprocess.run(
        [sys.executable, "-m", "tools.match", "--a", engine, "--b", f"{gnugo} --mode gtp --level 0 --japanese-rules",
         "--rules", "korean", "--size", "7", "--games", "2", "--max-moves", "30", "--sgf-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "rules korean; longest game" in result.stdout
    record = sgf_io.load_sgf_file(tmp_path / "game-1.sgf")
    assert (record.rules, record.komi) == ("korean", 6.5)  # the rules' komi where --komi is not given


# A GTP program that plays the moves its arguments list, one a genmove, and takes whatever it is told.
SCRIPTED = """
import sys
moves = iter(sys.argv[1:])
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "final_score":
        print("? cannot score\\n", flush=True)
        continue
    answer = {"name": "scripted", "version": "1", "genmove": next(moves, "pass") if words[0] == "genmove" else ""}
    print(f"= {answer.get(words[0], '')}\\n", flush=True)
    if words[0] == "quit":
        break
"""


def scripted(tmp_path, moves: str) -> str:
    script = tmp_path / "scripted.py"
    script.write_text(SCRIPTED)
    return f"{sys.executable} {script} {moves}"


def test_a_rule_set_the_referee_cannot_count_is_counted_from_its_dead_stones(tmp_path):
    """Stone scoring: GNU Go calls the dead stones, the rules core counts: each counted region costs its owner two
    points. Black's A-B columns are two regions, White's E column one: B+5 by GNU Go's Chinese count, B+3 so."""
    gnugo = gnugo_or_skip()
    black = scripted(tmp_path, "C1 C2 C3 C4 C5 A3 B3")
    white = scripted(tmp_path, "D1 D2 D3 D4 D5")
    _, _, games = match.play_match(black, white, games=1, size=5, komi=0, referee=f"{gnugo} --mode gtp --chinese-rules",
                                   sgf_dir=tmp_path, rules=Rules.named("stone-scoring"))
    assert games[0].result == "B+3"
    assert sgf_io.load_sgf_file(tmp_path / "game-1.sgf").rules == "stone-scoring"


def test_a_suicide_the_rules_allow_and_gnu_go_refuses_is_played_on(tmp_path, caplog):
    """New Zealand rules: Black's two-stone suicide at A1 is legal; GNU Go, the referee, refuses it and gets the
    position as setup stones, and the game goes on to its end instead of a forfeit."""
    gnugo = gnugo_or_skip()
    black = scripted(tmp_path, "C3 pass pass A2 A1")
    white = scripted(tmp_path, "B2 A3 B1 D4")
    with caplog.at_level(logging.INFO, logger="gtp_engine.match"):
        _, _, games = match.play_match(black, white, games=1, size=5, komi=0, sgf_dir=tmp_path,
                                       referee=f"{gnugo} --mode gtp --chinese-rules", rules=Rules.named("new-zealand"))
    assert "refused Black's legal move" in caplog.text
    record = sgf_io.load_sgf_file(tmp_path / "game-1.sgf")
    assert [coords.to_gtp(record.to_game().grid, p) for _, p in record.moves[8:]] == ["A1", "pass", "pass"]
    assert "+F" not in games[0].result and games[0].moves == 11


def test_connecting_a_chain_in_atari_inside_ones_area_is_no_own_territory_move():
    # White's dead A3 and B2 leave Black's A2 one liberty, A1, which Black fills after White's pass: a needed
    # connection. Without B2, A2 has two liberties and the same move is an own-territory move.
    def dead(game):
        return [coords.from_gtp(game.grid, v) for v in ("A3", "B2", "E5") if game.board.colors[
            coords.from_gtp(game.grid, v)] != 0]
    needed = _game(5, WALLS + " B A2 W A3 B pass W B2 B E5 W pass B A1 W pass B pass")
    assert match.own_territory_moves(needed, dead(needed)) == {BLACK: 0, WHITE: 0}
    spared = _game(5, WALLS + " B A2 W A3 B E5 W pass B A1 W pass B pass")
    assert match.own_territory_moves(spared, dead(spared)) == {BLACK: 1, WHITE: 0}
