"""The analyze commands of GTP (lz-analyze, kata-analyze, *-genmove_analyze): their requests, and search snapshots
written as the info lines GUIs parse.

Terms:
- request: what lz-analyze / kata-analyze / *-genmove_analyze ask for: `[color] [interval] [key value]...`
  (KataGo's grammar): the colour to analyse for, the interval in centiseconds between lines (0: one line when
  the search ends), minmoves / maxmoves (how many candidate moves a line lists), and for kata- also ownership,
  movesOwnership, pvVisits and rootInfo (true / false).
- avoid / allow: `avoid COLOR V1,V2,... UNTILDEPTH` (any number per colour) or `allow COLOR V1,... UNTILDEPTH`
  (one per colour, not with avoid for that colour): the colour's moves in the first UNTILDEPTH plies of the
  search leave out the listed vertices (avoid), or everything else, pass too unless listed (allow, as KataGo).
  A vertex may be a rectangle "A1:C3" (Leela Zero). They become the search's mcts.MoveFilter.
- info line: one line per snapshot, holding every candidate as "info move V visits N ... pv V1 V2 ...", best
  first; pv is last in each block because clients read it to the end of the block.
- lz format: winrate, prior and lcb as integers, 10000 = certain (Leela Zero; Lizzie parses them as integers).
  kata format: decimals in [0, 1], plus utility, scoreLead and scoreMean in points (Sabaki shows scoreLead)
  and scoreStdev (Lizzie shows it beside scoreMean; here the spread of the leads the search backed up through
  the move, search/snapshot.py, not a network output). Both are from the view of the side to move, as the
  clients expect.
- after a kata block's pv, on request: pvVisits (the visits of each pv move) and movesOwnership (the ownership
  after the move, as the search averaged it, in the order and view of the ownership line).
- ownership (kata, on request): after the info blocks, one value per point in [-1, 1] for the side to move,
  row by row from the top-left (A19 on 19x19) to the bottom-right.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from gtp_engine import coords
from gtp_engine.board import BLACK
from gtp_engine.gtp.protocol import SYNTAX_ERROR, GtpError
from gtp_engine.gtp.values import is_color, parse_bool, parse_color, parse_float, parse_int, parse_vertex
from gtp_engine.mcts import MoveClause, MoveFilter
from gtp_engine.search import MoveInfo, ReportSchedule, Snapshot


@dataclasses.dataclass(frozen=True)
class Request:
    kata: bool  # kata- format (decimals, scores) or lz- format (integers)
    color: int
    interval: float = 0.0  # seconds between info lines; 0: one line when the search ends
    min_moves: int = 0
    max_moves: int | None = None
    ownership: bool = False
    moves_ownership: bool = False
    pv_visits: bool = False
    root_info: bool = False
    move_filter: MoveFilter = MoveFilter()

    @property
    def reports(self) -> ReportSchedule | None:
        """When the search reports an info line during itself: every interval; None: only when it ends."""
        return ReportSchedule.periodic(self.interval) if self.interval else None


def parse_request(args: tuple[str, ...], g: coords.Grid, to_play: int, kata: bool) -> Request:
    """Parses KataGo's analyze grammar; raises GtpError("syntax error") for anything else."""
    values: dict = {"kata": kata, "color": to_play}
    clauses: list[MoveClause] = []
    i = 0
    if i < len(args) and is_color(args[i]):
        values["color"] = parse_color(args[i])
        i += 1
    if i < len(args) and _is_number(args[i]):
        values["interval"] = _interval(args[i])
        i += 1
    while i < len(args):
        key = args[i]
        if key in ("avoid", "allow"):
            if i + 3 >= len(args):
                raise GtpError(SYNTAX_ERROR)
            color = parse_color(args[i + 1])
            points = _points(g, args[i + 2])
            clauses.append(MoveClause(color, points, parse_int(args[i + 3], minimum=1), allow=key == "allow"))
            i += 4
            continue
        if i + 1 >= len(args):
            raise GtpError(SYNTAX_ERROR)
        value = args[i + 1]
        if key == "interval":
            values["interval"] = _interval(value)
        elif key == "minmoves":
            values["min_moves"] = parse_int(value)
        elif key == "maxmoves":
            values["max_moves"] = parse_int(value, minimum=1)
        elif key == "ownership" and kata:
            values["ownership"] = parse_bool(value)
        elif key == "movesOwnership" and kata:
            values["moves_ownership"] = parse_bool(value)
        elif key == "pvVisits" and kata:
            values["pv_visits"] = parse_bool(value)
        elif key == "rootInfo" and kata:
            values["root_info"] = parse_bool(value)
        else:
            raise GtpError(SYNTAX_ERROR)
        i += 2
    try:
        values["move_filter"] = MoveFilter(tuple(clauses))
    except ValueError as error:
        raise GtpError(f"cannot use these avoid / allow clauses: {error}") from None
    return Request(**values)


