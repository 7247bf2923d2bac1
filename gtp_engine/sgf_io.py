"""SGF game records: reading one game from SGF bytes and writing a game back, through sgfmill.

Terms:
- record: a GameRecord, what one SGF game says about a game: board size, komi, rules (a rule set's name, or
  KataGo's JSON rules for others, as RU is written), handicap, setup stones, the moves of the main line, result
  and players. It is plain data; GameRecord.to_game
  replays it into a GameState, which is where legality is checked.
- main line: from the root, the first child at every node (OGS files nest every move in its own variation).
- setup stones: AB / AW / AE in the root and in the nodes before the first move, applied in order.
  Setup after the first move is rejected: a GameState holds setup only before its moves.
- source: the name of the data (usually the file name), repeated in every error message.
- read_sgf_files: the .sgf files of a folder or an archive as (name, bytes), for tools and training ingest.

Decoding: the bytes are decoded to text before they are parsed, because multi-byte charsets (Shift_JIS,
GBK) use the byte values of '\\' and ']' inside characters. Order: a byte-order mark; UTF-16 without one
(NUL bytes); the CA property; without CA, UTF-8 and then ISO-8859-1, the SGF default. Text that does not
decode in its declared charset is tried as UTF-8 (a common mislabel) and otherwise decoded with
replacement characters, since only names and comments are affected.

sgfmill's Sgf_game knows square boards only, so this module uses sgfmill's grammar layer (parsing, text
unescaping, serialising) and reads points with coords.from_sgf, which gives rectangular boards
(SZ[columns:rows]) too.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import logging
import math
import re
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Iterator

from sgfmill import sgf_grammar

import gtp_engine
from gtp_engine import coords
from gtp_engine.board import BLACK, WHITE, IllegalMoveError
from gtp_engine.game import RULE_SETS, GameState, Rules

log = logging.getLogger(__name__)

_COLOR_OF = {"B": BLACK, "W": WHITE}
_LETTER_OF = {BLACK: "B", WHITE: "W"}
_BOMS = (  # UTF-32 first: its little-endian BOM starts with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_CHARSET_RE = re.compile(rb"(?<![A-Za-z])CA\s*\[\s*([^\]]*?)\s*\]")
_SETUP = ("AB", "AW", "AE")
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")


class SgfError(ValueError):
    """Input that cannot be read as one Go game. reason is a short category (for counting), detail the rest."""

    def __init__(self, source: str, reason: str, detail: str = ""):
        self.source = source
        self.reason = reason
        self.detail = detail
        super().__init__(f"{source}: {reason}" + (f": {detail}" if detail else ""))


@dataclasses.dataclass
class GameRecord:
    """One game as an SGF file states it. Points are coords points of grid(width, height)."""

    width: int
    height: int
    komi: float | None = None  # None: no KM property
    rules: str | None = None  # the RU text as written
    handicap: int = 0  # HA, 0 when absent
    setup: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (color, point)
    first_player: int | None = None  # PL before the first move
    moves: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (color, point), PASS allowed
    result: str | None = None
    black: str | None = None
    white: str | None = None
    black_rank: str | None = None
    white_rank: str | None = None
    source: str = "<sgf>"

    @property
    def grid(self) -> coords.Grid:
        return coords.grid(self.width, self.height)

    @classmethod
    def from_game(
        cls,
        game: GameState,
        *,
        black: str | None = None,
        white: str | None = None,
        black_rank: str | None = None,
        white_rank: str | None = None,
        result: str | None = None,
    ) -> GameRecord:
        return cls(
            width=game.grid.width,
            height=game.grid.height,
            komi=game.komi,
            rules=game.rules.name if game.rules.name in RULE_SETS else json.dumps(game.rules.to_katago(),
                                                                                  separators=(",", ":")),
            handicap=game.handicap_stones,
            setup=list(game.setup),
            first_player=None if game.moves else game.to_play,
            moves=list(game.moves),
            result=result,
            black=black,
            white=white,
            black_rank=black_rank,
            white_rank=white_rank,
        )

    def game_rules(self) -> Rules:
        """The rules RU names (a rule set name, KataGo's too, or KataGo's JSON rules: the nearest this engine
        plays, Rules.nearest_katago), else the default rules."""
        if self.rules:
            try:
                return Rules.nearest_katago(self.rules)[0]
            except ValueError:
                pass
        return Rules()

    def to_game(self, rules: Rules | None = None, max_moves: int | None = None) -> GameState:
        """Replays the record with legality checks (rules from RU unless given); stops after max_moves moves. The
        komi is KM's, or without KM the rules' default for the game's handicap (Rules.default_komi).

        Raises SgfError for setup stones without liberties and for an illegal move (its number and reason).
        """
        rules = rules or self.game_rules()
        game = GameState(self.width, self.height, komi=0.0 if self.komi is None else self.komi, rules=rules)
        self._place_setup(game)
        if self.komi is None:
            game.komi = rules.default_komi(game.handicap_stones)
        g = self.grid
        for number, (color, point) in enumerate(self.moves[:max_moves], start=1):
            try:
                game.play(point, color)
            except IllegalMoveError as e:
                move = f"{_LETTER_OF[color]} {coords.to_gtp(g, point)}"
                raise SgfError(self.source, f"illegal move ({e.reason})", f"move {number} {move}: {e}") from None
        return game

    def _place_setup(self, game: GameState) -> None:
        black = [p for c, p in self.setup if c == BLACK]
        white = [p for c, p in self.setup if c == WHITE]
        try:
            if self.handicap >= 2 and len(black) == self.handicap and not white:
                game.place_handicap(black)
            else:
                for color, points in ((BLACK, black), (WHITE, white)):
                    if points:
                        game.place_setup(color, points)
        except ValueError as e:  # Board.place_stone refuses a chain without liberties
            raise SgfError(self.source, "illegal setup", str(e)) from None
        # Who moves first: the recorded first move when there is one (it overrides PL), else PL.
        first = self.moves[0][0] if self.moves else self.first_player
        if first is not None and first != game.to_play:
            game.set_to_play(first)

    def to_sgf(self) -> bytes:
        """The record as UTF-8 SGF: game information in the root, setup there too, one node per move."""
        g = self.grid
        size = str(self.width) if self.width == self.height else f"{self.width}:{self.height}"
        root: dict[str, list[bytes]] = {
            "FF": [b"4"],
            "GM": [b"1"],
            "CA": [b"UTF-8"],
            "AP": [f"gtp_engine:{gtp_engine.__version__}".encode()],
            "SZ": [size.encode()],
        }
        if self.komi is not None:
            komi = int(self.komi) if self.komi.is_integer() else self.komi  # 7.5 and 6, exactly
            root["KM"] = [str(komi).encode()]
        if self.handicap:
            root["HA"] = [str(self.handicap).encode()]
        for ident, text in (
            ("RU", self.rules),
            ("RE", self.result),
            ("PB", self.black),
            ("PW", self.white),
            ("BR", self.black_rank),
            ("WR", self.white_rank),
        ):
            if text:
                root[ident] = [sgf_grammar.escape_text(text.encode("utf-8"))]
        for color, ident in ((BLACK, "AB"), (WHITE, "AW")):
            points = [coords.to_sgf(g, p).encode() for c, p in self.setup if c == color]
            if points:
                root[ident] = points
        if self.first_player is not None:
            root["PL"] = [_LETTER_OF[self.first_player].encode()]
        tree = sgf_grammar.Coarse_game_tree()
        tree.sequence = [root] + [
            {_LETTER_OF[color]: [coords.to_sgf(g, point).encode()]} for color, point in self.moves
        ]
        return sgf_grammar.serialise_game_tree(tree)


def save_sgf(game: GameState, **info: str | None) -> bytes:
    """SGF bytes for a game; info: black, white, black_rank, white_rank, result (see GameRecord.from_game)."""
    return GameRecord.from_game(game, **info).to_sgf()


def load_sgf_file(path: str | Path) -> GameRecord:
    """Reads the first game of an SGF file. OSError propagates; bad content raises SgfError."""
    return load_sgf(Path(path).read_bytes(), source=str(path))


def read_sgf_files(path: str | Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every .sgf file in a folder (recursively), a tar archive (.tar, .tar.gz, .tgz, .tar.xz,
    .tar.bz2) or a .zip, or of one file. Archives are read as a stream, never unpacked to disk."""
    path = Path(path)
    name = path.name.lower()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.suffix.lower() == ".sgf" and p.is_file()):
            yield str(file), file.read_bytes()
    elif name.endswith(_TAR_SUFFIXES):
        with tarfile.open(path, "r|*") as archive:  # "|": a stream, so a compressed archive is decompressed once
            for member in archive:
                if member.isfile() and member.name.lower().endswith(".sgf"):
                    yield member.name, archive.extractfile(member).read()
    elif name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.is_dir() and info.filename.lower().endswith(".sgf"):
                    yield info.filename, archive.read(info)
    else:
        yield str(path), path.read_bytes()


