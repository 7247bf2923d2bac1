"""Files of the training package: atomic replacement, the names shared by every run folder, and the metadata
document of a network file (its one reader and one writer).

Atomic replacement: a file is written beside its target and moved over it only once complete. An interrupted
run (a killed process, a full disk) therefore leaves either the old file or the new one, never a half-written
one. The new file gets ordinary permissions (0644): tempfile's private 0600 would lock other users, and copies
made for other machines, out of checkpoints, shards and exported networks.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

from gtp_engine.onnx_evaluator import METADATA_KEY

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


def network_metadata(proto) -> dict | None:
    """The ONNX ModelProto's gtp_engine document (METADATA_KEY), None when it has none."""
    for entry in proto.metadata_props:
        if entry.key == METADATA_KEY:
            return json.loads(entry.value)
    return None


def set_network_metadata(proto, metadata: dict) -> None:
    """Makes `metadata` the ONNX ModelProto's one gtp_engine document (METADATA_KEY), and its doc string a summary
    of it: the one writer of network metadata (export, quantize, board_masks)."""
    del proto.metadata_props[:]
    entry = proto.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, json.dumps(metadata, sort_keys=True)
    precision = metadata.get("precision", "fp32")
    proto.doc_string = (f"gtp_engine network {metadata.get('preset', '?')}"
                        + (f", {precision}" if precision != "fp32" else "")
                        + f", features v{metadata['features_version']}")
