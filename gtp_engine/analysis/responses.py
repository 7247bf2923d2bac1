"""Responses of the JSON analysis engine: search snapshots as KataGo's result objects, errors and warnings.

Terms:
- result: {"id", "turnNumber", "isDuringSearch", "moveInfos", "rootInfo", and when asked "ownership",
  "policy"}; exactly one per analysed turn has isDuringSearch false. A turn terminated before its search
  started answers {"id", "turnNumber", "isDuringSearch": false, "noResults": true}.
- reporting side (settings.REPORT_SIDES): winrates, leads, utilities and ownership are from its view; a winrate
  seen from the other side is 1 - winrate, a lead -lead; an LCB seen from the other side is 1 - LCB (KataGo
  flips it the same way, so it then bounds from above).
- moveInfos: the moves the search visited, the chosen one first (order 0), then by visits. edgeVisits equals
  visits (the tree has no transpositions). scoreMean is scoreLead (KataGo keeps both names). scoreStdev is the
  spread of the leads the search backed up through the move (search/snapshot.py), not a network output.
- ownership: row-major from the top-left point (flat order, coords.py), length width * height.
- policy: the network's policy for the position over its legal moves (evaluator.legal_policy: renormalised, as
  KataGo's network masks illegal moves), flat order with pass last, -1 on illegal moves.
- humanPolicy: the move distribution of the query's strength rank on its board (search/strength.py, the rank of
  humanSLProfile) over the moves, in the policy's layout: from the network's policy averaged over the board's
  symmetries (the policy a level chooses by in GTP, search/choice.py) and the leads this search found
  (a move it did not visit has 0), around the move it chooses; at max, that move alone. A calibration of the
  engine's own play, not a human-trained model's policy.
- thisHash: the position's Zobrist hash of stones and side to move, in hexadecimal (KataGo's also covers a simple
  ko ban). Fields KataGo sends that this engine cannot compute honestly (scoreSelfplay, utilityLcb, symHash,
  ownershipStdev) are left out.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gtp_engine import coords
from gtp_engine.board import BLACK
from gtp_engine.game import GameState
from gtp_engine.search import MoveInfo, Rank, Snapshot, strength

MoveOwnership = Callable[[int], "np.ndarray | None"]  # root move -> mean ownership after it, Black's view


def error(message: str, field: str | None = None, query_id: Any = None) -> dict[str, Any]:
    response: dict[str, Any] = {"error": message}
    if field is not None:
        response["field"] = field
    if query_id is not None:
        response["id"] = query_id
    return response


def warning(message: str, field: str, query_id: Any) -> dict[str, Any]:
    return {"warning": message, "field": field, "id": query_id}


def no_results(query_id: str, turn: int) -> dict[str, Any]:
    return {"id": query_id, "turnNumber": turn, "isDuringSearch": False, "noResults": True}


def result(query, turn, snapshot: Snapshot, move_ownership: MoveOwnership | None = None,
           policy: np.ndarray | None = None, level_policy: np.ndarray | None = None) -> dict[str, Any]:
    """The result object for one analysed turn (query.Query, query.Turn) from a snapshot of its search, during
    the search or final as the snapshot is.

    move_ownership is asked for the visited moves when the query includes moves' ownership; policy is the
    network's policy (flat, pass last, see policy) when it includes the policy; level_policy the one humanPolicy
    draws from, in the same layout, when it includes the human policy."""
    state: GameState = turn.state
    g = state.grid
    flip = _flips(query.settings.report_as, snapshot.to_play)
    sign = -1.0 if flip else 1.0
    owner_sign = _ownership_sign(query.settings.report_as, snapshot.to_play)
    pv_length = query.settings.pv_length

    infos = []
    for order, move in enumerate(m for m in snapshot.moves if m.visits > 0):
        info = _move_info(move, order, g, flip, sign, pv_length, query.include_pv_visits)
        if query.include_moves_ownership and move_ownership is not None:
            ownership = move_ownership(move.point)
            if ownership is not None:
                info["ownership"] = _floats(owner_sign * ownership)
        infos.append(info)

    response: dict[str, Any] = {
        "id": query.id,
        "turnNumber": turn.number,
        "isDuringSearch": snapshot.during_search,
        "moveInfos": infos,
        "rootInfo": {
            "visits": snapshot.visits,
            "winrate": _winrate(snapshot.winrate, flip),
            "scoreLead": sign * snapshot.score_lead,
            "scoreStdev": snapshot.score_stdev,
            "utility": sign * snapshot.utility,
            "rawWinrate": _winrate(snapshot.raw_winrate, flip),
            "rawLead": sign * snapshot.raw_lead,
            "currentPlayer": "B" if snapshot.to_play == BLACK else "W",
            "thisHash": f"{hash((state.board.hash, state.to_play)) & 0xFFFF_FFFF_FFFF_FFFF:016X}",
        },
    }
    if query.include_ownership and snapshot.ownership is not None:
        response["ownership"] = _floats(owner_sign * np.asarray(snapshot.ownership))
    if query.include_policy and policy is not None:
        response["policy"] = _floats(policy)
    if query.include_human_policy and level_policy is not None:
        response["humanPolicy"] = _floats(human_policy(query.settings.rank, level_policy, snapshot, g))
    return response


def human_policy(rank: Rank | None, policy: np.ndarray, snapshot: Snapshot, g: coords.Grid) -> np.ndarray:
    """The move distribution of the rank's level on this board (see humanPolicy) in the layout of `policy` (flat,
    pass last, -1 illegal)."""
    legal = np.flatnonzero(policy >= 0)
    edge = {int(flat): i for i, flat in enumerate(legal)}
    lead = np.full(len(legal), np.nan)
    for move in snapshot.moves:
        if move.visits > 0 and g.flat(move.point) in edge:
            lead[edge[g.flat(move.point)]] = move.score_lead
    chosen = [edge[g.flat(m.point)] for m in snapshot.moves[:1] if g.flat(m.point) in edge]
    best = chosen[0] if chosen else int(np.argmax(policy[legal]))
    if rank is None:
        probability = np.zeros(len(legal))
        probability[best] = 1.0
    else:
        probability = strength.distribution(rank.level(g.area), policy[legal], lead, best, legal == g.pass_index,
                                            g.area)
    result = np.where(policy >= 0, 0.0, -1.0)
    result[legal] = probability
    return result


def _move_info(move: MoveInfo, order: int, g: coords.Grid, flip: bool, sign: float, pv_length: int,
               with_pv_visits: bool) -> dict[str, Any]:
    pv = (move.pv or [move.point])[:pv_length]
    info = {
        "move": coords.to_gtp(g, move.point),
        "visits": move.visits,
        "edgeVisits": move.visits,
        "winrate": _winrate(move.winrate, flip),
        "scoreLead": sign * move.score_lead,
        "scoreMean": sign * move.score_lead,
        "scoreStdev": move.score_stdev,
        "prior": move.prior,
        "utility": sign * move.utility,
        "lcb": _winrate(move.lcb, flip),
        "order": order,
        "pv": [coords.to_gtp(g, p) for p in pv],
    }
    if with_pv_visits:
        info["pvVisits"] = (move.pv_visits or [move.visits])[: len(pv)]
    return info


def _flips(report_as: str, to_play: int) -> bool:
    """Whether the reporting side is not the side to move."""
    if report_as == "SIDETOMOVE":
        return False
    return (report_as == "BLACK") != (to_play == BLACK)


def _ownership_sign(report_as: str, to_play: int) -> float:
    """Our ownership is Black's view; the factor that turns it into the reporting side's."""
    if report_as == "BLACK":
        return 1.0
    if report_as == "WHITE":
        return -1.0
    return 1.0 if to_play == BLACK else -1.0


def _winrate(value: float, flip: bool) -> float:
    return 1.0 - value if flip else value


def _floats(values: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in np.asarray(values, dtype=np.float64)]