def load_sgf(data: bytes, source: str = "<sgf>") -> GameRecord:
    """Reads the first game of SGF bytes (later games of a collection are ignored). Raises SgfError."""
    text = _decode(data, source)
    if text.lstrip().startswith(";"):  # some Fox files lack the opening parenthesis
        text = "(" + text
    try:
        tree = sgf_grammar.parse_sgf_game(text.encode("utf-8"))
    except ValueError as e:
        raise SgfError(source, "not SGF", str(e)) from None
    return _Reader(source, list(sgf_grammar.main_sequence_iter(tree))).record


def _decode(data: bytes, source: str) -> str:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return _decode_as(data, [encoding])
    head = data[:64]
    if b"\x00" in head:  # UTF-16 without a byte-order mark: the NUL is the high byte of ASCII characters
        return _decode_as(data, ["utf-16-le" if head[1:2] == b"\x00" else "utf-16-be"])
    match = _CHARSET_RE.search(data)
    if match is None:
        return _decode_as(data, ["utf-8", "iso-8859-1"])
    charset = match.group(1).decode("ascii", "replace")
    try:
        declared = codecs.lookup(charset).name
        if declared.startswith(("utf-16", "utf-32")):  # a readable CA means ASCII-compatible bytes: mislabelled
            declared = "utf-8"
        declared = _SUPERSETS.get(declared, declared)
        return _decode_as(data, [declared, "utf-8", "cp1252", "iso-8859-1"])
    except LookupError:  # unknown, or a codec that is not a text encoding (base64, zip)
        raise SgfError(source, "bad encoding", f"unknown charset CA[{charset}]") from None


