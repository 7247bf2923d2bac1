"""SGF ingest: game records (SGF folders, files, tar archives) become training shards (dataset.py).

Terms:
- record: one SGF game, read by sgf_io.load_sgf (main line only).
- filters (IngestConfig): board size, most handicap stones, fewest moves, result present and readable, draws
  kept or not, and the players' strength where the record states it: a rank ("3d", "5k", "1p") against
  min_rank, or a bare number (CGOS Elo) against min_elo. A player whose strength cannot be read passes.
- skip: a record left out, counted under its reason (a filter, or what was wrong with it); never an error.
- replay: the moves played one by one through game.py with full legality checks; the position before each move
  is encoded by features.encode and stored in compact form with its targets (dataset.py).
- result: RE parsed into the winner (or a draw) and how the game ended: "score" (a points margin), "resign",
  "time", "forfeit", or "win" (a winner without detail).
- value target: win/loss (and draw, with keep_draws) from the side to move, for every position of a game
  with a result.
- score target: the RE margin from the side to move, only for games that ended by counting.
- ownership target: the final position's Tromp-Taylor owners, only when the game ended in two passes and the
  Tromp-Taylor count of the final board equals the RE margin (within a point under territory scoring, where
  the two counts may differ by one): then no dead stones were left on the board. With ownership_playouts, a
  game ended by counting that this leaves out has its dead stones judged by rollouts: the shipped rollout policy
  plays the final board out that many times, and a chain whose mean area ownership lies on the other side is dead
  (endgame.dead_stones). Where the record's own count without them equals the RE margin (within that point), the
  target is the Tromp-Taylor owners of the board without them. Masked everywhere else.
- setup drawn anew (relabel_share > 0): a share of the training games that ended by counting keep their moves but
  are labelled as if played under a rule set and komi drawn from relabel_rules and relabel_komi_stdev around the
  record's own komi (game_setups.SetupDistribution): the margin moves by the komi, exactly. A rule set of the
  record's own counting (Chinese for AGA) is taken as drawn; between area and territory counting only where the
  game ended in two passes without a seki (the two counts of one board then differ by the stones each side put
  on it); elsewhere the record's rules stay. The positions' rule and komi inputs and the value and score targets
  follow the setup; validation games stay as recorded. So a network sees a point of komi move the result under
  every rule set, not only across records.
- game key: a hash of size, setup and moves; a later record with the same key is skipped as a duplicate, and
  the key's value decides whether a game goes to the validation split (a fraction val_fraction of games).
- chunk: a group of records one worker process replays; chunks come back in order, so the shards do not
  depend on the number of workers.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import math
import multiprocessing
import multiprocessing.pool
import os
import re
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np
from tqdm import tqdm

from gtp_engine import endgame, features, network_loader, sgf_io
from gtp_engine.board import BLACK, WHITE, Board, IllegalMoveError
from gtp_engine.game import GameState
from gtp_engine.rollout import RolloutPolicy
from gtp_engine.training import dataset, game_setups, splits

log = logging.getLogger(__name__)

_CHUNK = 64  # records per worker task: large enough to amortise pickling, small enough to balance load


@dataclass(frozen=True)
class IngestConfig:
    size: int = 19
    max_handicap: int = 0
    min_moves: int = 20
    require_result: bool = True
    keep_draws: bool = False
    min_rank: str | None = None
    min_elo: float | None = None
    val_fraction: float = 0.02
    shard_samples: int = 250_000
    workers: int = 0  # 0: one per CPU core
    seed: int = 0  # shuffles the records before they are split into shards; with the game key, draws relabelling
    relabel_share: float = 0.0
    relabel_rules: str = "chinese,japanese"
    relabel_komi_stdev: float = 1.0
    ownership_playouts: int = 0  # rollouts that judge a counted game's dead stones for its ownership target

    def __post_init__(self) -> None:
        if not 0.0 <= self.relabel_share <= 1.0:
            raise ValueError("relabel_share must be in [0, 1]")
        self.relabel_setups()  # a ValueError for unknown rules or a negative spread
        if self.min_rank is not None and parse_rank(self.min_rank) is None:
            raise ValueError(f"min_rank {self.min_rank!r} is not a rank like 3d, 5k or 1p")
        if self.ownership_playouts < 0:
            raise ValueError("ownership_playouts must not be negative")
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError("val_fraction must be in [0, 1)")
        if self.shard_samples < 1:
            raise ValueError("shard_samples must be positive")

    def relabel_setups(self) -> game_setups.SetupDistribution:
        """What a relabelled game's setup is drawn from: each rule set about its default komi (a record's own komi
        then moves the draw by its distance from its rules' default)."""
        first = game_setups.rule_sets(self.relabel_rules)[0]
        return game_setups.SetupDistribution(self.relabel_rules, first.default_komi(), self.relabel_komi_stdev)


