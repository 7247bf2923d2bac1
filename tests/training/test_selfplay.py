"""Self-play on a 5x5 board: games finish and are saved as SGF whose results and moves agree with the samples,
policy targets are visit distributions of full searches only, resignation and the no-resign share, one
evaluator call per round across games, the shards train, and the command line."""

import json
import subprocess
from collections import Counter
import time
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import features, sgf_io  # noqa: E402
from gtp_engine.board import BLACK, WHITE  # noqa: E402
from gtp_engine.coords import PASS  # noqa: E402
from gtp_engine.evaluator import UniformEvaluator  # noqa: E402
from gtp_engine.game import format_result  # noqa: E402
from gtp_engine.onnx_evaluator import OnnxEvaluator  # noqa: E402
from gtp_engine.training import dataset, selfplay, sgf_ingest, train  # noqa: E402
from gtp_engine.training.selfplay import SelfPlayConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SIZE = 5
AREA = SIZE * SIZE
GAMES = 10
CONFIG = SelfPlayConfig(size=SIZE, komi=2.0, full_visits=24, fast_visits=6, full_search_fraction=0.5,
                        parallel_games=4, leaves_per_game=4, val_fraction=0.5, seed=1)


@pytest.fixture(scope="module")
def played(tiny_onnx_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("selfplay")
    evaluator = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=0)
    report = selfplay.play(evaluator, GAMES, CONFIG, out, progress=False)
    return out, report


def all_samples(out: Path) -> dict:
    shards = [dataset.load_shard(out / s["file"]) for s in dataset.read_sidecar(out)["shards"]]
    return dataset.concatenate(shards)


def game_rows(arrays: dict, name: str) -> np.ndarray:
    games = np.flatnonzero(arrays["game_source"] == name)
    assert len(games) == 1, name
    return np.flatnonzero(arrays["game"] == games[0])


def test_games_finish_and_are_reported(played):
    out, report = played
    assert report.games == GAMES and sum(report.endings.values()) == GAMES
    assert report.black_wins + report.white_wins + report.draws == GAMES
    assert sorted(p.name for p in (out / "sgf").iterdir()) == sorted(f"game-{n}.sgf" for n in range(GAMES))
    assert json.loads((out / selfplay.REPORT).read_text()) == json.loads(json.dumps(report.to_dict()))
    sidecar = dataset.read_sidecar(out)
    assert sidecar["games"]["train"] + sidecar["games"]["val"] == GAMES
    assert sidecar["samples"]["train"] + sidecar["samples"]["val"] == report.samples == report.moves
    assert report.evaluations > 0 and report.evaluations_per_second > 0 and report.games_per_hour > 0


def test_sgf_records_agree_with_the_samples(played):
    out, _ = played
    arrays = all_samples(out)
    for number in range(GAMES):
        name = f"sgf/game-{number}.sgf"
        record = sgf_io.load_sgf_file(out / name)
        assert (record.width, record.height, record.komi, record.rules) == (SIZE, SIZE, 2.0, "chinese")
        final = record.to_game()  # every move legal
        result = sgf_ingest.parse_result(record.result)
        rows = game_rows(arrays, name)
        g = final.grid
        assert arrays["move"][rows].tolist() == [g.flat(p) for _, p in record.moves]
        assert arrays["to_play"][rows].tolist() == [c for c, _ in record.moves]
        values = arrays["value"][rows]
        if result.winner is None:
            assert (values == 2).all()
        else:
            assert np.array_equal(values, np.where(arrays["to_play"][rows] == result.winner, 0, 1))
        game = arrays["game"][rows[0]]
        if record.moves[-2:] == [(BLACK, PASS), (WHITE, PASS)] or record.moves[-2:] == [(WHITE, PASS), (BLACK, PASS)]:
            # Played out: the area count of the final position is the result, the score and the ownership target.
            assert result.ending in ("score", "draw") and final.area_score() == pytest.approx(
                result.margin * (1 if result.winner == BLACK else -1))
            lead = np.where(arrays["to_play"][rows] == BLACK, final.area_score(), -final.area_score())
            assert arrays["score_mask"][rows].all() and np.allclose(arrays["score"][rows], lead)
            assert arrays["ownership_mask"][game]
            assert np.array_equal(arrays["game_ownership"][game], final.area_ownership())
        else:
            assert not arrays["score_mask"][rows].any() and not arrays["ownership_mask"][game]