# Charsets that records declare while their bytes are in the vendor's superset (GBK text labelled GB2312 is common):
# decoded with the declared one, a character outside it would lose its lead byte and leave its trail byte, which can
# be "]" or "\\", to the SGF syntax.
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "shift_jis": "cp932", "big5": "cp950", "euc_kr": "cp949"}


def _decode_as(data: bytes, encodings: list[str]) -> str:
    """The text in the first encoding that decodes all the data (a single-byte one last, which always does: a
    comment in the wrong encoding reads as other letters, never as replacement characters), else the first with
    replacement characters."""
    for encoding in encodings:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode(encodings[0], "replace")


class _Reader:
    """Interprets the property maps of a main line; the result is .record."""

    def __init__(self, source: str, nodes: list[dict[str, list[bytes]]]):
        self.source = source
        root = nodes[0]
        if root.get("GM", [b"1"])[0].strip() != b"1":
            self.fail("not Go", f"GM[{self.text(root['GM'][0])}]")
        width, height = self.size(root)
        try:
            self.grid = coords.grid(width, height)
        except ValueError as e:
            self.fail("unsupported size", str(e))
        self.record = GameRecord(width=width, height=height, source=source)
        first_move = next((i for i, node in enumerate(nodes) if "B" in node or "W" in node), len(nodes))
        for node in nodes[:first_move]:
            self.read_info(node)
            self.read_setup(node)
        if first_move < len(nodes):
            self.read_info(nodes[first_move])  # a root that holds the first move holds the game's information too
        for node in nodes[first_move:]:
            self.read_move(node)

    def fail(self, reason: str, detail: str = ""):
        raise SgfError(self.source, reason, detail)

    def text(self, raw: bytes) -> str:
        return sgf_grammar.simpletext_value(raw).decode("utf-8").strip()

    def size(self, root: dict[str, list[bytes]]) -> tuple[int, int]:
        if "SZ" not in root:
            return 19, 19
        raw = self.text(root["SZ"][0])
        try:
            parts = [int(part) for part in raw.split(":")]
        except ValueError:
            parts = []
        if len(parts) not in (1, 2):
            self.fail("bad property", f"SZ[{raw}]")
        return parts[0], parts[-1]

    def read_info(self, node: dict[str, list[bytes]]) -> None:
        """Game information from any node before the first move; the first value met wins."""
        record = self.record
        for ident, field in (
            ("RU", "rules"),
            ("RE", "result"),
            ("PB", "black"),
            ("PW", "white"),
            ("BR", "black_rank"),
            ("WR", "white_rank"),
        ):
            if ident in node and getattr(record, field) is None:
                setattr(record, field, self.text(node[ident][0]))
        if "KM" in node and record.komi is None:
            raw = self.text(node["KM"][0])
            try:
                komi = float(raw) if raw else 0.0
            except ValueError:
                komi = math.nan
            if not math.isfinite(komi):
                self.fail("bad property", f"KM[{raw}]")
            record.komi = komi
        if "HA" in node and not record.handicap:
            raw = self.text(node["HA"][0])
            if not (raw.isascii() and raw.isdigit()):
                self.fail("bad property", f"HA[{raw}]")
            record.handicap = int(raw)
        if "PL" in node:
            record.first_player = self.color(node["PL"][0])

    def color(self, raw: bytes) -> int:
        letter = self.text(raw)[:1].upper()
        if letter not in _COLOR_OF:
            self.fail("bad property", f"colour {letter!r}")
        return _COLOR_OF[letter]

    def read_setup(self, node: dict[str, list[bytes]]) -> None:
        lists = {ident: self.points(node.get(ident, []), ident) for ident in _SETUP}
        seen: set[int] = set()
        for ident in _SETUP:
            clash = seen.intersection(lists[ident])
            if clash:
                self.fail("illegal setup", f"{ident} names a point already set up in the same node")
            seen.update(lists[ident])
        stones = dict((p, c) for c, p in self.record.setup)
        for ident, color in (("AE", None), ("AB", BLACK), ("AW", WHITE)):
            for point in lists[ident]:
                stones.pop(point, None)
                if color is not None:
                    stones[point] = color
        self.record.setup = [(c, p) for p, c in stones.items()]

    def points(self, values: list[bytes], ident: str) -> list[int]:
        """A point list, with FF[4] rectangles 'aa:cc' expanded; empty values (an empty list) are skipped."""
        points: list[int] = []
        for raw in values:
            text = raw.decode("utf-8").strip()
            if not text:
                continue
            corners = [self.point(part, ident) for part in text.split(":")]
            if len(corners) > 2:
                self.fail("bad point", f"{ident}[{text}]")
            (row0, col0), (row1, col1) = (self.grid.row_col(p) for p in (corners[0], corners[-1]))
            points += [
                self.grid.point(row, col)
                for row in range(min(row0, row1), max(row0, row1) + 1)
                for col in range(min(col0, col1), max(col0, col1) + 1)
            ]
        return points

    def point(self, text: str, ident: str) -> int:
        try:
            point = coords.from_sgf(self.grid, text)
        except ValueError:
            point = None
        if point is None or point == coords.PASS:
            self.fail("bad point", f"{ident}[{text}] on a {self.grid.width}x{self.grid.height} board")
        return point

    def read_move(self, node: dict[str, list[bytes]]) -> None:
        number = len(self.record.moves) + 1
        if any(ident in node for ident in _SETUP):
            self.fail("setup after moves", f"AB/AW/AE at move {number}")
        idents = [ident for ident in ("B", "W") if ident in node]
        if not idents:
            return  # a node with comments or markup only
        if len(idents) > 1 or len(node[idents[0]]) > 1:
            self.fail("bad move", f"move {number} has more than one B/W value")
        ident = idents[0]
        text = node[ident][0].decode("utf-8").strip()
        try:
            point = coords.from_sgf(self.grid, text)
        except ValueError:
            self.fail("bad point", f"move {number} {ident}[{text}] on a {self.grid.width}x{self.grid.height} board")
        self.record.moves.append((_COLOR_OF[ident], point))


