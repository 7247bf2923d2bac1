"""The tree: PUCT arithmetic, virtual loss bookkeeping, duplicates, terminal scoring, recovery from errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from search_support import KO_AND_SUICIDES, ScriptedEvaluator, check_tree, position

from gtp_engine import tree_core
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.evaluator import EvaluationBatch, UniformEvaluator
from gtp_engine.game import GameState, Rules
from gtp_engine.mcts import OWNERSHIP_DEPTH, Node, Tree, TreeConfig

PARAMS = dict(c_puct=1.0, c_puct_log=0.45, c_puct_base=500.0, fpu_reduction=0.25, root_fpu_reduction=0.1,
              virtual_loss=1.0, score_utility=0.0, score_scale=5.0)


def make_tree(state, evaluator=None, root=None, **overrides):
    return Tree(evaluator or UniformEvaluator(), state, TreeConfig(**{**PARAMS, **overrides}), root=root)


def hand_built_node(prior, N, W, net_u):
    node = Node()
    node.expand(list(range(100, 100 + len(prior))), np.array(prior, dtype=np.float64))
    k = len(N)
    node.try_all()
    node.tried = k
    node.tried_prior = float(node.prior[:k].sum())
    node.N[:k] = N
    node.W[:k] = W
    node.nsum = float(sum(N))
    node.visits = 1 + int(sum(N))
    node.net_u = net_u
    return node


def test_puct_scores_match_the_formula_by_hand():
    tree = make_tree(GameState(5), c_puct=1.5, c_puct_log=0.0, fpu_reduction=0.3)
    node = hand_built_node(prior=[0.5, 0.3, 0.2], N=[2, 1], W=[1.0, -0.5], net_u=0.2)
    scores = tree_core.puct_scores(node, 0.3, node.prior, tree._params)
    c = 1.5 * math.sqrt(3)
    fpu = 0.2 - 0.3 * math.sqrt(0.8)  # edges 0 and 1 visited: prior 0.8
    assert scores == pytest.approx([1.0 / 2 + c * 0.5 / 3, -0.5 + c * 0.3 / 2, fpu + c * 0.2 / 1])


def test_exploration_grows_with_the_log_of_visits():
    tree = make_tree(GameState(5), c_puct=1.0, c_puct_log=0.45, c_puct_base=500.0)
    assert tree.exploration(0) == 0
    assert tree.exploration(100) == pytest.approx((1.0 + 0.45 * math.log(600 / 500)) * 10)
    assert tree.exploration(10_000) / 100 > tree.exploration(100) / 10


CORES = [tree_core.IMPLEMENTATIONS.python, pytest.param(tree_core.IMPLEMENTATIONS.compiled, marks=pytest.mark.skipif(
    tree_core.IMPLEMENTATIONS.compiled is None, reason="the compiled search core is not built"))]


@pytest.mark.parametrize("core", CORES, ids=["python", "compiled"])
def test_fast_selection_agrees_with_the_reference_formula(core):
    rng = np.random.default_rng(7)
    tree = make_tree(GameState(5))
    for _ in range(300):
        n = int(rng.integers(2, 30))
        prior = np.sort(rng.dirichlet(np.ones(n)))[::-1]
        k = int(rng.integers(0, n + 1))
        N = rng.integers(1, 50, size=k).astype(float)
        W = N * rng.uniform(-1, 1, size=k)
        node = hand_built_node(prior, N, W, net_u=float(rng.uniform(-1, 1)))
        expected = int(np.argmax(tree_core.puct_scores(node, tree.config.fpu_reduction, node.prior, tree._params)))
        assert core.select(node, tree._params) == expected


def test_edges_are_sorted_by_prior_and_moves_follow_their_priors():
    node = Node()
    node.expand([10, 11, 12, PASS], np.array([0.1, 0.6, 0.2, 0.1]))
    assert node.moves == (11, 12, 10, PASS)
    assert node.prior.tolist() == [0.6, 0.2, 0.1, 0.1]


@pytest.mark.parametrize("batch_size", [1, 3, 8, 32])
def test_no_virtual_loss_is_left_after_any_batch(batch_size):
    tree = make_tree(GameState(5))
    total = 0
    for _ in range(12):
        total += tree.run_batch(batch_size)
        check_tree(tree)
    assert tree.root.visits == total
    assert tree.root.ownership_count == total


def test_duplicate_leaves_in_a_batch_are_evaluated_once_and_backed_up_each_time():
    # On 2x2 a batch of 16 must select some leaves more than once.
    evaluator = ScriptedEvaluator()
    tree = make_tree(GameState(2), evaluator)
    tree.run_batch(1)
    positions_before = evaluator.positions
    done = tree.run_batch(16)
    assert done == 16
    assert tree.root.visits == 17
    assert evaluator.positions - positions_before < 16
    check_tree(tree)


def test_virtual_loss_is_reverted_when_the_evaluator_fails():
    evaluator = ScriptedEvaluator(fail_on_call=4)
    tree = make_tree(GameState(5), evaluator)
    tree.run_batch(1)
    tree.run_batch(8)
    tree.run_batch(8)
    visits = tree.root.visits
    with pytest.raises(RuntimeError):
        tree.run_batch(8)
    check_tree(tree)
    assert tree.root.visits == visits
    tree.run_batch(8)  # and the tree goes on
    check_tree(tree)




class BlindEvaluator:
    """Favours the suicide points and otherwise spreads its policy over every point, legal or not."""

    def evaluate(self, states):
        g = states[0].grid
        policy = np.ones((len(states), g.area + 1), np.float32)
        policy[:, [g.flat(g.point(0, 0)), g.flat(g.point(4, 4))]] = 20.0
        policy /= policy.sum(axis=1, keepdims=True)
        n = len(states)
        return EvaluationBatch(policy, np.zeros(n, np.float32), np.zeros(n, np.float32),
                               np.zeros((n, g.area), np.float32))


@pytest.mark.parametrize("to_play", [BLACK, WHITE])
def test_the_tree_only_holds_legal_moves(to_play):
    tree = make_tree(position(KO_AND_SUICIDES, to_play), BlindEvaluator())
    for _ in range(60):
        tree.run_batch(8)
    assert check_tree(tree, legality=True) > 100


@pytest.mark.parametrize("to_play", [BLACK, WHITE])
def test_a_kept_subtree_becomes_a_root_with_only_legal_edges(to_play):
    # An inner node has an edge for every empty point; as the root of a later search it keeps the legal ones.
    state = position(KO_AND_SUICIDES, to_play)
    empty = [p for p in state.grid.points if state.board.colors[p] == 0] + [PASS]
    node = Node()
    node.expand(np.array(empty), np.full(len(empty), 1.0 / len(empty)))
    node.visits = 1
    tree = make_tree(state, BlindEvaluator(), root=node)
    assert len(tree.root.moves) < len(empty)
    tree.run_batch(8)
    check_tree(tree, legality=True)


def test_two_passes_are_scored_exactly_without_the_network():
    # Black owns the left three columns, White the right two: Black leads by 15 - 10 - 0.5 after two passes.
    state = position("""
        . . X O .
        . . X O .
        . . X O .
        . . X O .
        . . X O .
    """, to_play=BLACK)
    state.play(PASS)  # black passed; white to play
    evaluator = ScriptedEvaluator(value=lambda s: 0.0)
    tree = make_tree(state, evaluator)
    for _ in range(20):
        tree.run_batch(4)
    root = tree.root
    edge = root.moves.index(PASS)
    terminal = root.children[edge]
    assert terminal.terminal and terminal.net_s == pytest.approx(4.5) and terminal.net_v == 1.0
    # White's pass edge: the score from White's view is -4.5, a sure loss.
    assert root.V[edge] / root.N[edge] == pytest.approx(-1.0)
    assert root.S[edge] / root.N[edge] == pytest.approx(-4.5)
    check_tree(tree)


@pytest.mark.parametrize("rules, sure, liberties, black_lead", [
    ("chinese", 1.0, 1.0, 5 - 11 - 0.5),  # every stone alive: the white stone makes Black's side neutral
    ("japanese", 1.0, 1.0, 10 + 1 - 5 - 0.5),  # the white stone dead: Black's 10 points of territory and it a prisoner
    ("japanese", 0.3, 1.0, 10 + 1 - 5 - 0.5),  # unsure of it, sure its liberties are Black's: dead all the same
    ("japanese", 0.3, 0.3, 0 - 5 - 0.5),  # unsure of it and of its liberties: it stays, and Black's side is neutral
])
def test_two_passes_take_dead_stones_off_as_territory_rules_do(rules, sure, liberties, black_lead):
    """Under territory scoring the count of the game two passes end takes off the stones the root's ownership
    is sure are dead, as a referee would, rather than have the search pay a point a stone to capture them."""
    state = position("""
        . . X O .
        . O X O .
        . . X O .
        . . X O .
        . . X O .
    """, to_play=BLACK, rules=Rules.named(rules))
    state.play(PASS)  # black passed; white to play
    left = {state.grid.flat(p) for p in state.grid.points if state.grid.row_col(p)[1] <= 2}
    stone = state.grid.point(1, 1)
    dead_point = state.grid.flat(stone)
    owner = np.array([1.0 if flat in left else -1.0 for flat in range(state.grid.area)])
    owner[dead_point] = sure
    owner[[state.grid.flat(p) for p in state.board.chain_liberty_points(stone)]] = liberties
    tree = make_tree(state, ScriptedEvaluator(value=lambda s: 0.0, ownership=lambda s: owner))
    for _ in range(20):
        tree.run_batch(4)
    terminal = tree.root.children[tree.root.moves.index(PASS)]
    assert terminal.terminal and terminal.net_s == pytest.approx(black_lead)
    taken_off = rules == "japanese" and black_lead > 0
    assert terminal.ownership[dead_point] == (1.0 if taken_off else -1.0)


@pytest.mark.parametrize("to_play", [BLACK, WHITE])
def test_values_are_backed_up_from_each_players_view(to_play):
    # Every position is worth 0.6 to Black, at every depth: the evaluator says +0.6 when Black is to move and
    # -0.6 when White is. Every root edge must then average 0.6 for Black, or -0.6 for White.
    evaluator = ScriptedEvaluator(value=lambda s: 0.6 if s.to_play == BLACK else -0.6)
    state = GameState(5)
    state.to_play = to_play
    tree = make_tree(state, evaluator)
    for _ in range(10):
        tree.run_batch(4)
    root = tree.root
    expected = 0.6 if to_play == BLACK else -0.6
    visited = root.N > 0
    assert visited.sum() > 1 and root.N.max() > 1
    assert np.allclose(root.V[visited] / root.N[visited], expected)
    assert tree.root_value()[0] == pytest.approx(expected)


def test_root_ownership_is_in_blacks_view():
    # Evaluator ownership: everything Black's, whoever is to move.
    evaluator = ScriptedEvaluator(ownership=lambda s: np.ones(s.grid.area))
    for to_play in (BLACK, WHITE):
        state = GameState(5)
        state.to_play = to_play
        tree = make_tree(state, evaluator)
        for _ in range(5):
            tree.run_batch(4)
        assert np.allclose(tree.root_ownership(), 1.0)


def test_nodes_near_the_root_count_the_ownership_of_every_backup_through_them():
    # Ownership is the stone count of the evaluated position, so each node's sum can be recomputed by hand.
    evaluator = ScriptedEvaluator(ownership=lambda s: np.full(s.grid.area, s.board.stone_count[BLACK] - 0.5 *
                                                              s.board.stone_count[WHITE]))
    tree = make_tree(GameState(3), evaluator)
    for _ in range(40):
        tree.run_batch(4)

    def walk(node, depth):
        if depth <= OWNERSHIP_DEPTH:
            assert node.ownership_count == node.visits, f"depth {depth}"
            mean = node.ownership_sum / node.ownership_count
            assert np.all((-2.5 <= mean) & (mean <= 5)) and np.ptp(mean) == 0
        else:
            assert node.ownership_sum is None and node.ownership_count == 0
        for child in node.children.values():
            if child.visits:
                yield from walk(child, depth + 1)
        yield depth

    assert max(walk(tree.root, 0)) > OWNERSHIP_DEPTH  # the tree is deep enough to test the limit
    root = tree.root
    # The root's mean is its own evaluation plus every backup below it, weighted by visits.
    edges = [e for e in range(root.tried) if root.N[e] > 0]
    total = np.full(9, 0.0)  # the root's own evaluation: an empty board
    for e in edges:
        total += root.children[e].ownership_sum
    assert np.allclose(tree.root_ownership(), total / root.visits)


def test_a_root_kept_from_deeper_than_the_ownership_depth_is_evaluated_for_its_ownership():
    evaluator = ScriptedEvaluator(ownership=lambda s: np.full(s.grid.area, 0.25))
    tree = make_tree(GameState(3), evaluator)
    for _ in range(60):
        tree.run_batch(4)
    node, state = tree.root, GameState(3)
    for _ in range(OWNERSHIP_DEPTH + 1):  # down the most visited line
        edge = int(node.N[: node.tried].argmax())
        state.play(node.moves[edge])
        node = node.children[edge]
    assert node.is_expanded and node.visits >= 1 and node.ownership_count == 0
    kept = make_tree(state, evaluator, root=node)
    calls = evaluator.calls
    assert np.allclose(kept.root_ownership(), 0.25)
    assert evaluator.calls == calls + 1 and node.ownership_count == 1


def _tree_signature(node: Node, depth: int = 0) -> list:
    """Everything a search reads from a node and its subtree, as nested lists (for exact comparison)."""
    if not node.is_expanded:
        return [node.terminal, node.visits]
    k = node.tried
    return [node.moves, node.prior.tolist(), k, node.stats[:, :k].tolist(), node.nsum, node.visits, node.net_u,
            None if node.ownership_sum is None else node.ownership_sum.tolist(),
            sorted((edge, _tree_signature(child, depth + 1)) for edge, child in node.children.items())]


def test_gather_and_finish_across_trees_with_one_evaluation_equal_run_batch():
    states = [position(KO_AND_SUICIDES, BLACK), GameState(5)]
    alone_evaluator, shared_evaluator = ScriptedEvaluator(favour=[7]), ScriptedEvaluator(favour=[7])
    alone = [make_tree(s.copy(), alone_evaluator) for s in states]
    shared = [make_tree(s.copy(), shared_evaluator) for s in states]
    for size in (1, 8, 8, 3, 8, 16):
        for tree in alone:
            tree.run_batch(size)
        pending = [tree.gather(size) for tree in shared]
        batch = shared_evaluator.evaluate([s for p in pending for s in p.states])
        start = 0
        for tree, p in zip(shared, pending):
            stop = start + len(p.states)
            rows = EvaluationBatch(batch.policy[start:stop], batch.value[start:stop], batch.score[start:stop],
                                   batch.ownership[start:stop])
            tree.finish(p, rows if p.states else None)
            start = stop
    for a, b in zip(alone, shared):
        check_tree(b)
        assert _tree_signature(a.root) == _tree_signature(b.root)
    assert shared_evaluator.calls == 6 and alone_evaluator.calls == 12


def test_an_abandoned_gather_leaves_the_tree_as_it_was():
    tree = make_tree(GameState(5), ScriptedEvaluator())
    for _ in range(5):
        tree.run_batch(8)
    before = _tree_signature(tree.root)
    pending = tree.gather(8)
    assert len(pending.states) > 1 and _tree_signature(tree.root) != before
    tree.abandon(pending)
    assert _tree_signature(tree.root) == before
    check_tree(tree)


def test_a_leaf_pending_in_an_earlier_batch_is_awaited_and_backed_up_once_per_selection():
    # Without virtual loss every selection of a batch, and of the next batch in flight, reaches the same new leaf.
    evaluator = ScriptedEvaluator()
    tree = make_tree(GameState(5), evaluator, virtual_loss=0.0)
    tree.run_batch(1)
    first = tree.gather(4)
    second = tree.gather(3)
    assert len(first.states) == 1 and not second.states
    leaf = first.selected[0][0]
    assert all(selected is leaf for selected, _ in first.selected + second.selected)
    assert tree.finish(first, evaluator.evaluate(first.states)) == 4
    assert tree.finish(second, None) == 3
    assert evaluator.positions == 2  # the root and the leaf, once
    assert leaf.visits == 7 and tree.root.visits == 8
    assert tree.root.ownership_count == 8 and leaf.ownership_count == 7
    check_tree(tree)


def test_batches_in_flight_abandoned_latest_first_leave_the_tree_as_it_was():
    tree = make_tree(GameState(5), ScriptedEvaluator())
    for _ in range(5):
        tree.run_batch(8)
    before = _tree_signature(tree.root)
    first, second = tree.gather(8), tree.gather(8)
    tree.abandon(second)
    tree.abandon(first)
    assert _tree_signature(tree.root) == before
    check_tree(tree)
    tree.run_batch(8)  # and the tree goes on
    check_tree(tree)


def test_batches_in_flight_finished_in_order_keep_the_bookkeeping():
    evaluator = ScriptedEvaluator()
    tree = make_tree(position(KO_AND_SUICIDES, BLACK), evaluator)
    tree.run_batch(1)
    in_flight = [tree.gather(8) for _ in range(3)]
    total = 1
    for _ in range(20):
        pending = in_flight.pop(0)
        total += tree.finish(pending, evaluator.evaluate(pending.states) if pending.states else None)
        in_flight.append(tree.gather(8))
    for pending in in_flight:
        total += tree.finish(pending, evaluator.evaluate(pending.states) if pending.states else None)
    assert tree.root.visits == total == 1 + 23 * 8
    check_tree(tree, legality=True)


def test_forced_playouts_choose_the_best_root_edge_short_of_its_share():
    tree = make_tree(GameState(5))
    # Edge 0 is far ahead by PUCT; edges 1 and 2 are short of sqrt(2 * P * 50) = 1.22 and 0.71 visits.
    tree.root = hand_built_node(prior=[0.98, 0.015, 0.005], N=[50, 0, 0], W=[45.0, 0.0, 0.0], net_u=-1.0)
    assert tree.select_root() == 0
    tree.root_forced_k = 2.0
    assert tree.select_root() == 1  # both unvisited, the same FPU: the higher prior
    tree.root.N[1] = 2
    tree.root.nsum += 2
    assert tree.select_root() == 2
    tree.root.N[2] = 1  # nobody short any more (sqrt(2 * 0.005 * 53) = 0.73): PUCT again
    tree.root.nsum += 1
    assert tree.select_root() == 0
    tree.root.N[2] = 0
    tree.root.nsum -= 1
    tree.root_excluded = np.array([False, False, True])  # an excluded edge is never forced
    assert tree.select_root() == 0


def test_a_search_with_forced_playouts_gives_every_root_move_its_share():
    state = position("""
        . . . . .
        . . . . .
        . . X . .
        . . . . .
        . . . . .""", to_play=WHITE)
    best = state.grid.flat(state.grid.point(1, 1))

    def value(s):  # Black to move after White's reply: lost after the best reply, won after any other
        return -0.9 if s.moves and s.grid.flat(s.moves[-1][1]) == best else 0.9

    evaluator = ScriptedEvaluator(favour=[state.grid.point(1, 1)], value=value)
    k = 2.0
    for forced in (False, True):
        tree = make_tree(state.copy(), evaluator)
        tree.root_forced_k = k if forced else 0.0
        while tree.root.visits < 1000:
            tree.run_batch(1)
        root = tree.root
        N, prior = root.N[: len(root.moves)], root.prior
        short = N < np.sqrt(k * prior * root.nsum) - 1  # -1: the threshold grows between two selections
        assert short.any() != forced
        check_tree(tree)
