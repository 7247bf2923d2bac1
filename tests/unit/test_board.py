"""Board rules on ASCII positions: captures, suicide, simple ko, snapback, hashing, liberties, legal masks.

Boards are written top row first: X black, O white, . empty. Points are named by GTP vertex (A1 is bottom left).
"""

import numpy as np
import pytest

from gtp_engine.board import BLACK, WHITE, Board, IllegalMoveError
from gtp_engine.coords import PASS, from_gtp


def at(board, vertex):
    return from_gtp(board.grid, vertex)


def play(board, color, vertex):
    board.play(at(board, vertex), color)


def test_single_stone_capture_in_the_middle():
    board = Board.from_ascii("""
        . . . . .
        . . X . .
        . X O . .
        . . X . .
        . . . . .
    """)
    play(board, BLACK, "D3")
    assert board.to_ascii() == Board.from_ascii("""
        . . . . .
        . . X . .
        . X . X .
        . . X . .
        . . . . .
    """).to_ascii()
    assert board.captures[BLACK] == 1


def test_one_move_captures_four_chains():
    board = Board.from_ascii("""
        . X . . .
        X O X . .
        O . O X .
        X O X . .
        . X . . .
    """)
    for vertex in ("B4", "B2", "C3", "A3"):
        assert board.chain_liberties(at(board, vertex)) == 1
    play(board, BLACK, "B3")
    assert board.captures[BLACK] == 4
    assert board.stones(WHITE) == []
    assert board.chain_liberties(at(board, "B3")) == 4


def test_capture_of_a_large_chain_on_the_edge():
    board = Board.from_ascii("""
        O O O O .
        X X X X X
        . . . . .
    """)
    play(board, BLACK, "E3")
    assert board.captures[BLACK] == 4
    assert board.stones(WHITE) == []


def test_suicide_is_illegal_and_says_why():
    board = Board.from_ascii("""
        . X .
        X . X
        . X .
    """)
    assert board.illegal_reason(at(board, "B2"), WHITE) == "suicide"
    assert board.illegal_reason(at(board, "B2"), BLACK) is None
    with pytest.raises(IllegalMoveError) as error:
        play(board, WHITE, "B2")
    assert error.value.reason == "suicide"
    assert "suicide" in str(error.value)


def test_multi_stone_suicide_and_allowed_suicide_removes_own_chain():
    board = Board.from_ascii("""
        O O X .
        . O X .
        X X X .
        . . . .
    """)
    assert board.illegal_reason(at(board, "A3"), WHITE) == "suicide"
    board.play(at(board, "A3"), WHITE, allow_suicide=True)
    assert board.stones(WHITE) == []
    assert board.captures[BLACK] == 4  # suicide gives the opponent the stones


def test_filling_own_last_liberty_is_legal_when_it_captures():
    board = Board.from_ascii("""
        . O X .
        O X . .
        X . . .
        . . . .
    """)
    assert board.illegal_reason(at(board, "A4"), BLACK) is None
    play(board, BLACK, "A4")
    assert board.captures[BLACK] == 2


def test_occupied_point():
    board = Board.from_ascii("""
        X .
        . .
    """)
    assert board.illegal_reason(at(board, "A2"), WHITE) == "occupied"


KO = """
    . X O .
    X O . O
    . X O .
    . . . .
"""


def test_simple_ko_bans_only_the_immediate_recapture():
    board = Board.from_ascii(KO)
    play(board, BLACK, "C3")
    assert board.captures[BLACK] == 1
    assert board.ko_point == at(board, "B3")
    assert board.illegal_reason(at(board, "B3"), WHITE) == "ko"
    assert not board.legal_mask(WHITE)[board.grid.flat(at(board, "B3"))]
    play(board, WHITE, "D1")  # a ko threat elsewhere
    play(board, BLACK, "A1")
    assert board.illegal_reason(at(board, "B3"), WHITE) is None
    play(board, WHITE, "B3")
    assert board.captures[WHITE] == 1


def test_pass_clears_the_ko():
    board = Board.from_ascii(KO)
    play(board, BLACK, "C3")
    board.play(PASS, WHITE)
    board.play(PASS, BLACK)
    assert board.is_legal(at(board, "B3"), WHITE)


def test_snapback_is_not_a_ko():
    board = Board.from_ascii("""
        . . . . X
        . . . X O
        . . X X .
        . . O O .
    """)
    play(board, BLACK, "E1")  # a throw-in, one stone in atari
    assert board.chain_liberties(at(board, "E1")) == 1
    play(board, WHITE, "E2")  # captures the throw-in
    assert board.captures[WHITE] == 1
    assert board.ko_point == PASS  # white's capturing chain has one liberty but two stones: no ko
    play(board, BLACK, "E1")  # snaps back
    assert board.captures[BLACK] == 2
    assert board.colors[at(board, "E3")] == board.colors[at(board, "E2")] == 0


def test_hash_depends_only_on_the_stones():
    board = Board.from_ascii(KO)
    play(board, BLACK, "C3")
    same = Board.from_ascii("""
        . X O .
        X . X O
        . X O .
        . . . .
    """)
    assert board.hash == same.hash
    assert board == same
    play(board, WHITE, "D1")
    assert board.hash != same.hash


def test_hash_after_predicts_captures():
    board = Board.from_ascii(KO)
    predicted = board.hash_after(at(board, "C3"), BLACK)
    play(board, BLACK, "C3")
    assert board.hash == predicted


def test_liberties_count_shared_liberties_once():
    board = Board.from_ascii("""
        . . . . .
        . X X X .
        . X . X .
        . X X X .
        . . . . .
    """)
    libs = board.liberties().reshape(5, 5)
    assert libs[1, 1] == 13  # 12 outside + the eye, each counted once
    assert libs[0, 0] == 0
    assert board.chain_liberties(at(board, "B4")) == 13


def test_legal_mask_matches_point_by_point_legality():
    board = Board.from_ascii("""
        . X O . O
        X O . O .
        . X O . O
        X X O O .
        . X . O .
    """)
    for color in (BLACK, WHITE):
        mask = board.legal_mask(color)
        expected = np.array([board.is_legal(p, color) for p in board.grid.points])
        assert (mask == expected).all()
        assert not mask.all() and mask.any()


def test_rectangular_board_plays():
    board = Board(7, 3)
    play(board, BLACK, "G3")
    play(board, WHITE, "F3")
    play(board, WHITE, "G2")
    assert board.captures[WHITE] == 1


def test_setup_stones_refuse_captures():
    board = Board.from_ascii("""
        . X .
        X . .
        . . .
    """)
    with pytest.raises(ValueError):
        board.place_stone(at(board, "A3"), WHITE)
