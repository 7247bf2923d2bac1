"""The training loop on a 5x5 board with the tiny preset: the gate's decision rule on fixed results, a gate match
that alternates colours and resumes, a generation end to end (promotion, metrics, plot), resumption after an
exception in training (no promotion) and after a kill, a rerun with other settings refused, the optional match
against GNU Go, and the Ray path on a local cluster when ray is installed."""

import dataclasses
import functools
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gtp_engine import sgf_io  # noqa: E402
from gtp_engine.board import BLACK, WHITE  # noqa: E402
from gtp_engine.evaluator import UniformEvaluator  # noqa: E402
from gtp_engine.network_evaluator import ModelLoadError  # noqa: E402
from gtp_engine.onnx_evaluator import OnnxEvaluator  # noqa: E402
from gtp_engine.training import checkpoint as checkpoint_lib  # noqa: E402
from gtp_engine.training import dataset, gating, loop, quantize, selfplay, sgf_ingest, train  # noqa: E402
from gtp_engine.training.gating import GateConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SIZE = 5
# Small everything: a generation is two self-play batches of 3 games, 6 training steps and a 4-game gate.
TINY = {"generations": 1, "games_per_generation": 6, "batch_games": 3, "size": SIZE, "komi": 2.0, "device": "cpu",
        "selfplay": selfplay.SelfPlayConfig(full_visits=12, fast_visits=4, parallel_games=3, val_fraction=0.5),
        "train": dataclasses.replace(loop.TRAIN, steps=6, batch_size=16, warmup_steps=2, val_samples=64,
                                     device="cpu"),
        "gate": GateConfig(max_games=4, visits=6)}
# The same as command-line flags: the loop's own, the nested ones with their section, and flags of earlier versions.
TINY_FLAGS = ["--generations", "1", "--games-per-generation", "6", "--batch-games", "3", "--size", str(SIZE),
              "--komi", "2", "--device", "cpu", "--selfplay-full-visits", "12", "--fast-visits", "4",
              "--parallel-games", "3", "--selfplay-val-fraction", "0.5", "--train-steps", "6", "--batch-size", "16",
              "--train-warmup-steps", "2", "--val-samples", "64", "--gate-games", "4", "--gate-visits", "6",
              "--train-device", "cpu"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_checkpoint_with_seed):
    return tiny_checkpoint_with_seed(0)


def results(wins: int, losses: int, draws: int = 0) -> list[float]:
    """Interleaved, as a real match would give them."""
    out, left = [], {1.0: wins, 0.0: losses, 0.5: draws}
    while any(left.values()):
        for value in (1.0, 0.0, 0.5):
            if left[value]:
                out.append(value)
                left[value] -= 1
    return out


# ---- the decision rule -------------------------------------------------------------------------------------


def test_the_sprt_promotes_a_clearly_stronger_candidate_and_rejects_a_weaker_one():
    config = GateConfig(max_games=400)
    promoted, reason = gating.verdict(results(70, 30), config)
    assert promoted is True and "H1" in reason
    promoted, reason = gating.verdict(results(30, 70), config)
    assert promoted is False and "H0" in reason
    assert gating.verdict(results(12, 8), config)[0] is None  # 60% of 20 games proves nothing yet
    assert gating.verdict(results(9, 1), config)[0] is None  # before sprt_min_games the SPRT is not asked


def test_at_the_cap_the_fixed_rule_wants_55_percent_over_100_games():
    config = GateConfig(max_games=100)
    close = results(56, 44)
    assert gating.verdict(close[:99], config)[0] is None
    promoted, reason = gating.verdict(close, config)
    assert promoted is True and "cap" in reason
    assert gating.verdict(results(54, 46), config)[0] is False
    capped = GateConfig(max_games=50)  # under fixed_games: only the SPRT can promote
    promoted, reason = gating.verdict(results(28, 22), capped)
    assert promoted is False and "fewer than 100" in reason


def test_the_result_carries_the_interval_and_the_sprt():
    result = gating.summarize(results(60, 40), GateConfig(max_games=100), seconds=1.0)
    assert (result.games, result.wins, result.losses, result.draws) == (100, 60, 40, 0)
    assert result.score == pytest.approx(0.6) and result.score_low < result.score < result.score_high
    assert result.elo_low < result.elo < result.elo_high
    assert result.llr_low < 0 < result.llr_high and result.promoted


# ---- the gate match ----------------------------------------------------------------------------------------


