"""Strength levels: the engine playing weaker in calibrated steps, and what a level's move distribution is.

Terms:
- rank (Rank): a kyu/dan rank, "12k" .. "1k", "1d", what --strength sets; its kyu number counts down to 0 at 1d
  (12k is 12, 1k is 1), as KaTrain counts. The scale: GNU Go 3.8 at level 10 is 8k, and a rank is 100 Elo (a rank
  above scores 64%). The ranks are where calibration matches put each level (docs/measurements.md, "Strength
  levels"), not ranks of any server. The scale ends at 12k, the weakest rank matches placed on both boards: a draw
  among the candidates at random plays far weaker than that, and no anchor is weak enough to place it.
- level: the settings a rank plays with on a board (StrengthLevel): its reading (playouts of the move's search),
  the temperature of its draw among the candidates, the search share (how often it plays the search's own choice
  outright) and the largest loss it accepts. `max`, no rank, plays at full strength, exactly as without the option.
- table: the levels of the calibrated ranks on one board size (TABLES, by size). The same settings play stronger
  on 19x19 than on 9x9 against the same anchor, so each calibrated size has its own; a board takes the table of
  the calibrated size nearest in points (13x13: 9x9's), and a rank between two rows the settings between them
  (level_for). A table starts at the scale's weakest rank and ends at the strongest rank measured on its board;
  a rank above that plays the table's strongest row (capped): on 9x9 the levels end at 4k, where the engine's
  own default search plays.
- placed: whether matches put a row at the rank it is named. One that is not (19x19's 1d: it beats 4k at even,
  but gives stones as a 4-5k does) names a target, as do the ranks between it and the row below; the Player
  says so once in the log.
- candidates: the first CANDIDATES root moves by the network's policy, averaged over the board's symmetries where
  the evaluator offers that (one symmetry's top 10 holds a move outside the network's own top 10 in about one case
  in ten on 19x19), so that a level only ever plays among the policy's top 10. The level's search looks at no
  other root move and gives each candidate a visit before PUCT chooses, so that the search has judged every move
  it may play.
- blunder bound: a candidate whose score lead, as the level's search judged it, is more than max_loss of the
  board's points below the lead of the search's own choice is never played; max_loss is at most
  MAX_LOSS_SHARE (a quarter), well inside the half of the board no level may ever throw away. The search's own
  choice always stays playable, so a game already lost is played on with its best move.
- distribution: the probability of each root move at the level: search_share on the search's choice, the rest
  over the other playable candidates (never a pass, unless it is the search's choice) in proportion to
  prior ** (1 / temperature). Where the search chooses to pass, the level passes: the pass rules
  (endgame.py) then decide as at full strength. The analysis engine reports the distribution as humanPolicy.
- resignation at a level: only from RESIGN_MOVES_SHARE of the board's points in moves on, after
  RESIGN_CONSECUTIVE searches in a row below the threshold (player.PlayerConfig.resign_rule), so that a handicap
  game against a weaker player is played out.
- human profile: KataGo's humanSLProfile names (rank_20k .. rank_9d, preaz_20k .. preaz_9d, proyear_1800 ..
  proyear_2023): rank_ and preaz_ ranks map to the nearest rank of the scale (below it its weakest), ranks above it
  and professionals to max. This is a calibration of the engine's own play, not a model of human moves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

CANDIDATES = 10
MAX_LOSS_SHARE = 0.25  # of the board's points: the largest max_loss a level may have
WEAKEST, STRONGEST = 12, 0  # kyu numbers of the scale's ends: 12k and 1d
RESIGN_MOVES_SHARE = 0.5  # of the board's points: a level resigns from this move number on
RESIGN_CONSECUTIVE = 3
_RANK = re.compile(r"^(\d{1,2})\s*([kd])$", re.IGNORECASE)
_PROFILE = re.compile(r"^(rank|preaz)_(\d{1,2})([kd])$|^proyear_(\d{4})$")


@dataclass(frozen=True)
class StrengthLevel:
    """How one rank plays (see level)."""

    name: str  # its rank, e.g. "12k"
    playouts: int  # of the move's search, at least CANDIDATES
    temperature: float  # of the draw among the candidates, on their priors
    search_share: float  # probability of playing the search's own choice outright, 0 .. 1
    max_loss: float  # the largest loss it accepts, a share of the board's points (0 .. MAX_LOSS_SHARE)
    placed: bool = True  # matches put it at its rank (see placed)

    def __post_init__(self) -> None:
        if self.playouts < CANDIDATES:
            raise ValueError("a level needs a playout for each candidate")
        if not (self.temperature > 0 and 0 <= self.search_share <= 1 and 0 <= self.max_loss <= MAX_LOSS_SHARE):
            raise ValueError("temperature must be > 0, search_share and max_loss shares")

    @property
    def kyu(self) -> int:
        return kyu_number(self.name)


@dataclass(frozen=True)
class Rank:
    """A rank of the scale (see rank)."""

    kyu: int  # WEAKEST .. STRONGEST

    def __post_init__(self) -> None:
        if not STRONGEST <= self.kyu <= WEAKEST:
            raise ValueError(f"ranks go from {rank_name(WEAKEST)} to {rank_name(STRONGEST)}")

    @property
    def name(self) -> str:
        return rank_name(self.kyu)

    def level(self, area: int) -> StrengthLevel:
        """How this rank plays on a board of `area` points."""
        return level_for(self.kyu, area)


# Each calibrated size's rows, weakest first, named by where matches placed them (tuned by
# tools/calibrate_strength.py; docs/measurements.md has the matches behind each row). 19x19's 1d row is 9x9
# settings shifted two ranks (the shift measured at 9k), not yet placed by a match on 19x19.
TABLES: dict[int, tuple[StrengthLevel, ...]] = {
    9: (
        StrengthLevel("12k", playouts=12, temperature=2.83, search_share=0.125, max_loss=0.2),
        StrengthLevel("11k", playouts=12, temperature=2.29, search_share=0.1458, max_loss=0.1917),
        StrengthLevel("9k", playouts=13, temperature=1.5, search_share=0.1875, max_loss=0.175),
        StrengthLevel("8k", playouts=14, temperature=0.8, search_share=0.25, max_loss=0.15),
        StrengthLevel("5k", playouts=100, temperature=0.4, search_share=0.7, max_loss=0.08),
        StrengthLevel("4k", playouts=800, temperature=0.2, search_share=0.95, max_loss=0.05),
    ),
    19: (
        StrengthLevel("12k", playouts=11, temperature=3.0, search_share=0.11, max_loss=0.21),
        StrengthLevel("8k", playouts=12, temperature=2.0, search_share=0.15, max_loss=0.19),
        StrengthLevel("4k", playouts=37, temperature=0.57, search_share=0.475, max_loss=0.115),
        StrengthLevel("1d", playouts=168, temperature=0.34, search_share=0.76, max_loss=0.07, placed=False),
    ),
}


def table_for(area: int) -> tuple[StrengthLevel, ...]:
    """The table of the calibrated size nearest to a board of `area` points (see table)."""
    return TABLES[min(TABLES, key=lambda size: (abs(size * size - area), size))]


def kyu_number(rank: str) -> int:
    """The kyu number of a rank ("12k" -> 12, "1d" -> 0, "3d" -> -2); ValueError for what is no rank."""
    match = _RANK.match(rank.strip())
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"not a rank: {rank!r}")
    number = int(match.group(1))
    return number if match.group(2).lower() == "k" else 1 - number


def rank_name(kyu: int) -> str:
    return f"{kyu}k" if kyu > 0 else f"{1 - kyu}d"


def level_for(kyu: int, area: int) -> StrengthLevel:
    """The level of a kyu number on the scale (WEAKEST .. STRONGEST) on a board of `area` points: a row of its
    table, the settings between the two rows around it (geometric in playouts and temperature, linear in the
    shares), or the table's strongest row for a rank above it (see table)."""
    if not STRONGEST <= kyu <= WEAKEST:
        raise ValueError(f"ranks go from {rank_name(WEAKEST)} to {rank_name(STRONGEST)}")
    rows = sorted(table_for(area), key=lambda level: -level.kyu)
    if kyu <= rows[-1].kyu:
        return rows[-1]
    for weak, strong in zip(rows, rows[1:]):
        if strong.kyu <= kyu <= weak.kyu:
            t = (weak.kyu - kyu) / (weak.kyu - strong.kyu)
            return StrengthLevel(
                rank_name(kyu), playouts=round(weak.playouts * (strong.playouts / weak.playouts) ** t),
                temperature=weak.temperature * (strong.temperature / weak.temperature) ** t,
                search_share=weak.search_share + t * (strong.search_share - weak.search_share),
                max_loss=weak.max_loss + t * (strong.max_loss - weak.max_loss),
                placed=weak.placed and strong.placed)
    raise AssertionError("every table starts at the scale's weakest rank")


