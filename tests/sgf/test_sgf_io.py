"""sgf_io on real SGF files: passes, handicap, OGS nesting, encodings, rectangular boards, rejections, saving."""

import io
import re
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gtp_engine import coords
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.game import RULE_SETS, GameState, Rules
from gtp_engine.sgf_io import GameRecord, SgfError, load_sgf, load_sgf_file, read_sgf_files, save_sgf

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> GameRecord:
    return load_sgf_file(FIXTURES / name)


def main_line_by_regex(text: str) -> list[tuple[int, str]]:
    """The moves of a file whose every node holds one move and whose main line is everything (OGS files)."""
    return [({"B": BLACK, "W": WHITE}[c], p) for c, p in re.findall(r";\s*([BW])\[([a-z]*)\]", text)]


def test_passes_written_as_empty_value():
    game = load("2-passes.sgf").to_game()
    assert game.moves == [(BLACK, PASS), (WHITE, PASS)]
    assert game.is_over


def test_passes_written_as_tt_up_to_19x19_only():
    record = load("panda1.sgf")
    raw = main_line_by_regex((FIXTURES / "panda1.sgf").read_text())
    assert "tt" in [p for _, p in raw]
    assert [p == "tt" for _, p in raw] == [p == PASS for _, p in record.moves]
    big = load_sgf(b"(;SZ[20];B[tt];W[])")
    assert big.moves == [(BLACK, coords.grid(20).point(19, 19)), (WHITE, PASS)]


@pytest.mark.parametrize("name, stones", [("panda1.sgf", 2), ("ogs_16994283.sgf", 3)])
def test_handicap_stones_from_ab(name, stones):
    record = load(name)
    assert record.handicap == stones
    game = record.to_game()
    assert game.handicap_stones == stones
    assert sorted(game.setup) == sorted(record.setup)
    assert all(color == BLACK for color, _ in record.setup) and len(record.setup) == stones
    assert record.moves[0][0] == WHITE
    before_first_move = record.to_game(max_moves=0)
    assert before_first_move.to_play == WHITE
    assert before_first_move.board.stones(BLACK) == sorted(p for _, p in record.setup)


@pytest.mark.parametrize("name", ["ogs_16975155.sgf", "ogs_16994283.sgf"])
def test_ogs_nested_variations_give_the_whole_main_line(name):
    text = (FIXTURES / name).read_text()
    assert text.count("(") > 30  # every move really is nested in its own variation
    record = load(name)
    g = record.grid
    assert [(c, coords.to_sgf(g, p) if p != PASS else "") for c, p in record.moves] == [
        (c, "" if p == "tt" else p) for c, p in main_line_by_regex(text)
    ]
    assert record.to_game().move_number == len(record.moves)


def test_utf16_and_utf8_bom_read_the_same_game():
    utf16 = load("utf16le.sgf")
    utf8 = load("utf8bom.sgf")
    assert (FIXTURES / "utf16le.sgf").read_bytes()[:2] == b"\xff\xfe"
    assert (FIXTURES / "utf8bom.sgf").read_bytes()[:3] == b"\xef\xbb\xbf"
    assert len(utf8.moves) > 100
    utf16.source = utf8.source
    assert utf16 == utf8
    assert utf8.black == "Kitani Minoru"


def test_charset_from_ca_decodes_before_parsing():
    record = load("japanese.sgf")
    raw = (FIXTURES / "japanese.sgf").read_bytes()
    assert b"CA[Shift_JIS]" in raw
    assert record.black == raw.split(b"PB[")[1].split(b"]")[0].decode("shift_jis")
    assert len(record.moves) == 2


def test_a_mislabelled_charset_never_changes_the_game():
    # GBK text labelled GB2312 (common): 淺's trail byte is "\\" and 乗's is "]" to a GB2312 decoder.
    record = load_sgf("(;GM[1]CA[GB2312]SZ[9]PB[乗]KM[6.5]C[淺]AB[aa];B[ee];W[cc])".encode("gbk"))
    assert (record.black, record.komi, record.setup, len(record.moves)) == ("乗", 6.5, [(BLACK, coords.from_gtp(
        record.grid, "A9"))], 2)
    latin = load_sgf("(;GM[1]CA[UTF-8]SZ[9]PB[José];B[ee])".encode("latin-1"))  # Latin-1 bytes labelled UTF-8
    assert latin.black == "José"