def test_each_game_is_played_counted_and_encoded_under_its_own_setup(tiny_onnx_model, tmp_path):
    config = replace(CONFIG, size=7, rules="chinese,japanese", komi=7.5, komi_stdev=1.0, handicap_share=0.3,
                     max_handicap=3, full_visits=8, fast_visits=4, max_moves=60, seed=3)
    evaluator = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=0)
    report = selfplay.play(evaluator, 12, config, tmp_path, progress=False)
    arrays = all_samples(tmp_path)
    seen = Counter()
    for number in range(12):
        name = f"sgf/game-{number}.sgf"
        record = sgf_io.load_sgf_file(tmp_path / name)
        setup = config.setups().draw(np.random.default_rng([config.seed, number]))
        assert (record.rules, record.komi, record.handicap) == (setup.rules.name, setup.komi, setup.handicap)
        seen[setup.rules.name, setup.handicap > 0] += 1
        start = record.to_game(max_moves=0)
        assert start.handicap_stones == setup.handicap and len(start.setup) == setup.handicap
        rows = game_rows(arrays, name)
        # The samples carry the game's own rules and komi: the first one's inputs are those of its start.
        _, global_ = features.encode([start])
        assert np.array_equal(arrays["globals"][rows[0]], global_[0])
        final = record.to_game()
        if not record.result.endswith("+R"):  # counted by the game's rules, every stone alive
            assert record.result == format_result(final.score())
        if arrays["score_mask"][rows].any():
            lead = np.where(arrays["to_play"][rows] == BLACK, final.score(), -final.score())
            assert np.allclose(arrays["score"][rows], lead)
    assert report.games == 12 and len(seen) >= 3, seen  # both rule sets, even and handicap games
    assert sum(report.setups.values()) == 12 and sum(n for key, n in report.setups.items() if "stones" in key) == \
        sum(n for (_, handicap), n in seen.items() if handicap)


def test_policy_targets_are_visit_distributions_of_full_searches(played):
    out, report = played
    arrays = all_samples(out)
    policy = arrays["policy"].astype(np.float64)
    mask = arrays["policy_mask"]
    assert 0 < mask.sum() == report.policy_samples < len(mask)
    assert np.allclose(policy[mask].sum(axis=1), 1.0, atol=2e-3) and (policy >= 0).all()
    assert not policy[~mask].any()
    # A distribution of (pruned) visits: some visit count up to three times a full search's makes every entry
    # a whole number of visits (float16 rounding aside).
    for row in policy[mask]:
        totals = np.arange(1, 3 * CONFIG.full_visits)
        error = np.abs(row[None, :] * totals[:, None] - np.round(row[None, :] * totals[:, None])).max(axis=1)
        assert error.min() < 0.1


def test_pruning_keeps_the_best_move_and_drops_visits_the_prior_does_not_explain():
    prior = np.array([0.6, 0.3, 0.05, 0.05, 0.0])
    q = np.array([0.1, 0.05, -0.5, 0.08, 0.5])
    visits = np.array([60.0, 25.0, 10.0, 5.0, 3.0])
    exploration = 20.0  # the best's final score: 0.1 + 20 * 0.6 / 61 = 0.2967
    kept = selfplay.prune_visits(visits, q, prior, exploration)
    # 20 * 0.3 / (0.2967 - 0.05) = 24.3; 1 / 0.7967 = 1.3 -> 1 visit, dropped; 1 / 0.2167 = 4.6; q above the score
    assert kept.tolist() == [60.0, 24.0, 0.0, 4.0, 3.0]
    assert (kept <= visits).all()
    lone = selfplay.prune_visits(np.array([5.0, 1.0, 1.0]), np.array([0.0, 0.9, -0.9]), np.array([0.5, 0.3, 0.2]), 3.0)
    assert lone.tolist() == [5.0, 0.0, 0.0]  # one visit is never kept, whatever its value


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_only_full_searches_give_policy_targets(tmp_path, fraction):
    config = SelfPlayConfig(size=SIZE, full_visits=8, fast_visits=8, full_search_fraction=fraction,
                            noise_fraction=0.0, parallel_games=2, val_fraction=0.0, resign_winrate=0.0)
    selfplay.play(UniformEvaluator(), 2, config, tmp_path, progress=False)
    arrays = all_samples(tmp_path)
    for number in range(2):
        name = f"sgf/game-{number}.sgf"
        record = sgf_io.load_sgf_file(tmp_path / name)
        state = record.to_game(max_moves=0)
        searched = []  # a position with one legal move (pass) is played without a search: no policy target
        for color, point in record.moves:
            searched.append(state.legal_mask().sum() > 1)
            state.play(point, color)
        mask = arrays["policy_mask"][game_rows(arrays, name)]
        assert np.array_equal(mask, np.array(searched) & (fraction == 1.0))


