"""Game setups: the rules, komi and handicap stones a self-play or gate game starts with, drawn per game, so that a
network learns every rule set, komi and handicap it will be asked to judge, as KataGo's self-play does.

Terms:
- setup: one game's rule set, komi and handicap stones (GameSetup); new_game() is its empty board.
- rule sets: a comma-separated list of game.py's names ("chinese", "chinese,japanese,aga"); each game draws one.
- komi of a rule set: the run's komi is the first rule set's; another scoring moves it as the rules' default komi
  moves (Rules.default_komi: the usual point between area and territory counting, territory the lower).
- komi spread (komi_stdev > 0): an even game's komi is drawn from a normal distribution around its rule set's komi,
  rounded to a half point (whole komi included, so draws happen and are learnt too).
- handicap games (handicap_share > 0): that share of games gives Black 2 .. max_handicap stones on GTP's fixed
  points, the number drawn uniformly; White moves first, the komi is the rules' handicap komi (0.5) and White's
  compensation for the stones is the rules' own (game.py's white_handicap_bonus), with no spread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gtp_engine.game import GameState, Rules, fixed_handicap_points


def rule_sets(names: str) -> tuple[Rules, ...]:
    """The rule sets of a comma-separated list of names; ValueError for an empty list or an unknown name."""
    listed = [name.strip() for name in names.split(",")]
    if not all(listed):
        raise ValueError(f"rules {names!r}: a rule set name, or several separated by commas")
    return tuple(Rules.named(name) for name in listed)


@dataclass(frozen=True)
class GameSetup:
    rules: Rules
    komi: float
    handicap: int = 0

    def new_game(self, size: int) -> GameState:
        """The empty board of this setup (its handicap stones placed, White then to move)."""
        game = GameState(size, komi=self.komi, rules=self.rules)
        if self.handicap:
            game.place_handicap(fixed_handicap_points(game.grid, self.handicap))
        return game


@dataclass(frozen=True)
class SetupDistribution:
    """What each game's setup is drawn from (module docstring)."""

    rules: str = "chinese"
    komi: float = 7.5  # the first rule set's komi
    komi_stdev: float = 0.0
    handicap_share: float = 0.0
    max_handicap: int = 4
    choices: tuple[Rules, ...] = field(init=False, repr=False, compare=False)  # the rule sets `rules` names

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", rule_sets(self.rules))
        if self.komi_stdev < 0 or not 0.0 <= self.handicap_share <= 1.0:
            raise ValueError("komi_stdev must not be negative and handicap_share must be in [0, 1]")
        if self.handicap_share > 0 and self.max_handicap < 2:
            raise ValueError("handicap games need max_handicap of at least 2")

    def check_board(self, size: int) -> None:
        """ValueError where the handicap games cannot be played on this board (GTP's fixed points)."""
        if self.handicap_share > 0:
            try:
                fixed_handicap_points(GameState(size).grid, self.max_handicap)
            except ValueError:
                raise ValueError(f"GTP has no fixed handicap of {self.max_handicap} stones on {size}x{size} (boards "
                                 "from 7x7; up to 4 stones, and up to 9 on odd boards from 9x9)") from None

    def komi_of(self, rules: Rules) -> float:
        """The even-game komi of `rules` before any spread: the first rule set's komi, moved by the scoring."""
        return self.komi + rules.default_komi() - self.choices[0].default_komi()

    def draw(self, rng: np.random.Generator) -> GameSetup:
        """One game's setup."""
        choices = self.choices
        rules = choices[int(rng.integers(len(choices)))] if len(choices) > 1 else choices[0]
        if self.handicap_share > 0 and rng.random() < self.handicap_share:
            stones = int(rng.integers(2, self.max_handicap + 1))
            return GameSetup(rules, rules.default_komi(stones), stones)
        komi = self.komi_of(rules)
        if self.komi_stdev > 0:
            komi = round(2.0 * rng.normal(komi, self.komi_stdev)) / 2.0
        return GameSetup(rules, komi)
