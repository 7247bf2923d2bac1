"""GTP commands: the registry of exact command names, and the Session that gives each its meaning in Go.

Terms:
- registry: command name -> handler, filled by the @command decorator below. list_commands and known_command
  read it, so a command is listed exactly when it is implemented.
- Session: the one owner of the game record (a GameState, the truth for every command), the clock and the
  options; it hands its game to the engine's Player (search + network), which searches the position and
  keeps no game of its own. Handlers only translate GTP into these calls and their answers back into GTP.
- player source: hands out the Player for a board size (network_loader.NetworkLoader). The network loads in the
  background, so commands that need none (the handshake, play, undo, boardsize, ...) answer at once, and those
  that do wait for the load or fail with "no network loaded: <why>" (NetworkUnavailable).
- dead and seki stones: as the endgame judgement reads them from the Player's ownership (network and search);
  final_score and final_status_list use the same judgement, so they never disagree.
- komi: the controller's (the komi command) once it has sent one; until then the rules' default for the game
  (Rules.default_komi), set anew by clear_board, boardsize, kata-set-rules and the handicap commands: 7.5 under
  area scoring, 6.5 under territory scoring, 0.5 with handicap stones (the rules' white handicap bonus on top).
- strength: the rank genmove plays at (search/strength.py; None: full strength), --strength's until
  `kata-set-param strength RANK` (or humanSLProfile PROFILE, KataGo's name, mapped to the nearest rank) or
  `lz-setoption name strength value RANK` sets another; each Player is given it before it is used.
- pondering: after genmove (with --ponder on) the Player searches on with the opponent to move, in a thread,
  until the next input line; the next command waits for it to stop before it touches the Player.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

import gtp_engine
from gtp_engine import coords, sgf_io
from gtp_engine.board import BLACK, WHITE, IllegalMoveError, opponent
from gtp_engine.config import EngineConfig, PlayOptions
from gtp_engine.evaluator import legal_policy
from gtp_engine.game import GameState, Rules, diagram, fixed_handicap_points, format_result, free_handicap_points
from gtp_engine.gtp import analyze_lines
from gtp_engine.gtp.protocol import (
    BAD_VERTEX_LIST,
    BOARD_NOT_EMPTY,
    CANNOT_LOAD_FILE,
    CANNOT_SCORE,
    CANNOT_UNDO,
    ILLEGAL_MOVE,
    INVALID_NUMBER_OF_STONES,
    SYNTAX_ERROR,
    UNACCEPTABLE_SIZE,
    Command,
    GtpError,
    Handler,
    Stream,
)
from gtp_engine.gtp.values import (
    IllegalVertex,
    arity,
    color_letter,
    parse_color,
    parse_bool,
    parse_float,
    parse_int,
    parse_vertex,
)
from gtp_engine.mcts import MoveFilter
from gtp_engine.network_loader import NetworkUnavailable
from gtp_engine.player import MoveLimits, white_view
from gtp_engine.search import Rank, StopCondition, strength
from gtp_engine.timecontrol import AnswerOverhead, Clock, TimeSettings

log = logging.getLogger(__name__)

MIN_SIZE = 2
SEARCH_PARAMS = {"maxVisits": "visits", "maxPlayouts": "playouts", "maxTime": "time_per_move"}  # kata-set-param
LEVEL_PARAMS = ("strength", "humanSLProfile")  # kata-set-param's names for the strength level
# kata-set-rule's rule names (lower case) -> the field of KataGo's rules object (game.Rules.to_katago)
KATA_RULE_FIELDS = {"ko": "ko", "scoring": "scoring", "score": "scoring", "tax": "tax", "suicide": "suicide",
                    "multistonesuicidelegal": "suicide", "hasbutton": "hasButton", "button": "hasButton",
                    "whitehandicapbonus": "whiteHandicapBonus", "friendlypassok": "friendlyPassOk"}
KATA_BOOLEAN_RULES = ("suicide", "hasButton", "friendlyPassOk")
KGS_RULES = {"japanese": "japanese", "chinese": "chinese-kgs", "aga": "aga", "new_zealand": "new-zealand"}


class PlayerSource(Protocol):
    def prepare(self, width: int, height: int) -> str | None:
        """Starts loading what a width x height game needs, in the background; returns at once: why this size
        cannot be played where that is known already (no network for it, a loaded network that refuses it), else
        None."""

    def get(self, width: int, height: int):
        """The Player for this size, once loaded (waits for the load); raises NetworkUnavailable."""

    def clear_cache(self) -> None:
        """Forgets cached network evaluations and search trees of the loaded Players."""


_REGISTRY: dict[str, Callable[[Session, Command, Stream], str]] = {}


def command(*names: str):
    """Registers a Session method as the handler of these GTP command names."""

    def register(method):
        for name in names:
            _REGISTRY[name] = method
        return method

    return register


def command_names() -> list[str]:
    return list(_REGISTRY)


class Session:
    def __init__(self, players: PlayerSource, move_limits: MoveLimits, play: PlayOptions, rules: Rules,
                 board_size: int = 19, komi: float | None = None, now: Callable[[], float] = time.monotonic,
                 name: str = EngineConfig.name, strength: Rank | None = None):
        """komi: as if the controller had sent it; None: the rules' default (see komi in the module docstring)."""
        self.players = players
        self.name_answer = name  # the name command's (--name)
        self.now = now  # the clock of move times and deadlines: the Players' searchers must read the same one
        self.move_limits = move_limits
        self.options = play
        self.komi_given = komi is not None
        self.game = GameState(board_size, komi=rules.default_komi() if komi is None else komi, rules=rules)
        self.clock = Clock()
        self.overhead = AnswerOverhead()  # the engine's own work per move after its search
        self._pondering = None  # the Player while it ponders
        self._resign_winrate: float | None = None  # lz-setoption's resign percentage; None: as configured
        self.strength = strength  # see strength
        players.prepare(board_size, board_size)

    def handler(self, name: str) -> Handler | None:
        method = _REGISTRY.get(name)
        if method is None:
            return None

        def run(cmd: Command, stream: Stream) -> str:
            self.stop_pondering()
            return method(self, cmd, stream)

        return run

    # ---- administration ---------------------------------------------------------------------------------

    @command("protocol_version")
    def protocol_version(self, cmd: Command, stream: Stream) -> str:
        return "2"

    @command("name")
    def name(self, cmd: Command, stream: Stream) -> str:
        return self.name_answer

    @command("version")
    def version(self, cmd: Command, stream: Stream) -> str:
        return gtp_engine.__version__

    @command("known_command")
    def known_command(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 1)
        return "true" if cmd.args[0].lower() in _REGISTRY else "false"

    @command("list_commands")
    def list_commands(self, cmd: Command, stream: Stream) -> str:
        return "\n".join(command_names())

    @command("quit")
    def quit(self, cmd: Command, stream: Stream) -> str:
        return ""  # pondering already stopped; protocol.serve ends the session after this answer

    # ---- setting up -------------------------------------------------------------------------------------

    @command("boardsize", "rectangular_boardsize")
    def boardsize(self, cmd: Command, stream: Stream) -> str:
        """boardsize N, boardsize W H or W:H, rectangular_boardsize W H. Clears the board, keeps komi and rules."""
        args = cmd.args[0].split(":") if len(cmd.args) == 1 and ":" in cmd.args[0] else cmd.args
        arity(args, 1, 2)
        width = parse_int(args[0])
        height = parse_int(args[1]) if len(args) == 2 else width
        if not (MIN_SIZE <= width <= coords.MAX_SIZE and MIN_SIZE <= height <= coords.MAX_SIZE):
            raise GtpError(UNACCEPTABLE_SIZE)
        refusal = self.players.prepare(width, height)
        if refusal is not None:
            log.warning("boardsize %dx%d refused: %s", width, height, refusal)
            raise GtpError(UNACCEPTABLE_SIZE)
        self._new_game(width, height)
        return ""

    @command("clear_board")
    def clear_board(self, cmd: Command, stream: Stream) -> str:
        self._new_game(self.game.width, self.game.height)
        return ""

    def _new_game(self, width: int, height: int) -> None:
        rules = self.game.rules
        self.game = GameState(width, height, komi=self.game.komi if self.komi_given else rules.default_komi(),
                              rules=rules)
        self.clock = Clock(self.clock.settings)

    @command("komi")
    def komi(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 1)
        self.game.komi = parse_float(cmd.args[0])
        self.komi_given = True
        return ""

    @command("get_komi")
    def get_komi(self, cmd: Command, stream: Stream) -> str:
        return f"{self.game.komi:g}"

    @command("kata-get-rules")
    def kata_get_rules(self, cmd: Command, stream: Stream) -> str:
        return json.dumps(self.game.rules.to_katago(), separators=(",", ":"))

    @command("kata-set-rules")
    def kata_set_rules(self, cmd: Command, stream: Stream) -> str:
        """A rule set name (game.RULE_SETS, KataGo's names) or KataGo's JSON form; the game replayed under them."""
        if not cmd.args:
            raise GtpError(SYNTAX_ERROR)
        self._set_rules(cmd.arg_text)
        return ""

    @command("kata-set-rule")
    def kata_set_rule(self, cmd: Command, stream: Stream) -> str:
        """One field of KataGo's rules: ko, scoring, tax, suicide, hasButton, whiteHandicapBonus, friendlyPassOk
        (KATA_RULE_FIELDS), the others kept; setting the scoring gives the tax that scoring's own (SEKI under
        territory, NONE under area), as a rule set of that scoring has it. What cannot be played (the button, Spight's
        ko) is refused."""
        arity(cmd.args, 2)
        field = KATA_RULE_FIELDS.get(cmd.args[0].lower())
        if field is None:
            known = ", ".join(dict.fromkeys(KATA_RULE_FIELDS.values()))
            raise GtpError(f"unknown rule {cmd.args[0]!r}; known: {known}")
        rules = self.game.rules.to_katago()
        if field == "scoring":
            del rules["tax"]
        rules[field] = parse_bool(cmd.args[1]) if field in KATA_BOOLEAN_RULES else cmd.args[1].upper()
        self._set_rules(rules)
        return ""

    @command("kgs-rules")
    def kgs_rules(self, cmd: Command, stream: Stream) -> str:
        """KGS's rule set names: japanese, chinese, aga, new_zealand."""
        arity(cmd.args, 1)
        name = KGS_RULES.get(cmd.args[0].lower())
        if name is None:
            raise GtpError(f"unknown rules {cmd.args[0]!r}; known: {', '.join(KGS_RULES)}")
        self._set_rules(name)
        return ""

    def _set_rules(self, katago_rules: str | dict) -> None:
        """The game replayed under these rules (a KataGo name, JSON text or rules object); GtpError saying why
        when they cannot be played."""
        try:
            rules = Rules.from_katago(katago_rules)
            self.game = sgf_io.GameRecord.from_game(self.game).to_game(rules=rules)
            if not self.komi_given:
                self.game.komi = rules.default_komi(self.game.handicap_stones)
        except (ValueError, sgf_io.SgfError) as error:
            raise GtpError(f"cannot use these rules: {error}") from None

    # ---- moves ------------------------------------------------------------------------------------------

    @command("play")
    def play(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 2)
        color = parse_color(cmd.args[0])
        try:
            point = parse_vertex(self.game.grid, cmd.args[1])
            self.game.play(point, color)
        except (IllegalVertex, IllegalMoveError) as error:
            log.info("play %s %s refused: %s", *cmd.args, error)
            raise GtpError(ILLEGAL_MOVE) from None
        return ""

    @command("undo")
    def undo(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 0)
        self._undo(1)
        return ""

    @command("gg-undo")
    def gg_undo(self, cmd: Command, stream: Stream) -> str:
        """Undoes N moves (default 1), all or none."""
        arity(cmd.args, 0, 1)
        self._undo(parse_int(cmd.args[0], minimum=1) if cmd.args else 1)
        return ""

    def _undo(self, count: int) -> None:
        if count > len(self.game.moves) or not self.game.can_undo:
            raise GtpError(CANNOT_UNDO)
        for _ in range(count):
            self.game.undo()

    @command("genmove")
    def genmove(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 1)
        return self._generate(cmd, stream, parse_color(cmd.args[0]))

    @command("kgs-genmove_cleanup")
    def genmove_cleanup(self, cmd: Command, stream: Stream) -> str:
        """genmove that does not pass while dead opponent stones are left on the board, and never resigns."""
        arity(cmd.args, 1)
        return self._generate(cmd, stream, parse_color(cmd.args[0]), cleanup=True)

    @command("reg_genmove")
    def reg_genmove(self, cmd: Command, stream: Stream) -> str:
        """The move genmove would choose, without playing it."""
        arity(cmd.args, 1)
        return self._generate(cmd, stream, parse_color(cmd.args[0]), keep=False)

    @command("lz-genmove_analyze", "kata-genmove_analyze")
    def genmove_analyze(self, cmd: Command, stream: Stream) -> str:
        """genmove that streams info lines while it searches and ends with "play <vertex>"."""
        request = analyze_lines.parse_request(cmd.args, self.game.grid, self.game.to_play,
                                              kata=cmd.name.startswith("kata"))
        return "play " + self._generate(cmd, stream, request.color, request=request)

    def _generate(self, cmd: Command, stream: Stream, color: int, *, cleanup: bool = False, keep: bool = True,
                  request: analyze_lines.Request | None = None) -> str:
        started = cmd.received or self.now()
        player = self._player()
        stop = self._move_stop(player, color, started, stream.answer_now)
        report = reports = None
        if request is not None:
            report = analyze_lines.reporter(request, self.game.grid, stream.line, self._priors(player, request))
            reports = request.reports
            stream.start()
        choice = player.genmove(self.game, color, stop, on_snapshot=report, reports=reports, cleanup=cleanup,
                                move_filter=request.move_filter if request is not None else MoveFilter(),
                                trial=not keep)
        answered = self.now()
        self.overhead.note(answered - (player.searcher.stopped or answered))
        if keep:
            self.clock.spend(color, answered - started)
        if choice.resign:
            return "resign"
        if not keep:
            return coords.to_gtp(self.game.grid, choice.point)
        self.game.play(choice.point, color)  # legal: the Player checks its move against this game
        if self.options.ponder and not self.game.is_over:
            player.ponder_after(self.game, stop, stream.interrupted)
            self._pondering = player
        return coords.to_gtp(self.game.grid, choice.point)

    def _move_stop(self, player, color: int, started: float, interrupt: threading.Event) -> StopCondition:
        """What ends one move's search: the clock's budget within the move limits."""
        game = self.game
        budget = self.clock.budget(color, game.grid.area, game.board.stone_count[BLACK] +
                                   game.board.stone_count[WHITE], self.options.lag_buffer, self.overhead.seconds)
        return self.move_limits.stop(started, interrupt, player.config.search.stop.default_visits, budget)

    # ---- pondering --------------------------------------------------------------------------------------

    def stop_pondering(self) -> None:
        if self._pondering is not None:
            self._pondering.stop_background()
            self._pondering = None

    @command("gogui-interrupt")
    def gogui_interrupt(self, cmd: Command, stream: Stream) -> str:
        return ""  # listing it tells GoGui that a "# interrupt" line ends a running genmove early

    @command("stop")
    def stop(self, cmd: Command, stream: Stream) -> str:
        return ""  # pondering has stopped before any command runs

    @command("kgs-game_over")
    def game_over(self, cmd: Command, stream: Stream) -> str:
        return ""  # likewise; no pondering starts again until the next genmove

    # ---- handicap ---------------------------------------------------------------------------------------

    @command("fixed_handicap")
    def fixed_handicap(self, cmd: Command, stream: Stream) -> str:
        return self._handicap(cmd, fixed_handicap_points)

    @command("place_free_handicap")
    def place_free_handicap(self, cmd: Command, stream: Stream) -> str:
        """The fixed layout where GTP defines one; otherwise stones spread over the board from the 3-3 points in."""
        return self._handicap(cmd, free_handicap_points)

    def _handicap(self, cmd: Command, layout: Callable[[coords.Grid, int], list[int]]) -> str:
        arity(cmd.args, 1)
        count = parse_int(cmd.args[0])
        self._require_empty()
        try:
            points = layout(self.game.grid, count)
        except ValueError:
            raise GtpError(INVALID_NUMBER_OF_STONES) from None
        return self._place_handicap(points)

    @command("set_free_handicap")
    def set_free_handicap(self, cmd: Command, stream: Stream) -> str:
        self._require_empty()
        g = self.game.grid
        try:
            points = [parse_vertex(g, text) for text in cmd.args]
        except GtpError:
            raise GtpError(BAD_VERTEX_LIST) from None
        if len(points) < 2 or len(set(points)) != len(points) or coords.PASS in points or len(points) >= g.area:
            raise GtpError(BAD_VERTEX_LIST)
        self._place_handicap(points)
        return ""

    def _require_empty(self) -> None:
        board = self.game.board
        if self.game.moves or self.game.setup or board.stone_count[BLACK] + board.stone_count[WHITE]:
            raise GtpError(BOARD_NOT_EMPTY)

    def _place_handicap(self, points: list[int]) -> str:
        self.game.place_handicap(points)
        if not self.komi_given:
            self.game.komi = self.game.rules.default_komi(len(points))
        return " ".join(coords.to_gtp(self.game.grid, p) for p in points)

    # ---- time -------------------------------------------------------------------------------------------

    @command("time_settings")
    def time_settings(self, cmd: Command, stream: Stream) -> str:
        """Canadian byo-yomi; byo-yomi 0 means absolute time, stones 0 with byo-yomi > 0 means no limit."""
        self._set_clock(lambda: TimeSettings.from_time_settings(cmd.args))
        return ""

    @command("kgs-time_settings")
    def kgs_time_settings(self, cmd: Command, stream: Stream) -> str:
        """none | absolute M | byoyomi M B P | canadian M B S; after byoyomi, time_left counts periods."""
        self._set_clock(lambda: TimeSettings.from_kgs(cmd.args))
        return ""

    @command("kata-time_settings")
    def kata_time_settings(self, cmd: Command, stream: Stream) -> str:
        """The kgs-time_settings kinds, plus fischer M INC and fischer-capped M INC LIMIT MAXMOVE (-1: no cap)."""
        self._set_clock(lambda: TimeSettings.from_kata(cmd.args))
        return ""

    @command("kata-list_time_settings")
    def kata_list_time_settings(self, cmd: Command, stream: Stream) -> str:
        return "none absolute byoyomi canadian fischer fischer-capped"

    def _set_clock(self, settings: Callable[[], TimeSettings]) -> None:
        try:
            self.clock = Clock(settings())
        except ValueError:
            raise GtpError(SYNTAX_ERROR) from None

    @command("time_left")
    def time_left(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 3)
        color = parse_color(cmd.args[0])
        seconds = parse_float(cmd.args[1])  # may be 0 or negative when the controller is late
        self.clock.time_left(color, seconds, parse_int(cmd.args[2]))
        return ""

    @command("cputime")
    def cputime(self, cmd: Command, stream: Stream) -> str:
        return f"{time.process_time():.3f}"

    # ---- scoring ----------------------------------------------------------------------------------------

    @command("final_score")
    def final_score(self, cmd: Command, stream: Stream) -> str:
        try:
            player = self._player()
        except GtpError as error:
            log.warning("final_score: %s", error)
            raise GtpError(CANNOT_SCORE) from None
        return format_result(player.final_score(self.game))

    @command("final_status_list")
    def final_status_list(self, cmd: Command, stream: Stream) -> str:
        arity(cmd.args, 1)
        status = cmd.args[0].lower()
        if status not in ("alive", "dead", "seki"):
            raise GtpError(SYNTAX_ERROR)
        chains = self._player().chain_statuses(self.game)[status]
        g = self.game.grid
        return "\n".join(" ".join(coords.to_gtp(g, p) for p in chain) for chain in chains)

    # ---- analysis ---------------------------------------------------------------------------------------

    @command("lz-analyze", "kata-analyze")
    def analyze(self, cmd: Command, stream: Stream) -> str:
        """Streams info lines for the position until the next input line."""
        request = analyze_lines.parse_request(cmd.args, self.game.grid, self.game.to_play,
                                              kata=cmd.name.startswith("kata"))
        player = self._player()
        report = analyze_lines.reporter(request, self.game.grid, stream.line, self._priors(player, request),
                                        player.searcher.move_ownership if request.moves_ownership else None)
        stream.start()
        player.analyze(self.game, request.color, StopCondition(interrupt=stream.interrupted), report,
                       request.reports, ownership=request.ownership, move_filter=request.move_filter)
        return ""

    def _priors(self, player, request: analyze_lines.Request) -> dict[int, float] | None:
        """The network's policy for the analysed colour, point -> probability, when minmoves needs it; only the
        moves the request's filter leaves at the root."""
        if not request.min_moves:
            return None
        policy = player.policy(self.game, request.color)
        g = self.game.grid
        return {g.from_flat(i): float(policy[i]) for i in np.flatnonzero(policy)
                if request.move_filter.permits(request.color, g.from_flat(i), 1)}

    @command("kata-raw-nn")
    def kata_raw_nn(self, cmd: Command, stream: Stream) -> str:
        """The network's raw output for the position, in KataGo's layout (LizzieYzy's policy heat map): whiteWin,
        whiteLoss, whiteLead, the policy (NAN on illegal points) and policyPass, whiteOwnership. The evaluation is
        the one the search uses (cached, in the network's own symmetry mode), so the first line says
        "symmetry cached" whatever symmetry (0..7 or all) is asked for."""
        if len(cmd.args) != 1 or cmd.args[0] not in ("all", *"01234567"):
            raise GtpError(SYNTAX_ERROR)
        player = self._player()
        state = self.game
        batch = player.evaluator.evaluate([state])
        white = white_view(state, batch)
        g = state.grid
        policy = legal_policy(batch.policy[0], state, illegal=np.nan)

        def rows(values: np.ndarray) -> list[str]:
            grid = values[: g.area].reshape(g.height, g.width)
            return [" ".join("NAN" if np.isnan(v) else f"{v:.6f}" for v in row) for row in grid]

        return "\n".join([
            "symmetry cached", f"whiteWin {white.win:.6f}", f"whiteLoss {white.loss:.6f}",
            "noResult 0.000000", f"whiteLead {white.lead:.6f}", "policy", *rows(policy),
            f"policyPass {policy[-1]:.6f}",
            "whiteOwnership", *rows(white.ownership),
        ])

    @command("kata-get-param")
    def kata_get_param(self, cmd: Command, stream: Stream) -> str:
        """A search setting by KataGo's name: maxVisits, maxPlayouts, maxTime (-1: no limit set); strength and
        humanSLProfile: the strength level (max: full strength)."""
        arity(cmd.args, 1)
        if cmd.args[0] in LEVEL_PARAMS:
            return strength.rank_label(self.strength)
        field = SEARCH_PARAMS.get(cmd.args[0])
        if field is None:
            raise GtpError(f"unknown parameter {cmd.args[0]!r}; known: {', '.join(self._params())}")
        value = getattr(self.move_limits, field)
        return "-1" if value is None else f"{value:g}"

    @command("kata-set-param")
    def kata_set_param(self, cmd: Command, stream: Stream) -> str:
        """Sets maxVisits, maxPlayouts (positive integers) or maxTime (seconds > 0), -1 removing the limit; strength
        (a rank 12k .. 1d, or max) or humanSLProfile (KataGo's profile names, see search/strength.py)."""
        arity(cmd.args, 2)
        name, text = cmd.args
        if name in LEVEL_PARAMS:
            self.strength = self._rank(text, strength.parse_rank if name == "strength" else strength.profile_rank)
            return ""
        field = SEARCH_PARAMS.get(name)
        if field is None:
            raise GtpError(f"unknown parameter {name!r}; known: {', '.join(self._params())}")
        value: float | int | None
        if text.strip() == "-1":
            value = None
        elif field == "time_per_move":
            value = parse_float(text)
            if not value > 0:
                raise GtpError(SYNTAX_ERROR)
        else:
            value = parse_int(text, minimum=1)
        self.move_limits = dataclasses.replace(self.move_limits, **{field: value})
        return ""

    @command("kata-list-params")
    def kata_list_params(self, cmd: Command, stream: Stream) -> str:
        """The parameters kata-get-param and kata-set-param take."""
        return " ".join(self._params())

    @staticmethod
    def _params() -> list[str]:
        return [*SEARCH_PARAMS, *LEVEL_PARAMS]

    @staticmethod
    def _rank(text: str, parse: Callable[[str], Rank | None]) -> Rank | None:
        """A strength rank read by `parse`; GtpError with its message for a bad one."""
        try:
            return parse(text)
        except ValueError as error:
            raise GtpError(str(error)) from None

    @command("lz-setoption")
    def lz_setoption(self, cmd: Command, stream: Stream) -> str:
        """Leela Zero's `lz-setoption name NAME value VALUE` for the options it shares with this engine (names in
        any case): Visits and Playouts (0: no limit), Lagbuffer (centiseconds), Pondering (true or false), Resign
        Percentage (-1: as configured), and Strength (a rank 12k .. 1d, or max). Without arguments, those options in
        Leela Zero's listing."""
        if not cmd.args:
            return "\n".join(self._lz_options())
        words = [word.lower() for word in cmd.args]
        if words[0] != "name" or "value" not in words[2:]:
            raise GtpError(SYNTAX_ERROR)
        split = words.index("value", 2)
        name, value = " ".join(words[1:split]), " ".join(cmd.args[split + 1:])
        if name in ("visits", "playouts"):
            count = parse_int(value)
            field = "visits" if name == "visits" else "playouts"
            self.move_limits = dataclasses.replace(self.move_limits, **{field: count or None})
        elif name == "lagbuffer":
            self.options = dataclasses.replace(self.options, lag_buffer=parse_int(value) / 100)
        elif name == "pondering":
            self.options = dataclasses.replace(self.options, ponder=parse_bool(value))
        elif name == "resign percentage":
            percent = parse_float(value)
            if not (percent == -1 or 0 <= percent < 100):
                raise GtpError(SYNTAX_ERROR)
            self._resign_winrate = None if percent == -1 else percent / 100
        elif name == "strength":
            self.strength = self._rank(value, strength.parse_rank)
        else:
            raise GtpError(f"unknown option {name!r}; known: visits, playouts, lagbuffer, pondering, "
                           "resign percentage, strength")
        return ""

    def _lz_options(self) -> list[str]:
        limits, options = self.move_limits, self.options
        lag = options.lag_buffer
        resign = -1 if self._resign_winrate is None else round(100 * self._resign_winrate)
        return [f"option name Visits type spin default {limits.visits or 0} min 0 max 1000000000",
                f"option name Playouts type spin default {limits.playouts or 0} min 0 max 1000000000",
                f"option name Lagbuffer type spin default {0 if lag is None else round(100 * lag)} min 0 max 3000",
                f"option name Resign Percentage type spin default {resign} min -1 max 99",
                f"option name Pondering type check default {'true' if options.ponder else 'false'}",
                f"option name Strength type string default {strength.rank_label(self.strength)}"]

    @command("gogui-analyze_commands")
    def gogui_analyze_commands(self, cmd: Command, stream: Stream) -> str:
        return "\n".join(GOGUI_ANALYZE_COMMANDS)

    @command("gogui-ownership")
    def gogui_ownership(self, cmd: Command, stream: Stream) -> str:
        """Who owns each point (dboard: +1 Black, -1 White), rows from the top."""
        ownership = self._player().ownership(self.game)
        g = self.game.grid
        rows = ownership.reshape(g.height, g.width)
        return "\n" + "\n".join(" ".join(f"{v:.2f}" for v in row) for row in rows)

    @command("gogui-policy")
    def gogui_policy(self, cmd: Command, stream: Stream) -> str:
        """The network's move probabilities for the side to move (gfx: shading and percentages)."""
        policy = self._player().policy(self.game, self.game.to_play)
        g = self.game.grid
        top = float(policy[:-1].max()) or 1.0
        lines = [f"INFLUENCE {coords.to_gtp(g, g.from_flat(i))} {policy[i] / top:.3f}"
                 for i in np.flatnonzero(policy[:-1] >= 0.001 * top)]
        lines += [f"LABEL {coords.to_gtp(g, g.from_flat(i))} {round(100 * policy[i])}"
                  for i in np.argsort(-policy[:-1])[:10] if policy[i] >= 0.005]
        lines.append(f"TEXT pass {100 * policy[-1]:.1f}%")
        return "\n".join(lines)

    @command("gogui-best_moves")
    def gogui_best_moves(self, cmd: Command, stream: Stream) -> str:
        """A search's principal variation (gfx VAR) and its best moves labelled with their winrates."""
        snapshot = self._search_snapshot(stream)
        g = self.game.grid
        lines = []
        if snapshot.moves:
            color, variation = snapshot.to_play, []
            for point in snapshot.moves[0].pv:
                variation.append(f"{color_letter(color).lower()} {coords.to_gtp(g, point)}")
                color = opponent(color)
            lines.append("VAR " + " ".join(variation))
        lines += [f"LABEL {coords.to_gtp(g, m.point)} {round(100 * m.winrate)}%"
                  for m in snapshot.moves[:8] if m.point != coords.PASS and m.visits > 0]
        lines.append(f"TEXT {summary(snapshot)}")
        return "\n".join(lines)

    @command("gogui-winrate")
    def gogui_winrate(self, cmd: Command, stream: Stream) -> str:
        """The side to move's winrate and score lead after a search."""
        return summary(self._search_snapshot(stream))

    def _search_snapshot(self, stream: Stream):
        """A search of the position for the side to move, to the move limits but not the clock; plays nothing."""
        player = self._player()
        snapshots: list = []
        stop = self.move_limits.stop(self.now(), stream.answer_now, player.config.search.stop.default_visits)
        player.analyze(self.game, self.game.to_play, stop, snapshots.append)
        return snapshots[-1]

    @command("clear_cache")
    def clear_cache(self, cmd: Command, stream: Stream) -> str:
        """Forgets network evaluations and search trees."""
        self.players.clear_cache()
        return ""

    # ---- showing the game -------------------------------------------------------------------------------

    @command("showboard")
    def showboard(self, cmd: Command, stream: Stream) -> str:
        return "\n" + diagram(self.game)

    @command("loadsgf")
    def loadsgf(self, cmd: Command, stream: Stream) -> str:
        """loadsgf FILE [N]: the game of FILE up to, not including, move N, under the rules its RU names (as KataGo
        does, said on stderr where they change); the session's rules where RU names none this engine knows."""
        if not cmd.args:
            raise GtpError(SYNTAX_ERROR)
        path, number = cmd.arg_text, None
        head, _, last = path.rpartition(" ")
        if head.strip() and last.isdigit():
            path, number = head.strip(), int(last)
        if len(path) > 1 and path[0] == path[-1] == '"':
            path = path[1:-1]  # GoGui quotes file names that contain spaces
        try:
            record = sgf_io.load_sgf_file(path)
            if not (MIN_SIZE <= record.width <= coords.MAX_SIZE and MIN_SIZE <= record.height <= coords.MAX_SIZE):
                raise sgf_io.SgfError(path, "board size", f"{record.width}x{record.height}")
            rules = self._record_rules(record)
            game = record.to_game(rules=rules, max_moves=None if number is None else max(0, number - 1))
        except (OSError, sgf_io.SgfError) as error:
            log.warning("loadsgf: %s", error)
            raise GtpError(CANNOT_LOAD_FILE) from None
        if rules != self.game.rules:
            log.warning("loadsgf: rules changed to %s, as the record's RU[%s] says", rules.name, record.rules)
        if record.komi is None and self.komi_given:
            game.komi = self.game.komi  # else the rules' default for the record's game
        self.game = game
        self.clock = Clock(self.clock.settings)
        self.players.prepare(game.width, game.height)
        return ""

    def _record_rules(self, record: sgf_io.GameRecord) -> Rules:
        """The rules a loaded record's RU names, else the session's (said on stderr where RU is unknown)."""
        if not record.rules:
            return self.game.rules
        try:
            rules, differences = Rules.nearest_katago(record.rules)
        except ValueError as error:
            log.warning("loadsgf: RU[%s] is no rule set this engine knows (%s); the session's rules stay",
                        record.rules, error)
            return self.game.rules
        for difference in differences:
            log.warning("loadsgf: %s", difference)
        return rules

    @command("printsgf")
    def printsgf(self, cmd: Command, stream: Stream) -> str:
        """The game as SGF; printsgf FILE writes it to FILE instead."""
        data = sgf_io.save_sgf(self.game)
        if not cmd.args:
            return data.decode("utf-8")
        try:
            Path(cmd.arg_text).write_bytes(data)
        except OSError as error:
            raise GtpError(f"cannot write file: {error.strerror}") from None
        return ""

    # ---- the Player -------------------------------------------------------------------------------------

    def _player(self):
        """The Player for this board size; GtpError when there is none."""
        try:
            player = self.players.get(self.game.width, self.game.height)
        except NetworkUnavailable as error:
            raise GtpError(f"no network loaded: {error}") from None
        player.resign_below(self._resign_winrate)
        player.set_strength(self.strength)
        return player


# ---- pictures ---------------------------------------------------------------------------------------------

def summary(snapshot) -> str:
    """One line for people: the side to move's winrate and lead, and the search's size."""
    side = "Black" if snapshot.to_play == BLACK else "White"
    lead = snapshot.score_lead
    return (f"{side} to play: winrate {100 * snapshot.winrate:.1f}%, "
            f"{'leads' if lead >= 0 else 'trails'} by {abs(lead):.1f} points, {snapshot.visits} visits")


GOGUI_ANALYZE_COMMANDS = (
    "dboard/Ownership/gogui-ownership",
    "gfx/Policy/gogui-policy",
    "gfx/Best Moves/gogui-best_moves",
    "string/Winrate and Score/gogui-winrate",
    "plist/Dead Stones/final_status_list dead",
    "plist/Seki Stones/final_status_list seki",
    "string/Final Score/final_score",
    "none/Clear Cache/clear_cache",
)
