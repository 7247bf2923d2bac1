"""Input features: each plane and global value on hand-built positions, liberties against the board's own count,
symmetry equivariance, and the position key."""

import numpy as np
import pytest

from gtp_engine import features, native, symmetry
from gtp_engine.board import BLACK, WHITE, Board
from gtp_engine.coords import PASS, Grid
from gtp_engine.game import GameState, Rules

CH = {name: i for i, name in enumerate(features.SPATIAL)}
GL = {name: i for i, name in enumerate(features.GLOBAL)}
PYTHON, COMPILED = features.IMPLEMENTATIONS.python, features.IMPLEMENTATIONS.compiled
TWIN = native.load("_features_core")  # the extension itself, for its own argument checks


def from_ascii(text, **game_args):
    board = Board.from_ascii(text)
    state = GameState(board.width, board.height, **game_args)
    for color in (BLACK, WHITE):
        state.place_setup(color, board.stones(color))
    return state


def plane(state, name):
    spatial, _ = features.encode([state])
    return spatial[0, CH[name]]


def marked(state, *row_cols):
    out = np.zeros((state.grid.height, state.grid.width), np.float32)
    for r, c in row_cols:
        out[r, c] = 1
    return out


def test_channel_names_define_the_counts_and_shapes():
    assert features.SPATIAL_CHANNELS == len(features.SPATIAL) == len(set(features.SPATIAL))
    assert features.GLOBAL_FEATURES == len(features.GLOBAL)
    spatial, global_ = features.encode([GameState(7, 5), GameState(7, 5)])
    assert spatial.shape == (2, features.SPATIAL_CHANNELS, 5, 7) and spatial.dtype == np.float32
    assert global_.shape == (2, features.GLOBAL_FEATURES) and global_.dtype == np.float32
    assert spatial[:, CH["on_board"]].min() == 1.0


def test_stones_and_liberty_planes_are_from_the_side_to_move():
    state = from_ascii("""
        X O . . .
        X O . . .
        . X . . .
        . . . . .
        . . . . .
    """)
    assert state.to_play == BLACK
    assert np.array_equal(plane(state, "own_stones"), marked(state, (0, 0), (1, 0), (2, 1)))
    assert np.array_equal(plane(state, "own_1_liberty"), marked(state, (0, 0), (1, 0)))
    assert np.array_equal(plane(state, "own_3plus_liberties"), marked(state, (2, 1)))
    assert np.array_equal(plane(state, "opponent_2_liberties"), marked(state, (0, 1), (1, 1)))
    assert plane(state, "own_2_liberties").sum() == 0
    state.play(PASS)  # white to move: the same stones, seen from the other side
    assert np.array_equal(plane(state, "opponent_1_liberty"), marked(state, (0, 0), (1, 0)))
    assert np.array_equal(plane(state, "own_2_liberties"), marked(state, (0, 1), (1, 1)))


def test_liberty_planes_agree_with_the_boards_chain_liberties(random_states):
    states = random_states(9, 6, seed=1) + random_states((5, 8), 4, seed=2)
    for state in states:
        spatial, _ = features.encode([state])
        g = state.grid
        for point in g.points:
            color = state.board.colors[point]
            if color not in (BLACK, WHITE):
                continue
            side = "own" if color == state.to_play else "opponent"
            bucket = {1: "1_liberty", 2: "2_liberties"}.get(state.board.chain_liberties(point), "3plus_liberties")
            name = f"{side}_{bucket}"
            r, c = g.row_col(point)
            assert spatial[0, CH[name], r, c] == 1.0
            assert spatial[0, CH["own_1_liberty"]:CH["opponent_3plus_liberties"] + 1, r, c].sum() == 1.0


def test_batch_liberties_equal_board_liberties(random_states):
    states = random_states(9, 8, seed=3) + random_states(9, 1, seed=4, max_fill=0)
    boards = [s.board for s in states]
    assert np.array_equal(features.batch_liberties(boards), np.stack([b.liberties() for b in boards]))


def test_ko_plane_marks_the_banned_recapture_only_while_it_is_banned():
    state = from_ascii("""
        . X O .
        X O . O
        . X O .
        . . . .
    """)
    assert plane(state, "ko_ban").sum() == 0
    state.play(state.grid.point(1, 2), BLACK)  # captures at (1, 1); white may not retake at once
    assert state.to_play == WHITE
    assert np.array_equal(plane(state, "ko_ban"), marked(state, (1, 1)))
    state.play(state.grid.point(3, 3))
    assert plane(state, "ko_ban").sum() == 0