def _points(g: coords.Grid, text: str) -> frozenset[int]:
    """The points of a comma-separated vertex list; a vertex may be a rectangle "A1:C3". Never empty."""
    points = set()
    try:
        for item in filter(None, text.split(",")):  # KataGo skips empty items
            first, _, last = item.partition(":")
            corners = [parse_vertex(g, first)] + ([parse_vertex(g, last)] if last else [])
            if len(corners) == 1:
                points.add(corners[0])
                continue
            if coords.PASS in corners:
                raise GtpError(SYNTAX_ERROR)
            (r1, c1), (r2, c2) = (g.row_col(p) for p in corners)
            points.update(g.point(r, c) for r in range(min(r1, r2), max(r1, r2) + 1)
                          for c in range(min(c1, c2), max(c1, c2) + 1))
    except GtpError:  # an off-board vertex too: the list is wrong, whatever the position
        raise GtpError(SYNTAX_ERROR) from None
    if not points:
        raise GtpError(SYNTAX_ERROR)
    return frozenset(points)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _interval(text: str) -> float:
    centiseconds = parse_float(text)
    if centiseconds < 0:
        raise GtpError(SYNTAX_ERROR)
    return centiseconds / 100.0


MoveOwnership = Callable[[int], "np.ndarray | None"]  # root move -> mean ownership after it, Black's view


def info_line(snapshot: Snapshot, g: coords.Grid, request: Request, priors: dict[int, float] | None = None,
              move_ownership: MoveOwnership | None = None) -> str:
    """One info line for a snapshot. priors (point -> policy) pad the line with unvisited moves up to minmoves;
    move_ownership gives movesOwnership (asked in the search's thread, between batches)."""
    moves = [m for m in snapshot.moves if m.visits > 0]
    if request.min_moves > len(moves) and priors:
        listed = {m.point for m in moves}
        extra = sorted((p for p in priors if p not in listed), key=lambda p: -priors[p])
        for point in extra[: request.min_moves - len(moves)]:
            moves.append(MoveInfo(point, 0, snapshot.winrate, snapshot.score_lead, priors[point], 0.0, 0, [point]))
    if request.max_moves is not None:
        moves = moves[: request.max_moves]
    sign = 1.0 if snapshot.to_play == BLACK else -1.0
    blocks = []
    for k, m in enumerate(moves):
        if not request.kata:
            blocks.append(_lz_block(m, k, g))
            continue
        block = _kata_block(m, k, g)
        if request.pv_visits:
            block += " pvVisits " + " ".join(str(v) for v in (m.pv_visits or [m.visits]))
        if request.moves_ownership and move_ownership is not None:
            ownership = move_ownership(m.point) if m.visits else None
            if ownership is not None:
                block += " movesOwnership " + _ownership(sign * ownership)
        blocks.append(block)
    if request.kata and request.root_info:
        blocks.append(f"rootInfo visits {snapshot.visits} utility {snapshot.utility:.6f} "
                      f"winrate {snapshot.winrate:.6f} scoreLead {snapshot.score_lead:.6f} "
                      f"scoreMean {snapshot.score_lead:.6f} scoreStdev {snapshot.score_stdev:.6f} "
                      f"rawWinrate {snapshot.raw_winrate:.6f} rawLead {snapshot.raw_lead:.6f}")
    if request.kata and request.ownership and snapshot.ownership is not None:
        blocks.append("ownership " + _ownership(sign * np.asarray(snapshot.ownership)))
    return " ".join(blocks)


def _ownership(values: np.ndarray) -> str:
    return " ".join(f"{v:.4f}" for v in values)


def _pv(move: MoveInfo, g: coords.Grid) -> str:
    return " ".join(coords.to_gtp(g, p) for p in (move.pv or [move.point]))


def _lz_block(move: MoveInfo, order: int, g: coords.Grid) -> str:
    return (f"info move {coords.to_gtp(g, move.point)} visits {move.visits} winrate {_per10000(move.winrate)} "
            f"prior {_per10000(move.prior)} lcb {_per10000(move.lcb)} order {order} pv {_pv(move, g)}")


def _kata_block(move: MoveInfo, order: int, g: coords.Grid) -> str:
    return (f"info move {coords.to_gtp(g, move.point)} visits {move.visits} edgeVisits {move.visits} "
            f"utility {move.utility:.6f} winrate {move.winrate:.6f} scoreMean {move.score_lead:.6f} "
            f"scoreStdev {move.score_stdev:.6f} scoreLead {move.score_lead:.6f} prior {move.prior:.6f} "
            f"lcb {move.lcb:.6f} order {order} pv {_pv(move, g)}")


def _per10000(probability: float) -> int:
    return int(round(probability * 10000))


def reporter(request: Request, g: coords.Grid, write: Callable[[str], None],
             priors: dict[int, float] | None = None,
             move_ownership: MoveOwnership | None = None) -> Callable[[Snapshot], None]:
    """The on_snapshot callback of a search that writes each snapshot as an info line."""
    return lambda snapshot: write(info_line(snapshot, g, request, priors, move_ownership))
