"""The compiled search core against its Python reference (tree_core.py): the same choices, the same trees.

Each search is grown twice from the same position with the same evaluator, once through the reference and once
through the compiled twin (tree_core.IMPLEMENTATIONS: python, compiled), and the two trees must agree in every node:
moves, priors, tried prefix, and every edge statistic to the last bit. Positions come from a real game record
(captures), a ko with suicide points (lazy legality drops edges) and the end of a game (terminal nodes). Without a
built extension, or with GTP_ENGINE_PURE_PYTHON=1, these tests skip (.ci/run installs gcc and says whether it was
built).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from search_support import KO_AND_SUICIDES, position

from gtp_engine import tree_core
from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.evaluator import EvaluationBatch
from gtp_engine.game import GameState
from gtp_engine.mcts import MoveFilter, MoveClause, Node, Tree, TreeConfig
from gtp_engine.sgf_io import load_sgf_file

FIXTURES = Path(__file__).resolve().parents[1] / "sgf" / "fixtures"
PYTHON, COMPILED = tree_core.IMPLEMENTATIONS.python, tree_core.IMPLEMENTATIONS.compiled
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled search core is not built")


class HashedEvaluator:
    """A stand-in network whose outputs are a fixed pseudo-random function of the position: a peaked policy over
    every point (legal or not, as a network's), a value, a score and an ownership map."""

    def evaluate(self, states):
        area = states[0].grid.area
        policy = np.empty((len(states), area + 1), np.float32)
        value = np.empty(len(states), np.float32)
        score = np.empty(len(states), np.float32)
        ownership = np.empty((len(states), area), np.float32)
        for i, state in enumerate(states):
            rng = np.random.default_rng([state.board.hash & 0xFFFFFFFF, state.to_play, len(state.moves)])
            logits = rng.normal(0.0, 2.0, area + 1)
            policy[i] = np.exp(logits) / np.exp(logits).sum()
            value[i] = rng.uniform(-0.9, 0.9)
            score[i] = rng.normal(0.0, 5.0)
            ownership[i] = rng.uniform(-1.0, 1.0, area)
        return EvaluationBatch(policy, value, score, ownership)


def grow(core, state: GameState, playouts: int, batch: int, monkeypatch, **config) -> Tree:
    monkeypatch.setattr(tree_core, "CORE", core)
    tree = Tree(HashedEvaluator(), state.copy(), TreeConfig(**config))
    done = 0
    while done < playouts:
        done += tree.run_batch(batch)
    return tree


def assert_same_tree(a: Node, b: Node, path: str = "root") -> int:
    assert a.moves == b.moves, path
    if a.moves is None:
        assert (a.terminal, a.visits) == (b.terminal, b.visits), path
        return 1
    assert np.array_equal(a.prior, b.prior), path
    assert (a.tried, a.tried_prior, a.nsum, a.visits) == (b.tried, b.tried_prior, b.nsum, b.visits), path
    assert np.array_equal(a.stats[:, : a.tried], b.stats[:, : b.tried]), path
    assert a.ownership_count == b.ownership_count, path
    assert (a.ownership_sum is None) == (b.ownership_sum is None), path
    assert a.ownership_sum is None or np.array_equal(a.ownership_sum, b.ownership_sum), path
    assert a.children.keys() == b.children.keys(), path
    return 1 + sum(assert_same_tree(a.children[e], b.children[e], f"{path}/{a.moves[e]}") for e in a.children)


def record_position(name: str, moves: int) -> GameState:
    return load_sgf_file(FIXTURES / name).to_game(max_moves=moves)


POSITIONS = {
    "empty 9x9": lambda: GameState(9, komi=7),
    "game record, move 40": lambda: record_position("ogs_16975155.sgf", 40),
    "ko and suicides": lambda: position(KO_AND_SUICIDES, to_play=WHITE),
    "after two passes in a row": lambda: record_position("2-passes.sgf", 1),
}


@pytest.mark.parametrize("name", POSITIONS)
@pytest.mark.parametrize("batch, virtual_loss", [(1, 1.0), (8, 1.0), (8, 3.0), (4, 0.0)])
def test_compiled_core_grows_the_reference_tree(name, batch, virtual_loss, monkeypatch):
    state = POSITIONS[name]()
    trees = [grow(core, state, 600, batch, monkeypatch, virtual_loss=virtual_loss)
             for core in (PYTHON, COMPILED)]
    assert assert_same_tree(trees[0].root, trees[1].root) > 50


def test_compiled_root_selection_with_noise_exclusions_and_forced_playouts(monkeypatch):
    """The self-play root: noisy priors, an excluded edge, forced playouts; also a move filter below the root."""
    state = record_position("ogs_16975155.sgf", 30)
    move_filter = MoveFilter((MoveClause(BLACK, frozenset(state.grid.points[:20]), 3, allow=False),))
    trees = []
    for core in (PYTHON, COMPILED):
        monkeypatch.setattr(tree_core, "CORE", core)
        tree = Tree(HashedEvaluator(), state.copy(), TreeConfig(), move_filter=move_filter)
        tree.run_batch(1)
        n = len(tree.root.moves)
        rng = np.random.default_rng(5)
        tree.root_prior = 0.75 * tree.root.prior + 0.25 * rng.dirichlet(np.full(n, 0.3))
        tree.root_excluded = np.zeros(n, dtype=bool)
        tree.root_excluded[0] = True
        tree.root_forced_k = 2.0
        for _ in range(100):
            tree.run_batch(4)
        trees.append(tree)
    assert trees[0].root.N[0] == 0
    assert assert_same_tree(trees[0].root, trees[1].root) > 50


def hand_built_node(rng: np.random.Generator) -> Node:
    """A node with a random visited prefix, some edges pending without virtual loss (N = 0), and full capacity."""
    n = int(rng.integers(2, 40))
    node = Node()
    node.expand(list(range(n)), rng.dirichlet(np.ones(n)))
    k = int(rng.integers(0, n + 1))
    node.try_all()
    node.tried = k
    node.tried_prior = float(node.prior[:k].sum())
    node.N[:k] = rng.integers(0, 30, size=k) * (rng.random(k) < 0.9)
    node.W[:k] = node.N[:k] * rng.uniform(-1, 1, size=k)
    node.nsum = float(node.N[:k].sum())
    node.net_u = float(rng.uniform(-1, 1))
    if rng.random() < 0.5:  # statistics only for the prefix, so that selecting the next edge grows them
        node._allocate(max(k, 1))
    return node


PARAMS = tree_core.PuctParams(c_puct=1.1, c_puct_log=0.45, c_puct_base=500.0, fpu_reduction=0.25, virtual_loss=1.0)


def test_compiled_select_matches_the_reference_on_random_nodes():
    rng = np.random.default_rng(11)
    params = PARAMS
    for _ in range(500):
        seed = int(rng.integers(1 << 30))
        nodes = [hand_built_node(np.random.default_rng(seed)) for _ in range(2)]
        edges = [core.select(node, params) for core, node in zip((PYTHON, COMPILED), nodes)]
        assert edges[0] == edges[1]
        assert (nodes[0].tried, nodes[0].tried_prior) == (nodes[1].tried, nodes[1].tried_prior)
        assert nodes[0].stats.shape == nodes[1].stats.shape


def test_compiled_select_reads_priors_and_statistics_given_after_a_first_selection():
    """The compiled core checks a node's arrays once and keeps their data; a new array (new priors, grown or replaced
    statistics) must be read from then on, as the reference reads it."""
    params = PARAMS
    for seed in range(40):
        nodes = [hand_built_node(np.random.default_rng(seed)) for _ in range(2)]
        for core, node in zip((PYTHON, COMPILED), nodes):
            core.select(node, params)
            node.prior = node.prior[::-1].copy()  # new priors: rising now
            stats = node.stats.copy()
            stats[1] = -stats[1]  # new statistics: the utilities turned around
            node.stats = stats
        edges = [core.select(node, params) for core, node in zip((PYTHON, COMPILED), nodes)]
        assert edges[0] == edges[1], seed
        assert (nodes[0].tried, nodes[0].tried_prior) == (nodes[1].tried, nodes[1].tried_prior)


def test_compiled_core_refuses_statistics_of_another_type():
    node = hand_built_node(np.random.default_rng(1))
    node.prior = node.prior.astype(np.float32)
    with pytest.raises(TypeError, match="float64"):
        COMPILED.select(node, PARAMS)
    with pytest.raises(TypeError, match="params: a tree_core.PuctParams, not tuple"):
        COMPILED.select(node, (1.1, 0.45, 500.0, 0.25, 1.0))


def test_both_cores_read_the_params_by_name():
    """Any record with the fields, in any order, selects as PuctParams does: neither core reads a field by its place,
    so that a field added or moved cannot be misread."""
    shuffled = SimpleNamespace(virtual_loss=1.0, fpu_reduction=0.25, c_puct_base=500.0, c_puct_log=0.45, c_puct=1.1)
    for seed in range(40):
        nodes = [hand_built_node(np.random.default_rng(seed)) for _ in range(4)]
        edges = [core.select(node, params) for (core, params), node in
                 zip([(PYTHON, PARAMS), (PYTHON, shuffled), (COMPILED, PARAMS), (COMPILED, shuffled)], nodes)]
        assert len(set(edges)) == 1, seed
    with pytest.raises(TypeError, match="no fpu_reduction"):
        COMPILED.select(nodes[0], SimpleNamespace(c_puct=1.1, c_puct_log=0.45, c_puct_base=500.0, virtual_loss=1.0))


@pytest.mark.parametrize("width", [10, 82, 362])
def test_compiled_expand_matches_the_reference_with_ties_and_empty_policies(width):
    """Rows of tied priors (rounded to a few values), rows with no mass on their moves and rows with a NaN take
    the same order, priors and first statistics in both cores, on boards whose edges fit in one of the compiled
    sort's runs and on boards that need many merges."""
    rng = np.random.default_rng(3)
    point_of_flat = np.append(np.arange(10, 10 + width - 1), -1).astype(np.int64)
    mask = rng.random((12, width)) < 0.6
    mask[:, -1] = True
    prior = np.round(rng.dirichlet(np.ones(width), 12), 2).astype(np.float32)  # mass off the mask too: ignored
    prior[3] = 0.0  # no mass: uniform
    prior[4] = np.where(mask[4], 0.0, 0.5)  # mass only off the mask: uniform
    prior[5, 7] = np.nan
    prior[6, ~mask[6]] = np.nan  # NaN off the mask: ignored
    leaves = [[Node() for _ in range(12)] for _ in range(2)]
    for core, row in zip((PYTHON, COMPILED), leaves):
        core.expand(row, prior.copy(), mask.copy(), point_of_flat, 4)
    ties = 0
    for a, b in zip(*leaves):
        assert a.moves == b.moves and np.array_equal(a.prior, b.prior)
        assert a.stats.shape == b.stats.shape == (6, min(4, len(a.moves)))
        assert np.shares_memory(b.N, b.stats) and np.shares_memory(b.S2, b.stats) and not b.stats.any()
        ties += len(a.prior) - len(set(a.prior.tolist()))
    assert ties > width // 4 and len(set(leaves[0][3].prior.tolist())) == 1
    with pytest.raises(ValueError, match="one row"):
        COMPILED.expand(leaves[1][:2], prior, mask, point_of_flat, 4)
    with pytest.raises(TypeError, match="mask"):
        COMPILED.expand(leaves[1], prior, mask.astype(np.uint8), point_of_flat, 4)
    with pytest.raises(TypeError, match="policy"):
        COMPILED.expand(leaves[1], prior.astype(np.float64), mask, point_of_flat, 4)


@pytest.mark.parametrize("name", POSITIONS)
def test_compiled_candidates_match_the_reference(name):
    """The empty points and pass of positions from a game record, a ko with suicide points and a finished game."""
    state = POSITIONS[name]()
    states = [state, state.copy(), GameState(state.width, komi=7)]
    states[1].play(PASS)
    point_of_flat = np.append(state.grid.point_of, PASS).astype(np.int64)
    masks = [np.zeros((3, state.grid.area + 1), bool) for _ in range(2)]
    for core, mask in zip((PYTHON, COMPILED), masks):
        core.candidates(states, point_of_flat, mask)
    assert np.array_equal(masks[0], masks[1])
    assert masks[1][:, -1].all() and masks[1][2].all()
    assert np.array_equal(masks[1][0, :-1], [state.board.colors[p] == 0 for p in state.grid.point_of])
    with pytest.raises(ValueError, match="row of out"):
        COMPILED.candidates(states, point_of_flat, masks[1][:2])


def test_compiled_nodes_stay_out_of_the_garbage_collector_and_survive_collections(monkeypatch):
    """A tree has no reference cycles, so the compiled descent and expansion keep its nodes, their children and their
    moves (tuples) from the collector's watch (full collections walked big trees); a collection changes nothing."""
    import gc

    state = POSITIONS["game record, move 40"]()
    tree = grow(COMPILED, state, 300, 8, monkeypatch)
    reference = grow(COMPILED, state, 300, 8, monkeypatch)
    gc.collect()
    nodes = [child for child in tree.root.children.values() if child.moves is not None]
    assert len(nodes) > 20
    assert not any(gc.is_tracked(n) or gc.is_tracked(n.children) or gc.is_tracked(n.moves) for n in nodes)
    assert assert_same_tree(tree.root, reference.root) > 50
    for _ in range(30):
        tree.run_batch(8)
        reference.run_batch(8)
    assert assert_same_tree(tree.root, reference.root) > 50


@pytest.mark.parametrize("core", ["python", "compiled"])
def test_descents_before_a_failure_are_undone(core, monkeypatch):
    """A gather that fails between descents (here at the third copy of the root's position) undoes the descents
    before it (virtual loss, new leaves), so the tree equals one that never tried, and searches on alike."""
    state = POSITIONS["game record, move 40"]()
    tree = grow(getattr(tree_core.IMPLEMENTATIONS, core), state, 200, 8, monkeypatch)
    reference = grow(getattr(tree_core.IMPLEMENTATIONS, core), state, 200, 8, monkeypatch)

    copies = 0

    def third_copy_fails(state):
        nonlocal copies
        copies += 1
        if copies == 3:
            raise RuntimeError("scripted failure")
        return state.copy()

    own_hooks = tree._hooks
    tree._hooks = own_hooks._replace(copy_state=third_copy_fails)
    with pytest.raises(RuntimeError, match="scripted"):
        tree.gather(8)
    assert copies == 3
    tree._hooks = own_hooks
    assert assert_same_tree(tree.root, reference.root) > 50
    for _ in range(5):
        tree.run_batch(8)
        reference.run_batch(8)
    assert assert_same_tree(tree.root, reference.root) > 50


@pytest.mark.parametrize("core", ["python", "compiled"])
def test_gather_reads_the_hooks_by_name(core, monkeypatch):
    """Hooks given as any record with the fields, in another order, grow the tree tree_core.Hooks grows."""
    state = POSITIONS["ko and suicides"]()
    tree = grow(getattr(tree_core.IMPLEMENTATIONS, core), state, 100, 8, monkeypatch)
    reference = grow(getattr(tree_core.IMPLEMENTATIONS, core), state, 100, 8, monkeypatch)
    tree._hooks = SimpleNamespace(**dict(reversed(tree._hooks._asdict().items())))
    for _ in range(20):
        tree.run_batch(8)
        reference.run_batch(8)
    assert assert_same_tree(tree.root, reference.root) > 50
    tree._hooks = SimpleNamespace(**{k: v for k, v in reference._hooks._asdict().items() if k != "copy_state"})
    with pytest.raises((TypeError, AttributeError), match="copy_state"):
        tree.gather(8)


@pytest.mark.parametrize("name", ["empty 9x9", "game record, move 40"])
def test_compiled_core_grows_the_reference_tree_with_batches_in_flight(name, monkeypatch):
    """Three batches gathered before the first is finished, without virtual loss: leaves pending in an earlier batch
    are selected again and await its result (tree_core.gather counts them, tree_core.back_up takes them), in both
    cores alike."""

    def grow_in_flight(core):
        monkeypatch.setattr(tree_core, "CORE", core)
        tree = Tree(HashedEvaluator(), POSITIONS[name](), TreeConfig(virtual_loss=0.0))
        tree.run_batch(1)
        awaited = 0
        for _ in range(40):
            batches = [tree.gather(8) for _ in range(3)]
            awaited += sum(len(b.selected) - len(b.leaves) for b in batches)
            for pending in batches:
                tree.finish(pending, tree.evaluator.evaluate(pending.states) if pending.states else None)
        assert not tree._in_flight and not tree._awaited
        return tree, awaited

    (python, awaited), (compiled, _) = grow_in_flight(PYTHON), grow_in_flight(COMPILED)
    assert awaited > 50
    assert assert_same_tree(python.root, compiled.root) > 30
