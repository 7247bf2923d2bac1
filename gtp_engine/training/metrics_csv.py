"""Metrics CSV: one row per iteration or evaluation of a run, appended as the run goes, with the rows written
after the checkpoint a resumed run starts from (a crash between the row and the save) dropped again.

Terms:
- columns: the fixed header of a run's file; values are written as they are, floats with 6 significant digits.
- position column: the column that counts the run's progress (step, iteration), compared on truncation.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence


def append(path: Path, columns: Sequence[str], row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        if new:
            writer.writeheader()
        writer.writerow({key: (f"{value:.6g}" if isinstance(value, float) else value) for key, value in row.items()})


def read(path: str | Path) -> list[dict[str, str]]:
    with Path(path).open(newline="") as f:
        return list(csv.DictReader(f))


def truncate(path: Path, columns: Sequence[str], position: str, last: int) -> None:
    """Keeps the rows whose `position` column is at most `last`."""
    if not path.exists():
        return
    rows = [row for row in read(path) if int(row[position]) <= last]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