def parse_rank(text: str) -> Rank | None:
    """A --strength value: a rank on the scale, or "max" (None: full strength). ValueError saying what is
    accepted."""
    text = str(text).strip()
    if text.lower() == "max":
        return None
    try:
        return Rank(kyu_number(text))
    except ValueError:
        raise ValueError(f"expected a rank from {rank_name(WEAKEST)} to {rank_name(STRONGEST)} or max, "
                         f"got {text!r}") from None


def rank_label(rank: Rank | None) -> str:
    """A --strength value's name: the rank's, or max."""
    return "max" if rank is None else rank.name


def profile_rank(profile: str) -> Rank | None:
    """The rank nearest to a KataGo humanSLProfile (see human profile); ValueError for an unknown profile."""
    match = _PROFILE.match(str(profile).strip())
    if not match or (match.group(2) is not None and int(match.group(2)) < 1):
        raise ValueError(f"unknown humanSLProfile {profile!r}; expected rank_<rank>, preaz_<rank> "
                         f"(20k .. 9d) or proyear_<year>")
    if match.group(4) is not None:
        return None
    kyu = kyu_number(match.group(2) + match.group(3))
    if kyu < STRONGEST:
        return None
    return Rank(min(kyu, WEAKEST))


def candidate_edges(prior: np.ndarray) -> np.ndarray:
    """The candidates among edges with these priors (see candidates): their indices, highest prior first."""
    return np.argsort(-np.asarray(prior), kind="stable")[:CANDIDATES]


def distribution(level: StrengthLevel, prior: np.ndarray, lead: np.ndarray, best: int, is_pass: np.ndarray,
                 area: int) -> np.ndarray:
    """The level's probability of each edge (see distribution): prior and lead per edge (lead NaN where the
    search did not visit the edge, which is then never played), best the search's choice, is_pass per edge."""
    prior = np.asarray(prior, dtype=np.float64)
    lead = np.asarray(lead, dtype=np.float64)
    probability = np.zeros(len(prior))
    probability[best] = level.search_share
    playable = np.zeros(len(prior), dtype=bool)
    playable[candidate_edges(prior)] = True
    with np.errstate(invalid="ignore"):
        playable &= np.isfinite(lead) & (lead >= lead[best] - level.max_loss * area)
    playable &= ~np.asarray(is_pass, dtype=bool)
    playable[best] = True  # the search's choice is always playable
    weights = np.where(playable, prior, 0.0)
    if is_pass[best] or weights.sum() <= 0 or level.search_share >= 1.0:
        probability[:] = 0.0
        probability[best] = 1.0
        return probability
    weights = np.where(playable, (weights / weights.max()) ** (1.0 / level.temperature), 0.0)
    return probability + (1.0 - level.search_share) * weights / weights.sum()
