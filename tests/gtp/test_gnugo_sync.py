"""Whole random games played and taken back over GTP on the engine and on GNU Go side by side: after every step
both hold the same stones and captures, and both accept and refuse the same moves (moves GNU Go refuses, the
engine refuses; the one difference allowed is positional superko, which GNU Go does not apply)."""

from __future__ import annotations

import random
import re

import pytest

from gtp_engine import coords
from gtp_engine.game import GameState
from gtp_engine.gtp.values import parse_color

SIZE = 9


def stones(diagram: str) -> dict[str, set[str]]:
    """Black and white vertices of a showboard diagram."""
    found: dict[str, set[str]] = {"X": set(), "O": set()}
    for line in diagram.split("\n"):
        match = re.fullmatch(r"\s*(\d+)(.*?)(\d+)", line)
        if match:
            for col, cell in enumerate(re.sub(r"[ ()]", "", match.group(2))):
                if cell in found:
                    found[cell].add(f"{coords.GTP_COLUMNS[col]}{match.group(1)}")
    return found


def same_position(gtp, gnugo) -> None:
    mine = stones(gtp.ok("showboard"))
    assert mine["X"] == set(gnugo("list_stones black").text.upper().split())
    assert mine["O"] == set(gnugo("list_stones white").text.upper().split())
    captured = re.search(r"Black \(X\) (\d+), White \(O\) (\d+)", gtp.ok("showboard")).groups()
    assert captured == (gnugo("captures black").text, gnugo("captures white").text)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_random_game_with_undo_stays_in_sync_with_gnugo(engine, gnugo, seed):
    rng = random.Random(seed)
    gtp, referee = engine(), gnugo()
    for command in ("boardsize 9", "clear_board", "komi 6.5"):
        gtp.ok(command)
        assert referee(command).ok
    game = GameState(SIZE, komi=6.5)  # our own record, to tell superko refusals from wrong ones
    color, passes, moves = "black", 0, 0
    while passes < 2 and moves < 160:
        step = rng.random()
        if step < 0.12:  # take back one to three moves, on both
            count = rng.randint(1, 3)
            for _ in range(count):
                mine, theirs = gtp("undo"), referee("undo")
                assert mine.ok == theirs.ok == bool(game.moves)
                if mine.ok:
                    game.undo()
                    color = "white" if color == "black" else "black"
                    passes = 0
            same_position(gtp, referee)
            continue
        legal = referee(f"all_legal {color}").text.upper().split()
        refused = [v for v in (f"{c}{r}" for c in coords.GTP_COLUMNS[:SIZE] for r in range(1, SIZE + 1))
                   if v not in legal]
        if refused:  # a move GNU Go refuses (occupied, suicide, ko) the engine refuses with "illegal move"
            probe = rng.choice(refused)
            assert gtp(f"play {color} {probe}").text == "illegal move", probe
        vertex = "pass" if step > 0.95 or not legal else rng.choice(legal)
        reply = gtp(f"play {color} {vertex}")
        if not reply.ok:
            point = coords.from_gtp(game.grid, vertex)
            assert game.illegal_reason(point, parse_color(color)) == "superko", vertex
            continue
        assert referee(f"play {color} {vertex}").ok
        game.play(coords.PASS if vertex == "pass" else coords.from_gtp(game.grid, vertex), parse_color(color))
        passes = passes + 1 if vertex == "pass" else 0
        moves += 1
        color = "white" if color == "black" else "black"
        if moves % 5 == 0:
            same_position(gtp, referee)
    same_position(gtp, referee)
    assert moves >= 40  # whole games, not a few moves