@dataclasses.dataclass(frozen=True)
class Variation:
    """A line of play in a main-line move's stead, written as a sibling of that move's node (a further child of the
    node before it), where SGF viewers show it beside the move."""

    moves: list[tuple[int, int]]  # (color, point), PASS allowed; the first is played in the move's stead
    comment: str  # on its first node


OwnText = Callable[[str], tuple[str, ...] | None]


def annotate_main_line(data: bytes, record: GameRecord, root: dict[str, str], moves: list[dict[str, str]],
                       variations: dict[int, Variation], own: OwnText) -> bytes:
    """The SGF of `record` (read from `data`) with a writer's annotations along its main line, replacing that
    writer's earlier ones and keeping everything else (other variations, markup, other comments, the other games
    of a collection).

    Own text: a paragraph of a comment (lines up to a blank line) for which own(paragraph) gives the properties
    written with it, where own gives None for other text. Earlier annotations go first: a variation (not the
    first child) whose first node's comment has own text, with its subtree (a node left with one child is joined
    to it again), then own paragraphs and the properties named with them.

    root: properties for the root node; moves[i]: for the node of the main line's i-th move (the nodes with B or
    W, in order, from 0; fewer entries leave the rest alone); variations[i]: a line in that move's stead (a move
    in the root has none). A comment (C) is a paragraph after the node's own comment; other properties replace
    the node's. The result is UTF-8 (CA[UTF-8]). Raises SgfError like load_sgf.
    """
    source = record.source
    text = _decode(data, source)
    if text.lstrip().startswith(";"):
        text = "(" + text
    try:
        trees = sgf_grammar.parse_sgf_collection(text.encode("utf-8"))
    except ValueError:
        try:  # a later game of a collection that is not SGF: the first alone
            trees = [sgf_grammar.parse_sgf_game(text.encode("utf-8"))]
        except ValueError as e:
            raise SgfError(source, "not SGF", str(e)) from None
        log.warning("%s: only the first game is written back; a later one is not readable SGF", source)
    tree = trees[0]
    _remove_own_variations(tree, own)
    _remove_own_text(tree, own)
    places = [(branch, i) for branch, i in _main_line_places(tree)
              if "B" in branch.sequence[i] or "W" in branch.sequence[i]]
    root_node = tree.sequence[0]
    root_node["CA"] = [b"UTF-8"]
    for node, properties in [(root_node, root)] + [(b.sequence[i], p) for (b, i), p in zip(places, moves)]:
        for ident, value in properties.items():
            escaped = sgf_grammar.escape_text(value.encode("utf-8"))
            if ident == "C" and node.get("C"):
                node["C"] = [node["C"][0].rstrip() + b"\n\n" + escaped]
            else:
                node[ident] = [escaped]
    for index in sorted(variations, reverse=True):  # from the end: a split moves only the nodes after it
        branch, i = places[index]
        parent = _parent_for_sibling(tree, branch, i)
        if parent is not None:
            parent.children.append(_variation_tree(record.grid, variations[index]))
    return b"\n".join(sgf_grammar.serialise_game_tree(game) for game in trees)  # the collection's other games kept