def test_a_gate_match_alternates_colours_saves_games_and_resumes(tiny_onnx_model, tmp_path):
    candidate = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=1)
    best = OnnxEvaluator(tiny_onnx_model, device="cpu", threads=1, seed=2)
    config = GateConfig(size=SIZE, komi=2.0, visits=6, max_games=6, parallel_games=3, leaves_per_game=3)
    result = gating.play_match(candidate, best, config, tmp_path, progress=False)
    records = [json.loads(line) for line in (tmp_path / gating.GAMES).read_text().splitlines()]
    assert sorted(r["index"] for r in records) == list(range(6)) and result.games == 6
    assert all(r["candidate_black"] == (r["index"] % 2 == 0) for r in records)
    for record in records:
        game = sgf_io.load_sgf_file(tmp_path / "sgf" / f"game-{record['index']}.sgf")
        assert game.result == record["result"]
        assert (game.black == "candidate") == record["candidate_black"]
        game.to_game()  # every move legal
    assert result.wins + result.losses + result.draws == 6
    assert result.promoted is False  # 6 games cannot be significant
    assert gating.read_result(tmp_path) == result

    # Interrupted after three games, one journal line cut short: the rerun plays the other three only.
    lines = (tmp_path / gating.GAMES).read_text().splitlines()
    (tmp_path / gating.GAMES).write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])
    (tmp_path / gating.RESULT).unlink()
    again = gating.play_match(candidate, best, config, tmp_path, progress=False)
    records = [json.loads(line) for line in (tmp_path / gating.GAMES).read_text().splitlines()]
    assert len(records) == 6 and sorted(r["index"] for r in records) == list(range(6))
    assert records[:3] == [json.loads(line) for line in lines[:3]] and again.games == 6


class Leaning(UniformEvaluator):
    """Deterministic, with a value that depends on the position, so games differ from one another."""

    def evaluate(self, states):
        batch = super().evaluate(states)
        batch.value[:] = [np.tanh(0.3 * (len(s.board.stones(BLACK)) - len(s.board.stones(WHITE)))) for s in states]
        return batch


def leaning_against_uniform():
    """A gate's (candidate, best), opened in a part's own process (module level: the process imports it)."""
    return Leaning(), UniformEvaluator()


def test_a_pipelined_gate_plays_the_games_an_unpipelined_one_plays(tmp_path):
    games = {}
    for threads in (0, 1):
        config = GateConfig(size=SIZE, komi=2.0, visits=8, max_games=8, sprt_min_games=8, parallel_games=4,
                            leaves_per_game=3, evaluation_threads=threads)
        gating.play_match(Leaning(), UniformEvaluator(), config, tmp_path / str(threads), progress=False)
        games[threads] = {n: (tmp_path / str(threads) / "sgf" / f"game-{n}.sgf").read_text() for n in range(8)}
    assert games[0] == games[1]
    assert len(set(games[0].values())) > 1


def test_the_parts_of_a_match_are_consecutive_blocks_as_even_as_the_games_allow():
    plan = gating.part_plan(GateConfig(max_games=11, processes=4, sprt_min_games=3))
    assert [(first, part.max_games) for first, part in plan] == [(0, 3), (3, 3), (6, 3), (9, 2)]
    assert all(part.processes == 1 and part.sprt_min_games == part.max_games for _, part in plan)
    assert [first for first, _ in gating.part_plan(GateConfig(max_games=2, processes=3))] == [0, 1]  # none empty


def test_a_match_in_processes_plays_the_games_one_process_plays_and_resumes(tmp_path):
    config = GateConfig(size=SIZE, komi=2.0, visits=8, max_games=7, parallel_games=2, leaves_per_game=3,
                        evaluation_threads=0)
    alone = gating.play_match(*leaning_against_uniform(), dataclasses.replace(config, sprt_min_games=7),
                              tmp_path / "alone", progress=False)
    pooled = gating.play_parts(leaning_against_uniform, dataclasses.replace(config, processes=3), tmp_path / "parts",
                               progress=False)
    parts = sorted((tmp_path / "parts").glob("part-*"))
    assert [p.name for p in parts] == ["part-00", "part-01", "part-02"]
    played = {int(f.stem.split("-")[1]): f.read_text() for part in parts for f in (part / "sgf").glob("*.sgf")}
    assert played == {n: (tmp_path / "alone" / "sgf" / f"game-{n}.sgf").read_text() for n in range(7)}
    assert (pooled.games, pooled.wins, pooled.draws, pooled.losses, pooled.score, pooled.llr, pooled.reason) == \
        (alone.games, alone.wins, alone.draws, alone.losses, alone.score, alone.llr, alone.reason)
    assert gating.read_result(tmp_path / "parts") == pooled

    # Cut short in one part (its last game lost, the pooled result not written): the rerun plays that game only.
    journal = parts[1] / gating.GAMES
    kept = journal.read_text().splitlines()[:-1]
    journal.write_text("\n".join(kept) + "\n")
    for path in (parts[1] / gating.RESULT, tmp_path / "parts" / gating.RESULT):
        path.unlink()
    again = gating.play_parts(leaning_against_uniform, dataclasses.replace(config, processes=3), tmp_path / "parts",
                              progress=False)
    assert journal.read_text().splitlines()[:-1] == kept
    assert (again.games, again.score) == (pooled.games, pooled.score)

    # Resumed with another split, or by one process (and a one-process match in parts): refused, nothing played.
    for folder in ("parts", "alone"):
        (tmp_path / folder / gating.RESULT).unlink()
    with pytest.raises(ValueError, match=r"begun in 3 parts \[\(0, 3\), \(3, 2\), \(5, 2\)\]"):
        gating.play_parts(leaning_against_uniform, dataclasses.replace(config, processes=2), tmp_path / "parts")
    with pytest.raises(ValueError, match="begun in processes"):
        gating.play_match(*leaning_against_uniform(), config, tmp_path / "parts", progress=False)
    with pytest.raises(ValueError, match="played in one process"):
        gating.play_parts(leaning_against_uniform, dataclasses.replace(config, processes=3), tmp_path / "alone")
    assert not (tmp_path / "alone" / gating.PARTS).exists() and not (tmp_path / "parts" / gating.GAMES).exists()