class LostForWhite:
    """A uniform policy and a value that says White has lost; it records the size of every call."""

    def __init__(self):
        self.sizes = []

    def evaluate(self, states):
        self.sizes.append(len(states))
        batch = UniformEvaluator().evaluate(states)
        batch.value[:] = [0.98 if s.to_play == BLACK else -0.98 for s in states]
        return batch


def test_resignation_the_no_resign_share_and_false_resignations(tmp_path):
    evaluator = LostForWhite()
    config = SelfPlayConfig(size=SIZE, full_visits=8, fast_visits=4, parallel_games=4, leaves_per_game=2,
                            no_resign_fraction=0.3, resign_consecutive=2, val_fraction=0.0)
    report = selfplay.play(evaluator, 10, config, tmp_path, progress=False)
    assert report.no_resign_games == 3 and report.resigned == 7  # games 3, 6 and 9 play on
    assert report.would_resign == 3
    white_won = 0
    for number in range(10):
        record = sgf_io.load_sgf_file(tmp_path / f"sgf/game-{number}.sgf")
        if number in (3, 6, 9):
            assert not record.result.endswith("+R")
            white_won += record.result.startswith("W+")
        else:
            assert record.result == "B+R" and len(record.moves) == 3  # White resigns at its second search
    assert report.false_resignations == white_won
    arrays = all_samples(tmp_path)
    rows = game_rows(arrays, "sgf/game-0.sgf")
    assert np.array_equal(arrays["value"][rows], np.where(arrays["to_play"][rows] == BLACK, 0, 1))
    assert not arrays["score_mask"][rows].any() and not arrays["ownership_mask"][arrays["game"][rows[0]]]
    # The search value of the resigned games: what the searches believed, Black winning and White losing. (A game
    # played on may end in two passes, where the last searches see the count.)
    resigned = np.isin(arrays["game_source"][arrays["game"]], [f"sgf/game-{n}.sgf" for n in (0, 1, 2, 4, 5, 7, 8)])
    black = arrays["to_play"] == BLACK
    assert (arrays["search_value"][black & resigned] > 0).all() and (arrays["search_value"][~black & resigned] < 0).all()
    # One evaluator call per round, shared by the games in progress.
    assert len(evaluator.sizes) == report.evaluator_calls and max(evaluator.sizes) <= 4 * 2
    assert max(evaluator.sizes) > 2


def test_a_game_cut_at_max_moves_is_scored_as_it_stands(tmp_path):
    config = SelfPlayConfig(size=SIZE, full_visits=4, fast_visits=4, max_moves=6, parallel_games=2,
                            val_fraction=0.0, resign_winrate=0.0)
    report = selfplay.play(UniformEvaluator(), 2, config, tmp_path, progress=False)
    assert report.endings["cut"] == 2 and report.moves == 12
    arrays = all_samples(tmp_path)
    for number in range(2):
        name = f"sgf/game-{number}.sgf"
        record = sgf_io.load_sgf_file(tmp_path / name)
        score = record.to_game().area_score()
        assert len(record.moves) == 6 and record.result == format_result(score)
        rows = game_rows(arrays, name)
        winner = BLACK if score > 0 else WHITE
        assert np.array_equal(arrays["value"][rows], np.where(arrays["to_play"][rows] == winner, 0, 1))
        assert not arrays["score_mask"][rows].any() and not arrays["ownership_mask"][arrays["game"][rows[0]]]


def test_the_shards_train(played, tmp_path):
    out, _ = played
    config = train.TrainConfig(data=(str(out),), preset="tiny", batch_size=16, steps=2, eval_every=2,
                               warmup_steps=1, val_samples=32, window_samples=64, device="cpu")
    summary = train.train(config, tmp_path / "run", export=False, progress=False)
    assert summary["finished"] and np.isfinite(summary["validation"]["policy_loss"])
    batch = next(dataset.Shards([out], "train").batches(16, seed=0))
    assert batch["policy"].shape == (16, AREA + 1)


def test_the_command_line_plays_and_writes_a_report(tiny_onnx_model, tmp_path):
    out = tmp_path / "cli"
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "selfplay", "--weights",
               str(tiny_onnx_model), "--out", str(out), "--games", "2", "--size", "5", "--full-visits", "8",
               "--fast-visits", "4", "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    assert json.loads((out / selfplay.REPORT).read_text())["games"] == 2
    assert len(list((out / "sgf").glob("*.sgf"))) == 2


