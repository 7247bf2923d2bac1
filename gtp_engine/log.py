"""Logging: every diagnostic line goes to stderr through the logging module, never to stdout.

Terms:
- protocol stream: stdout, kept for the protocol alone (GTP, or the JSON analysis engine's): protocol_stdout()
  duplicates file descriptor 1 for the protocol's writer and then points it at stderr, so a stray print or a
  library's message cannot corrupt the protocol.
- writer thread: records pass through a queue to one thread that writes them, so a search thread never waits on a
  full stderr pipe.
- announcement: a line on stderr for people and programs that read it (the start-up line, the analysis engine's
  ready line), written as it is, without the time and level of a log record, in order with the records.
- ending the process: the queued records written, then os._exit, without waiting for search threads and without
  the interpreter's exit, during which onnxruntime's threads abort the process ("terminate called"). The front ends
  end so after quit or the end of input, and at a stop signal (SIGTERM, or SIGINT from Ctrl-C).
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import signal
import socket
import sys
import threading
from typing import BinaryIO, Callable, NoReturn

LEVELS = ("debug", "info", "warning", "error")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_listeners: list[logging.handlers.QueueListener] = []


def setup(level: str) -> None:
    """Sends the records of `level` and above to stderr; safe to call once per process."""
    records: queue.SimpleQueue = queue.SimpleQueue()
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    listener = logging.handlers.QueueListener(records, to_stderr)
    listener.start()
    _listeners.append(listener)
    atexit.register(flush)
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(records)]
    root.setLevel(level.upper())


class _Formatter(logging.Formatter):
    """The records' format; an announcement as it is."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage() if getattr(record, "announcement", False) else super().format(record)


def announce(line: str, always: bool = False) -> None:
    """Writes an announcement (module docstring) at the levels that show warnings, or at every level when `always`."""
    root = logging.getLogger()
    if not (always or root.isEnabledFor(logging.WARNING)):
        return
    root.handle(logging.makeLogRecord({"name": "gtp_engine", "levelno": logging.WARNING, "levelname": "WARNING",
                                       "msg": line, "announcement": True}))


def flush() -> None:
    """Writes out what is queued; called before the process ends without running atexit (os._exit)."""
    while _listeners:
        _listeners.pop().stop()


def end_process(status: int = 0) -> NoReturn:
    """Ends the process at once with `status` (see ending the process)."""
    flush()
    sys.stderr.flush()
    os._exit(status)


def end_at_stop_signals(last_words: Callable[[int], int] | None = None) -> None:
    """Makes SIGTERM and SIGINT end the process at once (end_process), with status 0, or the status that
    last_words(signal number) returns once it has said and undone what it must; a later call replaces last_words.
    Call it from the main thread.

    A signal runs Python's handler in the main thread only, and only once that thread runs Python again: one that
    waits for input would not, when the signal came to another thread. So the handler also writes the signal's
    number to a pipe (signal.set_wakeup_fd), from whichever thread received it, and a thread that waits on the pipe
    ends the process; the first of the two to come ends it, the other waits for the end.
    """
    _stop_signals.last_words = last_words
    if _stop_signals.watched:
        return
    _stop_signals.watched = True
    _stop_signals.pipe = receiver, sender = socket.socketpair()  # a socket pair: what Windows takes too
    sender.setblocking(False)
    signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda signum, frame: _stop_signals.end(signum))
    threading.Thread(target=_stop_signals.watch, args=(receiver,), name="stop-signals", daemon=True).start()


def ignore_stop_signals() -> None:
    """From now on SIGTERM and SIGINT change nothing, for a last step that must not stop half-way (the review's
    renames); an ending under way (end_at_stop_signals) ends the process first."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    _stop_signals.hold()


class _StopSignals:
    """What end_at_stop_signals set up: its last words, and the one ending of the process."""

    def __init__(self):
        self.last_words: Callable[[int], int] | None = None
        self.watched = False
        self.pipe: tuple[socket.socket, socket.socket] | None = None  # the wakeup pipe, kept open
        self._ending = threading.RLock()  # reentrant: a second signal may come to a thread that is ending
        self._held = False

    def hold(self) -> None:
        """Makes a signal taken from now on change nothing; returns once no ending is under way."""
        self._ending.acquire()
        self._held = True

    def end(self, signum: int) -> None:
        self._ending.acquire()  # held until the process ends: another thread's signal waits for the end
        if self._held:  # taken before ignore_stop_signals, handled in the thread that holds
            return
        logging.getLogger(__name__).info("signal %d: exiting", signum)
        end_process(0 if self.last_words is None else self.last_words(signum))

    def watch(self, receiver: socket.socket) -> None:
        while True:
            for signum in receiver.recv(64):
                if signum in STOP_SIGNALS:
                    self.end(signum)


_stop_signals = _StopSignals()


def protocol_stdout() -> BinaryIO:
    """A binary stream on the real stdout for the protocol; file descriptor 1 then points at stderr."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return out
