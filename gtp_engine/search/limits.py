"""What a search is told about time and size: when it stops (StopCondition) and when it reports (ReportSchedule).

Terms:
- visits: backups through the root, those kept from earlier searches included (tree reuse); playouts: backups
  made by this search alone.
- clock: the function a Searcher reads time from (time.monotonic unless a test injects another); deadlines and
  report times are seconds on it.
- stop condition: visits, playouts, a deadline and an interrupt Event; the search stops at the first one
  reached, and only between batches, so a deadline counts as reached once the next batch would end past it (the
  batch time: the longest recent batch, decaying with time; at most half the search's time to that deadline).
  A time budget becomes a stop condition through StopCondition.for_budget, limits (visits, playouts, seconds)
  through StopCondition.for_limits; nothing here knows a game clock.
- report schedule: when a search reports what it thinks during itself (a snapshot marked during_search): the
  first report `first` seconds after it starts, then one every `every` seconds after the last; every None: that
  one report only. A search always reports once more when it ends (the final snapshot). Reports are made between
  batches, once a batch ends past the report time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class StopCondition:
    visits: int | None = None  # root visits, reused ones included
    playouts: int | None = None  # backups of this search
    deadline: float | None = None  # when to stop, on the searcher's clock
    interrupt: threading.Event | None = None  # set by another thread: stop after the current batch
    max_deadline: float | None = None  # the search may run past deadline up to this while its choice is unsettled
    min_deadline: float | None = None  # no early stop before this: time not used here is lost (byo-yomi)

    @classmethod
    def for_budget(cls, start: float, minimum: float, recommended: float, maximum: float,
                   interrupt: threading.Event | None = None, visits: int | None = None,
                   playouts: int | None = None) -> StopCondition:
        """From a time budget in seconds (timecontrol.budget) counted from `start` (on the searcher's clock), within
        limits on the search's size."""
        return cls(visits=visits, playouts=playouts, deadline=start + recommended, interrupt=interrupt,
                   max_deadline=start + maximum, min_deadline=start + minimum)

    @classmethod
    def for_limits(cls, start: float, visits: int | None = None, playouts: int | None = None,
                   seconds: float | None = None, interrupt: threading.Event | None = None) -> StopCondition:
        """From limits on the search's size and time: `seconds` counted from `start` (on the searcher's clock);
        None for no such limit."""
        return cls(visits=visits, playouts=playouts, deadline=None if seconds is None else start + seconds,
                   interrupt=interrupt)

    @property
    def is_bounded(self) -> bool:
        """Whether anything but an interrupt ends the search."""
        return self.visits is not None or self.playouts is not None or self.deadline is not None


@dataclass(frozen=True)
class ReportSchedule:
    """When a search reports during itself (see report schedule), in seconds on the searcher's clock."""

    first: float  # from the start of the search to the first report
    every: float | None = None  # from each report to the next; None: no report after the first

    @classmethod
    def periodic(cls, seconds: float) -> ReportSchedule:
        """A report every `seconds`, the first `seconds` after the start."""
        return cls(seconds, seconds)
