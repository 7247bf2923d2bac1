"""The AlphaGo (2016) ablation table: engine configurations against opponents, one match per cell.

Terms:
- configuration: how the engine under test plays. "lambda<L>" searches at the table's time (or visits) per move
  with leaf values (1 - L) * value + L * rollout result (--lambda L); lambda0 is the default engine (AlphaGo
  Zero's setting), lambda1 takes the value from rollouts only. "policy" is the policy network alone: 1 visit,
  the network's first choice.
- opponent: "default" is the default engine at the same time (or visits) per move, so lambda0 against it is a
  sanity row (about 50% expected); "gnugo" is GNU Go at --gnugo-level with Chinese rules.
- cell: a configuration against an opponent, named "configuration/opponent" (lambda0.5/gnugo); --cells takes
  such names, shell patterns allowed (lambda*/gnugo).
- match: --games games per cell with gtp_engine/match.py's play_game, colours alternating (the configuration has
  Black in games 1, 3, 5, ...), a GNU Go referee checking every move and scoring by area.
- journal: <out>/journal.jsonl, one JSON line per finished game (cell, game number, colours, result, score for
  the configuration, moves, mean root visits per move of the configuration and of a default-engine opponent);
  a rerun plays only the games the journal lacks, so a table can be built over several sessions.
  <out>/settings.json holds what makes games comparable (size, komi, time, ...); a rerun with other settings is
  refused. Each game's SGF is in <out>/sgf/.
- row: a cell's games summed up: wins / losses / draws, score with its 95% interval and Elo with its interval
  (gtp_engine/match_stats.py), all for the configuration; written to <out>/table.md and printed.

Usage (from the repository root):
  python -m tools.ablation --size 9 --komi 7 --time 1 --games 20 --out runs/ablation \\
      [--gnugo-level 10] [--configs lambda0,lambda0.5,lambda1,policy] [--opponents default,gnugo] [--cells ...]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import shlex
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gtp_engine import coords, match_stats, sgf_io
from gtp_engine.game import KOMI
from gtp_engine.match import EXTRA_PATH, GtpError, Program, play_game
from gtp_engine.rollout import RolloutPolicy, RolloutWeightsError

CONFIGS = ("lambda0", "lambda0.5", "lambda1", "policy")
OPPONENTS = ("default", "gnugo")
REFEREE = "gnugo --mode gtp --chinese-rules"
JOURNAL, SETTINGS, TABLE = "journal.jsonl", "settings.json", "table.md"


class AblationError(Exception):
    """A problem the user must fix (a missing program or file, settings that differ from the journal's)."""


@dataclass(frozen=True)
class Settings:
    """What makes the games of one --out folder comparable; stored in settings.json."""
    size: int
    komi: float
    time: float | None  # seconds per move of every searching engine, or None with visits
    visits: int | None
    gnugo_level: int
    max_moves: int
    engine_args: str  # flags given to every engine (device, threads, weights)
    rollout_weights: str | None


class MeteredProgram(Program):
    """Our engine, asked for its moves with kata-genmove_analyze so that each move's root visits are known (the
    same search as genmove; both sides of an engine-against-engine game are asked this way)."""

    def __init__(self, command: str, verbose: bool = False):
        super().__init__(command, verbose)
        self.visits: list[int] = []

    def send(self, command: str, check: bool = True) -> str:
        if not command.startswith("genmove "):
            return super().send(command, check)
        lines = super().send(f"kata-genmove_analyze {command.split()[1]} rootInfo true maxmoves 1", check).split("\n")
        root = next((line.split("rootInfo visits ")[1] for line in lines if "rootInfo visits " in line), None)
        if root is not None:
            self.visits.append(int(root.split()[0]))
        return lines[-1].removeprefix("play ").strip()


# ---- configurations and opponents -----------------------------------------------------------------------

def parse_config(name: str) -> str:
    """The canonical name of a configuration (lambda0.50 -> lambda0.5); ValueError if it is none."""
    if name == "policy":
        return name
    try:
        mix = float(name.removeprefix("lambda")) if name.startswith("lambda") else math.nan
    except ValueError:
        mix = math.nan
    if not 0 <= mix <= 1:
        raise ValueError(f"unknown configuration {name!r}: expected policy or lambda<L> with L in [0, 1]")
    return f"lambda{mix:g}"


def config_label(name: str) -> str:
    if name == "policy":
        return "policy network only (1 visit)"
    mix = float(name.removeprefix("lambda"))
    return {0: "λ=0 (default engine)", 1: "λ=1 (rollouts only)"}.get(mix, f"λ={mix:g}")


def opponent_label(name: str, settings: Settings) -> str:
    if name == "gnugo":
        return f"GNU Go level {settings.gnugo_level}"
    return f"default engine, {budget_label(settings)}"


def budget_label(settings: Settings) -> str:
    return f"{settings.time:g} s/move" if settings.time is not None else f"{settings.visits} visits/move"


def search_flags(settings: Settings) -> str:
    return f"--time {settings.time:g}" if settings.time is not None else f"--visits {settings.visits}"


def engine_command(engine: str, settings: Settings, config: str | None) -> str:
    """The command of a configuration, or of the default engine (config None)."""
    parts = [engine, settings.engine_args]
    if config == "policy":
        parts.append("--visits 1")
    else:
        parts.append(search_flags(settings))
        mix = float(config.removeprefix("lambda")) if config else 0.0
        if mix > 0:
            parts.append(f"--lambda {mix:g}")
            if settings.rollout_weights:
                parts.append(f"--rollout-weights {shlex.quote(settings.rollout_weights)}")
    return " ".join(p for p in parts if p)


def gnugo_command(level: int) -> str:
    return f"gnugo --mode gtp --level {level} --chinese-rules"


def require_program(command: str, role: str) -> None:
    """Raises AblationError when the program of a command cannot be found (GNU Go is often not installed)."""
    program = shlex.split(command)[0]
    if shutil.which(program) is None and shutil.which(program, path=EXTRA_PATH) is None:
        hint = " (install GNU Go 3.8, e.g. apt-get install gnugo)" if "gnugo" in program else ""
        raise AblationError(f"{role}: {program!r} is not installed: not found on PATH or in {EXTRA_PATH}{hint}")


# ---- the journal --------------------------------------------------------------------------------------------

def read_journal(path: Path) -> list[dict]:
    """The finished games. A last line cut short (the run was killed while writing it) is dropped from the file."""
    if not path.exists():
        return []
    records, lines = [], path.read_text().splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            missing = {"config", "opponent", "game", "score"} - record.keys()
        except json.JSONDecodeError as error:
            if number == len(lines) and not line.endswith("\n"):
                print(f"{path}: dropping the unfinished last line", file=sys.stderr)
                path.write_text("".join(lines[:-1]))
                break
            raise AblationError(f"{path} line {number}: not JSON ({error})") from None
        if missing:
            raise AblationError(f"{path} line {number}: missing {', '.join(sorted(missing))}")
        records.append(record)
    return records


def append_journal(path: Path, record: dict) -> None:
    with open(path, "a") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def check_settings(out: Path, settings: Settings) -> None:
    """Stores the settings on the first run; refuses a rerun whose settings differ."""
    path = out / SETTINGS
    wanted = settings.__dict__
    if not path.exists():
        path.write_text(json.dumps(wanted, indent=1) + "\n")
        return
    try:
        stored = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise AblationError(f"{path}: not JSON ({error})") from None
    differences = [f"{key} {stored.get(key)!r} there, {value!r} now" for key, value in wanted.items()
                   if stored.get(key) != value]
    if differences:
        raise AblationError(f"{out} holds games played with other settings ({'; '.join(differences)}): "
                            f"use another --out, or the same settings")


def stored_settings(out: Path) -> Settings:
    path = out / SETTINGS
    try:
        return Settings(**json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError, TypeError) as error:
        raise AblationError(f"{path}: cannot read the settings ({error})") from None


# ---- the table --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    config: str
    opponent: str
    games: int
    wins: int
    losses: int
    draws: int
    score: tuple[float, float, float] | None  # (score, low, high)
    elo: tuple[float, float, float] | None
    visits: float | None  # mean root visits per move of the configuration
    opponent_visits: float | None  # the same for a default-engine opponent


def row(config: str, opponent: str, records: list[dict]) -> Row:
    mine = [r for r in records if r["config"] == config and r["opponent"] == opponent]
    results = [r["score"] for r in mine]
    if not results:
        return Row(config, opponent, 0, 0, 0, 0, None, None, None, None)
    wins, draws = results.count(1.0), results.count(0.5)
    return Row(config, opponent, len(results), wins, len(results) - wins - draws, draws,
               match_stats.score_interval(results), match_stats.elo_interval(results),
               _mean(r.get("visits") for r in mine), _mean(r.get("opponent_visits") for r in mine))


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def markdown_table(rows: list[Row], settings: Settings) -> str:
    caption = (f"{settings.size}x{settings.size}, komi {settings.komi:g}, {budget_label(settings)} for every "
               f"searching engine; area scoring by a GNU Go referee. Score and Elo are the configuration's, with 95% "
               f"intervals (normal approximation, Wilson where every game had the same result; gtp_engine/match_stats.py).")
    lines = [
        caption,
        "",
        "| configuration | opponent | games | wins / losses / draws | score (95%) | Elo (95%) | root visits/move (config / opponent) |",
        "|---|---|---:|---:|---|---|---:|",
    ]
    for r in rows:
        score = elo = "–"
        if r.score is not None:
            score = "{:.2f} ({:.2f} .. {:.2f})".format(*r.score)
            elo = "{} ({} .. {})".format(*map(_signed, r.elo))
        visits = " / ".join(f"{v:.0f}" if v is not None else "–" for v in (r.visits, r.opponent_visits))
        lines.append(f"| {config_label(r.config)} | {opponent_label(r.opponent, settings)} | {r.games} | "
                     f"{r.wins} / {r.losses} / {r.draws} | {score} | {elo} | {visits} |")
    return "\n".join(lines) + "\n"


def _signed(elo: float) -> str:
    """Elo as +12 / -300 / +inf, with no "-0" for a small negative number."""
    return f"{elo:+.0f}" if math.isinf(elo) else f"{round(elo):+d}"


def write_table(out: Path, cells: list[tuple[str, str]], settings: Settings) -> str:
    records = read_journal(out / JOURNAL)
    text = markdown_table([row(c, o, records) for c, o in cells], settings)
    (out / TABLE).write_text(text)
    return text


# ---- playing ------------------------------------------------------------------------------------------------

class Programs:
    """The GTP programs of a run, started when first needed and kept for later cells; (role, command) -> Program."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.started: dict[tuple[str, str], Program] = {}

    def get(self, role: str, command: str, metered: bool = False) -> Program:
        key = (role, command)
        if key not in self.started:
            try:
                self.started[key] = (MeteredProgram if metered else Program)(command, self.verbose)
            except GtpError as error:
                raise GtpError(f"{error} (run the command by hand, or add --verbose, to see why)") from None
        return self.started[key]

    def close(self) -> None:
        for program in self.started.values():
            program.close()
        self.started.clear()


def play_cell_game(programs: Programs, referee: Program, engine: str, settings: Settings, out: Path, config: str,
                   opponent: str, number: int) -> dict:
    """Plays game `number` of a cell, saves its SGF and returns its journal record."""
    tested = programs.get(config, engine_command(engine, settings, config), metered=True)
    if opponent == "gnugo":
        other = programs.get("opponent gnugo", gnugo_command(settings.gnugo_level))
    else:
        other = programs.get("opponent default", engine_command(engine, settings, None), metered=True)
    config_black = number % 2 == 1
    black, white = (tested, other) if config_black else (other, tested)
    names = (config, opponent) if config_black else (opponent, config)
    metered = [program for program in (tested, other) if isinstance(program, MeteredProgram)]
    for program in metered:
        program.visits = []
    started = time.monotonic()
    result, game, _ = play_game(black, white, referee, settings.size, settings.komi, settings.max_moves)
    seconds = time.monotonic() - started
    sgf_path = out / "sgf" / f"{config}_vs_{opponent}_{number}.sgf"
    temporary = sgf_path.with_suffix(".tmp")
    temporary.write_bytes(sgf_io.save_sgf(game, black=names[0], white=names[1], result=result))
    os.replace(temporary, sgf_path)  # the SGF is complete before the journal counts the game
    score = 0.5 if result == "0" else float(result.startswith("B+") == config_black)
    return {
        "config": config, "opponent": opponent, "game": number, "black": names[0], "white": names[1],
        "result": result, "score": score, "moves": [coords.to_gtp(game.grid, p) for _, p in game.moves],
        "visits": _mean(tested.visits), "opponent_visits": _mean(other.visits) if other in metered else None,
        "seconds": round(seconds, 1), "sgf": str(sgf_path.relative_to(out)),
    }


def schedule(cells: list[tuple[str, str]], games: int, done: set[tuple[str, str, int]],
             order: str) -> list[tuple[str, str, int]]:
    """The games still to play: cell after cell, or (order "rounds") game 1 of every cell, then game 2, ..."""
    wanted = [(c, o, n) for c, o in cells for n in range(1, games + 1)]
    if order == "rounds":
        wanted.sort(key=lambda item: item[2])
    return [item for item in wanted if item not in done]


def check_programs(settings: Settings, opponents: list[str], referee: str, configs: list[str]) -> None:
    require_program(referee, "the referee")
    if "gnugo" in opponents:
        require_program(gnugo_command(settings.gnugo_level), "the gnugo opponent")
    if settings.rollout_weights and any(c != "policy" and float(c.removeprefix("lambda")) > 0 for c in configs):
        try:
            RolloutPolicy.load(settings.rollout_weights)
        except RolloutWeightsError as error:
            raise AblationError(f"--rollout-weights: {error}") from None


def preflight(programs: Programs, engine: str, settings: Settings, configs: list[str]) -> None:
    """Asks each configuration for a move on the empty board, so that a missing network or rollout policy stops
    the run before any game rather than hours into it."""
    for config in configs:
        program = programs.get(config, engine_command(engine, settings, config), metered=True)
        program.send(f"boardsize {settings.size}")
        program.send("clear_board")
        program.send("reg_genmove b")


def selected_cells(configs: list[str], opponents: list[str], patterns: list[str] | None) -> list[tuple[str, str]]:
    cells = [(c, o) for c in configs for o in opponents]
    if patterns:
        cells = [(c, o) for c, o in cells if any(fnmatch.fnmatchcase(f"{c}/{o}", p) for p in patterns)]
    return cells


def run(args: argparse.Namespace, settings: Settings, cells: list[tuple[str, str]]) -> int:
    out: Path = args.out
    (out / "sgf").mkdir(parents=True, exist_ok=True)
    check_settings(out, settings)
    journal = out / JOURNAL
    done = {(r["config"], r["opponent"], r["game"]) for r in read_journal(journal)}
    todo = schedule(cells, args.games, done, args.order)
    print(f"{len(todo)} games to play ({args.games} per cell, {len(cells)} cells; "
          f"{len(done)} finished games in {journal})", file=sys.stderr)
    if not todo:
        return 0
    check_programs(settings, sorted({o for _, o, _ in todo}), args.referee, [c for c, _, _ in todo])
    programs = Programs(args.verbose)
    deadline = None if args.stop_after is None else time.monotonic() + 60 * args.stop_after
    try:
        referee = programs.get("referee", args.referee)
        preflight(programs, args.engine, settings, list(dict.fromkeys(c for c, _, _ in todo)))
        for config, opponent, number in todo:
            if deadline is not None and time.monotonic() > deadline:
                print(f"--stop-after {args.stop_after:g} minutes reached: rerun the same command to go on",
                      file=sys.stderr)
                break
            record = play_cell_game(programs, referee, args.engine, settings, out, config, opponent, number)
            append_journal(journal, record)
            print(f"{config}/{opponent} game {number}: {record['black']} (B) vs {record['white']} (W): "
                  f"{record['result']} in {len(record['moves'])} moves, {record['seconds']:.0f} s", file=sys.stderr)
    except GtpError as error:
        print(f"ablation stopped: {error}", file=sys.stderr)
        return 1
    finally:
        programs.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the journal, SGF files and table.md")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=KOMI, help=f"(default: {KOMI:g})")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--time", type=float, help="seconds per move of every searching engine (default: 1)")
    budget.add_argument("--visits", type=int, help="root visits per move instead of --time (quick tests)")
    parser.add_argument("--games", type=int, default=20, help="games per cell (default: 20)")
    parser.add_argument("--gnugo-level", type=int, default=10)
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"configurations: policy or lambda<L> (default: {','.join(CONFIGS)})")
    parser.add_argument("--opponents", default=",".join(OPPONENTS), help="default and / or gnugo (default: both)")
    parser.add_argument("--cells", help="only these cells: config/opponent names, shell patterns allowed, "
                                        "comma-separated (lambda0.5/gnugo,policy/*)")
    parser.add_argument("--order", choices=("cells", "rounds"), default="cells",
                        help="play cell after cell, or game 1 of every cell first, then game 2, ... (default: cells)")
    parser.add_argument("--stop-after", type=float, metavar="MINUTES",
                        help="start no game after this many minutes (the rest waits for a rerun)")
    parser.add_argument("--engine", default=f"{shlex.quote(sys.executable)} -m gtp_engine",
                        help="command of the engine, without flags (default: this Python's gtp_engine)")
    parser.add_argument("--engine-args", default="",
                        help="flags for every engine, e.g. \"--device cpu --threads 1\" or \"--weights FILE\"")
    parser.add_argument("--rollout-weights", help="rollout policy of the lambda > 0 configurations "
                                                  "(default: the engine's, rollout-<W>x<H>.npz beside the networks)")
    parser.add_argument("--referee", default=REFEREE, help=f"GTP program that checks and scores (default: {REFEREE})")
    parser.add_argument("--max-moves", type=int, help="score the game after this many moves (default: 3 x area)")
    parser.add_argument("--table-only", action="store_true", help="write the table from the journal, play nothing")
    parser.add_argument("--verbose", action="store_true", help="show the programs' stderr")
    args = parser.parse_args(argv)
    try:
        configs = list(dict.fromkeys(parse_config(c.strip()) for c in args.configs.split(",") if c.strip()))
    except ValueError as error:
        parser.error(f"--configs: {error}")
    opponents = [o.strip() for o in args.opponents.split(",") if o.strip()]
    if not opponents or set(opponents) - set(OPPONENTS):
        parser.error(f"--opponents: expected default and / or gnugo, got {args.opponents!r}")
    if args.games < 0 or (args.visits is not None and args.visits < 1) or (args.time is not None and args.time <= 0):
        parser.error("--games must be >= 0, --visits >= 1 and --time > 0")
    cells = selected_cells(configs, opponents, args.cells.split(",") if args.cells else None)
    if not cells:
        parser.error(f"--cells {args.cells!r} selects none of the cells")

    def stop(signum, frame):  # a kill ends the current game, as Ctrl-C does: the journal keeps what finished
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        if args.table_only:
            settings = stored_settings(args.out)
            status = 0
        else:
            settings = Settings(
                size=args.size, komi=args.komi, time=None if args.visits else args.time or 1.0,
                visits=args.visits, gnugo_level=args.gnugo_level,
                max_moves=args.max_moves or 3 * args.size * args.size, engine_args=args.engine_args,
                rollout_weights=args.rollout_weights)
            try:
                status = run(args, settings, cells)
            except KeyboardInterrupt:
                print("interrupted: the finished games are in the journal; rerun the same command to go on",
                      file=sys.stderr)
                status = 130
        print(write_table(args.out, cells, settings), end="")
    except AblationError as error:
        print(f"ablation: {error}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
