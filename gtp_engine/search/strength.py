"""Strength levels: the engine playing weaker in calibrated steps, and what a level's move distribution is.

Terms:
- rank: a kyu/dan rank, "20k" .. "1k", "1d"; its kyu number counts down to 0 at 1d (20k is 20, 1k is 1), as
  KaTrain counts. The scale is anchored on GNU Go 3.8 (docs/measurements.md, "Strength levels"): the ranks are
  where the calibration matches put each level, not ranks of any server.
- level: the settings a rank plays with (StrengthLevel): its reading (playouts of the move's search), its
  candidates (the policy's top moves it may play), the temperature of its draw among them, the search share
  (how often it plays the search's own choice outright) and the largest loss it accepts. LEVELS holds the
  table's rows; a rank between two rows takes the settings between them (level_for). `max`, no level, plays at
  full strength, exactly as without the option.
- candidates: the first `candidates` root moves by the network's policy (at most MAX_CANDIDATES, so a level
  only ever plays among the policy's top 10). The level's search looks at no other root move and gives each
  candidate a visit before PUCT chooses, so that the search has judged every move it may play.
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
  proyear_2023): rank_ and preaz_ ranks map to the nearest level, ranks above the scale and professionals to
  max. This is a calibration of the engine's own play, not a model of human moves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

MAX_CANDIDATES = 10
MAX_LOSS_SHARE = 0.25  # of the board's points: the largest max_loss a level may have
WEAKEST, STRONGEST = 20, 0  # kyu numbers of the scale's ends: 20k and 1d
RESIGN_MOVES_SHARE = 0.5  # of the board's points: a level resigns from this move number on
RESIGN_CONSECUTIVE = 3
_RANK = re.compile(r"^(\d{1,2})\s*([kd])$", re.IGNORECASE)
_PROFILE = re.compile(r"^(rank|preaz)_(\d{1,2})([kd])$|^proyear_(\d{4})$")


@dataclass(frozen=True)
class StrengthLevel:
    """How one rank plays (see level)."""

    name: str  # its rank, e.g. "12k"
    playouts: int  # of the move's search
    candidates: int  # the policy's top moves it may play, 1 .. MAX_CANDIDATES
    temperature: float  # of the draw among the candidates, on their priors
    search_share: float  # probability of playing the search's own choice outright, 0 .. 1
    max_loss: float  # the largest loss it accepts, a share of the board's points (0 .. MAX_LOSS_SHARE)

    def __post_init__(self) -> None:
        if not 1 <= self.candidates <= MAX_CANDIDATES:
            raise ValueError(f"candidates must be 1 to {MAX_CANDIDATES}")
        if self.playouts < self.candidates:
            raise ValueError("a level needs a playout for each candidate")
        if not (self.temperature > 0 and 0 <= self.search_share <= 1 and 0 <= self.max_loss <= MAX_LOSS_SHARE):
            raise ValueError("temperature must be > 0, search_share and max_loss shares")

    @property
    def kyu(self) -> int:
        return kyu_number(self.name)


# The table's rows, weakest first (tuned by tools/calibrate_strength.py; docs/measurements.md has the matches).
LEVELS: tuple[StrengthLevel, ...] = (
    StrengthLevel("20k", playouts=10, candidates=10, temperature=2.0, search_share=0.0, max_loss=0.25),
    StrengthLevel("15k", playouts=12, candidates=10, temperature=1.0, search_share=0.1, max_loss=0.2),
    StrengthLevel("10k", playouts=16, candidates=8, temperature=0.7, search_share=0.3, max_loss=0.15),
    StrengthLevel("5k", playouts=32, candidates=6, temperature=0.5, search_share=0.55, max_loss=0.1),
    StrengthLevel("1d", playouts=64, candidates=4, temperature=0.3, search_share=0.8, max_loss=0.05),
)


def kyu_number(rank: str) -> int:
    """The kyu number of a rank ("12k" -> 12, "1d" -> 0, "3d" -> -2); ValueError for what is no rank."""
    match = _RANK.match(rank.strip())
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"not a rank: {rank!r}")
    number = int(match.group(1))
    return number if match.group(2).lower() == "k" else 1 - number


def rank_name(kyu: int) -> str:
    return f"{kyu}k" if kyu > 0 else f"{1 - kyu}d"


def level_for(kyu: int) -> StrengthLevel:
    """The level of a kyu number on the scale (WEAKEST .. STRONGEST): a row of LEVELS, or the settings between
    the two rows around it (linear in everything but playouts, which go geometrically)."""
    if not STRONGEST <= kyu <= WEAKEST:
        raise ValueError(f"ranks go from {rank_name(WEAKEST)} to {rank_name(STRONGEST)}")
    rows = sorted(LEVELS, key=lambda level: -level.kyu)
    for weak, strong in zip(rows, rows[1:]):
        if strong.kyu <= kyu <= weak.kyu:
            t = (weak.kyu - kyu) / (weak.kyu - strong.kyu)
            candidates = round(weak.candidates + t * (strong.candidates - weak.candidates))
            playouts = round(weak.playouts * (strong.playouts / weak.playouts) ** t)
            return StrengthLevel(
                rank_name(kyu), playouts=max(playouts, candidates), candidates=candidates,
                temperature=weak.temperature + t * (strong.temperature - weak.temperature),
                search_share=weak.search_share + t * (strong.search_share - weak.search_share),
                max_loss=weak.max_loss + t * (strong.max_loss - weak.max_loss))
    raise AssertionError("LEVELS covers the scale")


def parse_level(text: str) -> StrengthLevel | None:
    """A --strength value: a rank on the scale, or "max" (None: full strength). ValueError saying what is
    accepted."""
    text = str(text).strip()
    if text.lower() == "max":
        return None
    try:
        return level_for(kyu_number(text))
    except ValueError:
        raise ValueError(f"expected a rank from {rank_name(WEAKEST)} to {rank_name(STRONGEST)} or max, "
                         f"got {text!r}") from None


def level_name(level: StrengthLevel | None) -> str:
    return "max" if level is None else level.name


def profile_level(profile: str) -> StrengthLevel | None:
    """The level nearest to a KataGo humanSLProfile (see human profile); ValueError for an unknown profile."""
    match = _PROFILE.match(str(profile).strip())
    if not match or (match.group(2) is not None and int(match.group(2)) < 1):
        raise ValueError(f"unknown humanSLProfile {profile!r}; expected rank_<rank>, preaz_<rank> "
                         f"(20k .. 9d) or proyear_<year>")
    if match.group(4) is not None:
        return None
    kyu = kyu_number(match.group(2) + match.group(3))
    if kyu < STRONGEST:
        return None
    return level_for(min(kyu, WEAKEST))


def candidate_edges(prior: np.ndarray, level: StrengthLevel) -> np.ndarray:
    """The candidates among edges with these priors (see candidates): their indices, highest prior first."""
    return np.argsort(-np.asarray(prior), kind="stable")[: level.candidates]


def distribution(level: StrengthLevel, prior: np.ndarray, lead: np.ndarray, best: int, is_pass: np.ndarray,
                 area: int) -> np.ndarray:
    """The level's probability of each edge (see distribution): prior and lead per edge (lead NaN where the
    search did not visit the edge, which is then never played), best the search's choice, is_pass per edge."""
    prior = np.asarray(prior, dtype=np.float64)
    lead = np.asarray(lead, dtype=np.float64)
    probability = np.zeros(len(prior))
    probability[best] = level.search_share
    playable = np.zeros(len(prior), dtype=bool)
    playable[candidate_edges(prior, level)] = True
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
