"""Rules as KataGo's clients name them: a rule set name, or KataGo's JSON object of rule fields.

Terms:
- name: one of game.RULE_SETS or an alias (game.Rules.named), plus the names KataGo's clients send: chinese-ogs,
  chinese-kgs, "new zealand" (KaTrain writes it with a space).
- JSON form: {"ko": "SIMPLE|POSITIONAL|SITUATIONAL", "scoring": "AREA|TERRITORY", "suicide": bool,
  "tax": "NONE", "hasButton": false, "whiteHandicapBonus": "0|N|N-1"} (KataGo's kata-get-rules). Fields this
  engine cannot play (a group tax, the button) are refused, not approximated.
Both kata-set-rules (GTP) and the JSON analysis engine's `rules` field read rules here.
"""

from __future__ import annotations

import json
from typing import Any

from gtp_engine.game import RULE_SETS, Rules

_KATA_RULE_NAMES = {"chinese-ogs": "chinese", "chinese-kgs": "chinese", "new zealand": "new-zealand"}


def rules_to_dict(rules: Rules) -> dict[str, Any]:
    return {
        "ko": rules.ko.upper(),
        "scoring": rules.scoring.upper(),
        "suicide": rules.suicide_allowed,
        "tax": "NONE",
        "hasButton": False,
        "whiteHandicapBonus": rules.white_handicap_bonus,
    }


def rules_to_json(rules: Rules) -> str:
    return json.dumps(rules_to_dict(rules), separators=(",", ":"))


def rules_from_text(text: str) -> Rules:
    """A rule set name, or a JSON object with KataGo's keys; raises ValueError for what this engine cannot play."""
    text = text.strip()
    if not text.startswith("{"):
        return Rules.named(_KATA_RULE_NAMES.get(text.lower(), text))
    try:
        fields = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    return rules_from_dict(fields)


def rules_from_dict(fields: Any) -> Rules:
    """Rules from KataGo's JSON object (already decoded); raises ValueError."""
    if not isinstance(fields, dict):
        raise ValueError("expected a JSON object")
    current = Rules()
    values = {"scoring": current.scoring, "ko": current.ko, "suicide_allowed": current.suicide_allowed,
              "white_handicap_bonus": current.white_handicap_bonus}
    for key, value in fields.items():
        if key == "ko" and isinstance(value, str):
            values["ko"] = value.lower()
        elif key == "scoring" and isinstance(value, str):
            values["scoring"] = value.lower()
        elif key in ("suicide", "multiStoneSuicideLegal") and isinstance(value, bool):
            values["suicide_allowed"] = value
        elif key == "whiteHandicapBonus" and isinstance(value, str):
            values["white_handicap_bonus"] = value.upper()
        elif (key, value) in (("tax", "NONE"), ("hasButton", False)):
            continue
        else:
            raise ValueError(f"unsupported rule {key}={value!r}")
    named = [name for name, rules in RULE_SETS.items()
             if (rules.scoring, rules.ko, rules.suicide_allowed, rules.white_handicap_bonus) == tuple(values.values())]
    return Rules(**values, name=named[0] if named else "custom")
