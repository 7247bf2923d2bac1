"""What a search says it found: snapshots of its root for analysis, and the result of a search.

Terms:
- snapshot: what the search thinks now, for analysis: per visited root move its visits, winrate, score lead,
  prior, LCB (choice.py) and principal variation (PV), plus root ownership (the mean over the root's backups,
  kept ones included: a search that needs no new playouts still has it). Winrates are probabilities in [0, 1]
  and leads are points, both from the view of the side to move at the root. A snapshot is either during the
  search (a report of limits.ReportSchedule) or final (the one the search's result holds).
- score stdev: the standard deviation of the score leads backed up through a move (or the root): how much the
  leaves the search reached disagree. It is not KataGo's scoreStdev, which adds the network's own predicted
  spread of the final score (our networks have no such output), so it is much smaller early in a search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class MoveInfo:
    point: int  # board point or PASS
    visits: int
    winrate: float  # probability of winning for the side to move at the root
    score_lead: float  # points, side to move's view
    prior: float  # network policy (before noise)
    lcb: float  # lower confidence bound of the winrate (the utility's margin below the mean, applied to the value)
    order: int  # 0 for the move the search chooses, then by visits
    pv: list[int]  # principal variation starting with this move
    utility: float = 0.0  # mean utility (the search's objective: value plus score bonus), side to move's view
    score_stdev: float = 0.0  # of the score leads backed up through this move (see score stdev)
    pv_visits: list[int] = field(default_factory=list)  # visits of each edge of pv


@dataclass(frozen=True)
class Snapshot:
    to_play: int
    visits: int  # root visits
    playouts: int  # of this search
    elapsed: float  # seconds of this search
    winrate: float  # root, side to move's view
    score_lead: float
    moves: list[MoveInfo]  # the chosen move first (visited or not), then the other visited moves by visits
    ownership: np.ndarray | None  # flat, Black's view: +1 Black's; None when not asked for
    utility: float = 0.0  # root, side to move's view
    score_stdev: float = 0.0  # of the score leads backed up through the root
    raw_winrate: float = 0.5  # the network's, for the root position, side to move's view
    raw_lead: float = 0.0
    during_search: bool = False  # a report while the search goes on; False: the search's final snapshot


@dataclass(frozen=True)
class SearchResult:
    choice: MoveInfo  # the move to play: by LCB or visits, or drawn with the temperature
    snapshot: Snapshot  # final, with ownership
    root_moves: list[int] = field(default_factory=list)  # every legal root move, by falling prior


SnapshotCallback = Callable[[Snapshot], None]
