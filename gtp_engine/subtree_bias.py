"""Subtree value bias correction (KataGo): online learning of the network's errors on local tactics in one search.

Terms:
- bucket: nodes grouped by the move that led to them: the player who made it, its point, the point of the move
  before it, the 5x5 pattern around it (black, white, empty, off the board, and which stones are in atari) and the
  ko ban it left. bucket_key computes it from a GameState.
- observed error of a node: its network utility minus the mean utility of what was backed up through its children
  (both from the view of its player to move), once it has children visits.
- observed bias of a bucket: the mean observed error of its nodes, each weighted by its children visits to the
  power WEIGHT_EXPONENT. A node's contribution is replaced each time it is updated.
- correction: a new leaf's backed-up utility is its network utility minus factor * its bucket's observed bias at
  the time, so that a tactic the search already found the network wrong about elsewhere in the tree is valued as
  the search found it. The network's own outputs (net_v, net_u, net_s) are left as they are.
"""

from __future__ import annotations

from gtp_engine.board import BLACK, WHITE
from gtp_engine.coords import PASS
from gtp_engine.game import GameState

WEIGHT_EXPONENT = 0.8  # KataGo's alpha
PATTERN_RADIUS = 2  # the 5x5 pattern
_OFF, _ATARI = 3, 4  # pattern codes past EMPTY, BLACK, WHITE


def bucket_key(state: GameState) -> tuple | None:
    """The bucket of the node at `state` (see bucket); None before any move."""
    last = state.last_moves(2)
    if not last:
        return None
    mover, point = last[-1]
    before = last[0][1] if len(last) == 2 else None
    board = state.board
    pattern: tuple = ()
    if point != PASS:
        g = board.grid
        row, col = divmod(point, g.stride)
        row -= 1
        codes = []
        for dr in range(-PATTERN_RADIUS, PATTERN_RADIUS + 1):
            for dc in range(-PATTERN_RADIUS, PATTERN_RADIUS + 1):
                r, c = row + dr, col + dc
                if not (0 <= r < g.height and 0 <= c < g.width):
                    codes.append(_OFF)
                    continue
                p = (r + 1) * g.stride + c
                color = board.colors[p]
                if color in (BLACK, WHITE) and board.chain_liberties(p) == 1:
                    color += _ATARI
                codes.append(color)
        pattern = tuple(codes)
    return mover, point, before, pattern, board.ko_point


class SubtreeBias:
    """One search's buckets and the nodes it tracks (see the module docstring)."""

    def __init__(self, factor: float):
        self.factor = factor
        self._buckets: dict[tuple, list[float]] = {}  # key -> [error * weight sum, weight sum]
        # id(node) -> [node, bucket, its last error * weight, its last weight]
        self._nodes: dict[int, list] = {}

    def correct(self, leaf, state: GameState) -> float:
        """The correction to add to a new leaf's utility; starts tracking the leaf."""
        key = bucket_key(state)
        if key is None:
            return 0.0
        bucket = self._buckets.setdefault(key, [0.0, 0.0])
        correction = -self.factor * bucket[0] / bucket[1] if bucket[1] > 1e-3 else 0.0
        self._nodes[id(leaf)] = [leaf, bucket, 0.0, 0.0]
        return correction

    def update(self, paths: list[list]) -> None:
        """After a batch's backups: each tracked node on the paths (path: [node, edge, node, edge, ...] from the
        root, as tree_core.descend makes them) updates its bucket with its observed error."""
        seen = set()
        for path in paths:
            for i in range(2, len(path), 2):
                node = path[i]
                record = self._nodes.get(id(node))
                if record is None or id(node) in seen:
                    continue
                seen.add(id(node))
                # each selection still in flight added 1 to an edge's N and took 1 from its W beyond the visits
                # its child counts (virtual loss): W + N - visits is the edge's sum without them
                visits = utility = 0.0
                stats = node.stats
                for edge, child in node.children.items():
                    if child.visits:
                        visits += child.visits
                        utility += stats[1, edge] + stats[0, edge] - child.visits
                if visits < 1:
                    continue
                weight = visits ** WEIGHT_EXPONENT
                delta = (node.net_u - utility / visits) * weight
                bucket = record[1]
                bucket[0] += delta - record[2]
                bucket[1] += weight - record[3]
                record[2], record[3] = delta, weight
