"""GTP transport: turning input lines into commands and results into framed responses. Knows nothing of Go.

Terms (GTP version 2, sections 2 and 3):
- line: one line of input. Before parsing, control characters other than tab are removed (so CR from CRLF
  controllers goes), everything from '#' on is a comment, tabs become spaces. A line left empty is no command
  and gets no response, but it still counts as input: it stops a running analysis.
- command: [id] name [arguments]; the id is an unsigned integer the response echoes ("=12 D4").
- response: "=" or "?" (failure), the id if the command had one, a space and the result, then one empty line.
  A result never contains an empty line, since clients read one as the end of the response.
- stream: a response whose "=" line is written first and whose result lines follow as they are made
  (lz-analyze, kata-analyze); the empty line closes it.
- interrupt: GoGui's comment line "# interrupt", sent while a command runs to ask for its answer now.
- answer now: what asks a running command (genmove) for its answer at once: an interrupt, a quit command or the
  end of input, so that quit ends a long search at once rather than after it; other commands wait their turn.
- pipelining: controllers send several commands before reading any answer; the reader thread queues them and
  they are answered strictly in order.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import re
import threading
import time
from typing import BinaryIO, Callable

log = logging.getLogger(__name__)

# Error messages of the GTP specification; controllers compare them literally.
UNKNOWN_COMMAND = "unknown command"
SYNTAX_ERROR = "syntax error"
ILLEGAL_MOVE = "illegal move"
CANNOT_UNDO = "cannot undo"
UNACCEPTABLE_SIZE = "unacceptable size"
BOARD_NOT_EMPTY = "board not empty"
INVALID_NUMBER_OF_STONES = "invalid number of stones"
BAD_VERTEX_LIST = "bad vertex list"
CANNOT_LOAD_FILE = "cannot load file"
CANNOT_SCORE = "cannot score"

INTERRUPT_LINE = "# interrupt"

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class GtpError(Exception):
    """A failed command; str(error) is the text after '?'."""


@dataclasses.dataclass(frozen=True)
class Command:
    id: int | None
    name: str
    args: tuple[str, ...]
    arg_text: str  # the arguments as written (spaces kept), for file names that contain spaces
    received: float = dataclasses.field(default=0.0, compare=False)  # time.monotonic() when the line was read


def preprocess(line: str) -> str:
    """Applies GTP section 2.2 to one line; the result has no comment, no control characters and no tabs."""
    line = _CONTROL.sub("", line)
    comment = line.find("#")
    if comment >= 0:
        line = line[:comment]
    return line.replace("\t", " ").strip()


def parse(line: str) -> Command | None:
    """Parses one raw input line; None when nothing is left after preprocessing."""
    text = preprocess(line)
    if not text:
        return None
    head, _, rest = text.partition(" ")
    command_id = None
    if head.isdigit() and head.isascii():
        command_id = int(head)
        head, _, rest = rest.strip().partition(" ")
    rest = rest.strip()
    # Our command names are all lowercase; accepting any case costs nothing (GTP leaves it open in practice).
    return Command(command_id, head.lower(), tuple(rest.split()), rest)


def format_response(command_id: int | None, ok: bool, result: str) -> str:
    """Frames a result. A result starting with a newline keeps its first line below the '=' (showboard)."""
    head = ("=" if ok else "?") + ("" if command_id is None else str(command_id))
    lines = [line.rstrip() for line in result.split("\n") if line.strip()]
    if not lines:
        return head + "\n\n"
    separator = "\n" if result.startswith("\n") else " "
    return head + separator + "\n".join(lines) + "\n\n"


class Writer:
    """The only writer of GTP output: whole responses or stream lines, each written and flushed at once."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            try:
                self._stream.write(text.encode("utf-8", errors="replace"))
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                log.info("the controller closed our output")


class Stream:
    """The response of one command, for handlers that write result lines before they finish.

    Handlers that do not stream return their result and never touch this. A streaming handler calls start()
    (which writes the "=" line), then line() per result line, and its returned text becomes the last line.
    interrupted is set by any input line that arrives after the command was taken from the queue (or was
    already waiting behind it); answer_now only by an answer now (module docstring) that arrives so.
    """

    def __init__(self, command: Command, writer: Writer, interrupted: threading.Event, answer_now: threading.Event):
        self.command = command
        self.interrupted = interrupted
        self.answer_now = answer_now
        self._writer = writer
        self.started = False

    def start(self) -> None:
        if not self.started:
            self.started = True
            self._writer.write(format_response(self.command.id, True, "").rstrip("\n") + "\n")

    def line(self, text: str) -> None:
        """Writes one result line of a started stream; empty text is dropped, since it would end the response."""
        text = text.replace("\n", " ").rstrip()
        if text:
            self.start()
            self._writer.write(text + "\n")

    def finish(self, result: str) -> None:
        self.start()
        self.line(result)
        self._writer.write("\n")


class Reader:
    """Reads input on a daemon thread and queues commands in order; every line also sets interrupted, and an answer
    now (an interrupt line, quit, the end of input) answer_now.

    next() hands out commands (None at end of input) and clears the events when nothing else is waiting,
    so a command sees them set exactly when input arrived behind it.
    """

    _END = object()
    _NOTHING = object()  # an empty line: no command, but input that interrupts

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self.interrupted = threading.Event()
        self.answer_now = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gtp-reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        return self

    def _put(self, item: object, answer_now: bool = False) -> None:
        with self._lock:
            self._queue.put(item)
            self.interrupted.set()
            if answer_now:
                self.answer_now.set()

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                # surrogateescape keeps any byte of a file name as it was sent.
                line = raw.decode("utf-8", errors="surrogateescape")
                is_interrupt = _CONTROL.sub("", line).strip() == INTERRUPT_LINE
                command = parse(line)
                if command is None:
                    self._put(self._NOTHING, answer_now=is_interrupt)
                else:
                    command = dataclasses.replace(command, received=time.monotonic())
                    self._put(command, answer_now=command.name == "quit")
        except (OSError, ValueError) as error:
            log.info("input closed: %s", error)
        self._put(self._END, answer_now=True)

    def next(self) -> Command | None:
        while True:
            item = self._queue.get()
            with self._lock:
                if self._queue.empty():
                    self.interrupted.clear()
                    self.answer_now.clear()
            if item is self._END:
                return None
            if item is not self._NOTHING:
                return item

    def pending(self) -> bool:
        return not self._queue.empty()


Handler = Callable[[Command, Stream], str]


def serve(dispatch: Callable[[str], Handler | None], reader: Reader, writer: Writer) -> str:
    """Answers commands until quit or the end of input; returns "quit" or "eof".

    dispatch maps a command name to its handler (None: unknown). A handler returns its result or raises
    GtpError; any other exception is logged and answered as a failure, so no input can end the session.
    """
    while True:
        command = reader.next()
        if command is None:
            return "eof"
        handler = dispatch(command.name)
        stream = Stream(command, writer, reader.interrupted, reader.answer_now)
        if handler is None:
            writer.write(format_response(command.id, False, UNKNOWN_COMMAND))
            continue
        try:
            result, ok = handler(command, stream), True
        except GtpError as error:
            result, ok = str(error), False
        except Exception as error:  # noqa: BLE001 - the session must survive a bug in one command
            log.exception("command %r failed", command.name)
            result, ok = f"internal error: {type(error).__name__}: {error}", False
        if stream.started:
            if not ok:
                log.error("%s failed after its response began: %s", command.name, result)
                result = ""
            stream.finish(result)
        else:
            writer.write(format_response(command.id, ok, result))
        if command.name == "quit" and ok:
            return "quit"
