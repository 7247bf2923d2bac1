"""SGF ingest and shards: sample counts, move labels and value signs against an independent reading of the
fixture files, masked score/ownership targets, skipped records, archives, parallel workers, the compact form
against features.encode under every symmetry, and the batch stream's resumption."""

import functools
import re
import shutil
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import coords, features, sgf_io, symmetry  # noqa: E402
from gtp_engine.board import BLACK  # noqa: E402
from gtp_engine.game import GameState, Rules  # noqa: E402
from gtp_engine.training import dataset, sgf_ingest, splits  # noqa: E402
from gtp_engine.training.sgf_ingest import IngestConfig, Skip  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
SIZE = 9
CONFIG = IngestConfig(size=SIZE, min_moves=10, val_fraction=0.0, workers=1, shard_samples=100)


def independent_reading(path: Path):
    """(moves as (colour letter, flat index), RE) read with regular expressions, not sgf_io: OGS files nest every
    move in a variation of its own, so the nodes in file order are the main line."""
    text = path.read_text()
    moves = []
    for color, point in re.findall(r";\s*([BW])\[([a-z]{0,2})\]", text):
        if point in ("", "tt"):
            moves.append((color, SIZE * SIZE))
        else:
            moves.append((color, (ord(point[1]) - 97) * SIZE + ord(point[0]) - 97))
    result = re.search(r"RE\[([^\]]*)\]", text).group(1)
    return moves, result


def load_all(directory: Path, split: str = "train") -> dict:
    return dataset.Shards([directory], split).head(10**9)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    out = tmp_path_factory.mktemp("shards")
    sidecar = sgf_ingest.ingest([FIXTURES], out, CONFIG, progress=False)
    return out, sidecar


def test_samples_moves_and_values_match_the_records(shards):
    out, sidecar = shards
    arrays = load_all(out)
    kept = 0
    for path in sorted(FIXTURES.glob("*.sgf")):
        moves, result = independent_reading(path)
        games = np.flatnonzero(arrays["game_source"] == str(path))
        if result.lower() == "draw":
            assert len(games) == 0
            continue
        assert len(games) == 1, path.name
        rows = np.flatnonzero(arrays["game"] == games[0])
        kept += 1
        assert len(rows) == len(moves), path.name
        assert arrays["move"][rows].tolist() == [flat for _, flat in moves]
        movers = ["B" if c == 1 else "W" for c in arrays["to_play"][rows]]
        assert movers == [color for color, _ in moves]
        winner = result[0]
        expected_value = [0 if mover == winner else 1 for mover in movers]
        assert arrays["value"][rows].tolist() == expected_value, path.name
    total = sum(len(independent_reading(p)[0]) for p in FIXTURES.glob("*.sgf") if "Draw" not in p.read_text())
    assert sidecar["samples"] == {"train": total, "val": 0}
    assert sidecar["games"]["train"] == kept == 7
    assert sidecar["counts"]["skipped"] == {"draw": 1}
    assert sum(s["bytes"] for s in sidecar["shards"]) == sidecar["bytes"] > 0


def test_score_and_ownership_only_where_trusted(shards):
    arrays = load_all(shards[0])
    by_name = {Path(source).name: g for g, source in enumerate(arrays["game_source"])}
    trusted = {"623591.sgf", "ogs_18160620.sgf", "ogs_4988433.sgf"}
    scored = trusted | {"ogs_19567289.sgf"}
    for name, g in by_name.items():
        rows = arrays["game"] == g
        record = sgf_io.load_sgf_file(FIXTURES / name)
        assert arrays["ownership_mask"][g] == (name in trusted), name
        assert arrays["score_mask"][rows].all() == (name in scored) and arrays["score_mask"][rows].any() == (
            name in scored), name
        if name in scored:
            margin = float(record.result[2:]) * (1 if record.result[0] == "B" else -1)
            black_to_move = arrays["to_play"][rows] == 1
            assert np.array_equal(arrays["score"][rows], np.where(black_to_move, margin, -margin))
        if name in trusted:
            # Area count of the final board: black points minus white points is the margin plus komi.
            owner = arrays["game_ownership"][g]
            assert abs(owner.sum() - (margin + record.komi)) <= (1 if record.rules == "Japanese" else 0)
        else:
            assert not arrays["game_ownership"][g].any()


