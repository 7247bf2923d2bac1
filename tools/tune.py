"""Tuning the search's parameters for a network: SPSA at equal time per move, and the match that verifies it.

Terms:
- parameter: a search setting (SearchConfig, its tree and choice parts) with a range and an SPSA step (SPECS).
  A candidate is a set of values for some of them, named as in SPECS or as the config file names them (c-puct,
  batch); every other setting keeps the engine's default. A config is built by config.build from those values,
  as the engine builds one from its config file, so every value the tool prints is one the engine accepts.
  The base: the defaults with --set.
- equal time: both sides of a game get the same CPU time per move, expressed as visits. The parameters of
  selection and choice (c_puct and its growth, FPU, LCB, score utility, the root's policy temperature) change
  what a visit does, not what it costs, so SPSA plays them at equal visits (`spsa` measures the throughput of its
  answer to show it). Batch size and virtual loss change the cost of a visit (a batch shares one network call;
  colliding leaves are evaluated once): a match scales each side's visits by its throughput, the visits per CPU
  second of a real Searcher (one search, its own batches, onnxruntime on one thread) measured in the same run on
  the same positions, interleaved so that load falls on both alike. CPU seconds (time.process_time) rather than
  wall seconds: on a loaded machine they still measure what a search costs.
- game: in process, two Searchers' worth of trees sharing one evaluator: every round gathers a batch of leaves
  from each running game's tree (at most its side's batch_size), evaluates them together and finishes them
  (search.play_games, as training/gating.py: two lanes of games whose rounds overlap with --evaluation-threads).
  Every move is a fresh search of the side's visits (no tree reuse, no early stop: both sides spend exactly their
  budget; the root's priors under the side's policy temperature, as the Searcher sets them), chosen by
  search.choose_edge (LCB per the side's config). A game ends at two passes (area scoring of the board as it
  stands, komi 7, Chinese rules by default), when the mover's winrate stays below 5% for three of its moves (it
  resigns), or at twice the board's area in moves.
- pair: two games from one opening (--opening-moves moves drawn from the network's policy), colours swapped.
  SPSA's result of a pair is the plus side's wins minus losses (-2 .. 2).
- SPSA (Spall; as fishtest runs it): at iteration k every parameter moves by +-c_k (a random sign, `flip`) for
  the plus side and -+c_k for the minus side; after their pair, theta += R_k * c_k * result * flip, with
  c_k = c / k^0.101, R_k = a_k / c_k^2, a_k = a / (A + k)^0.602, A = pairs / 10, c = c_end * pairs^0.101 and
  a = r_end * c_end^2 * (A + pairs)^0.602, so that the last step is about r_end * c_end * result. Values stay
  in their range. --parallel pairs run at once, each started from the theta of its moment (fishtest's workers).
- verification: a match of the candidate against the base (colours swapped in each pair), fixed length with
  its 95% interval, or SPRT (--sprt ELO0,ELO1); match_stats.py does the statistics.
- journal: with --out DIR, settings.json (what the run depends on; a rerun with other settings is refused) and
  journal.jsonl (one line per finished pair of `spsa`, per game of `match`), so an interrupted run resumes
  where it stopped; pairs in flight at the interruption are played again. Without --out nothing is written.

Usage (from the repository root):
  python -m tools.tune spsa --weights weights/9x9.onnx --visits 64 --pairs 150 --r-end 0.04 \\
      --params c_puct,fpu_reduction,root_fpu_reduction,lcb_z,score_utility [--verify-games 200] [--out DIR]
  python -m tools.tune match --weights weights/9x9.onnx --visits 64 --candidate c_puct=1.3,batch_size=16 \\
      --games 200 [--sprt 0,30] [--equal time|visits] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from gtp_engine import config as config_lib
from gtp_engine import match_stats
from gtp_engine.board import BLACK, WHITE
from gtp_engine.evaluator import Evaluator
from gtp_engine.game import GameState, Rules
from gtp_engine.mcts import Tree
from gtp_engine.search import (ResignConfig, ResignCounter, SearchConfig, Searcher, StopCondition, add_noise,
                               choose_edge, network_threads, play_games)

SETTINGS, JOURNAL = "settings.json", "journal.jsonl"
GAMMA, ALPHA = 0.101, 0.602  # SPSA's exponents (Spall; fishtest)
RESIGN = ResignConfig(winrate=0.05, consecutive=3, after_moves=0)
NO_RANDOMNESS = np.random.default_rng(0)  # add_noise's generator: the engine's defaults draw no Dirichlet noise


class TuneError(Exception):
    """A problem the user must fix: a bad parameter or value, a journal of other settings."""


@dataclass(frozen=True)
class Spec:
    name: str  # SearchConfig field
    low: float
    high: float
    c_end: float  # SPSA perturbation at the last iteration, in the parameter's units
    integer: bool = False
    costly: bool = False  # changes the cost of a visit: tuned only with throughput-scaled visits (match)


SPECS = {spec.name: spec for spec in (
    Spec("c_puct", 0.2, 4.0, 0.15),
    Spec("c_puct_log", 0.0, 2.0, 0.1),
    Spec("c_puct_base", 20.0, 5000.0, 100.0),
    Spec("fpu_reduction", 0.0, 1.0, 0.05),
    Spec("root_fpu_reduction", 0.0, 1.0, 0.05),
    Spec("lcb_z", 0.1, 6.0, 0.3),
    Spec("lcb_min_visits_ratio", 0.01, 0.9, 0.03),
    Spec("score_utility", 0.0, 1.0, 0.04),
    Spec("score_scale", 1.0, 40.0, 1.0),
    Spec("root_policy_temperature", 0.5, 3.0, 0.1),
    Spec("virtual_loss", 0.0, 5.0, 0.25, costly=True),
    Spec("batch_size", 1, 64, 2, integer=True, costly=True),
)}
_OPTIONS = {option.name: option for option in config_lib.SEARCH_OPTIONS}
SPSA_DEFAULT = "c_puct,c_puct_log,fpu_reduction,root_fpu_reduction,lcb_z,lcb_min_visits_ratio,score_utility"


def parse_values(text: str) -> dict[str, float]:
    """"c_puct=1.3,batch_size=16" -> values, checked against SPECS (dashes accepted for underscores)."""
    values: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = item.partition("=")
        name = name.strip().replace("-", "_")
        name = "batch_size" if name == "batch" else name
        if not sep or name not in SPECS:
            raise TuneError(f"expected NAME=VALUE with NAME one of {', '.join(SPECS)}; got {item!r}")
        spec = SPECS[name]
        try:
            value = float(raw)
        except ValueError:
            raise TuneError(f"{name}: expected a number, got {raw!r}") from None
        if not spec.low <= value <= spec.high:
            raise TuneError(f"{name}: {value:g} is outside {spec.low:g} .. {spec.high:g}")
        values[name] = value
    return values


def option_name(name: str) -> str:
    """The config file's and the engine's flag name of a parameter (c_puct -> c-puct; batch_size -> batch)."""
    return "batch" if name == "batch_size" else name.replace("_", "-")


def make_config(values: dict[str, float]) -> SearchConfig:
    """The engine's search config with `values`, built as the engine builds it from a config file."""
    layer = {option_name(name): round(v) if SPECS[name].integer else float(v) for name, v in values.items()}
    try:
        return config_lib.build(layer).player.search
    except config_lib.ConfigError as error:
        raise TuneError(str(error)) from None


