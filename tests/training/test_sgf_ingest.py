"""SGF ingest and shards: sample counts, move labels and value signs against an independent reading of the
fixture files, masked score/ownership targets, skipped records, archives, parallel workers, the compact form
against features.encode under every symmetry, and the batch stream's resumption."""

import re
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features, sgf_io, symmetry  # noqa: E402
from gtp_engine.training import dataset, sgf_ingest  # noqa: E402
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
