"""Board speed: microseconds per move for our GameState and Board beside sgfmill's Board on the same games, and the
cost of a whole-board legal mask.

Usage (from the repository root):
    python -m tools.bench_board [--games9 100] [--games19 20] [--repeat 3] [--seed 1] [--profile]

The games are random playouts generated once with GameState (uniform over legal moves that do not fill a
one-point eye of the mover's own colour, passing when none is left), so they are legal under positional superko
and full of captures. Every implementation then replays exactly these (color, point) sequences on a fresh board;
the best of --repeat runs is kept. Per move:
- GameState.play: legality incl. positional superko, captures, liberties, hash, history and undo bookkeeping.
- Board.play: legality (occupied, suicide, simple ko), captures, liberties, hash.
- Board.play_unchecked: the same without the legality check (what the search uses).
- sgfmill: sgfmill.boards.Board.play, captures without any legality check or hash (passes skipped).
The legal mask is timed on positions taken from the 19x19 games, and also given in units of one Board.play and
one GameState.play. --profile prints cProfile listings of the GameState replay and of the masks.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time
from typing import Callable

from sgfmill import boards as sgf_boards

from gtp_engine.board import BLACK, Board
from gtp_engine.coords import PASS
from gtp_engine.game import GameState

Game = list[tuple[int, int]]


def random_game(size: int, rng: random.Random) -> Game:
    game = GameState(size)
    g = game.grid
    neighbors, on_board = g.neighbors, g.on_board
    while not game.is_over and game.move_number < 3 * g.area:
        colors, color = game.board.colors, game.to_play
        candidates = [
            g.points[flat]
            for flat, legal in enumerate(game.legal_mask()[:-1].tolist())
            if legal and not all(colors[n] == color or not on_board[n] for n in neighbors[g.points[flat]])
        ]
        game.play(rng.choice(candidates) if candidates else PASS)
    return list(game.moves)


def replay_game_state(size: int, moves: Game) -> None:
    game = GameState(size)
    for color, point in moves:
        game.play(point, color)


def replay_board(size: int, moves: Game) -> None:
    board = Board(size)
    for color, point in moves:
        board.play(point, color)


def replay_unchecked(size: int, moves: Game) -> None:
    board = Board(size)
    for color, point in moves:
        board.play_unchecked(point, color)


def sgfmill_moves(size: int, moves: Game) -> list[tuple[int, int, str]]:
    """The same games for sgfmill: (row counted from the bottom, col, colour), passes dropped."""
    g = Board(size).grid
    result = []
    for color, point in moves:
        if point != PASS:
            row, col = g.row_col(point)
            result.append((size - 1 - row, col, "b" if color == BLACK else "w"))
    return result


def replay_sgfmill(size: int, moves: list[tuple[int, int, str]]) -> None:
    board = sgf_boards.Board(size)
    for row, col, colour in moves:
        board.play(row, col, colour)


def best_time(run: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def bench_size(size: int, games: list[Game], repeat: int) -> dict[str, float]:
    """Microseconds per move of each implementation over all games."""
    moves = sum(len(game) for game in games)
    sgf_games = [sgfmill_moves(size, game) for game in games]
    runs = {
        "GameState.play": lambda: [replay_game_state(size, game) for game in games],
        "Board.play": lambda: [replay_board(size, game) for game in games],
        "Board.play_unchecked": lambda: [replay_unchecked(size, game) for game in games],
        "sgfmill Board.play": lambda: [replay_sgfmill(size, game) for game in sgf_games],
    }
    return {name: best_time(run, repeat) / moves * 1e6 for name, run in runs.items()}


def mask_positions(games: list[Game], every: int = 10) -> list[GameState]:
    positions = []
    for moves in games:
        game = GameState(19)
        for number, (color, point) in enumerate(moves, start=1):
            game.play(point, color)
            if number % every == 0:
                positions.append(game.copy())
    return positions


def bench_masks(positions: list[GameState], repeat: int) -> dict[str, float]:
    """Microseconds per whole-board legal mask (19x19) for the side to move."""
    runs = {
        "Board.legal_mask": lambda: [p.board.legal_mask(p.to_play) for p in positions],
        "GameState.legal_mask": lambda: [p.legal_mask() for p in positions],
    }
    return {name: best_time(run, repeat) / len(positions) * 1e6 for name, run in runs.items()}


def profile(title: str, run: Callable[[], None]) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(run)
    print(f"\n--- cProfile: {title} ---")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games9", type=int, default=100, help="random 9x9 games (default 100)")
    parser.add_argument("--games19", type=int, default=20, help="random 19x19 games (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement, best kept (default 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print cProfile listings too")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    counts = {9: args.games9, 19: args.games19}
    games = {size: [random_game(size, rng) for _ in range(count)] for size, count in counts.items()}
    per_move = {}
    for size, size_games in games.items():
        moves = sum(len(game) for game in size_games)
        per_move[size] = bench_size(size, size_games, args.repeat)
        sgfmill = per_move[size]["sgfmill Board.play"]
        print(f"{size}x{size}: {len(size_games)} random games, {moves} moves ({moves / len(size_games):.0f} per game)")
        for name, micros in per_move[size].items():
            print(f"  {name:22s} {micros:7.2f} us/move   {micros / sgfmill:5.2f} x sgfmill")

    positions = mask_positions(games[19])
    masks = bench_masks(positions, args.repeat)
    print(f"19x19 legal mask over {len(positions)} positions from those games:")
    for name, micros in masks.items():
        print(f"  {name:22s} {micros:7.1f} us   = {micros / per_move[19]['Board.play']:5.1f} Board.play"
              f"   = {micros / per_move[19]['GameState.play']:5.1f} GameState.play")

    if args.profile:
        profile("GameState.play replay, 19x19", lambda: [replay_game_state(19, game) for game in games[19]])
        profile("Board.play replay, 19x19", lambda: [replay_board(19, game) for game in games[19]])
        profile("GameState.legal_mask, 19x19", lambda: [p.legal_mask() for p in positions])


if __name__ == "__main__":
    main()
