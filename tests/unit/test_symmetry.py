"""The 8 board symmetries: inverses, group structure, and agreement between planes, flat vectors and policies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gtp_engine import symmetry


def test_each_symmetry_is_undone_by_its_inverse_on_a_square_board():
    planes = np.random.default_rng(0).random((3, 5, 5))
    for s in symmetry.ALL:
        moved = symmetry.transform_planes(planes, s)
        assert np.array_equal(symmetry.untransform_planes(moved, s), planes)
        assert np.array_equal(symmetry.transform_planes(symmetry.untransform_planes(planes, s), s), planes)


def test_the_eight_symmetries_are_distinct_and_closed_under_composition():
    board = np.arange(16).reshape(4, 4)
    images = {s: symmetry.transform_planes(board, s).tobytes() for s in symmetry.ALL}
    assert len(set(images.values())) == 8
    for a in symmetry.ALL:
        for b in symmetry.ALL:
            composed = symmetry.transform_planes(symmetry.transform_planes(board, a), b).tobytes()
            assert composed in images.values()


def test_named_bits_move_a_point_as_documented():
    board = np.zeros((5, 5), int)
    board[0, 1] = 1  # row 0 is the top row
    def where(s):
        return tuple(int(v) for v in np.argwhere(symmetry.transform_planes(board, s))[0])
    assert where(0) == (0, 1)
    assert where(symmetry.TRANSPOSE) == (1, 0)
    assert where(symmetry.FLIP_ROWS) == (4, 1)
    assert where(symmetry.FLIP_COLS) == (0, 3)
    assert where(symmetry.TRANSPOSE | symmetry.FLIP_ROWS) == (3, 0)


def test_rectangular_boards_get_the_four_shape_keeping_symmetries():
    assert symmetry.symmetries_for(9, 9) == symmetry.ALL
    kept = symmetry.symmetries_for(7, 5)
    assert len(kept) == 4
    planes = np.arange(35).reshape(5, 7)
    for s in kept:
        assert symmetry.transform_planes(planes, s).shape == (5, 7)
        assert np.array_equal(symmetry.untransform_planes(symmetry.transform_planes(planes, s), s), planes)
    assert symmetry.permutation_table(5, 7).shape == (4, 35)


@settings(max_examples=40, deadline=None)
@given(size=st.sampled_from([(5, 5), (9, 9), (4, 6), (19, 19)]), s=st.sampled_from(symmetry.ALL), seed=st.integers(0, 99))
def test_flat_vectors_and_policies_move_like_planes_and_keep_pass_last(size, s, seed):
    height, width = size
    if s not in symmetry.symmetries_for(width, height):
        return
    rng = np.random.default_rng(seed)
    board = rng.random((height, width))
    policy = np.append(board.ravel(), rng.random())
    expected = np.ascontiguousarray(symmetry.transform_planes(board, s)).ravel()
    assert np.array_equal(symmetry.transform_flat(board.ravel(), s, height, width), expected)
    moved = symmetry.transform_policy(policy, s, height, width)
    assert np.array_equal(moved[:-1], expected)
    assert moved[-1] == policy[-1]
    assert np.array_equal(symmetry.untransform_policy(moved, s, height, width), policy)


def test_policies_in_a_batch_transform_row_by_row():
    rng = np.random.default_rng(3)
    batch = rng.random((4, 26))
    moved = symmetry.transform_policy(batch, 5, 5, 5)
    for row, out in zip(batch, moved):
        assert np.array_equal(symmetry.transform_policy(row, 5, 5, 5), out)
    assert np.array_equal(symmetry.untransform_policy(moved, 5, 5, 5), batch)


@pytest.mark.parametrize("s", symmetry.ALL)
def test_permutation_of_the_inverse_is_the_inverse_permutation(s):
    perm = symmetry.flat_permutation(6, 6, s)
    back = symmetry.flat_permutation(6, 6, symmetry.inverse(s))
    assert np.array_equal(perm[back], np.arange(36))


@pytest.mark.parametrize("height, width", [(5, 5), (4, 6)])
def test_policy_permutation_table_rows_transform_policies(height, width):
    rng = np.random.default_rng(5)
    policy = rng.random(height * width + 1)
    table = symmetry.policy_permutation_table(height, width)
    assert len(table) == len(symmetry.symmetries_for(width, height))
    for s, row in enumerate(table):
        assert np.array_equal(policy[row], symmetry.transform_policy(policy, s, height, width))
