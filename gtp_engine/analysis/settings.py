"""Settings of the JSON analysis engine, named by KataGo's config keys.

Terms:
- setting: a KataGo config key this engine honours, e.g. maxVisits. The same table reads the config file
  (-config), -override-config k=v,... (both read by katago_config.py) and a query's overrideSettings, so a key
  means one thing everywhere.
- engine-only setting: one that only makes sense at start-up (numAnalysisThreads, numSearchThreads): refused in
  overrideSettings with a warning.
- ignored key: a KataGo key with no meaning here (nnCacheSizePowerOfTwo, logDir, homeDataDir, ...): a warning,
  never an error, so that KataGo's own config files (KaTrain's analysis_config.cfg) work unchanged.
- reporting side: reportAnalysisWinratesAs, BLACK, WHITE or SIDETOMOVE: whose view winrates, leads, utilities and
  ownership are reported from. BLACK by default, as in KataGo's analysis_example.cfg and every client's config.
- wideRootNoise w: KataGo widens the root search with it; here it is the policy half of KataGo's wide root
  noise, the root's priors raised to 1 / (1 + 4 w) (a root policy temperature), without KataGo's random noise
  on values, so results stay reproducible.
- rules: a config file's default rules for queries that give none (KataGo's GTP configs have the key; a query's
  own `rules` always wins).
- humanSLProfile: KataGo's human-style profile (rank_10k, preaz_2d, proyear_1990, ...). There is no human-trained
  network here: the profile picks the nearest strength rank (search/strength.py), whose level's move distribution
  the query's humanPolicy reports. Kept as given; profile_rank reads it.
- numSearchThreads: KataGo's threads per search collect leaves in parallel under virtual loss; here the same
  number is the search's batch size (leaves per network call), which plays that part.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

from gtp_engine.game import Rules
from gtp_engine.katago_config import SettingError
from gtp_engine.search import strength

REPORT_SIDES = ("BLACK", "WHITE", "SIDETOMOVE")
MAX_PV_LENGTH = 30  # the longest principal variation the search gives


@dataclass(frozen=True)
class AnalysisSettings:
    max_visits: int = 500  # maxVisits, KataGo's analysis example config
    max_time: float | None = None  # maxTime, seconds per analysed turn
    report_as: str = "BLACK"  # reportAnalysisWinratesAs
    wide_root_noise: float = 0.0  # wideRootNoise
    root_policy_temperature: float = 1.0  # rootPolicyTemperature
    root_fpu_reduction: float | None = None  # rootFpuReductionMax; None: the search's own
    fpu_reduction: float | None = None  # fpuReductionMax
    c_puct: float | None = None  # cpuctExploration
    c_puct_log: float | None = None  # cpuctExplorationLog
    c_puct_base: float | None = None  # cpuctExplorationBase
    pv_length: int = 15  # analysisPVLen
    search_threads: int | None = None  # numSearchThreads: the search's batch size; None: the network option's
    analysis_threads: int | None = None  # numAnalysisThreads: searches at once; None: one per CPU core
    rules: str | None = None  # rules: for queries without a rules field; None: such a query is refused
    human_profile: str | None = None  # humanSLProfile; None: none

    @property
    def rank(self) -> strength.Rank | None:
        """The strength rank of the human profile (None: full strength, also without a profile)."""
        return None if self.human_profile is None else strength.profile_rank(self.human_profile)

    @property
    def policy_temperature(self) -> float:
        """The root policy temperature the search uses: rootPolicyTemperature and the policy part of
        wideRootNoise together."""
        return self.root_policy_temperature * (1.0 + 4.0 * self.wide_root_noise)


def _positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    number = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
    if not number.is_integer() or number < 1:
        raise ValueError
    return int(number)


def _number(valid: Callable[[float], bool]) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError
        number = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
        if not math.isfinite(number) or not valid(number):
            raise ValueError
        return number
    return parse


def _side(value: Any) -> str:
    text = str(value).strip().upper()
    if text not in REPORT_SIDES:
        raise ValueError
    return text


def _rules_name(value: Any) -> str:
    text = str(value).strip()
    Rules.nearest_katago(text)  # ValueError if unknown
    return text


def _profile(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError
    strength.profile_rank(value)  # ValueError if unknown
    return value.strip()


def _pv_length(value: Any) -> int:
    return min(_positive_int(value), MAX_PV_LENGTH)


# key -> (AnalysisSettings field, parser, what a good value is, allowed per query)
_KEYS: dict[str, tuple[str, Callable[[Any], Any], str, bool]] = {
    "maxVisits": ("max_visits", _positive_int, "a positive integer", True),
    "maxTime": ("max_time", _number(lambda t: t > 0), "a positive number of seconds", True),
    "reportAnalysisWinratesAs": ("report_as", _side, "BLACK, WHITE or SIDETOMOVE", True),
    "wideRootNoise": ("wide_root_noise", _number(lambda w: w >= 0), "a number >= 0", True),
    "rootPolicyTemperature": ("root_policy_temperature", _number(lambda t: t > 0), "a number > 0", True),
    "rootFpuReductionMax": ("root_fpu_reduction", _number(lambda r: r >= 0), "a number >= 0", True),
    "fpuReductionMax": ("fpu_reduction", _number(lambda r: r >= 0), "a number >= 0", True),
    "cpuctExploration": ("c_puct", _number(lambda c: c > 0), "a number > 0", True),
    "cpuctExplorationLog": ("c_puct_log", _number(lambda c: c >= 0), "a number >= 0", True),
    "cpuctExplorationBase": ("c_puct_base", _number(lambda c: c > 0), "a number > 0", True),
    "analysisPVLen": ("pv_length", _pv_length, "a positive integer", True),
    "numSearchThreads": ("search_threads", _positive_int, "a positive integer", False),
    "numSearchThreadsPerAnalysisThread": ("search_threads", _positive_int, "a positive integer", False),
    "numAnalysisThreads": ("analysis_threads", _positive_int, "a positive integer", False),
    "rules": ("rules", _rules_name, "a rule set name or KataGo's JSON rules", False),
    "humanSLProfile": ("human_profile", _profile,
                       "rank_<rank> or preaz_<rank> (20k .. 9d), or proyear_<year>", True),
}


def apply(settings: AnalysisSettings, values: dict[str, Any], per_query: bool = False) -> tuple[AnalysisSettings, list[str]]:
    """settings with `values` (KataGo key -> value) applied, and the keys ignored (unknown here, or engine-only
    in a query). Raises SettingError for a bad value of a known key."""
    changes: dict[str, Any] = {}
    ignored: list[str] = []
    for key, raw in values.items():
        entry = _KEYS.get(key)
        if entry is None or (per_query and not entry[3]):
            ignored.append(key)
            continue
        name, parse, expected, _ = entry
        try:
            changes[name] = parse(raw)
        except (TypeError, ValueError):
            raise SettingError(f"{key}: expected {expected}, got {raw!r}") from None
    return dataclasses.replace(settings, **changes), ignored