@pytest.mark.parametrize("text, winner, ending, margin", [
    ("B+R", 1, "resign", None), ("W+Resign", 2, "resign", None), ("B+T", 1, "time", None),
    ("W+Forfeit", 2, "forfeit", None), ("B+3.5", 1, "score", 3.5), ("W+ 12", 2, "score", 12.0),
    ("W+", 2, "win", None), ("0", None, "draw", 0.0), ("Jigo", None, "draw", 0.0), ("Draw", None, "draw", 0.0),
])
def test_results(text, winner, ending, margin):
    assert sgf_ingest.parse_result(text) == sgf_ingest.Result(winner, ending, margin)


@pytest.mark.parametrize("text", ["Void", "?", "B+x", "", None, "B-3"])
def test_unusable_results_are_skips(text):
    with pytest.raises(Skip):
        sgf_ingest.parse_result(text)


def test_ranks():
    assert sgf_ingest.parse_rank("5k") < sgf_ingest.parse_rank("1k") < sgf_ingest.parse_rank("1d")
    assert sgf_ingest.parse_rank("9d") < sgf_ingest.parse_rank("1p") < sgf_ingest.parse_rank("9p")
    assert sgf_ingest.parse_rank("2549") is None and sgf_ingest.parse_rank("初段") is None


def test_bad_and_filtered_records_are_skipped_and_counted(tmp_path):
    good = (FIXTURES / "620462.sgf").read_text()
    source = tmp_path / "sgf"
    source.mkdir()
    variants = {
        "garbage": "this is not an sgf file",
        "illegal": None,
        "big": good.replace("SZ[9]", "SZ[19]"),
        "handicap": good.replace("SZ[9]", "SZ[9]HA[2]AB[cc][gg]"),
        "short": None,
        "noresult": re.sub(r"RE\[[^\]]*\]", "", good),
        "void": re.sub(r"RE\[[^\]]*\]", "RE[Void]", good),
        "weak": good.replace("BR[", "BR[12k]XX["),
        "duplicate": good,
        "good": good,
    }
    # An illegal move: the second move played again on the first move's point.
    first = re.search(r";B\[([a-z]{2})\]", good).group(1)
    variants["illegal"] = re.sub(r";W\[[a-z]{2}\]", f";W[{first}]", good, count=1)
    variants["short"] = re.sub(r"(;[BW]\[[a-z]{2}\][^;()]*){12}\)", ")", good)
    for name, text in variants.items():
        (source / f"{name}.sgf").write_text(text)
    config = IngestConfig(size=SIZE, min_moves=20, min_rank="1d", val_fraction=0.0, workers=1)
    sidecar = sgf_ingest.ingest([source], tmp_path / "out", config, progress=False)
    assert sidecar["counts"]["skipped"] == {
        "sgf: not SGF": 1, "illegal move": 1, "board size": 1, "handicap": 1, "too few moves": 1,
        "no result": 1, "void result": 1, "rank": 1, "duplicate": 1}
    assert sidecar["games"]["train"] == 1 and sidecar["counts"]["records"] == len(variants)


def test_archives_and_parallel_workers_give_the_same_shards(tmp_path, shards):
    archive = tmp_path / "games.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        for path in sorted(FIXTURES.glob("*.sgf")):
            tar.add(path, arcname=f"games/{path.name}")
    config = IngestConfig(**{**CONFIG.__dict__, "workers": 2})
    sidecar = sgf_ingest.ingest([archive], tmp_path / "out", config, progress=False)
    assert sidecar["samples"] == shards[1]["samples"]
    ours, theirs = load_all(tmp_path / "out"), load_all(shards[0])
    order = np.argsort(ours["game_key"][ours["game"]], kind="stable")
    reference = np.argsort(theirs["game_key"][theirs["game"]], kind="stable")
    for key in ("cells", "move", "history", "ko", "globals", "value", "score"):
        assert np.array_equal(ours[key][order], theirs[key][reference]), key
    assert all(source.startswith("games/") for source in ours["game_source"])