def test_last_move_planes_and_pass_flags():
    state = GameState(5, 5)
    g = state.grid
    moves = [(0, 0), (1, 1), None, (2, 2), (3, 3), (4, 4), None]
    for move in moves:
        state.play(PASS if move is None else g.point(*move))
    spatial, global_ = features.encode([state])
    # newest first: pass, (4,4), (3,3), (2,2), pass; (1,1) is 6 moves ago and no longer shown
    expected = [None, (4, 4), (3, 3), (2, 2), None]
    for k, move in enumerate(expected, start=1):
        want = marked(state) if move is None else marked(state, move)
        assert np.array_equal(spatial[0, CH[f"move_{k}_ago"]], want), k
    assert global_[0, GL["last_move_pass"]] == 1.0
    assert global_[0, GL["move_before_pass"]] == 0.0
    state.play(PASS)
    _, global_ = features.encode([state])
    assert global_[0, GL["last_move_pass"]] == 1.0 and global_[0, GL["move_before_pass"]] == 1.0


def test_compensation_is_komi_and_handicap_bonus_from_the_side_to_move():
    state = GameState(9, komi=7.5)
    _, g = features.encode([state])
    assert g[0, GL["compensation"]] == pytest.approx(-7.5 / 20)
    state.play(PASS)
    _, g = features.encode([state])
    assert g[0, GL["compensation"]] == pytest.approx(7.5 / 20)

    handicap = GameState(9, komi=0.5)  # chinese rules: white gets one point per handicap stone
    handicap.place_handicap([handicap.grid.point(2, 2), handicap.grid.point(6, 6), handicap.grid.point(2, 6)])
    _, g = features.encode([handicap])
    assert g[0, GL["compensation"]] == pytest.approx(3.5 / 20)
    assert g[0, GL["territory_scoring"]] == 0.0


def test_rules_and_prisoners_under_territory_scoring():
    state = from_ascii("""
        . X . .
        X O X .
        . . . .
        . . . .
    """, komi=6.5, rules=Rules.named("japanese"))
    state.play(state.grid.point(2, 1), BLACK)  # captures one white stone
    _, g = features.encode([state])
    assert state.to_play == WHITE
    assert g[0, GL["territory_scoring"]] == 1.0
    assert g[0, GL["prisoner_balance"]] == pytest.approx(-1 / 20)
    assert g[0, GL["simple_ko"]] == 1.0 and g[0, GL["situational_superko"]] == 0.0
    assert g[0, GL["suicide_allowed"]] == 0.0
    _, g = features.encode([GameState(9, rules=Rules.named("new-zealand"))])
    assert g[0, GL["situational_superko"]] == 1.0 and g[0, GL["suicide_allowed"]] == 1.0
    assert g[0, GL["prisoner_balance"]] == 0.0


def transformed_game(state, s):
    """The same game with every move and setup stone moved by symmetry s."""
    g = state.grid
    inverse_perm = np.argsort(symmetry.flat_permutation(g.height, g.width, s))
    width, height = (g.height, g.width) if s & symmetry.TRANSPOSE else (g.width, g.height)
    other = GameState(width, height, komi=state.komi, rules=state.rules)

    def move(point):
        return PASS if point == PASS else other.grid.from_flat(int(inverse_perm[g.flat(point)]))

    for color in (BLACK, WHITE):
        points = [move(p) for c, p in state.setup if c == color]
        if points:
            other.place_setup(color, points)
    for color, point in state.moves:
        other.play(move(point), color)
    return other


@pytest.mark.parametrize("size", [7, (5, 7)])
def test_features_of_a_transformed_position_are_the_transformed_features(random_states, size):
    states = random_states(size, 5, seed=7)
    spatial, global_ = features.encode(states)
    width, height = size if isinstance(size, tuple) else (size, size)
    for s in symmetry.symmetries_for(width, height):
        moved_spatial, moved_global = features.encode([transformed_game(state, s) for state in states])
        assert np.array_equal(moved_spatial, symmetry.transform_planes(spatial, s)), s
        assert np.array_equal(moved_global, global_)
        # encode's own symmetry argument gives the same planes without replaying the game
        direct, _ = features.encode(states, [s] * len(states))
        assert np.array_equal(direct, moved_spatial), s


def test_mixed_symmetries_in_one_batch(random_states):
    states = random_states(6, 8, seed=11)
    syms = list(range(8))
    mixed, _ = features.encode(states, syms)
    for i, (state, s) in enumerate(zip(states, syms)):
        alone, _ = features.encode([state])
        assert np.array_equal(mixed[i], symmetry.transform_planes(alone[0], s))


