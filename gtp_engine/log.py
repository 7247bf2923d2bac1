"""Logging: every diagnostic line goes to stderr through the logging module, never to stdout (stdout is GTP's).

Records pass through a queue to one writer thread, so a search thread never waits on a full stderr pipe.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import queue
import sys

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