class Skip(Exception):
    """A record left out; str(e) is the reason it is counted under."""


@dataclass(frozen=True)
class Result:
    winner: int | None  # BLACK, WHITE, or None for a draw
    ending: str  # "score", "resign", "time", "forfeit", "win", "draw"
    margin: float | None = None  # points, for "score" (and 0 for a counted draw)


_ENDINGS = {"R": "resign", "RESIGN": "resign", "T": "time", "TIME": "time", "F": "forfeit", "FORFEIT": "forfeit",
            "": "win"}
_DRAWS = {"0", "DRAW", "JIGO", "D"}


def parse_result(text: str | None) -> Result:
    """RE text as a Result; raises Skip("no result") or Skip("void result") for an absent or unusable one."""
    if text is None or not text.strip():
        raise Skip("no result")
    compact = re.sub(r"\s+", "", text).upper()
    if compact in _DRAWS:
        return Result(None, "draw", 0.0)
    match = re.fullmatch(r"([BW])\+(.*)", compact)
    if match is None:
        raise Skip("void result")
    winner = BLACK if match.group(1) == "B" else WHITE
    rest = match.group(2)
    if rest in _ENDINGS:
        return Result(winner, _ENDINGS[rest])
    try:
        margin = float(rest)
    except ValueError:
        raise Skip("void result") from None
    if not math.isfinite(margin) or margin < 0:
        raise Skip("void result")
    return Result(winner, "score", margin)


def parse_rank(text: str | None) -> float | None:
    """A rank on one scale (1k = 0, 1d = 1, 9d = 9, 1p = 10), None when the text is not a kyu/dan/pro rank."""
    match = re.fullmatch(r"\s*(\d+)\s*([kdp])[a-z]*\W*", (text or "").lower())
    if match is None:
        return None
    number, kind = int(match.group(1)), match.group(2)
    return {"k": 1.0 - number, "d": float(number), "p": 9.0 + number}[kind]


def _parse_elo(text: str | None) -> float | None:
    try:
        return float(text) if text and re.fullmatch(r"\s*\d+(\.\d*)?\s*", text) else None
    except ValueError:
        return None


def rollout_dead_stones(state: GameState, playouts: int, seed: int) -> list[int]:
    """The points of the chains that `playouts` rollouts of the final board, by the shipped rollout policy for its
    size, leave on the other side on average (endgame.dead_stones of their mean area ownership)."""
    board_left = state.copy()
    board_left.consecutive_passes = 0  # a game two passes ended is played on all the same
    policy, rng = _rollout_policy(state.width, state.height), np.random.default_rng(seed)
    owners = sum(policy.play_out(board_left, rng).area_ownership().astype(np.float64) for _ in range(playouts))
    return endgame.dead_stones(state, owners / playouts)


@functools.cache
def _rollout_policy(width: int, height: int) -> RolloutPolicy:
    """The shipped rollout policy for the size (network_loader.shipped_rollout), else the uniform one."""
    path = network_loader.shipped_rollout(width, height)
    return RolloutPolicy.load(path) if path is not None else RolloutPolicy.uniform()


