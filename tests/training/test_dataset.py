"""Soft policy targets in shards: they turn with the board under every symmetry, plain shards mixed in a window
get one-hot ones, and a writer refuses games of both kinds or half the soft fields."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features, symmetry  # noqa: E402
from gtp_engine.board import BLACK  # noqa: E402
from gtp_engine.training import dataset  # noqa: E402

SIZE = 5
AREA = SIZE * SIZE


def plain_game(states, rng) -> dict:
    """The states as one game for ShardWriter, without soft policy fields: a random legal move each."""
    spatial, global_ = features.encode(states)
    to_play = np.array([s.to_play for s in states], np.uint8)
    game = dataset.compact(spatial, to_play)
    count = len(states)
    moves = [int(rng.choice(np.flatnonzero(s.legal_mask()))) for s in states]
    game.update(to_play=to_play, globals=global_, move=np.array(moves, np.int16),
                value=np.zeros(count, np.int8), score=np.zeros(count, np.float32),
                score_mask=np.zeros(count, bool), game_ownership=np.zeros((1, AREA), np.int8),
                ownership_mask=np.array([False]), game_key=np.array([rng.integers(1 << 62)], np.uint64),
                game_source=np.array(["test"]))
    return game


def soft_game(states, rng) -> dict:
    game = plain_game(states, rng)
    policy = rng.dirichlet(np.ones(AREA + 1), size=len(states)).astype(np.float16)
    mask = np.arange(len(states)) % 3 != 0
    policy[~mask] = 0
    game.update(policy=policy, policy_mask=mask)
    return game


def test_soft_targets_turn_with_the_board_under_every_symmetry(random_states):
    rng = np.random.default_rng(1)
    states = random_states(SIZE, 12, seed=3)
    game = soft_game(states, rng)
    # Mark each position's first black stone (or pass) with most of the policy mass, so that the board and the
    # distribution can be checked against each other after a symmetry.
    marked = []
    for i, state in enumerate(states):
        stones = [state.grid.flat(p) for p in state.board.stones(BLACK)]
        marked.append(min(stones) if stones else AREA)
        game["policy"][i] = 0.0
        game["policy"][i, marked[-1]] = 0.75
        game["policy"][i, game["move"][i]] += 0.25
    game["game"] = np.zeros(len(states), np.int32)
    rows = np.arange(len(states))
    for s in symmetry.ALL:
        batch = dataset.take(game, rows)
        batch["symmetry"] = np.full(len(rows), s, np.uint8)
        spatial, _, targets = dataset.expand(dataset.to_device(batch, "cpu"), SIZE, SIZE)
        policy = targets["policy"].numpy()
        want = symmetry.transform_policy(game["policy"].astype(np.float32), s, SIZE, SIZE)
        assert np.array_equal(policy, want), s
        assert np.array_equal(targets["policy_mask"].numpy(), game["policy_mask"])
        # The moved mass lands on the moved stone: a black stone under the transformed board's planes.
        planes = spatial.numpy().reshape(len(rows), spatial.shape[1], -1)
        black_to_play = np.array([st.to_play == BLACK for st in states])[:, None]
        stones = np.where(black_to_play, planes[:, 1], planes[:, 2])  # own_stones, opponent_stones
        for i, point in enumerate(marked):
            top = np.flatnonzero(policy[i] >= 0.75)
            assert len(top) == 1 and (top[0] == AREA if point == AREA else stones[i, top[0]] == 1.0), (s, i)
        # The move target turns the same way as the distribution.
        moved = np.zeros((len(rows), AREA + 1), np.float32)
        moved[rows, targets["move"].numpy()] = 1.0
        assert np.array_equal(moved, symmetry.transform_policy(np.eye(AREA + 1, dtype=np.float32)[game["move"]],
                                                               s, SIZE, SIZE))


def test_plain_and_soft_shards_mix_with_one_hot_targets(random_states, tmp_path):
    rng = np.random.default_rng(2)
    states = random_states(SIZE, 30, seed=4)
    folders = []
    for name, make in (("plain", plain_game), ("soft", soft_game)):
        writer = dataset.ShardWriter(tmp_path / name, SIZE, SIZE, shard_samples=10)
        for start in range(0, 30, 10):
            writer.add("train", make(states[start:start + 10], rng))
        sidecar = writer.finish({})
        assert ("policy_samples" in sidecar["shards"][0]) == (name == "soft")
        folders.append(tmp_path / name)
    plain = dataset.Shards([folders[0]], "train").head(100)
    assert "policy" not in plain and "policy" not in dataset.take(plain, np.arange(4))
    both = dataset.Shards(folders, "train")
    batches = both.batches(20, seed=0, window_samples=1000)
    arrays = dataset.concatenate([dataset.load_shard(path) for path, _ in both.files])
    assert arrays["policy"].shape == (60, AREA + 1) and arrays["policy"].dtype == np.float16
    one_hot = arrays["policy"].astype(np.float32).max(axis=1) == 1.0
    from_plain = np.isin(arrays["game_key"][arrays["game"]],
                         dataset.Shards([folders[0]], "train").head(100)["game_key"])
    assert from_plain.sum() == 30 and one_hot[from_plain].all() and arrays["policy_mask"][from_plain].all()
    assert np.array_equal(arrays["policy"][from_plain].argmax(axis=1), arrays["move"][from_plain])
    batch = next(batches)
    assert batch["policy"].shape == (20, AREA + 1)


def test_plain_shards_mixed_with_search_values_get_their_results_as_search_values(random_states, tmp_path):
    rng = np.random.default_rng(9)
    states = random_states(SIZE, 6, seed=3)
    games = [plain_game(states[:3], rng), plain_game(states[3:], rng)]
    games[0]["value"] = np.array([0, 1, 2], np.int8)
    games[1]["search_value"] = np.array([0.25, -0.5, 0.0], np.float16)
    folders = []
    for number, game in enumerate(games):
        writer = dataset.ShardWriter(tmp_path / str(number), SIZE, SIZE, shard_samples=10)
        writer.add("train", game)
        writer.finish({})
        folders.append(tmp_path / str(number))
    arrays = dataset.concatenate([dataset.load_shard(path) for path, _ in dataset.Shards(folders, "train").files])
    assert arrays["search_value"].tolist() == [1.0, -1.0, 0.0, 0.25, -0.5, 0.0]
    batch = dataset.to_device(dataset.take(arrays, np.arange(6)), "cpu")
    assert dataset.expand(batch, SIZE, SIZE)[2]["search_value"].tolist() == [1.0, -1.0, 0.0, 0.25, -0.5, 0.0]


def test_a_writer_takes_both_soft_fields_or_neither_and_one_kind_of_game(random_states, tmp_path):
    rng = np.random.default_rng(3)
    states = random_states(SIZE, 4, seed=5)
    writer = dataset.ShardWriter(tmp_path / "a", SIZE, SIZE, shard_samples=100)
    half = soft_game(states, rng)
    del half["policy_mask"]
    with pytest.raises(ValueError, match="go together"):
        writer.add("train", half)
    writer.add("train", soft_game(states, rng))
    with pytest.raises(ValueError, match="cannot share"):
        writer.add("train", plain_game(states, rng))


def test_a_sample_takes_whole_training_games_until_it_holds_enough(random_states, tmp_path):
    rng = np.random.default_rng(6)
    states = random_states(SIZE, 40, seed=8)
    writer = dataset.ShardWriter(tmp_path / "expert", SIZE, SIZE, shard_samples=12)
    for start in range(0, 40, 5):  # 8 games of 5 samples: 6 for training, 2 held out
        writer.add("train" if start < 30 else "val", plain_game(states[start:start + 5], rng))
    writer.finish({})
    training = dataset.Shards([tmp_path / "expert"], "train").head(1000)

    sidecar = dataset.write_sample(tmp_path / "expert", tmp_path / "sample", samples=12, seed=1)
    assert sidecar["samples"] == {"train": 15, "val": 0} and sidecar["games"]["train"] == 3  # whole games
    sample = dataset.Shards([tmp_path / "sample"], "train").head(1000)
    for game, key in enumerate(sample["game_key"]):
        source = int(np.flatnonzero(training["game_key"] == key)[0])
        assert np.array_equal(sample["cells"][sample["game"] == game], training["cells"][training["game"] == source])
    again = dataset.write_sample(tmp_path / "expert", tmp_path / "again", samples=12, seed=1)
    other = dataset.write_sample(tmp_path / "expert", tmp_path / "other", samples=12, seed=2)
    keys = {name: sorted(dataset.Shards([tmp_path / name], "train").head(100)["game_key"])
            for name in ("again", "other")}
    assert keys["again"] == sorted(sample["game_key"]) and again["samples"] == sidecar["samples"]
    assert keys["other"] != keys["again"] and other["games"]["train"] == 3