def _main_line_places(tree: sgf_grammar.Coarse_game_tree) -> Iterator[tuple[sgf_grammar.Coarse_game_tree, int]]:
    """(tree, index in its sequence) of every node of the main line."""
    while True:
        yield from ((tree, i) for i in range(len(tree.sequence)))
        if not tree.children:
            return
        tree = tree.children[0]


def _parent_for_sibling(game: sgf_grammar.Coarse_game_tree, branch: sgf_grammar.Coarse_game_tree,
                        i: int) -> sgf_grammar.Coarse_game_tree | None:
    """The tree whose children hold the main-line node branch.sequence[i], as their first, once the sequence is split
    there where i > 0; None for the root node."""
    if i > 0:
        rest = sgf_grammar.Coarse_game_tree()
        rest.sequence, rest.children = branch.sequence[i:], branch.children
        branch.sequence, branch.children = branch.sequence[:i], [rest]
        return branch
    parent = None
    tree = game
    while tree is not branch:
        parent, tree = tree, tree.children[0]
    return parent


def _variation_tree(g: coords.Grid, variation: Variation) -> sgf_grammar.Coarse_game_tree:
    tree = sgf_grammar.Coarse_game_tree()
    tree.sequence = [{_LETTER_OF[color]: [coords.to_sgf(g, point).encode()]} for color, point in variation.moves]
    tree.sequence[0]["C"] = [sgf_grammar.escape_text(variation.comment.encode("utf-8"))]
    return tree