def check_players(record: sgf_io.GameRecord, config: IngestConfig) -> None:
    """Raises Skip("rank") when a player's readable strength is below the configured minimum."""
    for rank in (record.black_rank, record.white_rank):
        if config.min_rank is not None:
            value = parse_rank(rank)
            if value is not None and value < parse_rank(config.min_rank):
                raise Skip("rank")
        if config.min_elo is not None:
            elo = _parse_elo(rank)
            if elo is not None and elo < config.min_elo:
                raise Skip("rank")


def game_samples(record: sgf_io.GameRecord, config: IngestConfig) -> dict[str, np.ndarray]:
    """The samples of one record, as a game for dataset.ShardWriter; raises Skip when it is left out."""
    if (record.width, record.height) != (config.size, config.size):
        raise Skip("board size")
    if record.handicap > config.max_handicap:
        raise Skip("handicap")
    if len(record.moves) < config.min_moves:
        raise Skip("too few moves")
    check_players(record, config)
    try:
        result = parse_result(record.result)
    except Skip:
        if config.require_result:
            raise
        result = None
    if result is not None and result.winner is None and not config.keep_draws:
        raise Skip("draw")

    try:
        state = record.to_game(max_moves=0)
    except sgf_io.SgfError as e:
        raise Skip(f"sgf: {e.reason}") from None
    g = state.grid
    positions, to_play, moves = [], [], []
    for color, point in record.moves:
        if color != state.to_play:
            raise Skip("move out of turn")
        positions.append(_Position(state))
        to_play.append(color)
        moves.append(g.flat(point))
        try:
            state.play(point, color)
        except IllegalMoveError:
            raise Skip("illegal move") from None

    key = splits.record_key(record)
    recorded_lead = black_lead = None  # Black's lead as recorded, and as labelled
    relabelled = None
    if result is not None and result.margin is not None:
        recorded_lead = black_lead = result.margin * (-1.0 if result.winner == WHITE else 1.0)
        relabelled = _relabelled(key, state, recorded_lead, config)
        if relabelled is not None:
            setup, black_lead = relabelled
            result = Result(None if black_lead == 0 else BLACK if black_lead > 0 else WHITE, "score", abs(black_lead))
            for position in positions:
                position.rules, position.komi = setup.rules, setup.komi

    # One encode call for the whole game: per call, encode costs about as much as the replay itself.
    spatial, global_ = features.encode(positions)
    to_play = np.array(to_play, np.uint8)
    game = dataset.compact(spatial, to_play)
    count = len(moves)
    game.update(to_play=to_play, globals=global_, move=np.array(moves, np.int16))
    value = np.full(count, -1, np.int8)
    score = np.zeros(count, np.float32)
    score_mask = np.zeros(count, bool)
    ownership = np.zeros((1, g.area), np.int8)
    trusted_ownership = False
    if result is not None:
        if result.winner is None:
            value[:] = 2
        else:
            value[:] = np.where(to_play == result.winner, 0, 1)
        if black_lead is not None:
            score[:] = np.where(to_play == BLACK, black_lead, -black_lead)
            score_mask[:] = True
            tolerance = 0.0 if state.rules.scoring == "area" else 1.0
            if state.is_over and abs(state.area_score() - recorded_lead) <= tolerance:
                ownership[0] = state.area_ownership()
                trusted_ownership = True
            elif config.ownership_playouts:
                dead = rollout_dead_stones(state, config.ownership_playouts, seed=key)
                if abs(state.score(dead) - recorded_lead) <= tolerance:
                    ownership[0] = state.area_ownership(dead)
                    trusted_ownership = True
    game.update(value=value, score=score, score_mask=score_mask, game_ownership=ownership,
                ownership_mask=np.array([trusted_ownership]),
                game_key=np.array([key], np.uint64), game_source=np.array([record.source]))
    game["ending"] = "none" if result is None else result.ending
    game["relabelled"] = None if relabelled is None else relabelled[0].rules.name
    return game