def test_position_key_holds_what_the_features_read(random_states):
    state = random_states(9, 1, seed=5, max_fill=0.3)[0]
    key = features.position_key(state)
    assert features.position_key(state.copy()) == key
    hash(key)
    other_komi = GameState(9, komi=6.5)
    for color, point in state.moves:
        other_komi.play(point, color)
    assert features.position_key(other_komi) != key
    passed = state.copy()
    passed.play(PASS)
    assert features.position_key(passed) != key  # other side to move, other last moves
    # The same stones reached through a different recent history get a different key.
    a, b = GameState(9), GameState(9)
    g = a.grid
    for r, c in [(0, 0), (8, 8), (0, 8), (8, 0)]:
        a.play(g.point(r, c))
    for r, c in [(0, 8), (8, 0), (0, 0), (8, 8)]:
        b.play(g.point(r, c))
    assert a.board == b.board and a.to_play == b.to_play
    assert features.position_key(a) != features.position_key(b)
    assert not np.array_equal(features.encode([a])[0], features.encode([b])[0])


def ko_captures(states, limit):
    """Up to `limit` positions right after a ko capture, each one legal move after one of `states`."""
    found = []
    for state in states:
        for flat in np.flatnonzero(state.legal_mask()[:-1]):
            after = state.copy()
            after.play(state.grid.from_flat(int(flat)))
            if features._ko_ban(after) != PASS:
                found.append(after)
                break
        if len(found) == limit:
            break
    return found


@pytest.mark.skipif(COMPILED is None, reason="the compiled features are not built")
@pytest.mark.parametrize("size, seed", [(9, 1), ((7, 5), 2), (19, 3), (5, 6), ((1, 4), 5)])
def test_compiled_planes_equal_the_reference(random_states, size, seed):
    """_features_core.c against encode_python, value for value, with and without symmetries; small boards and long
    games give captures, kos and passes, and the test checks that the ko and last-move planes were exercised."""
    states = random_states(size, 40, seed=seed, max_fill=0.7 if size == 19 else 3.0)
    states += ko_captures(states, 5)
    width, height = size if isinstance(size, tuple) else (size, size)
    rng = np.random.default_rng(seed)
    reference = PYTHON.encode(states)
    for ours, theirs in zip(COMPILED.encode(states), reference):
        np.testing.assert_array_equal(ours, theirs)
    for symmetries in (rng.integers(0, len(symmetry.symmetries_for(width, height)), len(states)).tolist(),
                       np.full(len(states), len(symmetry.symmetries_for(width, height)) - 1)):
        for ours, theirs in zip(COMPILED.encode(states, symmetries), PYTHON.encode(states, symmetries)):
            assert ours.shape == theirs.shape
            np.testing.assert_array_equal(ours, theirs)
    spatial = reference[0]
    assert spatial[:, CH["move_5_ago"]].any()
    if min(width, height) > 1:
        assert spatial[:, CH["ko_ban"]].any() and spatial[:, CH["own_1_liberty"]].any()


@pytest.mark.skipif(COMPILED is None, reason="the compiled features are not built")
def test_compiled_planes_refuse_what_they_cannot_encode():
    planes = np.empty((1, features.SPATIAL_CHANNELS, 81), np.float32)
    with pytest.raises(ValueError, match="planes must be float32"):
        TWIN.spatial_planes([GameState(9), GameState(9)], None, None, planes)
    with pytest.raises(ValueError, match="another size"):
        TWIN.spatial_planes([GameState(9), GameState(7)], None, None,
                            np.empty((2, features.SPATIAL_CHANNELS, 81), np.float32))
    with pytest.raises(TypeError, match="planes"):
        TWIN.spatial_planes([GameState(9)], None, None, planes.astype(np.float64))
    with pytest.raises(ValueError, match="no row"):
        TWIN.spatial_planes([GameState(9)], [9], symmetry.permutation_table(9, 9), planes)


