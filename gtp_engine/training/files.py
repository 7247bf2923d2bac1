"""Files of the training package: atomic replacement, and the names shared by every run folder.

Atomic replacement: a file is written beside its target and moved over it only once complete. An interrupted
run (a killed process, a full disk) therefore leaves either the old file or the new one, never a half-written
one. The new file gets ordinary permissions (0644): tempfile's private 0600 would lock other users, and copies
made for other machines, out of checkpoints, shards and exported networks.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator

PERMISSIONS = 0o644
# A training run folder (train, reinforce, value-train) keeps its latest checkpoint, one metrics row per
# evaluation and, after the last step, the exported network under these names.
CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.csv"
ONNX = "model.onnx"


@contextlib.contextmanager
def replacing(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yields a temporary path beside `path`; when the block ends normally, the file there replaces `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=suffix, dir=path.parent)
    os.close(handle)
    try:
        yield Path(tmp)
        os.chmod(tmp, PERMISSIONS)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
