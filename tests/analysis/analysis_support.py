"""Helpers for the JSON analysis engine tests: the engine as a subprocess over pipes, and queries."""

from __future__ import annotations

import json

from engine_process import EngineProcess


class AnalysisEngine(EngineProcess):
    """A running analysis engine: send() queries, next() reads one response (with a timeout)."""

    def __init__(self, args: list[str]):
        super().__init__(["analysis", *args])

    def decode(self, line: bytes) -> dict:
        return json.loads(line)

    def send(self, query: dict | str) -> None:
        self.write((query if isinstance(query, str) else json.dumps(query)) + "\n")

    def next(self, timeout: float = 120) -> dict | None:
        return self.lines.get(timeout=timeout)

    def until_final(self, query_id: str, count: int = 1, timeout: float = 120) -> tuple[list[dict], list[dict]]:
        """Reads until `count` final results (isDuringSearch false) of query_id came; returns (finals, all read)."""
        finals, seen = [], []
        while len(finals) < count:
            response = self.next(timeout)
            assert response is not None, f"engine output ended; stderr:\n{self.stderr_text()}"
            seen.append(response)
            if response.get("id") == query_id and response.get("isDuringSearch") is False:
                finals.append(response)
        return finals, seen

    def ask(self, query: dict, timeout: float = 120) -> dict:
        """Sends a one-turn query and returns its final result; fails on an error for it."""
        self.send(query)
        finals, seen = self.until_final(query["id"], timeout=timeout)
        errors = [r for r in seen if "error" in r]
        assert not errors, errors
        return finals[0]


def position(query_id: str, moves=(), size: int = 9, **fields) -> dict:
    """A query of the last turn of `moves` (GTP vertices, alternating from Black) on a size x size board."""
    colors = "BW"
    return {"id": query_id, "moves": [[colors[i % 2], m] for i, m in enumerate(moves)], "rules": "chinese",
            "komi": 7.5, "boardXSize": size, "boardYSize": size, "maxVisits": 30, **fields}
