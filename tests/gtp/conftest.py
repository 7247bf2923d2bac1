"""Fixtures for GTP tests: the engine as a subprocess (python -m gtp_engine) and a minimal GTP client for it."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from engine_process import ROOT, EngineProcess, gnugo_path

RESPONSE_HEAD = re.compile(r"^([=?])(\d*)(?: (.*))?$")


@dataclass
class Response:
    ok: bool
    id: int | None
    text: str  # the result (or error) without the "=id " head; lines joined by "\n"

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n") if self.text else []


def parse_response(raw: list[str]) -> Response:
    """raw: the lines of one response, without the closing empty line."""
    match = RESPONSE_HEAD.match(raw[0])
    assert match, f"not a GTP response head: {raw[0]!r}"
    first = [match.group(3)] if match.group(3) else []
    return Response(match.group(1) == "=", int(match.group(2)) if match.group(2) else None,
                    "\n".join(first + raw[1:]).strip("\n"))


class Engine(EngineProcess):
    """A running engine: send() lines, response() reads one framed response (with a timeout)."""

    close_timeout = 10.0

    def decode(self, line: bytes) -> str:
        return line.decode("utf-8", errors="replace").rstrip("\n")

    def send(self, text: str, newline: str = "\n") -> None:
        self.write(text + newline)

    def line(self, timeout: float = 60) -> str | None:
        return self.lines.get(timeout=timeout)

    def response(self, timeout: float = 60) -> Response:
        raw: list[str] = []
        while True:
            line = self.line(timeout)
            assert line is not None, f"engine output ended; stderr:\n{self.stderr_text()}"
            if line == "" and raw:
                return parse_response(raw)
            if line != "":
                raw.append(line)

    def __call__(self, text: str, timeout: float = 60) -> Response:
        self.send(text)
        return self.response(timeout)

    def ok(self, text: str, timeout: float = 60) -> str:
        reply = self(text, timeout)
        assert reply.ok, f"{text!r} failed: {reply.text}"
        return reply.text


@pytest.fixture
def engine(tmp_path_factory):
    """engine(*args) starts `python -m gtp_engine *args`; every engine is closed after the test.

    Without --weights the engine looks for networks in an empty folder, not in the shipped weights/: tests never
    depend on the shipped networks, and a test without a network sees the engine as a user without one does.
    """
    started: list[Engine] = []
    no_networks = tmp_path_factory.mktemp("no-networks")

    def start(*args: str, env: dict | None = None, cwd: Path = ROOT) -> Engine:
        if not any(a.startswith("--weights") or a.startswith("--config") for a in args):
            args = (*args, "--weights-dir", str(no_networks))
        process = Engine(list(args), env, cwd)
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()


@pytest.fixture(scope="session")
def net_args(tiny_onnx_model) -> tuple[str, ...]:
    """Flags for an engine with the tiny test network: CPU, few visits, a fixed seed."""
    return ("--weights", str(tiny_onnx_model), "--device", "cpu", "--visits", "24", "--seed", "7")


@pytest.fixture
def gnugo():
    """A GNU Go process in GTP mode (the referee); skips when GNU Go is not installed."""
    path = gnugo_path()
    if path is None:
        pytest.skip("GNU Go is not installed (apt-get install gnugo)")
    processes: list[subprocess.Popen] = []

    def start(*args: str) -> Referee:
        process = subprocess.Popen([path, "--mode", "gtp", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True)
        processes.append(process)
        return Referee(process)

    yield start
    for process in processes:
        process.kill()
        process.wait()


class Referee:
    """A blocking GTP client for GNU Go."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    def __call__(self, text: str) -> Response:
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        raw = []
        while True:
            line = self.process.stdout.readline()
            assert line, "GNU Go ended"
            line = line.rstrip("\n")
            if line == "" and raw:
                return parse_response(raw)
            if line:
                raw.append(line)
