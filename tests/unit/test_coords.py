"""Coordinate conversions: every system against the others, on square and rectangular grids."""

import pytest

from gtp_engine.coords import PASS, from_gtp, from_sgf, grid, to_gtp, to_sgf


@pytest.mark.parametrize("size", [2, 9, 13, 19, 25])
def test_every_point_round_trips_through_every_system(size):
    g = grid(size)
    for flat, point in enumerate(g.points):
        assert g.flat(point) == flat
        assert g.from_flat(flat) == point
        row, col = g.row_col(point)
        assert g.point(row, col) == point
        assert from_gtp(g, to_gtp(g, point)) == point
        assert from_sgf(g, to_sgf(g, point)) == point


def test_corners_on_19x19():
    g = grid(19)
    assert to_gtp(g, g.point(0, 0)) == "A19"
    assert to_gtp(g, g.point(18, 18)) == "T1"
    assert to_gtp(g, g.point(18, 8)) == "J1"  # GTP skips the letter I
    assert to_sgf(g, g.point(0, 0)) == "aa"
    assert to_sgf(g, g.point(18, 18)) == "ss"


def test_pass_in_every_system():
    g = grid(19)
    assert g.flat(PASS) == g.area == g.pass_index
    assert g.from_flat(g.area) == PASS
    assert to_gtp(g, PASS) == "pass"
    assert from_gtp(g, "PASS") == PASS
    assert from_sgf(g, "") == PASS
    assert from_sgf(g, "tt") == PASS
    assert to_sgf(g, PASS) == ""


def test_tt_is_a_point_above_19():
    g = grid(21)
    assert from_sgf(g, "tt") == g.point(19, 19)


@pytest.mark.parametrize("text", ["I5", "Z1", "A0", "A10", "", "5A", "pas", "K", "A-1"])
def test_bad_gtp_vertices_are_refused(text):
    with pytest.raises(ValueError):
        from_gtp(grid(9), text)


def test_gtp_input_is_case_insensitive():
    g = grid(9)
    assert from_gtp(g, "d4") == from_gtp(g, "D4") == g.point(5, 3)


def test_rectangular_grid():
    g = grid(7, 5)
    assert (g.width, g.height, g.area) == (7, 5, 35)
    assert to_gtp(g, g.point(0, 6)) == "G5"
    with pytest.raises(ValueError):
        from_gtp(g, "H1")
    with pytest.raises(ValueError):
        from_gtp(g, "A6")