def test_game_information_in_the_node_of_the_first_move():
    record = load_sgf(b"(;GM[1]SZ[9]KM[6.5]RU[japanese]PB[Alice]B[ee];W[cc])")
    assert (record.komi, record.rules, record.black, len(record.moves)) == (6.5, "japanese", "Alice", 2)


def test_ru_names_katagos_names_and_json_rules():
    assert load_sgf(b"(;GM[1]SZ[9]RU[NZ])").game_rules().name == "new-zealand"
    assert load_sgf(b"(;GM[1]SZ[9]RU[Chinese_OGS])").game_rules().name == "chinese"
    assert load_sgf(b"(;GM[1]SZ[9]RU[stone scoring])").game_rules().tax == "all"
    record = load_sgf(b'(;GM[1]SZ[9]RU[{"scoring":"TERRITORY","ko":"SIMPLE","suicide":false}])')
    assert record.game_rules() == Rules.named("japanese")
    assert load_sgf(b"(;GM[1]SZ[9]RU[house rules])").game_rules() == Rules()


def test_rules_of_no_named_rule_set_are_written_as_katagos_json_and_read_back():
    rules = Rules.from_katago({"scoring": "TERRITORY", "tax": "NONE", "ko": "SIMPLE", "suicide": False})
    game = GameState(9, komi=6.5, rules=rules)
    again = load_sgf(save_sgf(game))
    assert again.game_rules() == rules and again.to_game().rules == rules
    assert load_sgf(save_sgf(GameState(9, rules=Rules.named("aga")))).rules == "aga"


def test_a_record_without_km_gets_the_rules_komi_for_its_handicap():
    assert load_sgf(b"(;GM[1]SZ[9];B[ee])").to_game().komi == 7.5
    assert load_sgf(b"(;GM[1]SZ[9]RU[Japanese];B[ee])").to_game().komi == 6.5
    for rules in (b"Japanese", b"Chinese", b"AGA"):
        game = load_sgf(b"(;GM[1]SZ[9]RU[" + rules + b"]HA[2]AB[cc][gg];W[ee])").to_game()
        assert (game.handicap_stones, game.komi) == (2, 0.5)
    assert load_sgf(b"(;GM[1]SZ[9]KM[0]HA[2]AB[cc][gg];W[ee])").to_game().komi == 0  # KM[0] is a komi


def test_setup_over_several_nodes_follows_the_main_line():
    record = load("setup-variations.sgf")
    g = record.grid
    stones = {coords.to_sgf(g, p): c for c, p in record.setup}
    # Root AB/AW, then AE[ab][ac][cd] AB[bb] AW[dd] in the first node of the main variation.
    assert stones == {
        "aa": BLACK, "cc": BLACK, "ce": BLACK, "bb": BLACK,
        "ff": WHITE, "fg": WHITE, "fh": WHITE, "dd": WHITE,
    }
    assert record.first_player == WHITE
    assert [coords.to_sgf(g, p) for _, p in record.moves] == ["ha"]
    assert record.to_game(max_moves=0).to_play == BLACK  # the recorded first move overrides PL


def test_position_before_the_first_move_has_the_first_mover_to_play():
    record = load_sgf(b"(;SZ[9];W[ee];B[cc])")
    assert record.to_game(max_moves=0).to_play == WHITE
    assert record.to_game().to_play == WHITE


def test_rectangular_board_round_trip():
    g = coords.grid(9, 5)
    game = GameState(9, 5, komi=3.5)
    game.play(g.point(4, 8), BLACK)
    game.play(g.point(0, 0), WHITE)
    game.play(PASS, BLACK)
    data = save_sgf(game)
    assert b"SZ[9:5]" in data
    again = load_sgf(data).to_game()
    assert (again.width, again.height, again.komi) == (9, 5, 3.5)
    assert again.moves == game.moves


@pytest.mark.parametrize(
    "name, reason, detail",
    [
        ("not-an-sgf-file.sgf", "not SGF", ""),
        ("encoding-unsupported.sgf", "bad encoding", "CA[foo]"),
        ("illegal-move.sgf", "illegal move (occupied)", "move 16"),
        ("suicide.sgf", "illegal move (suicide)", "move 4"),
        ("positional-superko.sgf", "illegal move (superko)", "move 23"),
        ("illegal-setup.sgf", "illegal setup", ""),
        ("setup-after-first-move.sgf", "setup after moves", "move 2"),
    ],
)
def test_corrupt_and_illegal_files_raise_sgf_error_naming_file_and_problem(name, reason, detail):
    with pytest.raises(SgfError) as caught:
        load(name).to_game()
    error = caught.value
    assert error.reason == reason
    assert detail in error.detail
    assert name in str(error) and reason in str(error)