def test_writer_refuses_a_folder_with_shards(shards):
    with pytest.raises(dataset.DatasetError, match="already holds shards"):
        sgf_ingest.ingest([FIXTURES], shards[0], CONFIG, progress=False)


def replayed_states(path: Path):
    record = sgf_io.load_sgf_file(path)
    state = record.to_game(max_moves=0)
    states = []
    for color, point in record.moves:
        states.append(state.copy())
        state.play(point, color)
    return states


def test_expanded_inputs_and_targets_equal_features_encode_under_every_symmetry(shards):
    arrays = load_all(shards[0])
    for g, source in enumerate(arrays["game_source"]):
        states = replayed_states(Path(source))
        rows = np.flatnonzero(arrays["game"] == g)
        batch = dataset.take(arrays, rows)
        for s in symmetry.ALL:
            syms = np.full(len(rows), s, np.uint8)
            batch["symmetry"] = syms
            spatial, global_, targets = dataset.expand(dataset.to_device(batch, "cpu"), SIZE, SIZE)
            want_spatial, want_global = features.encode(states, syms)
            assert np.array_equal(spatial.numpy(), want_spatial), (source, s)
            assert np.array_equal(global_.numpy(), want_global)
            one_hot = np.eye(SIZE * SIZE + 1)[arrays["move"][rows]]
            assert np.array_equal(targets["move"].numpy(),
                                  symmetry.transform_policy(one_hot, s, SIZE, SIZE).argmax(axis=1))
            sign = np.where(arrays["to_play"][rows] == 1, 1.0, -1.0)[:, None]
            owner = symmetry.transform_flat(arrays["game_ownership"][g] * sign, s, SIZE, SIZE)
            assert np.array_equal(targets["ownership"].numpy().reshape(len(rows), -1), owner)


def test_batch_stream_is_a_function_of_the_batch_number(tmp_path):
    out = tmp_path / "small-shards"
    sgf_ingest.ingest([FIXTURES], out, IngestConfig(**{**CONFIG.__dict__, "shard_samples": 40}), progress=False)
    shards = dataset.Shards([out], "train")
    assert len(shards.files) > 3

    def first(stream, n):
        return [next(stream) for _ in range(n)]

    whole = first(shards.batches(16, seed=3, window_samples=100), 30)
    tail = first(shards.batches(16, seed=3, start=17, window_samples=100), 13)
    for a, b in zip(whole[17:], tail):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    windows = shards._windows(0, 3, 100)
    files = sorted(f for w in windows for f in w.files)
    assert files == sorted(path for path, _ in shards.files)  # every shard once per epoch
    assert sum(w.samples for w in windows) == shards.samples
    other_seed = first(shards.batches(16, seed=4, window_samples=100), 1)[0]
    assert not np.array_equal(other_seed["move"], whole[0]["move"])


def test_sidecar_from_other_features_is_refused(tmp_path, shards):
    copy = tmp_path / "copy"
    shutil.copytree(shards[0], copy)
    text = (copy / dataset.SIDECAR).read_text().replace('"features_version": 1', '"features_version": 99')
    (copy / dataset.SIDECAR).write_text(text)
    with pytest.raises(dataset.DatasetError, match="features version 99"):
        dataset.Shards([copy], "train")


# ---- setups drawn anew for games that ended by counting ----------------------------------------------------------

# 5x5: a Black wall on column C, a White one on D, then one more Black stone inside Black's own area and two passes.
# Every stone is alive; by area Black has 15 points and White 10 (Black +5 before komi), by territory 9 and 5
# (Black +4): the extra stone is a point of area and a point less of territory.
_WALLS = "".join(f";B[c{row}];W[d{row}]" for row in "abcde") + ";B[aa];W[];B[]"
AREA_COUNT, TERRITORY_COUNT = 5.0, 4.0


def walls_record(komi=0.5, rules="Chinese", moves=_WALLS):
    lead = AREA_COUNT - komi if rules == "Chinese" else TERRITORY_COUNT - komi
    result = f"B+{lead:g}" if lead > 0 else f"W+{-lead:g}"
    return sgf_io.load_sgf(f"(;GM[1]FF[4]SZ[5]KM[{komi:g}]RU[{rules}]RE[{result}]{moves})".encode())