def value_of(config: SearchConfig, name: str, size: int) -> float:
    """A parameter's value in `config` on a size x size board, found where the config file's option puts it (a
    score scale left unset is the board's own)."""
    if name == "score_scale":
        return config.tree.scale_for(size * size)
    value: object = config
    for field in _OPTIONS[option_name(name)].target[2:]:  # past ("player", "search")
        value = getattr(value, field)
    return float(value)


# ---- games -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    config: SearchConfig
    visits: int


class Game:
    """One game between two sides, searched by fresh trees sharing the caller's evaluator."""

    def __init__(self, evaluator: Evaluator, opening: GameState, black: Side, white: Side, tag: object):
        self.evaluator, self.state, self.tag = evaluator, opening.copy(), tag
        self.sides = {BLACK: black, WHITE: white}
        self.resign = ResignCounter(RESIGN)
        self.winner: int | None = None  # BLACK, WHITE, or 0 for a draw, once over
        self.over = False
        self.tree = self._new_tree()

    def _new_tree(self) -> Tree:
        return Tree(self.evaluator, self.state.copy(), self.sides[self.state.to_play].config.tree)

    def wants(self) -> int:
        side = self.sides[self.state.to_play]
        return max(1, min(side.config.batch_size, side.visits - self.tree.root.visits))

    def advance(self) -> None:
        side = self.sides[self.state.to_play]
        if self.tree.root.visits == 1:  # just expanded: the root's priors for selection, as the Searcher sets them
            add_noise(self.tree, side.config.noise, NO_RANDOMNESS)
        if self.tree.root.visits >= side.visits:
            self.move()

    def move(self) -> None:
        state, color = self.state, self.state.to_play
        winrate = (self.tree.root_value()[0] + 1.0) / 2.0
        if self.resign.update(color, winrate, state.move_number, state.grid.area):
            self.winner, self.over = (WHITE if color == BLACK else BLACK), True
            return
        state.play(self.tree.root.moves[choose_edge(self.tree, self.sides[color].config.choice)])
        if state.is_over or state.move_number >= 2 * state.grid.area:
            score = state.area_score()
            self.winner, self.over = (BLACK if score > 0 else WHITE if score < 0 else 0), True
            return
        self.tree = self._new_tree()

    def score_for(self, color: int) -> float:
        return 0.5 if self.winner == 0 else float(self.winner == color)


