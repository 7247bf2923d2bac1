"""GameState: a board plus everything the rules need beyond it: whose turn, komi, superko history, undo, scoring.

Terms:
- Rules: the rule set. scoring is "area" (stones + surrounded points, Chinese / Tromp-Taylor) or "territory"
  (surrounded points + prisoners, Japanese); ko is "positional" superko (no move may recreate an earlier board),
  "situational" superko (no move may recreate an earlier board with the same player to move) or "simple" (only the
  immediate recapture is banned); suicide_allowed lets a move remove its own chain of two stones or more (a lone
  stone's suicide is illegal under every rule set, as in KataGo: it would be a pass that does not count as one);
  white_handicap_bonus is the
  compensation White gets per handicap stone under area scoring ("0", "N" or "N-1"); tax is KataGo's: "none",
  "seki" (the points of a region whose stones are in seki count for nobody: Japanese counting) or "all" (that,
  and every counted region costs its owner two points, the two eyes a group needs: ancient stone scoring); by
  default "seki" under territory scoring and "none" under area scoring. friendly_pass is KataGo's friendlyPassOk:
  after two passes the dead stones come off the board before the count; without it, under area scoring
  (Tromp-Taylor), the board is counted as it stands, so a player captures dead stones before passing.
- seki stones: the living chains beside a seki point, an empty point next to living stones of both colours where
  either colour's stone would leave its chain a single liberty without capturing (so neither plays there);
  dead stones are off the board for this. Unfilled dame next to chains with liberties to spare is no seki.
- counted region: an empty region (after removing dead stones) bordered by one colour only, and under tax "seki"
  or "all" by no seki stones: its points are that colour's territory.
- position key: what superko compares: the board's stones hash, plus who is to move under situational superko.
- setup stones: stones put on the board outside the move sequence (handicap, SGF AB/AW). They are not moves:
  undo never goes back past them.
- score: Black's points minus White's points, komi and handicap bonus included; positive means Black leads.
- dead stones: a set of points whose stones the players agree are captured; scoring removes them first.
- handicap layout: GTP's fixed points (fixed_handicap_points), or for other counts and boards points spread far
  apart (free_handicap_points); place_handicap puts them on the board as setup stones.
- diagram: the board as text for people (showboard), X black, O white, the last move in parentheses.
- KataGo's rules form: Rules.to_katago / Rules.from_katago, the JSON object of kata-get-rules / kata-set-rules.

A GameState owns its board and plays on it in place; copy() copies it (what the search does once per descent).
play_unchecked and illegal_reason hand their work to a compiled twin (_rules_core.c) where it is built:
IMPLEMENTATIONS (native.py) holds both, PLAY_UNCHECKED, PLAY_LINE, ILLEGAL_REASON and COPY below are the chosen
one's; the *_python functions are the reference it is tested against.
Undo replays the moves since the last setup stones from a saved board: it costs a fraction of a millisecond on a
full 19x19 game and keeps play itself as cheap as the board's own play.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np

from gtp_engine import native
from gtp_engine.board import BLACK, EMPTY, WHITE, Board, IllegalMoveError, opponent
from gtp_engine.coords import GTP_COLUMNS, PASS, Grid, to_gtp

SCORINGS = ("area", "territory")
KO_RULES = ("positional", "situational", "simple")
HANDICAP_BONUSES = ("0", "N", "N-1")
TAXES = ("none", "seki", "all")

# Distinguishes "white to move" in situational superko keys.
_WHITE_TO_MOVE_KEY = 0x5D3A_9F1B_2C47_E681


@dataclass(frozen=True)
class Rules:
    scoring: str = "area"
    ko: str = "positional"
    suicide_allowed: bool = False
    white_handicap_bonus: str = "N"
    name: str = "chinese"
    tax: str | None = None  # None: the scoring's default (see the module docstring)
    friendly_pass: bool = True  # KataGo's friendlyPassOk; False: the board is counted as it stands

    def __post_init__(self) -> None:
        if self.scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {self.scoring!r}; expected one of {SCORINGS}")
        if self.ko not in KO_RULES:
            raise ValueError(f"unknown ko rule {self.ko!r}; expected one of {KO_RULES}")
        if self.white_handicap_bonus not in HANDICAP_BONUSES:
            raise ValueError(f"unknown handicap bonus {self.white_handicap_bonus!r}")
        if self.tax is None:
            object.__setattr__(self, "tax", "seki" if self.scoring == "territory" else "none")
        if self.scoring == "territory":  # dead stones always come off under territory scoring
            object.__setattr__(self, "friendly_pass", True)
        if self.tax not in TAXES:
            raise ValueError(f"unknown tax {self.tax!r}; expected one of {TAXES}")

    @property
    def counts_the_board_as_it_stands(self) -> bool:
        """Whether the count takes no dead stones off: area scoring without a friendly pass (Tromp-Taylor)."""
        return self.scoring == "area" and not self.friendly_pass

    def default_komi(self, handicap_stones: int = 0) -> float:
        """The komi of a game under these rules where none is given: 0.5 with handicap stones (under area scoring
        White's compensation for them is then white_handicap_bonus: Chinese N, AGA N-1), else KOMI under area
        scoring and a point less under territory scoring (Japanese and Korean 6.5)."""
        if handicap_stones >= 2:
            return HANDICAP_KOMI
        return KOMI - 1 if self.scoring == "territory" else KOMI

    @staticmethod
    def named(name: str) -> "Rules":
        key = name.strip().lower().replace("_", "-")
        key = _RULE_ALIASES.get(key, key)
        if key not in RULE_SETS:
            raise ValueError(f"unknown rules {name!r}; known: {', '.join(sorted(RULE_SETS))}")
        return RULE_SETS[key]

    # ---- KataGo's JSON form (kata-get-rules, kata-set-rules, the analysis engine's "rules") ----------------

    def to_katago(self) -> dict:
        """The rules as KataGo writes them: {"ko": "POSITIONAL", "scoring": "AREA", ...}."""
        return {"ko": self.ko.upper(), "scoring": self.scoring.upper(), "suicide": self.suicide_allowed,
                "tax": self.tax.upper(), "hasButton": False, "whiteHandicapBonus": self.white_handicap_bonus,
                "friendlyPassOk": self.friendly_pass}

    @staticmethod
    def from_katago(value: str | dict) -> "Rules":
        """The rules of a KataGo rule set name or rules object (a dict or its JSON text), exactly; raises
        ValueError for rules this engine cannot play, or plays only approximately (nearest_katago says how)."""
        rules, approximations = Rules.nearest_katago(value)
        if approximations:
            raise ValueError("; ".join(approximations))
        return rules

    @staticmethod
    def nearest_katago(value: str | dict) -> tuple["Rules", list[str]]:
        """What this engine plays for a KataGo rule set name or rules object, and where that differs from it (a
        message per difference: the button, Spight's ko rule); raises ValueError for a name or a field KataGo
        does not know either, or a value it would refuse, naming the field."""
        if isinstance(value, str):
            text = value.strip()
            if not text.startswith("{"):
                key = re.sub(r"[\s_]+", "-", text.lower())
                if key in _KATAGO_APPROXIMATE:
                    rules, difference = _KATAGO_APPROXIMATE[key]
                    return rules, [f"{text}: {difference}"]
                return Rules.named(_KATAGO_NAMES.get(key.replace("-", ""), key)), []
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"not JSON: {error}") from None
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        fields = {"scoring": "area", "ko": "positional", "suicide_allowed": True, "white_handicap_bonus": "0",
                  "friendly_pass": False}
        tax, approximations = None, []  # KataGo's defaults for an object: Tromp-Taylor's, the scoring's tax
        for key, item in value.items():
            if key == "ko" and isinstance(item, str) and item.upper() == "SPIGHT":
                fields["ko"] = "situational"
                approximations.append("ko SPIGHT: played as situational superko")
            elif key == "ko" and isinstance(item, str):
                fields["ko"] = item.lower()
            elif key in ("scoring", "score") and isinstance(item, str):
                fields["scoring"] = item.lower()
            elif key in ("suicide", "multiStoneSuicideLegal") and isinstance(item, bool):
                fields["suicide_allowed"] = item
            elif key == "whiteHandicapBonus" and isinstance(item, str):
                fields["white_handicap_bonus"] = item.upper()
            elif key == "tax" and isinstance(item, str) and item.lower() in TAXES:
                tax = item.lower()
            elif key == "hasButton" and isinstance(item, bool):
                if item:
                    approximations.append("hasButton: the button is not played; scored without it")
            elif key == "friendlyPassOk" and isinstance(item, bool):
                fields["friendly_pass"] = item
            else:
                raise ValueError(f"unsupported rule {key}={item!r}")
        try:
            exact = Rules(**fields, name="custom", tax=tax)
        except ValueError as error:
            raise ValueError(f"unsupported rule: {error}") from None
        named = [name for name, rules in RULE_SETS.items() if rules.same_play(exact)]
        return (RULE_SETS[named[0]] if named else exact), approximations

    def same_play(self, other: "Rules") -> bool:
        """Whether the two rules are the same rules, whatever their names."""
        return (self.scoring, self.ko, self.suicide_allowed, self.white_handicap_bonus, self.tax,
                self.friendly_pass) == (other.scoring, other.ko, other.suicide_allowed, other.white_handicap_bonus,
                                        other.tax, other.friendly_pass)


RULE_SETS = {
    "chinese": Rules(),
    "tromp-taylor": Rules("area", "positional", True, "0", "tromp-taylor", friendly_pass=False),
    "aga": Rules("area", "situational", False, "N-1", "aga"),
    "new-zealand": Rules("area", "situational", True, "0", "new-zealand"),
    "japanese": Rules("territory", "simple", False, "0", "japanese"),
    "korean": Rules("territory", "simple", False, "0", "korean"),
    "stone-scoring": Rules("area", "simple", False, "0", "stone-scoring", "all"),
    "ancient-territory": Rules("territory", "simple", False, "0", "ancient-territory", "all"),
}
_RULE_ALIASES = {"cn": "chinese", "jp": "japanese", "tt": "tromp-taylor", "nz": "new-zealand", "ko": "korean"}
# KataGo's rule set names (spaces, underscores and hyphens dropped) that are one of RULE_SETS here.
_KATAGO_NAMES = {"chineseogs": "chinese", "chinesekgs": "chinese", "newzealand": "new-zealand",
                 "tromptaylor": "tromp-taylor", "bga": "aga", "french": "aga", "goe": "tromp-taylor",
                 "ing": "tromp-taylor", "stonescoring": "stone-scoring", "ancientarea": "stone-scoring",
                 "ancientterritory": "ancient-territory"}
# KataGo's rule sets this engine plays only approximately: the nearest rules, and what differs.
_KATAGO_APPROXIMATE = {
    **dict.fromkeys(("aga-button", "agabutton"), (
        RULE_SETS["aga"], "the button is not played; scored as aga")),
}


class _UndoStart(NamedTuple):
    """Where undo replays from: the state right after the last setup stones (the board in it is never mutated)."""

    board: Board
    to_play: int
    consecutive_passes: int
    max_stones: tuple[int, int, int]
    moves: int  # len(GameState.moves) then
    history: int  # len(GameState._history) then


# The komi of every game, match and training run unless one is given: Chinese rules' 7.5, which also makes draws
# impossible under area scoring. Rules.default_komi gives it a point less under territory scoring.
KOMI = 7.5
HANDICAP_KOMI = 0.5  # a handicap game's komi under every rule set (Rules.default_komi)


class GameState:
    def __init__(self, width: int = 19, height: int | None = None, komi: float = KOMI, rules: Rules = Rules()):
        self.board = Board(width, height)
        self.grid: Grid = self.board.grid
        self.komi = float(komi)
        self._rules = rules
        # What a position key adds to the stones hash when White is to move: non-zero only under situational superko.
        self._white_key = _WHITE_TO_MOVE_KEY if rules.ko == "situational" else 0
        self.to_play = BLACK
        self.moves: list[tuple[int, int]] = []
        self.setup: list[tuple[int, int]] = []
        self.handicap_stones = 0
        self.consecutive_passes = 0
        self._history: list[int] = [self._key(self.board.hash, BLACK)]
        # Most stones of each colour ever on the board in this line, indexed by colour. A move that is not a suicide
        # adds exactly one stone of its colour, so it can only repeat an earlier board if that colour once had more
        # stones than now: most positions need no superko check at all.
        self._max_stones: list[int] = [0, 0, 0]
        self._mark_start()

    @property
    def rules(self) -> Rules:
        """The rule set, fixed for the life of the game (the superko history is keyed under it)."""
        return self._rules

    @property
    def width(self) -> int:
        return self.grid.width

    @property
    def height(self) -> int:
        return self.grid.height

    @property
    def move_number(self) -> int:
        return len(self.moves)

    @property
    def is_over(self) -> bool:
        return self.consecutive_passes >= 2

    def copy(self) -> "GameState":
        other = GameState.__new__(GameState)
        other.__dict__.update(self.__dict__)
        other.board = self.board.copy()
        other.moves = self.moves[:]
        other.setup = self.setup[:]
        other._history = self._history[:]
        other._max_stones = self._max_stones[:]
        return other

    def last_moves(self, n: int) -> list[tuple[int, int]]:
        return self.moves[-n:] if n > 0 else []

    # ---- legality -------------------------------------------------------------------------------------

    def _key(self, stones_hash: int, to_play: int) -> int:
        return stones_hash ^ self._white_key if to_play == WHITE else stones_hash

    def illegal_reason(self, point: int, color: int | None = None) -> str | None:
        """None when color (default: the side to move) may play point, else why not: occupied, ko, suicide or
        superko."""
        return ILLEGAL_REASON(self, point, color)

    def _illegal_reason_python(self, point: int, color: int | None = None) -> str | None:
        color = self.to_play if color is None else color
        board = self.board
        rules = self._rules
        reason = board.illegal_reason(point, color, rules.suicide_allowed)
        if reason is not None or point == PASS or rules.ko == "simple":
            return reason
        if not self._superko_possible(color):
            return None
        if self._key(board.hash_after(point, color), opponent(color)) in self._history:
            return "superko"
        return None

    def _superko_possible(self, color: int) -> bool:
        """Whether any move by color could repeat an earlier board (see _max_stones); a suicide always could."""
        return self._rules.suicide_allowed or self.board.stone_count[color] + 1 <= self._max_stones[color]

    def is_legal(self, point: int, color: int | None = None) -> bool:
        return self.illegal_reason(point, color) is None

    def legal_mask(self) -> np.ndarray:
        """Legal moves for the side to move in flat order, pass last and always legal."""
        color, board = self.to_play, self.board
        mask = np.empty(self.grid.area + 1, dtype=bool)
        mask[-1] = True
        if self.rules.ko == "simple" or not self._superko_possible(color):
            mask[:-1] = board.legal_mask(color, self.rules.suicide_allowed)
            return mask
        legal, removes_stones = board.move_masks(color, self.rules.suicide_allowed)
        mask[:-1] = legal
        self._mask_superko(mask, legal, removes_stones, color)
        return mask

    def _mask_superko(self, mask: np.ndarray, legal: np.ndarray, removes_stones: np.ndarray, color: int) -> None:
        board, g = self.board, self.grid
        next_to_play = opponent(color)
        removals = np.flatnonzero(removes_stones).tolist()
        if removals:
            history_set = set(self._history)
            for flat in removals:
                if self._key(board.hash_after(g.points[flat], color), next_to_play) in history_set:
                    mask[flat] = False
        # The rest add one stone and remove none, so each changes the hash by its own key: test them at once.
        simple_flat = np.flatnonzero(legal & ~removes_stones)
        keys = np.uint64(self._key(board.hash, next_to_play)) ^ _zobrist_flat(board, color)[simple_flat]
        mask[simple_flat[np.isin(keys, np.array(self._history, dtype=np.uint64))]] = False

    # ---- moves ----------------------------------------------------------------------------------------

    def play(self, point: int, color: int | None = None) -> None:
        """Plays a checked move for color (default: the side to move); raises IllegalMoveError."""
        color = self.to_play if color is None else color
        reason = self.illegal_reason(point, color)
        if reason is not None:
            raise IllegalMoveError(reason, f"{'black' if color == BLACK else 'white'} "
                                           f"{to_gtp(self.grid, point)} is illegal: {reason}")
        self.play_unchecked(point, color)
        self._count_played_handicap()

    def _count_played_handicap(self) -> None:
        """Black stones played one after another on an empty board, two or more, are handicap stones: controllers
        that send the handicap as plays (Sabaki, some gtp2ogs set-ups) mean it so, and White gets its bonus."""
        if self.setup:
            return  # placed handicap stones, or a set-up position, count as placed
        leading = 0
        for color, point in self.moves:
            if color != BLACK or point == PASS:
                break
            leading += 1
        self.handicap_stones = leading if leading >= 2 else 0

    def play_unchecked(self, point: int, color: int | None = None) -> None:
        """Plays a move the caller knows is legal (the search) for color (default: the side to move)."""
        PLAY_UNCHECKED(self, point, color)

    def _play_unchecked_python(self, point: int, color: int | None = None) -> None:
        # The search's inner loop (several times per visit): _key and _note_stone_counts are written out here.
        if color is None:
            color = self.to_play
        board = self.board
        board.play_unchecked(point, color)
        self.moves.append((color, point))
        if point == PASS:
            self.consecutive_passes += 1
        else:
            self.consecutive_passes = 0
            stones, most = board.stone_count[color], self._max_stones
            if stones > most[color]:
                most[color] = stones
        if color == BLACK:
            self.to_play = WHITE
            self._history.append(board.hash ^ self._white_key)
        else:
            self.to_play = BLACK
            self._history.append(board.hash)

    def undo(self) -> None:
        """Takes back the last move (a pass too). Raises IndexError("cannot undo") at the start or at setup stones."""
        if not self.can_undo:
            raise IndexError("cannot undo")
        start = self._start
        replay = self.moves[start.moves:-1]
        self.board = start.board.copy()
        self.to_play = start.to_play
        self.consecutive_passes = start.consecutive_passes
        self._max_stones = list(start.max_stones)
        del self.moves[start.moves:]
        del self._history[start.history:]
        for color, point in replay:
            self.play_unchecked(point, color)
        self._count_played_handicap()

    @property
    def can_undo(self) -> bool:
        return len(self.moves) > self._start.moves

    def place_setup(self, color: int, points: Iterable[int]) -> None:
        """Puts setup stones on the board. Undo stops here: the moves before become history that cannot be undone.
        Where no move was played since the game's start or the last setup, the position before never happened (a
        record's black stones before its white ones, the empty board under them): the new one takes its place in
        the superko history."""
        board = self.board.copy()  # a refused stone leaves the game as it was
        placed = list(points)
        for point in placed:
            board.place_stone(point, color)
        self.board = board
        self.setup.extend((color, point) for point in placed)
        key = self._key(board.hash, self.to_play)
        if len(self.moves) == self._start.moves and len(self._history) == self._start.history:
            self._history[-1] = key
        else:
            self._history.append(key)
        self._note_stone_counts()
        self._mark_start()

    def _note_stone_counts(self) -> None:
        counts, most = self.board.stone_count, self._max_stones
        for color in (BLACK, WHITE):
            most[color] = max(most[color], counts[color])

    def _mark_start(self) -> None:
        self._start = _UndoStart(self.board.copy(), self.to_play, self.consecutive_passes, tuple(self._max_stones),
                                 len(self.moves), len(self._history))

    def with_to_play(self, color: int) -> "GameState":
        """A copy of this position with `color` to move (GTP may ask either colour for a move or an analysis)."""
        state = self.copy()
        if color != state.to_play:
            state.set_to_play(color)
        return state

    def set_to_play(self, color: int) -> None:
        """Says who moves next outside the move sequence (SGF PL, a setup position); undo stops here like at setup."""
        self.to_play = color
        self._history[-1] = self._key(self.board.hash, color)
        self._mark_start()

    def place_handicap(self, points: Sequence[int]) -> None:
        """Black's handicap stones on an empty board; White moves next."""
        if self.moves or self.board.stone_count[BLACK] + self.board.stone_count[WHITE]:
            raise ValueError("board not empty")
        if len(set(points)) != len(points) or PASS in points:
            raise ValueError("bad vertex list")
        self.place_setup(BLACK, points)
        self.handicap_stones = len(points)
        self.set_to_play(WHITE)

    # ---- scoring --------------------------------------------------------------------------------------

    def area_ownership(self, dead: Iterable[int] = ()) -> np.ndarray:
        """Tromp-Taylor ownership in flat order after removing dead stones: +1 Black, -1 White, 0 neither."""
        colors = self._colors_without(dead)
        g = self.grid
        owner = np.zeros(g.area, dtype=np.int8)
        for flat, p in enumerate(g.points):
            c = colors[p]
            if c == BLACK:
                owner[flat] = 1
            elif c == WHITE:
                owner[flat] = -1
        for region, borders in _empty_regions(g, colors):
            if borders == {BLACK}:
                owner[g.flat_of[region]] = 1
            elif borders == {WHITE}:
                owner[g.flat_of[region]] = -1
        return owner

    def area_score(self, dead: Iterable[int] = ()) -> float:
        """Stones plus counted regions (under tax "all" less two points a region), komi and handicap bonus
        included; with tax "none", Tromp-Taylor's count of area_ownership."""
        dead = set(dead)
        colors = self._colors_without(dead)
        stones = {color: sum(1 for p in self.grid.points if colors[p] == color) for color in (BLACK, WHITE)}
        points = self._counted_points(colors, dead)
        return float(stones[BLACK] + points[BLACK] - stones[WHITE] - points[WHITE]) - self.komi - \
            self._handicap_bonus()

    def territory_score(self, dead: Iterable[int] = ()) -> float:
        """Japanese-style count: counted regions (under tax "all" less two points a region) plus prisoners
        (captures and dead stones)."""
        dead = set(dead)
        colors = self._colors_without(dead)
        territory = self._counted_points(colors, dead)
        board = self.board
        dead_black = sum(1 for p in dead if board.colors[p] == BLACK)
        dead_white = sum(1 for p in dead if board.colors[p] == WHITE)
        black = territory[BLACK] + board.captures[BLACK] + dead_white
        white = territory[WHITE] + board.captures[WHITE] + dead_black
        return float(black - white) - self.komi

    def score(self, dead: Iterable[int] = ()) -> float:
        """The count per the rules, without the `dead` stones where the rules take dead stones off (friendly
        pass); Tromp-Taylor counts every stone as it stands."""
        dead = () if self.rules.counts_the_board_as_it_stands else dead
        return self.area_score(dead) if self.rules.scoring == "area" else self.territory_score(dead)

    def seki_stones(self, dead: Iterable[int] = ()) -> set[int]:
        """The points of the seki stones (see the module docstring) with `dead` off the board."""
        return _seki_stones(self.grid, self._colors_without(dead))

    def _counted_points(self, colors: bytearray, dead: set[int]) -> dict[int, int]:
        """Each colour's points of counted regions, less the tax on them, on the board `colors`."""
        g, tax = self.grid, self.rules.tax
        regions = _empty_regions(g, colors)
        seki = _seki_stones(g, colors, regions) if tax != "none" else set()
        points = {BLACK: 0, WHITE: 0}
        for region, borders in regions:
            if len(borders) != 1:
                continue
            if seki and any(n in seki for p in region for n in g.neighbors[p]):
                continue
            points[next(iter(borders))] += len(region) - (2 if tax == "all" else 0)
        return points

    def _handicap_bonus(self) -> float:
        n, bonus = self.handicap_stones, self.rules.white_handicap_bonus
        if n == 0 or bonus == "0":
            return 0.0
        return float(n if bonus == "N" else n - 1)

    def _colors_without(self, dead: Iterable[int]) -> bytearray:
        colors = self.board.colors[:]
        for p in dead:
            if colors[p] in (BLACK, WHITE):
                colors[p] = EMPTY
        return colors


def _play_line_python(state: GameState, points: Sequence[int]) -> None:
    for point in points:
        state._play_unchecked_python(point)


class GameFunctions(NamedTuple):
    """GameState.play_unchecked and .illegal_reason as plain functions of (state, point[, color]), play_line(state,
    points), play_unchecked of each point in turn, and copy(state), GameState.copy: what the search's descent calls
    without a method's frame."""

    play_unchecked: Callable[..., None]
    play_line: Callable[[GameState, Sequence[int]], None]
    illegal_reason: Callable[..., str | None]
    copy: Callable[[GameState], GameState]


IMPLEMENTATIONS = native.implementations(
    "_rules_core", GameFunctions(GameState._play_unchecked_python, _play_line_python,
                                 GameState._illegal_reason_python, GameState.copy),
    lambda twin: GameFunctions(twin.game_play, twin.game_play_line, twin.game_illegal_reason, twin.game_copy))
# The chosen ones, bound once (native.py): GameState's methods and GAME_STATES (position.py) call them.
PLAY_UNCHECKED = IMPLEMENTATIONS.chosen.play_unchecked
PLAY_LINE = IMPLEMENTATIONS.chosen.play_line
ILLEGAL_REASON = IMPLEMENTATIONS.chosen.illegal_reason
COPY = IMPLEMENTATIONS.chosen.copy

_zobrist_flat_cache: dict[tuple[Grid, int], np.ndarray] = {}


def _zobrist_flat(board: Board, color: int) -> np.ndarray:
    """The board's Zobrist keys for color as uint64, in flat order."""
    key = (board.grid, color)
    keys = _zobrist_flat_cache.get(key)
    if keys is None:
        table = board._zobrist[color]
        keys = np.array([table[p] for p in board.grid.points], dtype=np.uint64)
        _zobrist_flat_cache[key] = keys
    return keys


def _empty_regions(g: Grid, colors: bytearray) -> list[tuple[list[int], set[int]]]:
    """Each maximal connected set of empty points with the set of colours it touches."""
    seen = bytearray(g.array_size)
    neighbors = g.neighbors
    regions = []
    for start in g.points:
        if colors[start] != EMPTY or seen[start]:
            continue
        seen[start] = 1
        region, borders, stack = [], set(), [start]
        while stack:
            p = stack.pop()
            region.append(p)
            for n in neighbors[p]:
                c = colors[n]
                if c == EMPTY:
                    if not seen[n]:
                        seen[n] = 1
                        stack.append(n)
                elif c == BLACK or c == WHITE:
                    borders.add(c)
        regions.append((region, borders))
    return regions


def _seki_stones(g: Grid, colors: bytearray, regions: list[tuple[list[int], set[int]]] | None = None) -> set[int]:
    """The seki stones of the board `colors` (see the module docstring); regions: its _empty_regions, where the
    caller has them. Only points of regions touching both colours can be seki points: chains are traced from them."""
    neighbors = g.neighbors
    chain_of: dict[int, int] = {}
    chains: list[tuple[list[int], set[int]]] = []  # (stones, liberties)

    def chain(start: int) -> int:
        index = chain_of.get(start)
        if index is not None:
            return index
        index, color = len(chains), colors[start]
        stones, liberties, stack = [], set(), [start]
        chain_of[start] = index
        while stack:
            p = stack.pop()
            stones.append(p)
            for n in neighbors[p]:
                if colors[n] == EMPTY:
                    liberties.add(n)
                elif colors[n] == color and n not in chain_of:
                    chain_of[n] = index
                    stack.append(n)
        chains.append((stones, liberties))
        return index

    seki: set[int] = set()
    for region, borders in regions if regions is not None else _empty_regions(g, colors):
        if len(borders) < 2:
            continue
        for point in region:
            beside = {color: {chain(n) for n in neighbors[point] if colors[n] == color} for color in (BLACK, WHITE)}
            if beside[BLACK] and beside[WHITE] and all(
                    _self_atari(point, beside[color], beside[opponent(color)], chains, colors, g)
                    for color in (BLACK, WHITE)):
                for index in beside[BLACK] | beside[WHITE]:
                    seki.update(chains[index][0])
    return seki


def _self_atari(point: int, own: set[int], enemy: set[int], chains: list[tuple[list[int], set[int]]],
                colors: bytearray, g: Grid) -> bool:
    """Whether a stone at the empty `point` beside the chains `own` and `enemy` (indices into chains) captures
    nothing and leaves its chain one liberty or none."""
    if any(chains[index][1] == {point} for index in enemy):
        return False
    liberties = {n for n in g.neighbors[point] if colors[n] == EMPTY}
    for index in own:
        liberties |= chains[index][1]
    liberties.discard(point)
    return len(liberties) <= 1


def fixed_handicap_points(g: Grid, count: int) -> list[int]:
    """GTP's fixed handicap layout (spec 4.1.1). Raises ValueError("invalid number of stones") where undefined."""
    size = g.width
    if g.width != g.height or size < 7:
        raise ValueError("invalid number of stones")
    limit = 9 if size % 2 == 1 and size >= 9 else 4
    if not 2 <= count <= limit:
        raise ValueError("invalid number of stones")
    edge = 2 if size <= 12 else 3
    near, far, mid = edge, size - 1 - edge, size // 2
    # (row, col) with row 0 at the top: D4 is the lower left, Q16 the upper right.
    lower_left, upper_right = (far, near), (near, far)
    upper_left, lower_right = (near, near), (far, far)
    left, right, bottom, top, center = (mid, near), (mid, far), (far, mid), (near, mid), (mid, mid)
    corners = [lower_left, upper_right, upper_left, lower_right]
    layouts = {
        2: corners[:2],
        3: corners[:3],
        4: corners,
        5: corners + [center],
        6: corners + [left, right],
        7: corners + [left, right, center],
        8: corners + [left, right, bottom, top],
        9: corners + [left, right, bottom, top, center],
    }
    return [g.point(row, col) for row, col in layouts[count]]


def free_handicap_points(g: Grid, count: int) -> list[int]:
    """The engine's choice of `count` handicap points: the fixed layout where GTP defines one, otherwise points
    far from each other (spread_points). Raises ValueError("invalid number of stones") outside 2 .. area - 1."""
    if not 2 <= count < g.area:
        raise ValueError("invalid number of stones")
    try:
        return fixed_handicap_points(g, count)
    except ValueError:
        return spread_points(g, count)


def spread_points(g: Grid, count: int) -> list[int]:
    """count points far from each other, for handicaps GTP gives no layout for: each next point is the one farthest
    from those already chosen, points on the first two lines only once the others are used up."""
    rows, cols = np.divmod(np.arange(g.area), g.width)
    edge = np.minimum.reduce([rows, cols, g.height - 1 - rows, g.width - 1 - cols])
    margin = 2 if min(g.width, g.height) >= 7 else 0
    distance = np.full(g.area, 1e6)  # to the nearest chosen point
    chosen: list[int] = []
    for _ in range(count):
        score = np.where(edge >= margin, distance, distance - 1e3)
        score[chosen] = -np.inf
        flat = int(np.argmax(score))
        chosen.append(flat)
        distance = np.minimum(distance, np.hypot(rows - rows[flat], cols - cols[flat]))
    return [g.from_flat(i) for i in chosen]


def diagram(game: GameState) -> str:
    """The board with coordinates (X black, O white, the last move in parentheses) and status lines."""
    g, board = game.grid, game.board
    letters = "   " + " ".join(GTP_COLUMNS[:g.width])
    last = game.moves[-1][1] if game.moves else PASS
    lines = [letters]
    for row in range(g.height):
        cells = [{BLACK: "X", WHITE: "O"}.get(board.colors[g.point(row, col)], ".") for col in range(g.width)]
        separators = [" "] * (g.width + 1)
        if last != PASS and g.row_col(last)[0] == row:
            col = g.row_col(last)[1]
            separators[col], separators[col + 1] = "(", ")"
        number = g.height - row
        lines.append(f"{number:2d}" + "".join(map(str.__add__, separators, cells)) + separators[-1] + f"{number:2d}")
    lines.append(letters)
    to_play = "Black" if game.to_play == BLACK else "White"
    lines.append(f"captured: Black (X) {board.captures[BLACK]}, White (O) {board.captures[WHITE]}; "
                 f"komi {game.komi:g}; {game.rules.name} rules; move {game.move_number}; {to_play} to play")
    if game.moves:
        color, point = game.moves[-1]
        lines.append(f"last move: {'B' if color == BLACK else 'W'} {to_gtp(g, point)}")
    return "\n".join(lines)


def format_result(score: float) -> str:
    """GTP/SGF result text for a score from Black's view: B+3.5, W+0.5 or 0 for a draw."""
    if score == 0:
        return "0"
    winner = "B" if score > 0 else "W"
    margin = abs(score)
    text = f"{margin:.1f}" if margin != int(margin) else str(int(margin))
    return f"{winner}+{text}"