_PARAGRAPH_BREAK = re.compile(rb"(\r?\n[ \t]*\r?\n\s*)")


def _paragraphs(raw: bytes) -> list[bytes]:
    """A raw comment value split into paragraphs and the breaks between them, alternately (paragraph first)."""
    return _PARAGRAPH_BREAK.split(raw)


def _own(raw_paragraph: bytes, own: OwnText) -> tuple[str, ...] | None:
    return own(sgf_grammar.text_value(raw_paragraph).decode("utf-8", "replace"))


def _remove_own_variations(game: sgf_grammar.Coarse_game_tree, own: OwnText) -> None:
    """Drops every variation (not a first child) whose first node's comment has own text; a tree left with one
    child takes that child's nodes and children, as before the variation was added."""
    for tree in _trees(game):
        while len(tree.children) > 1:
            kept = tree.children[:1] + [child for child in tree.children[1:] if not any(
                _own(part, own) is not None for part in _paragraphs(child.sequence[0].get("C", [b""])[0])[::2])]
            if len(kept) == len(tree.children):
                break
            tree.children = kept
            if len(kept) == 1:
                tree.sequence, tree.children = tree.sequence + kept[0].sequence, kept[0].children


def _remove_own_text(game: sgf_grammar.Coarse_game_tree, own: OwnText) -> None:
    """Drops the own paragraphs of every comment, with a break beside each, and the properties written with them."""
    for node in (node for tree in _trees(game) for node in tree.sequence):
        if not node.get("C"):
            continue
        parts = _paragraphs(node["C"][0])
        kept: list[bytes] = []
        for index in range(0, len(parts), 2):
            idents = _own(parts[index], own)
            if idents is None:
                kept += ([parts[index - 1]] if kept else []) + [parts[index]]
            else:
                for ident in idents:
                    node.pop(ident, None)
        if len(kept) < len(parts):
            comment = b"".join(kept)
            if comment.strip():
                node["C"] = [comment]
            else:
                del node["C"]


def _trees(game: sgf_grammar.Coarse_game_tree) -> Iterator[sgf_grammar.Coarse_game_tree]:
    """The game tree and all its subtrees, each before its children (which it may change meanwhile); without
    recursion, since some files nest every move in a variation of its own."""
    stack = [game]
    while stack:
        tree = stack.pop()
        yield tree
        stack.extend(reversed(tree.children))
