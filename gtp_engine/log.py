"""Logging: every diagnostic line goes to stderr through the logging module, never to stdout.

Terms:
- protocol stream: stdout, kept for the protocol alone (GTP, or the JSON analysis engine's): protocol_stdout()
  duplicates file descriptor 1 for the protocol's writer and then points it at stderr, so a stray print or a
  library's message cannot corrupt the protocol.
- writer thread: records pass through a queue to one thread that writes them, so a search thread never waits on a
  full stderr pipe.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import sys
from typing import BinaryIO

LEVELS = ("debug", "info", "warning", "error")

_listeners: list[logging.handlers.QueueListener] = []


def setup(level: str) -> None:
    """Sends the records of `level` and above to stderr; safe to call once per process."""
    records: queue.SimpleQueue = queue.SimpleQueue()
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    listener = logging.handlers.QueueListener(records, to_stderr)
    listener.start()
    _listeners.append(listener)
    atexit.register(flush)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(records)]
    root.setLevel(level.upper())


def flush() -> None:
    """Writes out what is queued; called before the process ends without running atexit (os._exit)."""
    while _listeners:
        _listeners.pop().stop()


def protocol_stdout() -> BinaryIO:
    """A binary stream on the real stdout for the protocol; file descriptor 1 then points at stderr."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return out