RELABEL = IngestConfig(size=5, min_moves=5, val_fraction=0.0, workers=1, relabel_share=1.0,
                       relabel_rules="chinese,japanese", relabel_komi_stdev=2.0)


@functools.cache
def _setups_by_inputs() -> dict:
    """(rules name, komi) of Black's first move on the 5x5 board, by its global inputs, for komi -20 .. 20."""
    table = {}
    for name in ("chinese", "japanese"):
        for komi in np.arange(-20.0, 20.5, 0.5):
            state = GameState(5, komi=float(komi), rules=Rules.named(name))
            table[features.encode([state])[1][0].tobytes()] = name, float(komi)
    return table


def setup_of(game):
    """The (rules name, komi) whose inputs the game's first position carries, found among the candidates."""
    return _setups_by_inputs()[game["globals"][0].astype(np.float32).tobytes()]


def test_a_counted_game_is_labelled_under_its_drawn_rules_and_komi():
    setups = []
    for seed in range(120):
        game = sgf_ingest.game_samples(walls_record(), replace(RELABEL, seed=seed))
        name, komi = setup_of(game)
        count = AREA_COUNT if name == "chinese" else TERRITORY_COUNT  # the rules core's count under those rules
        black_lead = count - komi
        to_play = game["to_play"]
        assert np.array_equal(game["score"], np.where(to_play == BLACK, black_lead, -black_lead))
        assert game["score_mask"].all()
        assert np.array_equal(game["value"], np.where((to_play == BLACK) == (black_lead > 0), 0, 1))
        if game["relabelled"] is None:  # a draw under the komi drawn: kept as recorded, since draws are not kept
            assert (name, komi) == ("chinese", 0.5)
            continue
        assert game["relabelled"] == name
        setups.append((name, komi))
    names = [name for name, _ in setups]
    assert len(setups) > 100 and 30 < names.count("japanese") < 90
    # Each rule set's komi spreads about the record's own, moved a point lower under territory scoring.
    for name, centre in (("chinese", 0.5), ("japanese", -0.5)):
        komis = np.array([komi for n, komi in setups if n == name])
        assert abs(komis.mean() - centre) < 1.0 and 1.0 < komis.std() < 3.0
        assert len(set(komis)) >= 5


def test_dead_stones_need_no_judgement_to_count_by_the_other_scoring():
    # A dead White stone left in Black's area at the two passes: by area, Black 6 stones and 9 points against 10
    # (Black +5 before komi); by territory, 9 points and the dead stone as a prisoner against 5 (Black +5 too: each
    # side put 6 stones on the board). Counted alike whatever the rules drawn.
    dead_stone = walls_record(moves=_WALLS.replace(";B[aa];W[];B[]", ";B[aa];W[ab];B[];W[]"))
    names = set()
    for seed in range(30):
        game = sgf_ingest.game_samples(dead_stone, replace(RELABEL, seed=seed))
        name, komi = setup_of(game)
        names.add(name)
        assert game["score"][0] == AREA_COUNT - komi  # Black moves first
    assert names == {"chinese", "japanese"}


# SEKI_WITH_EYES of tests/unit/test_game.py as setup stones: Black 8 stones, White 10, the eyes in seki counted by
# area (Black 3 points, White 3) but not by territory.
_SEKI = "AB[ba][ab][bb][cb][dc][ec][dd][de]AW[da][db][eb][ac][bc][cc][bd][cd][ae][ce];B[];W[]"


def test_the_record_keeps_its_scoring_where_the_final_board_does_not_tell_the_other_count():
    # Without the two passes the final position is not the counted one; with a seki the two counts differ by its
    # eyes, not by the stones put on the board. Either way the game keeps Chinese rules, and only its komi is drawn:
    # the recorded margin moves by it exactly.
    unfinished = walls_record(moves=_WALLS[:-len(";W[];B[]")])
    seki = sgf_io.load_sgf(f"(;GM[1]FF[4]SZ[5]KM[0.5]RU[Chinese]RE[W+2.5]{_SEKI})".encode())
    for record, count in ((unfinished, AREA_COUNT), (seki, -2.0)):
        for seed in range(30):
            game = sgf_ingest.game_samples(record, replace(RELABEL, seed=seed, min_moves=1))
            name, komi = setup_of(game)
            assert name == "chinese"
            assert game["score"][0] == count - komi  # Black moves first