def test_gate_score_tallies_a_match_stopped_in_its_parts_by_colour(tmp_path):
    """What a gate stopped by a timeout leaves: parts.json, journals with the games that ended (one line cut by the
    kill); gate-score pools them as the candidate's, overall and by colour, and says the match is not complete."""
    (tmp_path / gating.PARTS).write_text(json.dumps([[0, 3], [3, 3]]))
    games = {"part-00": [(0, True, 1.0, 50), (1, False, 1.0, 60)],
             "part-01": [(3, False, 0.0, 90), (4, True, 0.5, 120), (5, False, 1.0, 70)]}
    for part, rows in games.items():
        (tmp_path / part).mkdir()
        lines = [json.dumps({"index": i, "candidate_black": black, "result": "?", "moves": moves,
                             "score_for_candidate": score, "seconds": 1.0}) for i, black, score, moves in rows]
        (tmp_path / part / gating.GAMES).write_text("\n".join(lines) + "\n" + '{"index": 2, "cand')
    tally = gating.tally(tmp_path)
    assert (tally["complete"], tally["ended"], tally["planned"], tally["games"]) == (False, "cut short", 6, 5)
    assert (tally["wins"], tally["draws"], tally["losses"], tally["score"]) == (3, 1, 1, pytest.approx(0.7))
    assert tally["as_black"] == {"games": 2, "score": 0.75, **{k: tally["as_black"][k] for k in ("score_low",
                                                                                              "score_high")}}
    assert (tally["as_white"]["games"], tally["as_white"]["score"]) == (3, pytest.approx(2 / 3))
    assert tally["colour_mean"] == pytest.approx((0.75 + 2 / 3) / 2)
    assert (tally["moves_mean"], tally["moves_max"]) == (78.0, 120)
    assert tally["score_low"] < 0.7 < tally["score_high"] and tally["elo_low"] < tally["elo"] < tally["elo_high"]

    command = [sys.executable, "-m", "gtp_engine.training", "gate-score", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stderr[done.stderr.index("{"):])["games"] == 5
    empty = subprocess.run(command[:-1] + [str(tmp_path / "part-99")], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert empty.returncode != 0 and "part-99: no finished games" in empty.stderr


def test_a_match_stops_at_its_start_window_with_every_game_it_began_finished_and_resumes(tmp_path):
    """No game starts once the window has passed (here after the first start: a clock that jumps); the games begun
    finish, nothing is written as the result, gate-score says how it ended, and a rerun plays the rest."""
    config = GateConfig(size=SIZE, komi=2.0, visits=8, max_games=6, sprt_min_games=6, parallel_games=2,
                        leaves_per_game=3, evaluation_threads=0, start_window=10.0)
    ticks = iter([0.0, 0.0])  # the window opens, the first start; every later reading is past the window

    stopped = gating.play_match(*leaning_against_uniform(), config, tmp_path / "m", progress=False,
                                clock=lambda: next(ticks, 100.0))
    assert stopped.games == 2 and "start window of 10 s closed with 2 of 6 games" in stopped.reason
    assert gating.read_result(tmp_path / "m") is None
    assert sorted(f.name for f in (tmp_path / "m" / "sgf").iterdir()) == ["game-0.sgf", "game-1.sgf"]
    assert gating.tally(tmp_path / "m")["ended"] == "start window, every game begun finished"

    done = gating.play_match(*leaning_against_uniform(), dataclasses.replace(config, start_window=0.0),
                             tmp_path / "m", progress=False)
    assert done.games == 6 and gating.read_result(tmp_path / "m") == done
    assert gating.tally(tmp_path / "m")["ended"] == "complete"
    alone = gating.play_match(*leaning_against_uniform(), dataclasses.replace(config, start_window=0.0),
                              tmp_path / "alone", progress=False)
    assert (done.wins, done.draws, done.losses) == (alone.wins, alone.draws, alone.losses)  # the same six games

    # In parts: a window too short for any start leaves every part unfinished, and the pooled result unwritten.
    parts = gating.play_parts(leaning_against_uniform, dataclasses.replace(config, processes=2, start_window=1e-9),
                              tmp_path / "parts", progress=False)
    assert parts.games == 0 and "closed with 0 of 6" in parts.reason and gating.read_result(tmp_path / "parts") is None
    with pytest.raises(ValueError, match="start_window must not be negative"):
        GateConfig(start_window=-1.0)


def test_a_part_that_fails_stops_the_match_with_its_error(tmp_path):
    config = GateConfig(size=SIZE, komi=2.0, visits=8, max_games=4, processes=2)
    with pytest.raises(ModelLoadError, match="missing.onnx: no such file"):
        gating.play_parts(functools.partial(loop._part_networks, loop.GateJob(
            str(tmp_path / "missing.onnx"), str(tmp_path / "missing.onnx"), config, str(tmp_path / "match"),
            loop.Engine("onnx", "cpu", 1))), config, tmp_path / "match", progress=False)
    assert gating.read_result(tmp_path / "match") is None


def test_a_candidate_given_its_own_visits_searches_that_many_a_move(tmp_path):
    class Counting(UniformEvaluator):
        """Counts the positions it evaluates (one a playout: no cache, no terminal leaves this early)."""

        def __init__(self):
            self.positions = 0

        def evaluate(self, states):
            self.positions += len(states)
            return super().evaluate(states)

    config = GateConfig(size=SIZE, komi=2.0, visits=5, candidate_visits=15, max_games=2, sprt_min_games=2,
                        parallel_games=2, leaves_per_game=4, evaluation_threads=0, max_moves=6)
    candidate, best = Counting(), Counting()
    gating.play_match(candidate, best, config, tmp_path, progress=False)
    # Each game: six moves, three by each side; a search ends at its visits, a batch's last leaves cut to fit.
    assert candidate.positions == 2 * 3 * 15 and best.positions == 2 * 3 * 5
    with pytest.raises(ValueError, match="candidate_visits"):
        GateConfig(candidate_visits=-1)


# ---- the loop ----------------------------------------------------------------------------------------------


def test_a_generation_runs_end_to_end_and_promotes_into_promote_to(tiny_checkpoint, tmp_path):
    run, weights = tmp_path / "run", tmp_path / "weights" / "5x5.onnx"
    # A fixed rule that any score meets at the cap: this candidate is promoted whatever it plays like.
    config = loop.LoopConfig(init=str(tiny_checkpoint), promote_to=str(weights),
                             **{**TINY, "gate": dataclasses.replace(TINY["gate"], fixed_games=1, fixed_score=0.0)})
    started = time.monotonic()
    state = loop.run(config, run, progress=False)
    seconds = time.monotonic() - started
    assert state["generation"] == 2 and state["phase"] == "selfplay" and state["best_generation"] == 1
    gen = run / "gen-0001"
    batches = sorted(p.name for p in (gen / "selfplay").iterdir())
    assert batches == ["batch-000", "batch-001"]
    reports = [json.loads((gen / "selfplay" / b / selfplay.REPORT).read_text()) for b in batches]
    assert sum(r["games"] for r in reports) == 6
    candidate = (gen / "train" / train.ONNX).read_bytes()
    assert (run / loop.BEST_ONNX).read_bytes() == candidate == weights.read_bytes()
    assert (run / loop.BEST_CHECKPOINT).read_bytes() == (gen / "train" / train.CHECKPOINT).read_bytes()
    trained = checkpoint_lib.load(gen / "train" / train.CHECKPOINT)
    assert trained.provenance["train_config"]["init_from"] == str(run / "gen-0000" / train.CHECKPOINT)
    rows = loop.read_metrics(run / loop.METRICS)
    assert len(rows) == 1 and rows[0]["generation"] == "1" and rows[0]["promoted"] == "True"
    assert int(rows[0]["games"]) == 6 and int(rows[0]["gate_games"]) == 4
    assert (rows[0]["full_visits"], rows[0]["fast_visits"]) == ("12", "4")
    assert float(rows[0]["gate_score_low"]) <= float(rows[0]["gate_score"]) <= float(rows[0]["gate_score_high"])
    assert float(rows[0]["best_elo"]) == pytest.approx(float(rows[0]["gate_elo"]))
    assert (run / loop.PLOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "generation 1 promoted" in (run / loop.LOG).read_text()
    print(f"one tiny generation (5x5, 6 games, 6 steps, 4 gate games, gen-0 export): {seconds:.1f} s")

    # The next candidate continues from this one, on the window of recent generations.
    later = loop.train_config(dataclasses.replace(config, window_generations=2), run, 2, "tiny")
    assert later.init_from == str(gen / "train" / train.CHECKPOINT)
    assert [Path(d).parts[-3:-1] for d in later.data] == [("gen-0001", "selfplay")] * 2
    with pytest.raises(ValueError, match="no shard folders"):  # a window of one: generation 2, not played yet
        loop.train_config(dataclasses.replace(config, window_generations=1), run, 2, "tiny")


def test_an_ungated_loop_promotes_every_candidate_without_a_match(tiny_checkpoint, tmp_path):
    run = tmp_path / "run"
    state = loop.run(loop.LoopConfig(init=str(tiny_checkpoint), gated=False, **{**TINY, "generations": 2}), run,
                     progress=False)
    assert state["generation"] == 3 and state["best_generation"] == 2
    assert not any(run.glob("gen-*/gate"))  # no match played
    assert (run / loop.BEST_ONNX).read_bytes() == (run / "gen-0002" / "train" / train.ONNX).read_bytes()
    rows = loop.read_metrics(run / loop.METRICS)
    assert [(r["promoted"], r["gate_games"], r["best_elo"], r["candidate_elo"]) for r in rows] == \
        [("True", "", "", "")] * 2
    assert (run / loop.PLOT).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "generation 2 promoted (no gate)" in (run / loop.LOG).read_text()


def test_an_averaging_loop_promotes_the_mean_of_recent_candidates_and_trains_on_from_its_own(tiny_checkpoint,
                                                                                              tmp_path):
    run = tmp_path / "run"
    config = loop.LoopConfig(init=str(tiny_checkpoint), gated=False, average_generations=2,
                             **{**TINY, "generations": 2})
    state = loop.run(config, run, progress=False)
    assert state["best_generation"] == 2
    trained = [run / f"gen-000{g}" / "train" / train.CHECKPOINT for g in (1, 2)]
    first = checkpoint_lib.load(run / "gen-0001" / loop.AVERAGE / train.CHECKPOINT)
    assert first.provenance["averaged"] == [str(trained[0])]  # generation 1 has one snapshot to average
    averaged = checkpoint_lib.load(run / "gen-0002" / loop.AVERAGE / train.CHECKPOINT)
    assert averaged.provenance["averaged"] == [str(p) for p in trained]
    snapshots = [checkpoint_lib.load(p).state_dict["stem.weight"] for p in trained]
    torch.testing.assert_close(averaged.state_dict["stem.weight"], (snapshots[0] + snapshots[1]) / 2)
    best = run / "gen-0002" / loop.AVERAGE
    assert (run / loop.BEST_ONNX).read_bytes() == (best / train.ONNX).read_bytes()
    assert (run / loop.BEST_CHECKPOINT).read_bytes() == (best / train.CHECKPOINT).read_bytes()
    # Training goes on from the previous candidate's own weights, not from the average.
    assert checkpoint_lib.load(trained[1]).provenance["train_config"]["init_from"] == str(trained[0])
    assert "the candidate is the average of generations 1 to 2" in (run / loop.LOG).read_text()
    with pytest.raises(ValueError, match="must be positive"):
        loop.LoopConfig(init=str(tiny_checkpoint), average_generations=0)


def test_an_int8_loop_quantizes_on_its_own_games_and_promotes_the_int8_sibling(tiny_checkpoint, tmp_path,
                                                                                  monkeypatch):
    run, weights = tmp_path / "run", tmp_path / "weights" / "5x5.onnx"
    weights.parent.mkdir()
    stale = quantize.default_out(weights)
    stale.write_bytes(b"an int8 file of an older network")
    played = []
    real_play = selfplay.play
    monkeypatch.setattr(selfplay, "play", lambda evaluator, *a, **k: played.append(evaluator.info.path) or
                        real_play(evaluator, *a, **k))
    gated = []
    real_gate = loop.run_gate
    monkeypatch.setattr(loop, "run_gate", lambda job, *a, **k: gated.append((job.candidate, job.best)) or
                        real_gate(job, *a, **k))
    monkeypatch.setattr(quantize, "MIN_TOP1_AGREEMENT", 0.0)  # a tiny random network: any agreement will do
    monkeypatch.setattr(quantize, "MAX_VALUE_DIFF", 2.0)
    config = loop.LoopConfig(init=str(tiny_checkpoint), promote_to=str(weights), precision="int8",
                             **{**TINY, "generations": 2,
                                "gate": dataclasses.replace(TINY["gate"], fixed_games=1, fixed_score=0.0)})
    loop.run(config, run, progress=False)
    # Generation 1 plays in fp32 (no games to calibrate on yet); its gate and generation 2 in int8.
    assert [Path(p).name for p in played[:2]] == ["best.onnx"] * 2
    assert [Path(p).name for p in played[2:]] == ["best.int8.onnx"] * 2
    assert [(Path(a).name, Path(b).name) for a, b in gated] == [("model.int8.onnx", "best.int8.onnx")] * 2
    int8 = OnnxEvaluator(run / "best.int8.onnx", device="cpu")
    assert int8.info.precision == "int8"
    assert "self-play of gen-0002" in int8.info.metadata["quantization"]["calibration"]
    assert stale.read_bytes() == (run / "best.int8.onnx").read_bytes()  # promoted along with its fp32 source
    assert weights.read_bytes() == (run / "best.onnx").read_bytes()


def test_int8_keeps_more_block_convolutions_in_fp32_until_the_agreement_is_met(tiny_onnx_model, tmp_path,
                                                                              monkeypatch):
    run = tmp_path / "run"
    batch = run / "gen-0001" / "selfplay" / "batch-000"
    config = loop.LoopConfig(init=str(tiny_onnx_model), precision="int8", **TINY)
    loop.run_selfplay(loop.SelfPlayJob(str(tiny_onnx_model), 3, config.selfplay_config(1, 0), str(batch),
                                       loop.Engine(device="cpu", threads=1)), progress=False)
    network = run / "best.onnx"
    shutil.copyfile(tiny_onnx_model, network)
    tried, real_quantize = [], quantize.quantize

    def quantize_missing_below_two(*args, fp32_convs, **kwargs):  # as the shipped 19x19 network did
        tried.append(fp32_convs)
        if fp32_convs < 2:
            raise quantize.QuantizeError("agreement below target")
        return real_quantize(*args, fp32_convs=fp32_convs, require_targets=False, **kwargs)

    monkeypatch.setattr(quantize, "quantize", quantize_missing_below_two)
    played = loop.play_network(config, run, network, 1)
    assert tried == [0, 1, 2] and played == quantize.default_out(network)
    assert "first 2 block convolutions fp32" in OnnxEvaluator(played, device="cpu").info.metadata["quantization"][
        "method"]
    def quantize_missing_always(*args, fp32_convs, **kwargs):
        tried.append(fp32_convs)
        raise quantize.QuantizeError("agreement below target")

    monkeypatch.setattr(quantize, "quantize", quantize_missing_always)
    played.unlink()
    assert loop.play_network(config, run, network, 1) == network  # none meets the targets: fp32
    assert tried == [0, 1, 2, 0, 1, 2]


def test_promoting_a_network_without_int8_sibling_removes_the_stale_one(tmp_path):
    source, target = tmp_path / "a" / "model.onnx", tmp_path / "b" / "9x9.onnx"
    source.parent.mkdir()
    target.parent.mkdir()
    source.write_bytes(b"new")
    quantize.default_out(target).write_bytes(b"old int8")
    loop._copy_network(source, target)
    assert target.read_bytes() == b"new" and not quantize.default_out(target).exists()


def test_an_exception_in_training_resumes_without_replaying_self_play(tiny_onnx_model, tmp_path, monkeypatch):
    run, weights = tmp_path / "run", tmp_path / "weights.onnx"
    # A fixed rule no score meets: the candidate stays a candidate.
    config = loop.LoopConfig(init=str(tiny_onnx_model), promote_to=str(weights),
                             **{**TINY, "gate": dataclasses.replace(TINY["gate"], fixed_games=1, fixed_score=1.01)})

    def broken(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(train, "train", broken)
    with pytest.raises(RuntimeError, match="injected"):
        loop.run(config, run, progress=False)
    assert json.loads((run / loop.STATE).read_text())["phase"] == "train"
    report = run / "gen-0001" / "selfplay" / "batch-000" / selfplay.REPORT
    before = report.read_bytes()
    monkeypatch.undo()

    played = []
    original = selfplay.play
    monkeypatch.setattr(selfplay, "play", lambda *a, **k: played.append(a) or original(*a, **k))
    state = loop.run(config, run, progress=False)
    assert state["generation"] == 2 and played == [] and report.read_bytes() == before

    assert state["best_generation"] == 0 and not weights.exists()
    assert (run / loop.BEST_ONNX).read_bytes() == Path(tiny_onnx_model).read_bytes()
    # an ONNX start is imported, and the candidate trains from the network's own weights, not random ones
    imported = run / "gen-0000" / train.CHECKPOINT
    assert (run / loop.BEST_CHECKPOINT).read_bytes() == imported.read_bytes()
    candidate = checkpoint_lib.load(run / "gen-0001" / "train" / train.CHECKPOINT)
    assert candidate.provenance["train_config"]["init_from"] == str(imported)
    assert loop.read_metrics(run / loop.METRICS)[0]["promoted"] == "False"


def test_an_anchor_of_expert_games_joins_each_candidates_training(tiny_checkpoint, random_states, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for number, state in enumerate(random_states(SIZE, 12, seed=7, max_fill=0.6)):
        (records / f"{number}.sgf").write_bytes(sgf_io.save_sgf(state, result="B+R" if number % 2 else "W+R"))
    sgf_ingest.ingest([records], tmp_path / "expert", sgf_ingest.IngestConfig(size=SIZE, min_moves=2,
                                                                                val_fraction=0.0, workers=1))
    config = loop.LoopConfig(init=str(tiny_checkpoint), anchor=str(tmp_path / "expert"), anchor_samples=20,
                             **{**TINY, "train": dataclasses.replace(TINY["train"], value_weight=0.25)})
    loop.run(config, tmp_path / "run", progress=False)
    anchor = tmp_path / "run" / "gen-0001" / loop.ANCHOR
    drawn = dataset.Shards([anchor], "train").head(1000)
    expert = dataset.Shards([tmp_path / "expert"], "train").head(1000)
    assert len(drawn["move"]) >= 20 and set(drawn["game_key"]) < set(expert["game_key"])
    trained = checkpoint_lib.load(tmp_path / "run" / "gen-0001" / "train" / train.CHECKPOINT)
    settings = trained.provenance["train_config"]
    assert settings["data"][-1] == str(anchor) and settings["value_weight"] == 0.25
    assert len(settings["data"]) == 3  # two self-play batches and the anchor
    with pytest.raises(ValueError, match="go together"):
        loop.LoopConfig(init=str(tiny_checkpoint), anchor=str(tmp_path / "expert"))


def test_a_batch_cut_short_is_played_again(tiny_onnx_model, tmp_path):
    batch = tmp_path / "batch-000"
    batch.mkdir()
    (batch / "junk").write_text("left over by a kill")
    config = loop.LoopConfig(init=str(tiny_onnx_model), **TINY)
    job = loop.SelfPlayJob(str(tiny_onnx_model), 2, config.selfplay_config(1, 0), str(batch),
                           loop.Engine(device="cpu", threads=1))
    report = loop.run_selfplay(job, progress=False)
    assert report["games"] == 2 and not (batch / "junk").exists() and (batch / selfplay.REPORT).exists()
    assert loop.run_selfplay(job, progress=False) == report  # complete: not played again


def test_the_playout_caps_follow_their_schedule_and_then_stay(tiny_onnx_model):
    config = loop.LoopConfig(init=str(tiny_onnx_model), final_full_visits=20, final_fast_visits=9,
                             visit_ramp_generations=3, **TINY)
    assert [config.visits(g) for g in (1, 2, 3, 4, 50)] == [(12, 4), (16, 6), (20, 9), (20, 9), (20, 9)]
    second = config.selfplay_config(2, 1)
    assert (second.full_visits, second.fast_visits) == (16, 6)
    assert second.seed != config.selfplay_config(2, 0).seed  # each batch its own games
    assert loop.LoopConfig(init=str(tiny_onnx_model), final_full_visits=20, final_fast_visits=9,
                           visit_ramp_generations=1, **TINY).visits(1) == (20, 9)  # a ramp of one: the end at once
    assert loop.LoopConfig(init=str(tiny_onnx_model), **TINY).visits(30) == (12, 4)  # no schedule
    for bad in ({"final_full_visits": 20}, {"final_full_visits": 8, "final_fast_visits": 9,
                                            "visit_ramp_generations": 3}):
        with pytest.raises(ValueError, match="go together"):
            loop.LoopConfig(init=str(tiny_onnx_model), **bad, **TINY)


def test_the_local_runner_shares_its_cores_among_the_pipelined_calls(tiny_onnx_model, monkeypatch):
    opened = []
    monkeypatch.setattr(loop, "run_selfplay", lambda job, progress: opened.append(job.engine.threads))
    monkeypatch.setattr(loop, "run_gate", lambda job, progress: opened.append(job.engine.threads))
    config = loop.LoopConfig(init=str(tiny_onnx_model), **TINY)
    pipelined = loop.SelfPlayJob("net.onnx", 2, config.selfplay_config(1, 0), "out")
    serial = dataclasses.replace(pipelined, config=dataclasses.replace(pipelined.config, evaluation_threads=0))
    gate = loop.GateJob("a.onnx", "b.onnx", GateConfig(evaluation_threads=1), "out")
    loop.LocalRunner(progress=False, cores=4).selfplay([pipelined, serial])
    loop.LocalRunner(progress=False, cores=4).gate(gate)
    loop.LocalRunner(progress=False).selfplay([pipelined])  # no cores given: the job's own choice at opening
    assert opened == [2, 4, 2, 0]


def test_an_unknown_backend_is_refused(tiny_onnx_model):
    with pytest.raises(ValueError, match="--backend must be one of auto, onnx, torch"):
        loop.LoopConfig(init=str(tiny_onnx_model), backend="gpu", **TINY)


def test_a_rerun_with_other_settings_is_refused(tiny_onnx_model, tmp_path):
    run = tmp_path / "run"
    loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model), **TINY), run)
    loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model), **{**TINY, "generations": 5}), run)
    with pytest.raises(ValueError, match=r"train\.steps"):
        loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model),
                                           **{**TINY, "train": dataclasses.replace(TINY["train"], steps=7)}), run)
    with pytest.raises(ValueError, match=r"selfplay\.noise_fraction"):  # settings a loop could not set before
        loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model), **{
            **TINY, "selfplay": dataclasses.replace(TINY["selfplay"], noise_fraction=0.1)}), run)
    # The training device may change: it does not change what is computed.
    loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model),
                                       **{**TINY, "train": dataclasses.replace(TINY["train"], device="cuda")}), run)
    # A run from before a setting existed had it at its default.
    saved = json.loads((run / loop.CONFIG).read_text())
    del saved["train"]["value_weight"]
    (run / loop.CONFIG).write_text(json.dumps(saved))
    loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model), **TINY), run)
    with pytest.raises(ValueError, match=r"train\.value_weight"):
        loop._check_config(loop.LoopConfig(init=str(tiny_onnx_model),
                                           **{**TINY, "train": dataclasses.replace(TINY["train"], value_weight=0.5)}),
                           run)