def _relabelled(key: int, state, black_lead: float,
                config: IngestConfig) -> tuple[game_setups.GameSetup, float] | None:
    """The setup drawn anew for a training game that ended by counting and Black's lead under it, or None where the
    game keeps its own (module docstring). `key`: the game key; `state`: the game replayed to its last move."""
    if config.relabel_share == 0 or state.handicap_stones:
        return None
    if splits.split_of(key, config.val_fraction) != "train":
        return None
    rng = np.random.default_rng([config.seed, key])
    if rng.random() >= config.relabel_share:
        return None
    drawn = config.relabel_setups().draw(rng)
    own = state.rules
    spread = drawn.komi - drawn.rules.default_komi()  # the draw's distance from the drawn rules' default komi
    record_offset = state.komi - own.default_komi()  # the record's own, kept: 5.5 stays a point under 6.5
    count = black_lead + state.komi  # Black's lead before komi, as the record counted it
    rules = own
    if _counting(drawn.rules) == _counting(own):
        rules = drawn.rules
    else:
        recount = _count_under(state, count, drawn.rules)
        if recount is not None:
            rules, count = drawn.rules, recount
    komi = rules.default_komi() + record_offset + spread
    if count == komi and not config.keep_draws:
        return None  # a draw under the drawn komi: the game keeps its own setup rather than leave the data
    return game_setups.GameSetup(rules, komi), count - komi


_AREA, _TERRITORY = ("area", "none", True), ("territory", "seki", True)  # Chinese's and Japanese's counting


def _counting(rules) -> tuple:
    """What decides a count of a game without handicap stones: two rule sets alike here count alike."""
    return rules.scoring, rules.tax, rules.friendly_pass


def _count_under(state, count: float, rules) -> float | None:
    """Black's lead before komi under `rules` of a game that ended in two passes, from `count`, its lead before komi
    as recorded under its own rules, one counting by area and the other by territory; else None. On one final
    board with the same dead stones, the area count less the territory count is the stones Black put on the board
    less White's (each stone is a point of area, each captured or dead one a prisoner), so it needs no judgement
    of dead stones. A seki breaks that (its eyes are area but not territory): a board the rules core finds one on,
    with every stone alive, is left alone."""
    counts = {_counting(state.rules), _counting(rules)}
    if not state.is_over or counts != {_AREA, _TERRITORY} or state.seki_stones():
        return None
    board = state.board
    placed_difference = (board.stone_count[BLACK] + board.captures[WHITE]) - \
        (board.stone_count[WHITE] + board.captures[BLACK])
    return count + placed_difference if rules.scoring == "area" else count - placed_difference


class _BoardView:
    """What features.encode reads of a Board (its grid, stones, chains, ko and captures), copied so that it stays
    as it was when the game moves on; a full Board.copy() costs more than the replay step it follows."""
    __slots__ = ("grid", "colors", "chain_head", "ko_point", "ko_color", "captures")

    def __init__(self, board: Board):
        self.grid = board.grid
        self.colors = bytes(board.colors)
        self.chain_head = board.chain_head[:]
        self.ko_point, self.ko_color = board.ko_point, board.ko_color
        self.captures = board.captures[:]


class _Position:
    """What features.encode reads of a GameState, frozen before the next move is played."""
    __slots__ = ("grid", "board", "to_play", "moves", "rules", "komi", "handicap_stones")

    def __init__(self, state):
        self.grid = state.grid
        self.board = _BoardView(state.board)
        self.to_play = state.to_play
        self.moves = state.moves[-features.HISTORY:]
        self.rules, self.komi, self.handicap_stones = state.rules, state.komi, state.handicap_stones