@pytest.mark.skipif(COMPILED is None, reason="the compiled features are not built")
@pytest.mark.parametrize("rules", ["chinese", "japanese", "aga", "new-zealand", "tromp-taylor"])
def test_compiled_global_inputs_and_key_equal_the_reference(random_states, rules):
    """Komi, handicap bonus (area scoring only), prisoners (territory scoring only), ko and suicide rules, passes:
    the same float32 rows and the same keys, equal and of equal hash."""
    states = random_states(7, 30, seed=9, max_fill=2.0, komi=6.5, rules=Rules.named(rules))
    handicap = GameState(9, komi=0.5, rules=Rules.named(rules))
    handicap.place_handicap(handicap.grid.points[:3])
    states += [handicap, handicap.with_to_play(WHITE), GameState(5, komi=0.0, rules=Rules.named(rules))]
    np.testing.assert_array_equal(COMPILED.global_inputs(states), PYTHON.global_inputs(states))
    assert any(PYTHON.global_inputs(states)[:, GL["last_move_pass"]])
    for state in states:
        key = COMPILED.position_key(state)
        assert key == PYTHON.position_key(state) and hash(key) == hash(PYTHON.position_key(state))
        assert type(key) is bytes


@pytest.mark.parametrize("width, height", [(9, 9), (19, 19), (7, 5), (1, 4)])
def test_decoding_a_transformed_position_undoes_its_symmetry(width, height):
    """A network that answers with its input's own layout (logit j = j-th flat of the planes it got) is decoded
    back into the board's order under every symmetry."""
    grid = Grid(width, height)
    kinds = len(symmetry.symmetries_for(width, height))
    syms = np.arange(kinds, dtype=np.int64)
    marks = np.arange(grid.area, dtype=np.float32) / grid.area  # a distinct value per board flat
    table = symmetry.permutation_table(height, width)
    seen = np.stack([marks[table[s]] for s in syms])  # output flat j of symmetry s reads board flat table[s][j]
    logits = np.concatenate([np.log(seen + 1.0), np.zeros((kinds, 1), np.float32)], axis=1)
    policy, value, owned = features.decode(logits, np.zeros((kinds, 3), np.float32), seen, grid, syms)
    expected = marks + 1.0  # the board's probabilities up to their sum
    for row in range(kinds):
        np.testing.assert_allclose(owned[row], marks, rtol=0, atol=0)
        np.testing.assert_allclose(policy[row, :-1] / policy[row, :-1].sum(), expected / expected.sum(), rtol=1e-5)
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(value, 0.0)


@pytest.mark.skipif(COMPILED is None, reason="the compiled features are not built")
@pytest.mark.parametrize("width, height", [(9, 9), (19, 19), (7, 5), (2, 3)])
@pytest.mark.parametrize("with_symmetries", [True, False])
def test_compiled_decode_equals_the_reference(width, height, with_symmetries):
    rng = np.random.default_rng(width * 100 + height)
    grid = Grid(width, height)
    count = 13
    policy_logits = (rng.normal(size=(count, grid.area + 1)) * 6).astype(np.float32)
    policy_logits[0] = 0.0  # a flat row
    policy_logits[1, 3] = 80.0  # one move with everything
    value_logits = (rng.normal(size=(count, 3)) * 4).astype(np.float32)
    ownership = np.tanh(rng.normal(size=(count, height, width))).astype(np.float32)
    syms = rng.integers(0, len(symmetry.symmetries_for(width, height)), count) if with_symmetries else None
    compiled = COMPILED.decode(policy_logits, value_logits, ownership, grid, syms)
    reference = PYTHON.decode(policy_logits, value_logits, ownership, grid, syms)
    for ours, theirs in zip(compiled, reference):
        assert ours.dtype == np.float32 and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-7)
    np.testing.assert_array_equal(compiled[2], reference[2])  # ownership is only moved


@pytest.mark.skipif(COMPILED is None, reason="the compiled features are not built")
def test_compiled_decode_refuses_what_does_not_fit():
    policy, value, owned = (np.zeros((2, 82), np.float32), np.zeros(2, np.float32), np.zeros((2, 81), np.float32))
    good = (np.zeros((2, 82), np.float32), np.zeros((2, 3), np.float32), np.zeros((2, 81), np.float32))
    table = symmetry.permutation_table(9, 9)
    inverse = np.array(symmetry.INVERSE)
    with pytest.raises(ValueError, match="decode needs"):
        TWIN.decode(np.zeros((2, 80), np.float32), good[1], good[2], None, inverse, table, policy, value, owned)
    with pytest.raises(ValueError, match="symmetry 9"):
        TWIN.decode(*good, np.array([0, 9]), inverse, table, policy, value, owned)
    with pytest.raises(TypeError, match="policy_logits"):
        TWIN.decode(good[0].astype(np.float64), good[1], good[2], None, inverse, table, policy, value, owned)
    TWIN.decode(*good, np.array([0, 7]), inverse, table, policy, value, owned)
    np.testing.assert_allclose(policy, 1 / 82, rtol=1e-6)
