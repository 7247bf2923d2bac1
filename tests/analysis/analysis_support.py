"""Helpers for the JSON analysis engine tests: the engine as a subprocess over pipes, and queries."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class AnalysisEngine:
    """A running analysis engine: send() queries, next() reads one response (with a timeout)."""

    def __init__(self, args: list[str]):
        self.stderr = tempfile.TemporaryFile()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gtp_engine", "analysis", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, cwd=ROOT, env={**os.environ, "PYTHONPATH": path},
        )
        self.responses: queue.Queue = queue.Queue()
        self.raw_lines: list[bytes] = []  # everything on stdout, to check it holds JSON lines only
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in iter(self.process.stdout.readline, b""):
            self.raw_lines.append(line)
            self.responses.put(json.loads(line))
        self.responses.put(None)

    def send(self, query: dict | str) -> None:
        text = query if isinstance(query, str) else json.dumps(query)
        self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()

    def next(self, timeout: float = 120) -> dict | None:
        return self.responses.get(timeout=timeout)

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

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self, timeout: float = 60) -> int:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode



def position(query_id: str, moves=(), size: int = 9, **fields) -> dict:
    """A query of the last turn of `moves` (GTP vertices, alternating from Black) on a size x size board."""
    colors = "BW"
    return {"id": query_id, "moves": [[colors[i % 2], m] for i, m in enumerate(moves)], "rules": "chinese",
            "komi": 7.5, "boardXSize": size, "boardYSize": size, "maxVisits": 30, **fields}