# ---- the pipeline ---------------------------------------------------------------------------------------------

def _replay_chunk(args: tuple[list[tuple[str, bytes]], IngestConfig]) -> list[dict | str]:
    """Each record of a chunk as a game dict, or the reason it was skipped."""
    chunk, config = args
    out: list[dict | str] = []
    for name, data in chunk:
        try:
            out.append(game_samples(sgf_io.load_sgf(data, source=name), config))
        except sgf_io.SgfError as e:
            out.append(f"sgf: {e.reason}")
        except Skip as e:
            out.append(str(e))
        except (ValueError, IndexError, RecursionError) as e:  # a record nothing above foresaw: still not fatal
            log.warning("%s: unexpected %s: %s", name, type(e).__name__, e)
            out.append(f"unexpected {type(e).__name__}")
    return out


def ingest(sources: Iterable[str | os.PathLike], out_dir: str | os.PathLike, config: IngestConfig,
           progress: bool = True) -> dict:
    """Reads every record of sources (.sgf files, folders, tar or zip archives: sgf_io.read_sgf_files), writes the
    shards and the sidecar into out_dir; returns the sidecar."""
    started = time.monotonic()
    sources = [str(s) for s in sources]
    workers = config.workers or os.cpu_count() or 1
    # Compression in threads of this process: on 16 cores a single-threaded writer falls behind the replay.
    writer = dataset.ShardWriter(out_dir, config.size, config.size, config.shard_samples,
                                 write_threads=min(4, max(1, workers // 4)) if workers > 1 else 0)
    records = [record for source in sources for record in sgf_io.read_sgf_files(source)]
    np.random.default_rng(config.seed).shuffle(records)
    chunks = [(records[i:i + _CHUNK], config) for i in range(0, len(records), _CHUNK)]
    skipped: collections.Counter[str] = collections.Counter()
    endings: collections.Counter[str] = collections.Counter()
    relabelled: collections.Counter[str] = collections.Counter()  # games by the rules of a setup drawn anew
    seen: set[int] = set()
    bar = tqdm(total=len(records), unit="game", desc="ingest", disable=not progress, smoothing=0.05)
    with _pool(workers) as pool:
        results = pool.imap(_replay_chunk, chunks) if pool is not None else map(_replay_chunk, chunks)
        for chunk_results in results:
            for game in chunk_results:
                bar.update(1)
                if isinstance(game, str):
                    skipped[game] += 1
                    continue
                key = int(game["game_key"][0])
                if key in seen:
                    skipped["duplicate"] += 1
                    continue
                seen.add(key)
                endings[game.pop("ending")] += 1
                relabelled[game.pop("relabelled") or "kept as recorded"] += 1
                writer.add(splits.split_of(key, config.val_fraction), game)
    bar.close()
    sidecar = writer.finish({
        "sources": sources,
        "config": dataclasses.asdict(config),
        "counts": {"records": len(records), "games": len(seen), "skipped": dict(sorted(skipped.items())),
                   "endings": dict(sorted(endings.items())), "setups": dict(sorted(relabelled.items()))},
        "seconds": round(time.monotonic() - started, 1),
    })
    log.info("ingest: %d records, %d games, %d train + %d val samples in %d shards (%.1f MB), %.0f s; skipped %s",
             len(records), len(seen), sidecar["samples"]["train"], sidecar["samples"]["val"],
             len(sidecar["shards"]), sidecar["bytes"] / 1e6, sidecar["seconds"], dict(skipped))
    return sidecar


@contextlib.contextmanager
def _pool(workers: int) -> Iterator[multiprocessing.pool.Pool | None]:
    """A process pool for more than one worker; None (replay in this process) for one."""
    if workers <= 1:
        yield None
        return
    # spawn, not fork: the parent may hold torch threads, which a forked child must not inherit.
    pool = multiprocessing.get_context("spawn").Pool(workers)
    try:
        yield pool
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
