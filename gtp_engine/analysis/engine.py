"""The JSON analysis engine's line loop: each input line is a query or an action; every answer is one JSON line.

Terms:
- line: one JSON object. A line that is not JSON, or not an object, answers {"error": ...}; an object without a
  string `id` answers an error too. Nothing in a line ends the engine.
- action: an object with "action": query_version (answered with version and git_hash added), clear_cache,
  terminate (terminateId, optional turnNumbers), terminate_all (optional turnNumbers), query_models (answered
  with "models"). Each is acknowledged by echoing the object back, as KataGo does.
- query: anything else with an id (query.py); its warnings are sent first, then it is queued (scheduler.py).
- output: a Writer sends each object as one line and flushes it; workers and the reader share it.
- human profile warning: the first query with a humanSLProfile logs once on stderr that its humanPolicy is a
  calibration of the engine's own play (search/strength.py), not a human-trained model.
- end of input: queued work is finished, then serve returns; it is dropped and the running searches stopped at once
  with quit_without_waiting (-quit-without-waiting), or where nobody reads the output any more (the client went
  away: a write failed, or the pipe's reading end is closed).
"""

from __future__ import annotations

import json
import logging
import select
import threading
from typing import Any, BinaryIO, Callable, Iterable

import gtp_engine
from gtp_engine.analysis import responses
from gtp_engine.analysis.query import QueryError, parse_query
from gtp_engine.analysis.scheduler import Scheduler
from gtp_engine.analysis.settings import AnalysisSettings
from gtp_engine.search import strength

log = logging.getLogger(__name__)

ACTIONS = ("query_version", "clear_cache", "terminate", "terminate_all", "query_models")


class Writer:
    """JSON objects out, one line each, flushed; safe to call from several threads."""

    def __init__(self, out: BinaryIO):
        self._out = out
        self._lock = threading.Lock()
        self._broken = False

    def __call__(self, response: dict[str, Any]) -> None:
        line = json.dumps(response, separators=(",", ":"), allow_nan=False, default=_json_default) + "\n"
        with self._lock:
            try:
                self._out.write(line.encode("utf-8"))
                self._out.flush()
            except (BrokenPipeError, ValueError):  # the client went away; its input's end ends the engine
                log.info("the client closed our output")
                self._broken = True

    def unread(self) -> bool:
        """Whether nobody reads the output any more: a write failed, or the reading end of its pipe is closed."""
        if self._broken:
            return True
        try:
            poller = select.poll()
            poller.register(self._out.fileno(), select.POLLOUT)
            return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
        except (OSError, ValueError):  # not a file (a test's buffer), or closed
            return False


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class Engine:
    """Reads lines, answers actions, queues queries on a Scheduler."""

    def __init__(self, scheduler: Scheduler, write: Callable[[dict[str, Any]], None], settings: AnalysisSettings,
                 clear_cache: Callable[[], None], models: Callable[[], list[dict[str, Any]]]):
        self.scheduler = scheduler
        self.write = write
        self.settings = settings
        self._clear_cache = clear_cache
        self._models = models
        self._warned_human = False  # see human profile warning

    def handle_line(self, raw: bytes | str) -> None:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        text = text.strip()
        if not text:
            return
        try:
            fields = json.loads(text, parse_constant=_refuse_constant)
        except (json.JSONDecodeError, ValueError) as error:
            self.write(responses.error(f"could not parse JSON: {error}"))
            return
        if not isinstance(fields, dict):
            self.write(responses.error("expected a JSON object"))
            return
        query_id = fields.get("id")
        if not isinstance(query_id, str):
            self.write(responses.error("the id field is missing or not a string", "id"))
            return
        if "action" in fields:
            self._action(fields)
            return
        try:
            query, warnings = parse_query(fields, self.settings)
        except QueryError as error:
            self.write(responses.error(str(error), error.field, query_id))
            return
        for field, message in warnings:
            self.write(responses.warning(message, field, query_id))
        if query.settings.human_profile is not None and not self._warned_human:
            self._warned_human = True
            log.warning("humanSLProfile %s: humanPolicy is the move distribution of the engine's strength level %s, a "
                        "calibration of its own play against GNU Go, not a human-trained model",
                        query.settings.human_profile, strength.rank_label(query.settings.rank))
        self.scheduler.submit(query)

    def _action(self, fields: dict[str, Any]) -> None:
        action, query_id = fields["action"], fields["id"]
        if action == "query_version":
            self.write({**fields, "version": gtp_engine.__version__, "git_hash": "<omitted>"})
        elif action == "clear_cache":
            self._clear_cache()
            self.write(fields)
        elif action in ("terminate", "terminate_all"):
            target = None
            if action == "terminate":
                target = fields.get("terminateId")
                if not isinstance(target, str):
                    self.write(responses.error("terminateId is missing or not a string", "terminateId", query_id))
                    return
            turns = fields.get("turnNumbers")
            if turns is not None and not (isinstance(turns, list) and all(
                    isinstance(t, int) and not isinstance(t, bool) for t in turns)):
                self.write(responses.error("turnNumbers must be a list of integers", "turnNumbers", query_id))
                return
            self.write(fields)  # acknowledged first: the terminated turns answer after it
            self.scheduler.terminate(target, turns)
        elif action == "query_models":
            self.write({**fields, "models": self._models()})
        else:
            self.write(responses.error(f"unknown action {action!r}; known: {', '.join(ACTIONS)}", "action", query_id))


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def serve(lines: Iterable[bytes], engine: Engine, write: Writer, quit_without_waiting: bool) -> None:
    """Handles every line until the end of input, then finishes (or drops) the queued work (module docstring)."""
    for raw in lines:
        try:
            engine.handle_line(raw)
        except Exception as error:  # noqa: BLE001 - a bad line never ends the engine
            log.exception("cannot handle line %r", raw[:200])
            engine.write(responses.error(f"internal error: {error}"))
    drop = quit_without_waiting or write.unread()
    log.info("end of input: %s", "quitting" if drop else "finishing the queued analysis")
    engine.scheduler.close(wait=not drop)