def test_territory_records_are_counted_by_area_when_area_rules_are_drawn():
    record = walls_record(komi=6.5, rules="Japanese")
    for seed in range(40):
        game = sgf_ingest.game_samples(record, replace(RELABEL, seed=seed))
        name, komi = setup_of(game)
        assert game["score"][0] == (AREA_COUNT if name == "chinese" else TERRITORY_COUNT) - komi


def test_validation_games_and_resigned_games_stay_as_recorded():
    recorded = sgf_ingest.game_samples(walls_record(), replace(RELABEL, relabel_share=0.0))
    assert setup_of(recorded) == ("chinese", 0.5) and recorded["relabelled"] is None
    record = walls_record()
    key = splits.record_key(record)
    held_out = replace(RELABEL, val_fraction=0.99)
    assert splits.split_of(key, held_out.val_fraction) == "val"
    assert sgf_ingest.game_samples(record, held_out)["relabelled"] is None
    resigned = sgf_io.load_sgf(f"(;GM[1]FF[4]SZ[5]KM[0.5]RU[Chinese]RE[W+R]{_WALLS})".encode())
    game = sgf_ingest.game_samples(resigned, RELABEL)
    assert setup_of(game) == ("chinese", 0.5) and game["relabelled"] is None and not game["score_mask"].any()


def test_relabelling_is_drawn_per_game_and_counted_in_the_sidecar(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for number in range(40):  # different games: a pass more or less at the start changes the game key
        (records / f"{number}.sgf").write_text(
            f"(;GM[1]FF[4]SZ[5]KM[0.5]RU[Chinese]RE[B+4.5]{';B[];W[]' * number}{_WALLS})")
    config = replace(RELABEL, relabel_share=0.5, min_moves=5)
    sidecar = sgf_ingest.ingest([records], tmp_path / "a", config, progress=False)
    setups = sidecar["counts"]["setups"]
    assert sum(setups.values()) == 40 and 8 <= setups["kept as recorded"] <= 32
    assert sgf_ingest.ingest([records], tmp_path / "b", config, progress=False)["counts"]["setups"] == setups


def test_bad_relabel_settings_are_refused():
    for bad in (dict(relabel_share=1.5), dict(relabel_rules="chinese,chess"), dict(relabel_komi_stdev=-1.0)):
        with pytest.raises(ValueError):
            IngestConfig(**bad)


# Black's wall on column E, White's on F, a dead white stone at B5 in Black's area; then C7 and H7, two passes.
DEAD_STONE_GAME = ("(;GM[1]FF[4]SZ[9]KM[0]RU[Chinese]RE[{result}]AB[ea][eb][ec][ed][ee][ef][eg][eh][ei]"
                   "AW[fa][fb][fc][fd][fe][ff][fg][fh][fi][be];B[cc];W[hc];B[];W[])")


def test_rollouts_take_dead_stones_off_for_the_ownership_target_where_the_count_then_gives_the_result():
    record = sgf_io.load_sgf(DEAD_STONE_GAME.format(result="B+9").encode())
    config = replace(CONFIG, min_moves=0)
    as_it_stands = sgf_ingest.game_samples(record, config)
    assert not as_it_stands["ownership_mask"][0]  # every stone alive, White gets B5's region: W+28, not B+9
    judged = sgf_ingest.game_samples(record, replace(config, ownership_playouts=32))
    owner = judged["game_ownership"][0]
    g = record.grid
    assert judged["ownership_mask"][0]
    assert owner[g.flat(coords.from_gtp(g, "B5"))] == 1 and owner[g.flat(coords.from_gtp(g, "F5"))] == -1
    assert owner.sum() == 9  # Black's 45 points against White's 36: the recorded margin at komi 0

    wrong = sgf_io.load_sgf(DEAD_STONE_GAME.format(result="B+20").encode())
    assert not sgf_ingest.game_samples(wrong, replace(config, ownership_playouts=32))["ownership_mask"][0]


def test_ownership_playouts_must_not_be_negative():
    with pytest.raises(ValueError, match="ownership_playouts"):
        IngestConfig(ownership_playouts=-1)