def play(start: Callable[[], list[Game]], done: Callable[[Game], None], parallel: int,
         evaluation_threads: int) -> None:
    """Plays games until start() has none to give, about `parallel` at once (search.play_games: in two lanes with
    evaluation threads), and calls done(game) as each ends."""

    def after_round(ended: list[Game], evaluations: int, calls: int) -> bool:
        for game in ended:
            done(game)
        return False

    play_games(lambda seats: start(), after_round, parallel, evaluation_threads)


def opening(evaluator: Evaluator, args: argparse.Namespace, rng: np.random.Generator) -> GameState:
    """The empty board and args.opening_moves moves drawn from the network's policy (never a pass)."""
    state = GameState(args.size, komi=args.komi, rules=Rules.named(args.rules))
    for _ in range(args.opening_moves):
        policy = evaluator.evaluate([state]).policy[0]
        legal = state.legal_mask()
        weights = np.where(legal[: len(policy)], policy, 0.0)[: state.grid.area]
        if weights.sum() <= 0:
            break
        state.play(state.grid.from_flat(int(rng.choice(len(weights), p=weights / weights.sum()))))
    return state


# ---- throughput --------------------------------------------------------------------------------------


def throughput(evaluator: Evaluator, configs: Sequence[SearchConfig], positions: Sequence[GameState],
               visits: int, rounds: int) -> list[float]:
    """Visits per CPU second of a real Searcher for each config, rounds interleaved over the same positions."""
    searchers = [Searcher(evaluator, replace(config, reuse_tree=False, stop=replace(config.stop, early_stop=False)))
                 for config in configs]
    for searcher in searchers:  # warm-up: onnxruntime's first calls of each batch size are slow
        searcher.search(positions[0], StopCondition(visits=visits))
    spent, done = [0.0] * len(configs), [0] * len(configs)
    for r in range(rounds):
        order = list(range(len(configs)))
        for i in order if r % 2 == 0 else order[::-1]:  # ABBA: a trend in the load falls on both alike
            searcher = searchers[i]
            for state in positions:
                start = time.process_time()
                result = searcher.search(state, StopCondition(visits=visits))
                spent[i] += time.process_time() - start
                done[i] += result.snapshot.playouts
    return [d / max(s, 1e-9) for d, s in zip(done, spent)]


