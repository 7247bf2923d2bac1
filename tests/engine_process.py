"""The engine as a subprocess over pipes, as a GUI or KaTrain runs it: what the GTP and the JSON analysis tests
share. Each front end's helper decodes the stdout lines its own way (GTP text, JSON objects). Also where test files
import their process helpers from (GNU Go's path, waiting for an exit): a test file that imports from `conftest`
gets whichever conftest.py was imported first when several folders are collected in one run."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def start_engine(args: list[str], stderr: Any = subprocess.PIPE, env: dict | None = None,
                 cwd: Path = ROOT) -> subprocess.Popen:
    """`python -m gtp_engine ARGS` with this checkout first on PYTHONPATH, stdin and stdout piped."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-m", "gtp_engine", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr, cwd=cwd,
                            env={**os.environ, "PYTHONPATH": path, **(env or {})})


class EngineProcess:
    """`python -m gtp_engine ARGS` with this checkout first on PYTHONPATH. A reader thread puts each stdout line,
    decoded by decode(), on `lines` (None once stdout ends) and keeps every byte in `raw`, for the checks that
    stdout carries the protocol only; stderr goes to a temporary file."""

    close_timeout = 60.0  # seconds close() waits for the engine to exit after its input ends, then kills it

    def __init__(self, args: list[str], env: dict | None = None, cwd: Path = ROOT):
        self.stderr = tempfile.TemporaryFile()
        self.process = start_engine(args, self.stderr, env, cwd)
        self.lines: queue.Queue = queue.Queue()
        self.raw = bytearray()
        threading.Thread(target=self._read, daemon=True).start()

    def decode(self, line: bytes) -> Any:
        raise NotImplementedError

    def _read(self) -> None:
        for line in iter(self.process.stdout.readline, b""):
            self.raw += line
            self.lines.put(self.decode(line))
        self.lines.put(None)

    def write(self, text: str) -> None:
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self, timeout: float | None = None) -> int:
        """Ends the engine's input, waits for it to exit (kills it after the timeout); its exit status."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(self.close_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def gnugo_path() -> str | None:
    return shutil.which("gnugo") or shutil.which("gnugo", path="/usr/games")


def wait_for_exit(process: subprocess.Popen, timeout: float) -> float:
    """Seconds until the process ended; fails the test when it outlives `timeout`."""
    start = time.monotonic()
    process.wait(timeout)
    return time.monotonic() - start
