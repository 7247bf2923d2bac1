"""Board against GNU Go as a referee: random games where, after every move, both hold the same stones and agree on
whether sampled points are legal.

GNU Go (`gnugo --mode gtp --chinese-rules`) runs as a subprocess driven over pipes. Its is_legal knows simple ko
only, so it is compared with Board.is_legal, which is also simple ko (superko lives in game.py). Each game is
generated with our board first; then all its GTP commands are written at once by a thread while the responses are
read, so a game costs one round trip instead of one per command.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading

import numpy as np
import pytest

from gtp_engine.board import BLACK, EMPTY, WHITE, Board
from gtp_engine.coords import PASS, to_gtp

GNUGO = shutil.which("gnugo") or shutil.which("gnugo", path=os.pathsep.join(["/usr/games", "/usr/local/games"]))
pytestmark = pytest.mark.skipif(GNUGO is None, reason="GNU Go is not installed (e.g. apt-get install gnugo)")

LEGALITY_SAMPLES = 6  # points asked about after each move, illegal ones (suicide, ko, occupied) first


class Gtp:
    """A GTP engine on pipes; batch() sends many commands and returns their responses in order."""

    def __init__(self, argv: list[str]):
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )

    def batch(self, commands: list[str]) -> list[tuple[bool, str]]:
        text = "".join(f"{i} {command}\n" for i, command in enumerate(commands))
        writer = threading.Thread(target=self._write, args=(text,))
        writer.start()  # writing from another thread: GNU Go blocks once our end of its stdout pipe is full
        responses = [self._read(i) for i in range(len(commands))]
        writer.join()
        return responses

    def _write(self, text: str) -> None:
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def _read(self, expected_id: int) -> tuple[bool, str]:
        first = self.process.stdout.readline()
        if not first:
            raise RuntimeError("GNU Go closed its output")
        lines = [first.rstrip("\n")]
        while (line := self.process.stdout.readline()) not in ("\n", ""):
            lines.append(line.rstrip("\n"))
        status, _, rest = lines[0].partition(" ")
        assert status[1:] == str(expected_id), f"GTP response out of order: {lines}"
        return status[0] == "=", "\n".join([rest] + lines[1:]).strip()

    def close(self) -> None:
        self.process.communicate("quit\n", timeout=10)


@pytest.fixture(scope="module")
def gnugo():
    engine = Gtp([GNUGO, "--mode", "gtp", "--chinese-rules"])
    yield engine
    engine.close()


def urgent_points(board: Board) -> list[int]:
    """Liberties of chains in atari: capturing, escaping and ko moves, to make random games tactical."""
    g, colors = board.grid, board.colors
    points = set()
    for flat in np.flatnonzero(board.liberties() == 1).tolist():
        points.update(n for n in g.neighbors[g.points[flat]] if colors[n] == EMPTY)
    return sorted(points)


def choose_move(board: Board, color: int, rng: random.Random) -> int:
    legal = np.flatnonzero(board.legal_mask(color)).tolist()
    if not legal or rng.random() < 0.02:
        return PASS
    urgent = [p for p in urgent_points(board) if board.is_legal(p, color)]
    if urgent and rng.random() < 0.6:
        return rng.choice(urgent)
    return board.grid.points[rng.choice(legal)]


def sample_points(board: Board, color: int, rng: random.Random) -> list[int]:
    g = board.grid
    illegal = [p for p in g.points if board.colors[p] == EMPTY and not board.is_legal(p, color)]
    occupied = [p for p in g.points if board.colors[p] != EMPTY]
    others = rng.sample(g.points, min(LEGALITY_SAMPLES, len(g.points)))
    ko = [board.ko_point] if board.ko_point != PASS else []
    chosen = ko + rng.sample(illegal, min(3, len(illegal))) + rng.sample(occupied, min(1, len(occupied))) + others
    return list(dict.fromkeys(chosen))[:LEGALITY_SAMPLES]


def random_game(size: int, max_moves: int, seed: int) -> tuple[list[str], list[tuple], dict[str, int]]:
    """The GTP commands replaying one random game, what each response must be, and what the game contained."""
    rng = random.Random(seed)
    board = Board(size)
    g = board.grid
    commands, expected = [f"boardsize {size}", "clear_board"], [("ok",), ("ok",)]
    seen = {"captures": 0, "kos": 0, "suicide or ko samples": 0}
    color = BLACK
    for number in range(1, max_moves + 1):
        point = choose_move(board, color, rng)
        before = board.captures[color]
        board.play(point, color)
        seen["captures"] += board.captures[color] > before
        seen["kos"] += board.ko_point != PASS
        where = f"seed {seed} move {number}"
        commands.append(f"play {'b' if color == BLACK else 'w'} {to_gtp(g, point)}")
        expected.append(("ok", where))
        for stone_color, name in ((BLACK, "black"), (WHITE, "white")):
            commands.append(f"list_stones {name}")
            expected.append(("stones", {to_gtp(g, p) for p in board.stones(stone_color)}, where))
        color = 3 - color
        for p in sample_points(board, color, rng):
            legal = board.is_legal(p, color)
            seen["suicide or ko samples"] += not legal and board.colors[p] == EMPTY
            commands.append(f"is_legal {'b' if color == BLACK else 'w'} {to_gtp(g, p)}")
            expected.append(("legal", legal, f"{where}, {board.illegal_reason(p, color)}"))
    for stone_color, name in ((BLACK, "black"), (WHITE, "white")):
        commands.append(f"captures {name}")
        expected.append(("count", board.captures[stone_color], f"seed {seed} end"))
    return commands, expected, seen


def referee(gnugo: Gtp, size: int, games: int, max_moves: int, first_seed: int) -> dict[str, int]:
    totals = {"captures": 0, "kos": 0, "suicide or ko samples": 0}
    for seed in range(first_seed, first_seed + games):
        commands, expected, seen = random_game(size, max_moves, seed)
        for command, (ok, text), want in zip(commands, gnugo.batch(commands), expected):
            context = f"{size}x{size} {want[-1]}: {command!r} -> {text!r}"
            assert ok, f"GNU Go refused {context}"
            if want[0] == "stones":
                assert set(text.upper().split()) == want[1], f"stones differ at {context}"
            elif want[0] == "legal":
                assert (text == "1") == want[1], f"legality differs (ours: {want[1]}) at {context}"
            elif want[0] == "count":
                assert int(text) == want[1], f"captures differ at {context}"
        for key in totals:
            totals[key] += seen[key]
    return totals


def test_9x9_random_games_match_gnugo(gnugo):
    totals = referee(gnugo, size=9, games=200, max_moves=120, first_seed=9000)
    # The games must really contain what the comparison is for.
    assert totals["captures"] > 1500 and totals["kos"] > 30 and totals["suicide or ko samples"] > 1000, totals


def test_19x19_random_games_match_gnugo(gnugo):
    totals = referee(gnugo, size=19, games=30, max_moves=250, first_seed=19000)
    assert totals["captures"] > 150 and totals["kos"] > 5 and totals["suicide or ko samples"] > 100, totals