def sample_positions(evaluator: Evaluator, args: argparse.Namespace, count: int) -> list[GameState]:
    """Positions for throughput: policy-drawn games cut after 0 .. half the board's area moves."""
    rng = np.random.default_rng([args.seed, 7])
    positions = []
    for i in range(count):
        moves = int(rng.integers(0, args.size * args.size // 2 + 1))
        positions.append(opening(evaluator, argparse.Namespace(**{**vars(args), "opening_moves": moves}), rng))
    return positions


# ---- journal -----------------------------------------------------------------------------------------


class Journal:
    """settings.json and journal.jsonl in --out, or nothing at all without it."""

    def __init__(self, out: str | None, settings: dict):
        self.path = Path(out) if out else None
        self.lines: list[dict] = []
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        saved = self.path / SETTINGS
        if saved.exists():
            old = json.loads(saved.read_text())
            if old != settings:
                changed = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
                raise TuneError(f"{saved} was written with other settings ({', '.join(changed)}); "
                                f"use another --out or the same settings")
        else:
            saved.write_text(json.dumps(settings, indent=1) + "\n")
        journal = self.path / JOURNAL
        if journal.exists():
            for line in journal.read_text().splitlines():
                try:
                    self.lines.append(json.loads(line))
                except json.JSONDecodeError:  # a line a kill cut short: its pair is played again
                    pass
            journal.write_text("".join(json.dumps(line) + "\n" for line in self.lines))

    def append(self, line: dict) -> None:
        self.lines.append(line)
        if self.path is not None:
            with (self.path / JOURNAL).open("a") as file:
                file.write(json.dumps(line) + "\n")


# ---- SPSA --------------------------------------------------------------------------------------------


@dataclass
class Spsa:
    specs: list[Spec]
    pairs: int
    r_end: float

    def c_k(self, k: int) -> np.ndarray:
        return np.array([s.c_end * self.pairs ** GAMMA / k ** GAMMA for s in self.specs])

    def r_k(self, k: int) -> np.ndarray:
        big_a = self.pairs / 10
        a = np.array([self.r_end * s.c_end ** 2 * (big_a + self.pairs) ** ALPHA for s in self.specs])
        return a / (big_a + k) ** ALPHA / self.c_k(k) ** 2

    def clip(self, theta: np.ndarray) -> np.ndarray:
        return np.clip(theta, [s.low for s in self.specs], [s.high for s in self.specs])

    def values(self, theta: np.ndarray) -> dict[str, float]:
        return {s.name: float(v) for s, v in zip(self.specs, theta)}

    def update(self, theta: np.ndarray, k: int, flip: np.ndarray, result: float) -> np.ndarray:
        return self.clip(theta + self.r_k(k) * self.c_k(k) * result * flip)


def spsa_params(text: str) -> list[str]:
    names = [n.strip().replace("-", "_") for n in text.split(",") if n.strip()]
    for name in names:
        if name not in SPECS:
            raise TuneError(f"--params: unknown parameter {name!r}; known: {', '.join(SPECS)}")
        if SPECS[name].costly:
            raise TuneError(f"--params: {name} changes the cost of a visit, so SPSA at equal visits cannot tune "
                            f"it; compare its values with `match` (throughput-scaled visits)")
    if not names:
        raise TuneError("--params: no parameter to tune")
    return names


def run_spsa(args: argparse.Namespace, evaluator: Evaluator, base: dict[str, float]) -> dict[str, float]:
    names = spsa_params(args.params)
    spsa = Spsa([SPECS[n] for n in names], args.pairs, args.r_end)
    start_values = {n: value_of(make_config(base), n, args.size) for n in names}
    journal = Journal(args.out, {"command": "spsa", **_common_settings(args), "params": names,
                                 "pairs": args.pairs, "r_end": args.r_end, "start": start_values})
    theta = np.array(journal.lines[-1]["theta"]) if journal.lines else np.array([start_values[n] for n in names])
    finished = len(journal.lines)
    next_k = max((line["k"] for line in journal.lines), default=0) + 1
    if finished:
        print(f"spsa: resuming after {finished} pairs", file=sys.stderr)
    wins: dict[int, list[Game]] = {}
    state = {"theta": theta, "k": next_k, "started": finished}
    rng = np.random.default_rng([args.seed, next_k])
    clock = time.monotonic()

    def start() -> list[Game]:
        if state["started"] >= args.pairs:
            return []
        k = state["k"]
        state["k"] += 1
        state["started"] += 1
        flip = rng.choice([-1.0, 1.0], size=len(names))
        c_k = spsa.c_k(k)
        plus = Side(make_config(base | spsa.values(spsa.clip(state["theta"] + c_k * flip))), args.visits)
        minus = Side(make_config(base | spsa.values(spsa.clip(state["theta"] - c_k * flip))), args.visits)
        board = opening(evaluator, args, np.random.default_rng([args.seed, k]))
        tag = (k, flip)
        return [Game(evaluator, board, plus, minus, (tag, BLACK)), Game(evaluator, board, minus, plus, (tag, WHITE))]

    def done(game: Game) -> None:
        (k, flip), plus_color = game.tag
        wins.setdefault(k, []).append(game)
        if len(wins[k]) < 2:
            return
        result = sum(2 * g.score_for(g.tag[1]) - 1 for g in wins.pop(k))
        state["theta"] = spsa.update(state["theta"], k, flip, result)
        journal.append({"k": k, "flip": flip.tolist(), "result": result,
                        "theta": [round(float(v), 6) for v in state["theta"]]})
        count = len(journal.lines)
        if count % args.report_every == 0 or count == args.pairs:
            shown = ", ".join(f"{n}={v:.4g}" for n, v in spsa.values(state["theta"]).items())
            print(f"spsa: {count}/{args.pairs} pairs, {time.monotonic() - clock:.0f} s: {shown}", file=sys.stderr,
                  flush=True)

    play(start, done, 2 * args.parallel, args.evaluation_threads)
    final = {n: round(v, 4) for n, v in spsa.values(state["theta"]).items()}
    print("SPSA result after", len(journal.lines), "pairs:", ", ".join(f"{n}={v:g}" for n, v in final.items()))
    if journal.lines:
        results = [line["result"] for line in journal.lines]
        print(f"  plus side's mean result per pair {np.mean(results):+.3f} (noise only: SPSA says where, the "
              f"verification match says how much)")
    return final


# ---- match -------------------------------------------------------------------------------------------


def run_match(args: argparse.Namespace, evaluator: Evaluator, base: dict[str, float], values: dict[str, float],
              out: str | None) -> dict:
    """The candidate against the base, visits scaled by measured throughput; prints and returns the result."""
    candidate, reference = make_config(base | values), make_config(base)
    sprt = _sprt(args.sprt)
    settings = {"command": "match", **_common_settings(args), "candidate": values, "games": args.games,
                "sprt": list(sprt) if sprt else None, "equal": args.equal}
    journal = Journal(out, settings)
    rate = None
    measured = [line for line in journal.lines if "throughput" in line]
    games_done = [line for line in journal.lines if "pair" in line]
    if args.equal == "time":
        if measured:
            rate = measured[0]["throughput"]
        else:
            positions = sample_positions(evaluator, args, args.throughput_positions)
            rate = throughput(evaluator, [reference, candidate], positions, args.visits, args.throughput_rounds)
            journal.append({"throughput": rate})
        ratio = rate[1] / rate[0]
        candidate_visits = max(1, round(args.visits * ratio))
        print(f"throughput (visits per CPU second, one search, one onnxruntime thread): base {rate[0]:.0f}, "
              f"candidate {rate[1]:.0f} (ratio {ratio:.3f}); {args.visits} visits a move take the base about "
              f"{args.visits / rate[0]:.2f} CPU s, the candidate gets {candidate_visits}", file=sys.stderr)
    else:
        candidate_visits = args.visits
    cand, ref = Side(candidate, candidate_visits), Side(reference, args.visits)
    results = [line["score"] for line in games_done]
    played = {(line["pair"], line["candidate_black"]) for line in games_done}
    todo = iter([(pair, [black for black in (True, False) if (pair, black) not in played])
                 for pair in range((args.games + 1) // 2)])
    stopped = {"decided": _decided(results, sprt, args.games)}
    clock = time.monotonic()

    def start() -> list[Game]:
        for pair, colours in todo:
            if stopped["decided"]:
                return []
            if not colours:
                continue
            board = opening(evaluator, args, np.random.default_rng([args.seed, 1_000_003, pair]))
            return [Game(evaluator, board, cand, ref, (pair, BLACK)) if black else
                    Game(evaluator, board, ref, cand, (pair, WHITE)) for black in colours]
        return []

    def done(game: Game) -> None:
        if stopped["decided"]:
            return
        pair, color = game.tag
        results.append(game.score_for(color))
        journal.append({"pair": pair, "candidate_black": color == BLACK, "score": results[-1],
                        "moves": game.state.move_number})
        stopped["decided"] = _decided(results, sprt, args.games)
        if len(results) % args.report_every == 0:
            print(f"match: {len(results)} games, score {match_stats.score(results):.3f}, "
                  f"{time.monotonic() - clock:.0f} s", file=sys.stderr, flush=True)

    play(start, done, 2 * args.parallel, args.evaluation_threads)
    return report(results, values, sprt, candidate_visits, args.visits)


def _decided(results: list[float], sprt: tuple[float, float] | None, games: int) -> bool:
    if len(results) >= games:
        return True
    return sprt is not None and len(results) >= 20 and match_stats.sprt_decision(results, *sprt) is not None


def report(results: list[float], values: dict[str, float], sprt: tuple[float, float] | None,
           candidate_visits: int, visits: int) -> dict:
    shown = ", ".join(f"{n}={v:g}" for n, v in values.items()) or "(the base itself)"
    if not results:
        print(f"candidate {shown}: no games")
        return {"games": 0}
    score, low, high = match_stats.score_interval(results)
    elo, elo_low, elo_high = match_stats.elo_interval(results)
    wins, draws = results.count(1.0), results.count(0.5)
    verdict = ("better at 95%" if low > 0.5 else "worse at 95%" if high < 0.5 else "within noise")
    line = (f"candidate {shown} against the base ({candidate_visits} v. {visits} visits a move): "
            f"{wins}-{draws}-{len(results) - wins - draws} in {len(results)} games, score {score:.3f} "
            f"(95%: {low:.3f} .. {high:.3f}), Elo {elo:+.0f} (95%: {elo_low:+.0f} .. {elo_high:+.0f}): {verdict}")
    result = {"games": len(results), "score": score, "low": low, "high": high, "elo": elo, "verdict": verdict}
    if sprt:
        llr, decision = match_stats.sprt_llr(results, *sprt), match_stats.sprt_decision(results, *sprt)
        bounds = match_stats.sprt_bounds()
        line += f"; SPRT({sprt[0]:g}, {sprt[1]:g}) LLR {llr:.2f} ({bounds[0]:.2f}, {bounds[1]:.2f}): " \
                f"{decision or 'undecided'}"
        result["sprt"] = decision
    print(line)
    return result


def _sprt(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        elo0, elo1 = (float(x) for x in text.split(","))
    except ValueError:
        raise TuneError(f"--sprt: expected ELO0,ELO1, got {text!r}") from None
    if not elo0 < elo1:
        raise TuneError("--sprt: ELO0 must be below ELO1")
    return elo0, elo1


# ---- command line ------------------------------------------------------------------------------------


def _common_settings(args: argparse.Namespace) -> dict:
    return {"weights": str(Path(args.weights).resolve()), "size": args.size, "komi": args.komi,
            "rules": args.rules, "visits": args.visits, "opening_moves": args.opening_moves, "seed": args.seed,
            "base": args.set}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.tune", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("spsa", "match"))
    parser.add_argument("--weights", required=True, help="ONNX network")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=7.0)
    parser.add_argument("--rules", default="chinese")
    parser.add_argument("--visits", type=int, default=48, help="visits a move of the base (default: 48)")
    parser.add_argument("--set", default="",
                        help="NAME=VALUE,...: the base for both sides (default: the engine's defaults)")
    parser.add_argument("--params", default=SPSA_DEFAULT, help=f"spsa: parameters to tune (default: {SPSA_DEFAULT})")
    parser.add_argument("--pairs", type=int, default=200, help="spsa: game pairs (iterations)")
    parser.add_argument("--r-end", type=float, default=0.02,
                        help="spsa: last step / (c_end * result); fishtest's 0.002 needs ten times the pairs")
    parser.add_argument("--verify-games", type=int, default=0, help="spsa: then this match against the base")
    parser.add_argument("--candidate", default="", help="match: NAME=VALUE,... against the base")
    parser.add_argument("--games", type=int, default=200, help="match: games (rounded up to pairs)")
    parser.add_argument("--sprt", help="match: ELO0,ELO1: stop when the SPRT decides")
    parser.add_argument("--equal", choices=("time", "visits"), default="time",
                        help="match: scale the candidate's visits by measured throughput (time) or not")
    parser.add_argument("--throughput-positions", type=int, default=6)
    parser.add_argument("--throughput-rounds", type=int, default=3)
    parser.add_argument("--opening-moves", type=int, default=4)
    parser.add_argument("--parallel", type=int, default=8, help="pairs played at once")
    parser.add_argument("--evaluation-threads", type=int, default=1,
                        help="threads computing one lane's positions while the other lane searches (0: none, one "
                             "network call a round; default: 1)")
    parser.add_argument("--report-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="journal folder (resumable); without it nothing is written")
    args = parser.parse_args(argv)
    try:
        if min(args.visits, args.pairs, args.games, args.parallel, args.report_every) < 1:
            raise TuneError("--visits, --pairs, --games, --parallel and --report-every must be positive")
        if args.evaluation_threads < 0:
            raise TuneError("--evaluation-threads must not be negative")
        Rules.named(args.rules)
        base = parse_values(args.set)
        candidate = spsa_params(args.params) if args.command == "spsa" else parse_values(args.candidate)
        from gtp_engine.network_evaluator import ModelLoadError
        from gtp_engine.onnx_evaluator import OnnxEvaluator  # onnxruntime: loaded only once the arguments are good
        try:
            evaluator = OnnxEvaluator(args.weights, device="cpu", threads=network_threads(args.evaluation_threads) or 1,
                                      seed=args.seed)
        except ModelLoadError as error:
            raise TuneError(str(error)) from None
        if args.command == "spsa":
            values = run_spsa(args, evaluator, base)
            _verify_throughput(args, evaluator, base, values)
            lines = [f"{option_name(n)} = {v:g}" for n, v in values.items()]
            print("config file lines (gtp-engine --config FILE):", *lines, sep="\n")
            if args.verify_games:  # at equal visits: SPSA's parameters leave the cost of a visit alone (shown above)
                args.games, args.equal = args.verify_games, "visits"
                run_match(args, evaluator, base, values, str(Path(args.out) / "verify") if args.out else None)
        else:
            run_match(args, evaluator, base, candidate, args.out)
    except TuneError as error:
        print(f"tune: {error}", file=sys.stderr)
        return 2
    return 0


def _verify_throughput(args: argparse.Namespace, evaluator: Evaluator, base: dict[str, float],
                       values: dict[str, float]) -> None:
    """Shows that SPSA's answer costs what the base costs per visit, which equal visits assumed."""
    positions = sample_positions(evaluator, args, args.throughput_positions)
    configs = [make_config(base), make_config(base | values)]
    rate = throughput(evaluator, configs, positions, args.visits, args.throughput_rounds)
    print(f"throughput of the result against the base (visits per CPU second): {rate[1]:.0f} / {rate[0]:.0f} "
          f"= {rate[1] / rate[0]:.3f}")


if __name__ == "__main__":
    sys.exit(main())
