"""Symmetry: the 8 dihedral transforms of the board, for planes, flat-index vectors and policies.

Terms:
- symmetry s in 0..7: three bits applied in this order: bit 4 transposes (row <-> column), then bit 1 flips
  the rows (top <-> bottom), then bit 2 flips the columns (left <-> right). 0 is the identity.
- inverse(s): the symmetry that undoes s. Transforms without the transpose bit are their own inverse.
- planes: any array whose last two axes are (height, width), row 0 the top row (as in coords.py).
- flat permutation perm of s on a height x width board: transformed_flat[k] = original_flat[perm[k]]; the
  transformed board is width x height when s transposes.
- policy: a vector over the flat indices with pass last; transforms move the board entries and keep pass last.
- rectangular boards: only the 4 symmetries without the transpose bit keep the shape (symmetries_for).
"""

from __future__ import annotations

import functools

import numpy as np

TRANSPOSE, FLIP_ROWS, FLIP_COLS = 4, 1, 2
ALL = tuple(range(8))
INVERSE = (0, 1, 2, 3, 4, 6, 5, 7)  # transpose-then-flip-rows is undone by transpose-then-flip-columns


def inverse(s: int) -> int:
    return INVERSE[s]


def symmetries_for(width: int, height: int) -> tuple[int, ...]:
    """The symmetries that map a width x height board onto itself."""
    return ALL if width == height else (0, 1, 2, 3)


def transform_planes(planes: np.ndarray, s: int) -> np.ndarray:
    """Applies s to the last two axes (a view where possible)."""
    if s & TRANSPOSE:
        planes = np.swapaxes(planes, -1, -2)
    if s & FLIP_ROWS:
        planes = planes[..., ::-1, :]
    if s & FLIP_COLS:
        planes = planes[..., :, ::-1]
    return planes


def untransform_planes(planes: np.ndarray, s: int) -> np.ndarray:
    return transform_planes(planes, INVERSE[s])


@functools.lru_cache(maxsize=None)
def flat_permutation(height: int, width: int, s: int) -> np.ndarray:
    """perm with transformed_flat[k] = original_flat[perm[k]] (read-only int64 array of height * width)."""
    perm = np.ascontiguousarray(transform_planes(np.arange(height * width).reshape(height, width), s)).ravel()
    perm.setflags(write=False)
    return perm


@functools.lru_cache(maxsize=None)
def permutation_table(height: int, width: int) -> np.ndarray:
    """Row s is flat_permutation(height, width, s), for each s in symmetries_for(width, height)."""
    table = np.stack([flat_permutation(height, width, s) for s in symmetries_for(width, height)])
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=None)
def _policy_permutation(height: int, width: int, s: int) -> np.ndarray:
    perm = np.append(flat_permutation(height, width, s), height * width)
    perm.setflags(write=False)
    return perm


@functools.lru_cache(maxsize=None)
def policy_permutation_table(height: int, width: int) -> np.ndarray:
    """permutation_table(height, width) with pass kept last: row s permutes policies as transform_policy does."""
    table = np.stack([_policy_permutation(height, width, s) for s in symmetries_for(width, height)])
    table.setflags(write=False)
    return table


def transform_flat(values: np.ndarray, s: int, height: int, width: int) -> np.ndarray:
    """Applies s to vectors over the flat indices (last axis of length height * width)."""
    return values[..., flat_permutation(height, width, s)]


def transform_policy(policy: np.ndarray, s: int, height: int, width: int) -> np.ndarray:
    """Applies s to policies (last axis height * width + 1, pass last and kept last)."""
    return policy[..., _policy_permutation(height, width, s)]


def untransform_policy(policy: np.ndarray, s: int, height: int, width: int) -> np.ndarray:
    """Undoes transform_policy(., s, height, width); `policy` is over the transformed board."""
    if s & TRANSPOSE:
        height, width = width, height
    return policy[..., _policy_permutation(height, width, INVERSE[s])]