def test_a_run_from_before_the_nested_settings_resumes(tiny_onnx_model, tmp_path):
    config = loop.LoopConfig(init=str(tiny_onnx_model), **TINY)
    flat = {k: v for k, v in config.to_dict().items() if k not in ("selfplay", "train", "gate")}
    flat.update(full_visits=12, fast_visits=4, parallel_games=3, val_fraction=0.5, train_steps=6, batch_size=16,
                warmup_steps=2, val_samples=64, gate_games=4, gate_visits=6, train_device="cpu")
    (tmp_path / loop.CONFIG).write_text(json.dumps(flat))
    loop._check_config(config, tmp_path)
    with pytest.raises(ValueError, match=r"train\.steps"):
        (tmp_path / loop.CONFIG).write_text(json.dumps({**flat, "train_steps": 7}))
        loop._check_config(config, tmp_path)


def test_loop_json_rebuilds_the_config_it_came_from(tiny_onnx_model):
    config = loop.LoopConfig(init=str(tiny_onnx_model), **TINY)
    assert loop.LoopConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert config.selfplay.komi == config.gate.komi == 2.0 and config.selfplay.size == SIZE  # the loop's board


def test_the_command_resumes_after_being_killed(tiny_onnx_model, tmp_path):
    run = tmp_path / "run"
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "loop", "--init",
               str(tiny_onnx_model), "--out", str(run), "--no-progress"]
    command += TINY_FLAGS
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first_batch = run / "gen-0001" / "selfplay" / "batch-000" / selfplay.REPORT
    deadline = time.monotonic() + 120
    while not first_batch.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert first_batch.exists(), "the first self-play batch never finished"
    before = first_batch.read_bytes()

    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    assert json.loads((run / loop.STATE).read_text())["generation"] == 2
    assert first_batch.read_bytes() == before  # finished work is kept, not redone
    assert len(loop.read_metrics(run / loop.METRICS)) == 1