def test_moves_drawn_by_visits_are_never_a_pass(tmp_path):
    # A uniform network gives pass as much prior as any point, so passes get visits on a 5x5 board.
    config = SelfPlayConfig(size=SIZE, full_visits=16, fast_visits=16, full_search_fraction=1.0,
                            temperature_moves=12, parallel_games=4, val_fraction=0.0, resign_winrate=0.0, seed=3)
    selfplay.play(UniformEvaluator(), 4, config, tmp_path, progress=False)
    arrays = all_samples(tmp_path)
    pass_visits = arrays["policy"][:, AREA][arrays["policy_mask"]]
    assert pass_visits[:12].sum() > 0  # passes were searched ...
    for number in range(4):
        record = sgf_io.load_sgf_file(tmp_path / f"sgf/game-{number}.sgf")
        assert PASS not in [point for _, point in record.moves[:12]]  # ... but never drawn


class FavourOnePoint:
    """Nine tenths of the prior on the first legal point, the rest spread; a value of 0."""

    def evaluate(self, states):
        batch = UniformEvaluator().evaluate(states)
        for row in batch.policy:
            row *= 0.1
            row[int(np.flatnonzero(row)[0])] += 0.9
        batch.value[:] = 0.0
        return batch


def test_forced_playouts_visit_every_root_move_and_their_targets_are_pruned(tmp_path, monkeypatch):
    pruned = []

    def recording_prune(visits, q, prior, exploration):
        kept = prune_visits(visits, q, prior, exploration)
        pruned.append((visits.copy(), kept))
        return kept

    prune_visits = selfplay.prune_visits
    monkeypatch.setattr(selfplay, "prune_visits", recording_prune)
    unvisited = {}
    for forced in (0.0, 2.0):
        pruned.clear()
        config = SelfPlayConfig(size=SIZE, komi=2.0, full_visits=48, fast_visits=8, full_search_fraction=1.0,
                                forced_playouts=forced, noise_fraction=0.0, parallel_games=2,
                                max_moves=12, val_fraction=0.0, resign_winrate=0.0, seed=4)
        out = tmp_path / str(forced)
        out.mkdir()
        report = selfplay.play(FavourOnePoint(), 2, config, out, progress=False)
        policy = all_samples(out)["policy"].astype(np.float64)
        assert np.allclose(policy.sum(axis=1), 1.0, atol=2e-3)
        assert len(pruned) == report.policy_samples
        unvisited[forced] = sum(int((visits == 0).sum()) for visits, _ in pruned if visits.sum() >= 40)
        assert any((kept < visits).any() for visits, kept in pruned)
    # Without forced playouts PUCT leaves the moves of tiny prior alone; with them each one gets a visit or more
    # (N < sqrt(2 * P * sum N) holds at N = 0 for any P > 0).
    assert unvisited[0.0] > 0 and unvisited[2.0] == 0
    config = SelfPlayConfig(size=SIZE, full_visits=16, fast_visits=16, full_search_fraction=1.0,
                            forced_playouts=2.0, prune_policy_target=False, parallel_games=2, max_moves=4)
    pruned.clear()
    selfplay.play(FavourOnePoint(), 1, config, tmp_path / "unpruned", progress=False)
    assert pruned  # forced visits are pruned from the targets whatever prune_policy_target says
    with pytest.raises(ValueError, match="forced_playouts"):
        SelfPlayConfig(forced_playouts=-1.0)


class Jittery(UniformEvaluator):
    """A uniform network that takes a random few milliseconds a call: pipelined calls end in any order."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def evaluate(self, states):
        time.sleep(float(self.rng.uniform(0.0, 0.003)))
        return super().evaluate(states)


def test_pipelined_selfplay_plays_the_same_games_whatever_the_timing(tmp_path):
    config = SelfPlayConfig(size=SIZE, full_visits=12, fast_visits=4, parallel_games=4, leaves_per_game=3,
                            val_fraction=0.0, seed=5)
    records = {}
    for name, evaluator, threads in (("a", Jittery(1), 1), ("b", Jittery(2), 1), ("serial", UniformEvaluator(), 0)):
        out = tmp_path / name
        report = selfplay.play(evaluator, 6, replace(config, evaluation_threads=threads), out, progress=False)
        assert report.games == 6 and report.samples == report.moves
        records[name] = [(out / f"sgf/game-{n}.sgf").read_text() for n in range(6)]
    assert records["a"] == records["b"]  # the threads' timing changes nothing


def test_pipelined_selfplay_shares_the_cores_between_calls():
    assert SelfPlayConfig(evaluation_threads=1).network_threads(cores=16) == 8
    assert SelfPlayConfig(evaluation_threads=3).network_threads(cores=2) == 1
    assert SelfPlayConfig(evaluation_threads=0).network_threads(cores=16) == 0  # onnxruntime's own choice
    with pytest.raises(ValueError, match="evaluation_threads"):
        SelfPlayConfig(evaluation_threads=-1)