@pytest.mark.parametrize("rules", sorted(RULE_SETS))
def test_a_lone_stones_suicide_is_refused_under_every_rule_set(rules):
    # White's one-stone suicide at move 4: a pass that does not count as one, illegal even where suicide is allowed
    # (as in KataGo, whose rules allow only the suicide of two stones or more).
    with pytest.raises(SgfError, match=r"move 4 W A19: white A19 is illegal: suicide"):
        load("suicide.sgf").to_game(Rules.named(rules))


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "not SGF"),
        (b"(;SZ[9];B[aa]", "not SGF"),
        (b"(;SZ[30])", "unsupported size"),
        (b"(;SZ[nine])", "bad property"),
        (b"(;GM[2])", "not Go"),
        (b"(;SZ[9]KM[six])", "bad property"),
        ("(;SZ[9]HA[²];B[ee])".encode(), "bad property"),
        (b"(;SZ[9];B[jj])", "bad point"),
        (b"(;SZ[9];B[aa]W[bb])", "bad move"),
        (b"(;SZ[9]AB[aa]AW[aa])", "illegal setup"),
        (b"(;CA[base64];B[aa])", "bad encoding"),
    ],
)
def test_malformed_bytes_raise_sgf_error(data, reason):
    with pytest.raises(SgfError) as caught:
        load_sgf(data, source="inline.sgf").to_game()
    assert caught.value.reason == reason
    assert str(caught.value).startswith("inline.sgf: ")


def test_save_writes_game_information_and_reloads_it():
    g = coords.grid(19)
    game = GameState(19, komi=0.5, rules=Rules.named("japanese"))
    game.place_handicap([g.point(3, 15), g.point(15, 3)])
    game.play(g.point(2, 2), WHITE)
    game.play(PASS, BLACK)
    data = save_sgf(game, black="Kitani [Minoru]", white="Go Seigen", black_rank="9p", white_rank="9p", result="W+R")
    for prop in (b"HA[2]", b"KM[0.5]", b"RU[japanese]", b"RE[W+R]", b"AB[", b"BR[9p]", b"Kitani [Minoru\\]"):
        assert prop in data
    record = load_sgf(data)
    assert (record.black, record.white, record.result) == ("Kitani [Minoru]", "Go Seigen", "W+R")
    again = record.to_game()
    assert again.rules == game.rules
    assert again.handicap_stones == 2
    assert again.moves == game.moves
    assert np.array_equal(again.board.to_array(), game.board.to_array())


def test_setup_only_position_keeps_player_to_move():
    g = coords.grid(9)
    game = GameState(9)
    game.place_setup(BLACK, [g.point(4, 4)])
    game.place_setup(WHITE, [g.point(4, 5)])
    game.set_to_play(WHITE)
    again = load_sgf(save_sgf(game)).to_game()
    assert np.array_equal(again.board.to_array(), game.board.to_array())
    assert again.to_play == WHITE


def test_read_sgf_files_from_folder_tar_and_zip(tmp_path):
    fixtures = {p.name: p.read_bytes() for p in FIXTURES.glob("*.sgf")}
    with tarfile.open(tmp_path / "games.tar.xz", "w:xz") as archive:
        for name, data in fixtures.items():
            info = tarfile.TarInfo(f"games/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        readme = tarfile.TarInfo("games/README.txt")
        archive.addfile(readme, io.BytesIO(b""))
    with zipfile.ZipFile(tmp_path / "games.zip", "w") as archive:
        for name, data in fixtures.items():
            archive.writestr(f"games/{name}", data)
        archive.writestr("games/README.txt", "")
    for source in (FIXTURES, tmp_path / "games.tar.xz", tmp_path / "games.zip"):
        found = {Path(name).name: data for name, data in read_sgf_files(source)}
        assert found == fixtures, source
    single = FIXTURES / "2-passes.sgf"
    assert list(read_sgf_files(single)) == [(str(single), fixtures["2-passes.sgf"])]