def test_the_gate_command_plays_a_match_of_fixed_length(tiny_onnx_model, tmp_path):
    command = [sys.executable, "-m", "gtp_engine.training", "--threads", "1", "gate", str(tiny_onnx_model),
               str(tiny_onnx_model), "--out", str(tmp_path), "--size", str(SIZE), "--komi", "2", "--visits", "4",
               "--max-games", "4", "--fixed-length", "--parallel-games", "2",
               "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    result = gating.read_result(tmp_path)
    assert result.games == 4 and json.loads(done.stderr[done.stderr.index("{"):])["games"] == 4
    assert len((tmp_path / gating.GAMES).read_text().splitlines()) == 4


def test_the_gate_command_plays_in_processes_with_torch(tiny_onnx_model, tmp_path):
    command = [sys.executable, "-m", "gtp_engine.training", "gate", str(tiny_onnx_model), str(tiny_onnx_model),
               "--out", str(tmp_path), "--size", str(SIZE), "--komi", "2", "--visits", "4", "--max-games", "4",
               "--parallel-games", "2", "--processes", "2", "--backend", "torch", "--device", "cpu", "--no-progress"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    result = gating.read_result(tmp_path)
    assert result.games == 4 and json.loads(done.stderr[done.stderr.index("{"):])["games"] == 4
    assert sorted(int(json.loads(line)["index"]) for part in ("part-00", "part-01")
                  for line in (tmp_path / part / gating.GAMES).read_text().splitlines()) == [0, 1, 2, 3]
    assert "runs on torch-cpu" in done.stderr


def test_the_best_can_play_gnu_go(tiny_onnx_model, tmp_path):
    if shutil.which("gnugo") is None and shutil.which("gnugo", path="/usr/games") is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    config = loop.LoopConfig(init=str(tiny_onnx_model), **{**TINY, "gnugo_every": 1, "gnugo_games": 2,
                                                           "gnugo_level": 0})
    result = loop.match_gnugo(Path(tiny_onnx_model), config, tmp_path / "gnugo")
    assert result["games"] == 2 == result["wins"] + result["draws"] + result["losses"]
    assert json.loads((tmp_path / "gnugo" / "result.json").read_text()) == result
    records = [sgf_io.load_sgf_file(tmp_path / "gnugo" / "sgf" / f"game-{n}.sgf") for n in (1, 2)]
    assert [(r.black, r.white) for r in records] == [("gtp_engine", "GNU Go"), ("GNU Go", "gtp_engine")]
    ours = [(r.result.startswith("B+") if n == 0 else r.result.startswith("W+")) for n, r in enumerate(records)]
    assert result["wins"] == sum(ours)
    columns = loop._gnugo_columns(tmp_path / "gnugo" / "result.json")
    assert set(columns) <= set(loop.COLUMNS) and columns["gnugo_games"] == 2


def test_the_single_machine_path_does_not_import_ray():
    code = "import sys, gtp_engine.training.__main__, gtp_engine.training.loop; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_generation_on_a_local_ray_cluster(tiny_onnx_model, tmp_path):
    ray = pytest.importorskip("ray")
    from gtp_engine.training import distributed

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        runner = distributed.RayRunner(workers=2)
        state = loop.run(loop.LoopConfig(init=str(tiny_onnx_model), **TINY), tmp_path, runner, progress=False)
        runner.close()
    finally:
        ray.shutdown()
    assert state["generation"] == 2
    gen = tmp_path / "gen-0001"
    assert all((gen / "selfplay" / b / selfplay.REPORT).exists() for b in ("batch-000", "batch-001"))
    assert (gen / "train" / train.ONNX).exists() and gating.read_result(gen / "gate").games >= 1
    assert len(loop.read_metrics(tmp_path / loop.METRICS)) == 1
