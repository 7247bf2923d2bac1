"""A query of KataGo's JSON analysis protocol, read and checked: the positions to analyse and how.

Terms:
- query: one JSON object with an `id` and no `action`. Required: id, moves, rules (unless the config file gives
  default rules), boardXSize, boardYSize.
- turn: turn t is the position after the first t moves (0: the initial position, from initialStones). The side
  to move at turn 0 is initialPlayer, else the player of the first move, else White after handicap stones, else
  Black; at a later turn, the opponent of the last move's player (as KataGo, which analyses a record's two moves
  of one colour in a row so). analyzeTurns lists the turns to analyse (default: the last), each once.
- moves are played as recorded where the rules forbid them only by superko or suicide (RECORDED_REGARDLESS), with
  a warning, as KataGo replays a record tolerantly; a move on an occupied point or retaking a ko at once is an
  error.
- location: a GTP vertex ("Q4", "pass") or KataGo's "(x,y)" with x the column from the left, y the row from the
  top, both from 0.
- handicap stones: initialStones of Black alone (at least two) count as handicap for the rules' white handicap
  bonus, as KataGo counts them.
- komi: the query's, else the rules' default for the game (game.Rules.default_komi): 7.5 under area scoring and
  6.5 under territory scoring, as KataGo, but 0.5 with handicap stones, where KataGo keeps 7.5 or 6.5.
- human policy: the move distribution of the strength level nearest to overrideSettings' humanSLProfile
  (responses.py), answered for includeHumanPolicy, and for includePolicy where a profile is set (KaTrain's
  human-style AIs ask so, as KataGo answers them with a human model loaded).
- error: QueryError(message, field): the query is refused whole and nothing is analysed. warning: (field,
  message) for a field that is ignored; the query still runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from gtp_engine import coords
from gtp_engine.analysis import settings as settings_lib
from gtp_engine.analysis.settings import AnalysisSettings
from gtp_engine.board import BLACK, WHITE, IllegalMoveError
from gtp_engine.game import GameState, Rules
from gtp_engine.mcts import MoveClause, MoveFilter

MAX_KOMI = 150.0
RECORDED_REGARDLESS = ("superko", "suicide")  # illegal moves a record may still hold (see moves)
MIN_SIZE = 2

# Fields KataGo knows that this engine reads but cannot honour: a warning, and the query runs without them.
UNSUPPORTED = {
    "includeOwnershipStdev": "the search keeps no spread of ownership",
    "includeMovesOwnershipStdev": "the search keeps no spread of ownership",
    "includeNoResultValue": "the networks have no no-result output",
}
KNOWN = {
    "id", "moves", "initialStones", "initialPlayer", "rules", "komi", "whiteHandicapBonus", "boardXSize",
    "boardYSize", "analyzeTurns", "maxVisits", "rootPolicyTemperature", "rootFpuReductionMax", "analysisPVLen",
    "includeOwnership", "includeMovesOwnership", "includePolicy", "includePVVisits", "includeHumanPolicy",
    "avoidMoves", "allowMoves", "overrideSettings", "reportDuringSearchEvery", "firstReportDuringSearchAfter",
    "priority", "priorities",
}
_XY = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


class QueryError(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Turn:
    number: int
    state: GameState  # the position, with its side to move; never changed after parsing
    priority: int


@dataclass(frozen=True)
class Query:
    id: str
    turns: tuple[Turn, ...]
    settings: AnalysisSettings  # the engine's, with this query's fields and overrideSettings applied
    move_filter: MoveFilter
    include_ownership: bool = False
    include_moves_ownership: bool = False
    include_policy: bool = False
    include_pv_visits: bool = False
    include_human_policy: bool = False  # see human policy
    report_every: float | None = None  # seconds between reports during the search; None: final results only
    first_report_after: float | None = None  # seconds to the first report (alone: the only one); None: report_every


def parse_query(fields: dict[str, Any], defaults: AnalysisSettings) -> tuple[Query, list[tuple[str, str]]]:
    """The Query of a decoded JSON object that has a string id, and its warnings; raises QueryError."""
    warnings = [(key, f"unexpected or unused field {key!r}") for key in fields if key not in KNOWN | set(UNSUPPORTED)]
    warnings += [(key, f"{key} is not supported: {why}") for key, why in UNSUPPORTED.items() if key in fields]
    if "rules" not in fields and defaults.rules is not None:
        fields = {**fields, "rules": defaults.rules}
    for key in ("moves", "rules", "boardXSize", "boardYSize"):
        if key not in fields:
            raise QueryError(f"{key} is required", key)
    width, height = _size(fields, "boardXSize"), _size(fields, "boardYSize")
    g = coords.grid(width, height)
    rules, differences = _rules(fields)
    warnings += [("rules", f"rules not supported, using the nearest instead: {why}") for why in differences]
    game = GameState(width, height, komi=_komi(fields), rules=rules)
    _place_initial_stones(game, g, fields.get("initialStones", []))
    if "komi" not in fields:
        game.komi = rules.default_komi(game.handicap_stones)
    moves = [_stone(g, item, "moves", i) for i, item in enumerate(_list(fields["moves"], "moves"))]
    if "initialPlayer" in fields:
        first = _player(fields["initialPlayer"], "initialPlayer")
    elif moves:
        first = moves[0][0]
    else:
        first = WHITE if game.handicap_stones else BLACK
    if first != game.to_play:
        game.set_to_play(first)

    listed = _turns(fields, len(moves))
    first_priority: dict[int, int] = {}  # a turn listed twice is analysed once, at its first priority
    for turn, priority in zip(listed, _priorities(fields, len(listed))):
        first_priority.setdefault(turn, priority)
    turn_numbers, priorities = list(first_priority), list(first_priority.values())
    positions: dict[int, GameState] = {}
    wanted = set(turn_numbers)
    for t in range(len(moves) + 1):
        if t in wanted:
            positions[t] = game.copy()  # the side to move: initialPlayer, then the opponent of the last mover
        if t == len(moves):
            break
        color, point = moves[t]
        try:
            game.play(point, color)
        except IllegalMoveError as error:
            move = f"move {t}: {'B' if color == BLACK else 'W'} {coords.to_gtp(g, point)}"
            if error.reason not in RECORDED_REGARDLESS:
                raise QueryError(f"Illegal {move} ({error.reason})", "moves") from None
            game.play_unchecked(point, color)
            warnings.append(("moves", f"{move} breaks the {error.reason} rule of {rules.name}; played as recorded"))

    settings = defaults
    changes = {key: fields[key] for key in ("maxVisits", "rootPolicyTemperature", "rootFpuReductionMax",
                                            "analysisPVLen") if key in fields}
    for key, value in changes.items():
        settings = _apply(settings, {key: value}, key)
    overrides = fields.get("overrideSettings", {})
    if not isinstance(overrides, dict):
        raise QueryError("overrideSettings must be an object", "overrideSettings")
    settings, ignored = _apply_overrides(settings, overrides)
    warnings += [("overrideSettings", f"unknown or unused setting {key!r} ignored") for key in ignored]
    human_policy = _bool(fields, "includeHumanPolicy")
    if human_policy and settings.human_profile is None:
        warnings.append(("includeHumanPolicy", "includeHumanPolicy needs a humanSLProfile in overrideSettings; "
                                               "no humanPolicy is answered"))
    include_policy = _bool(fields, "includePolicy")

    query = Query(
        id=fields["id"],
        turns=tuple(Turn(t, positions[t], p) for t, p in zip(turn_numbers, priorities)),
        settings=settings,
        move_filter=_move_filter(g, fields),
        include_ownership=_bool(fields, "includeOwnership"),
        include_moves_ownership=_bool(fields, "includeMovesOwnership"),
        include_policy=include_policy,
        include_pv_visits=_bool(fields, "includePVVisits"),
        include_human_policy=settings.human_profile is not None and (human_policy or include_policy),
        report_every=_seconds(fields, "reportDuringSearchEvery", positive=True),
        first_report_after=_seconds(fields, "firstReportDuringSearchAfter", positive=False),
    )
    return query, warnings


# ---- fields -------------------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or \
        isinstance(value, float) and value.is_integer()


def _size(fields: dict, key: str) -> int:
    value = fields[key]
    if not _is_int(value):
        raise QueryError(f"{key} must be an integer", key)
    if not MIN_SIZE <= int(value) <= coords.MAX_SIZE:
        raise QueryError(f"{key} {int(value)} is not supported (sizes {MIN_SIZE} to {coords.MAX_SIZE})", key)
    return int(value)


def _rules(fields: dict) -> tuple[Rules, list[str]]:
    """The rules to play, and where they differ from the query's (KataGo too warns and plays the nearest rules its
    network knows)."""
    try:
        rules, differences = Rules.nearest_katago(fields["rules"])
    except ValueError as error:
        raise QueryError(f"rules: {error}", "rules") from None
    if "whiteHandicapBonus" in fields:
        bonus = fields["whiteHandicapBonus"]
        try:
            rules = Rules.from_katago({**rules.to_katago(), "whiteHandicapBonus": bonus})
        except (ValueError, TypeError, AttributeError):
            raise QueryError(f"whiteHandicapBonus: expected \"0\", \"N\" or \"N-1\", got {bonus!r}",
                             "whiteHandicapBonus") from None
    return rules, differences


def _komi(fields: dict) -> float:
    """The query's komi; 0 where it has none (parse_query then gives the game the rules' default)."""
    if "komi" not in fields:
        return 0.0
    value = fields["komi"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise QueryError("komi must be a number", "komi")
    if abs(value) > MAX_KOMI or not float(2 * value).is_integer():
        raise QueryError(f"komi {value} is not an integer or half-integer in [-{MAX_KOMI:g}, {MAX_KOMI:g}]", "komi")
    return float(value)


def _list(value: Any, field: str) -> list:
    if not isinstance(value, list):
        raise QueryError(f"{field} must be a list", field)
    return value


def _player(value: Any, field: str) -> int:
    text = value.strip().upper() if isinstance(value, str) else ""
    if text in ("B", "BLACK"):
        return BLACK
    if text in ("W", "WHITE"):
        return WHITE
    raise QueryError(f"{field}: expected \"B\" or \"W\", got {value!r}", field)


def _location(g: coords.Grid, value: Any, field: str) -> int:
    if isinstance(value, str):
        match = _XY.match(value.strip())
        if match:
            x, y = int(match.group(1)), int(match.group(2))
            if x < g.width and y < g.height:
                return g.point(y, x)
        else:
            try:
                return coords.from_gtp(g, value)
            except ValueError:
                pass
    raise QueryError(f"{field}: not a location on a {g.width}x{g.height} board: {value!r}", field)


def _stone(g: coords.Grid, item: Any, field: str, index: int) -> tuple[int, int]:
    if not isinstance(item, list) or len(item) != 2:
        raise QueryError(f"{field}[{index}]: expected [player, location], got {item!r}", field)
    return _player(item[0], field), _location(g, item[1], field)


def _place_initial_stones(game: GameState, g: coords.Grid, value: Any) -> None:
    stones = [_stone(g, item, "initialStones", i) for i, item in enumerate(_list(value, "initialStones"))]
    for color in (BLACK, WHITE):
        points = [p for c, p in stones if c == color]
        if coords.PASS in points:
            raise QueryError("initialStones: a stone cannot be a pass", "initialStones")
        if points:
            try:
                game.place_setup(color, points)
            except ValueError as error:
                raise QueryError(f"initialStones: {error}", "initialStones") from None
    black = sum(1 for c, _ in stones if c == BLACK)
    if black >= 2 and black == len(stones):
        game.handicap_stones = black


def _turns(fields: dict, move_count: int) -> list[int]:
    if "analyzeTurns" not in fields:
        return [move_count]
    turns = _list(fields["analyzeTurns"], "analyzeTurns")
    if not turns:
        raise QueryError("analyzeTurns is empty", "analyzeTurns")
    for t in turns:
        if not _is_int(t) or not 0 <= int(t) <= move_count:
            raise QueryError(f"analyzeTurns: turn {t!r} is not in 0..{move_count}", "analyzeTurns")
    return [int(t) for t in turns]


def _priorities(fields: dict, count: int) -> list[int]:
    if "priorities" in fields:
        values = _list(fields["priorities"], "priorities")
        if len(values) != count or not all(_is_int(p) for p in values):
            raise QueryError("priorities must be integers, one per analysed turn", "priorities")
        return [int(p) for p in values]
    priority = fields.get("priority", 0)
    if not _is_int(priority):
        raise QueryError("priority must be an integer", "priority")
    return [int(priority)] * count


def _apply(settings: AnalysisSettings, values: dict, field: str) -> AnalysisSettings:
    try:
        settings, _ = settings_lib.apply(settings, values, per_query=True)
    except settings_lib.SettingError as error:
        raise QueryError(str(error), field) from None
    return settings


def _apply_overrides(settings: AnalysisSettings, overrides: dict) -> tuple[AnalysisSettings, list[str]]:
    try:
        return settings_lib.apply(settings, overrides, per_query=True)
    except settings_lib.SettingError as error:
        raise QueryError(f"overrideSettings: {error}", "overrideSettings") from None


def _bool(fields: dict, key: str) -> bool:
    value = fields.get(key, False)
    if not isinstance(value, bool):
        raise QueryError(f"{key} must be true or false", key)
    return value


def _seconds(fields: dict, key: str, positive: bool) -> float | None:
    if key not in fields:
        return None
    value = fields[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        raise QueryError(f"{key} must be a number of seconds {'> 0' if positive else '>= 0'}", key)
    return float(value)


def _move_filter(g: coords.Grid, fields: dict) -> MoveFilter:
    clauses = []
    for key, allow in (("avoidMoves", False), ("allowMoves", True)):
        items = _list(fields.get(key, []), key)
        if allow and len(items) > 1:
            raise QueryError("allowMoves takes a single entry", key)
        for item in items:
            if not isinstance(item, dict) or not {"player", "moves", "untilDepth"} <= set(item):
                raise QueryError(f"{key}: each entry needs player, moves and untilDepth", key)
            depth = item["untilDepth"]
            if not _is_int(depth) or int(depth) < 1:
                raise QueryError(f"{key}: untilDepth must be a positive integer", key)
            points = frozenset(_location(g, m, key) for m in _list(item["moves"], key))
            if points or allow:
                clauses.append(MoveClause(_player(item["player"], key), points, int(depth), allow))
    try:
        return MoveFilter(tuple(clauses))
    except ValueError as error:
        raise QueryError(f"avoidMoves / allowMoves: {error}", "avoidMoves" if fields.get("avoidMoves") else "allowMoves") from None
