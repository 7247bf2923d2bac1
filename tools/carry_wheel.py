"""Carries a file larger than one device call may carry (the onnxruntime-gpu wheel, about 256 MB, against 64 MiB a
call with the working tree) in parts, over successive calls to a machine that keeps an ignored folder while warm.

Terms:
- parts: the file cut into pieces of at most --part-mib MiB, named NAME.part-00, NAME.part-01, ... in the parts
  folder, beside manifest.json (the file's name, size and SHA-256, and each part's name, size and SHA-256).
- join: where every part of the manifest is in the folder with its own size and hash, the parts put together as
  the file (its hash checked) in --out; otherwise the parts missing or damaged, named, and status 2, so that a call
  can say what the next one must carry. `--check` says only that, and writes nothing.

Usage (from the repository root; docs/gpu-runs.md has the device calls):
  python -m tools.carry_wheel split WHEEL --out .gpu-wheel [--part-mib 40]
  python3 -m tools.carry_wheel join .gpu-wheel --out /tmp/wheels      # there, once every part has arrived
  python3 -m tools.carry_wheel join .gpu-wheel --check                # which parts are there
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

MANIFEST = "manifest.json"
CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def split(source: Path, out: Path, part_bytes: int) -> dict:
    """Writes source's parts and the manifest into out (see parts); returns the manifest."""
    if part_bytes < 1:
        raise ValueError("a part must hold at least one byte")
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{source.name}.part-*"):
        stale.unlink()
    parts = []
    with source.open("rb") as stream:
        while block := stream.read(part_bytes):
            part = out / f"{source.name}.part-{len(parts):02d}"
            part.write_bytes(block)
            parts.append({"name": part.name, "size": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    manifest = {"file": source.name, "size": source.stat().st_size, "sha256": _sha256(source), "parts": parts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def missing_parts(folder: Path, manifest: dict) -> list[str]:
    """The parts of the manifest that are not in folder whole (size and hash), by name."""
    missing = []
    for part in manifest["parts"]:
        path = folder / part["name"]
        if not path.is_file() or path.stat().st_size != part["size"] or _sha256(path) != part["sha256"]:
            missing.append(part["name"])
    return missing


def join(folder: Path, out: Path) -> Path:
    """The file put together from folder's parts in out; ValueError naming what is missing or wrong."""
    manifest = json.loads((folder / MANIFEST).read_text())
    missing = missing_parts(folder, manifest)
    if missing:
        raise ValueError(f"{len(missing)} of {len(manifest['parts'])} parts missing or damaged: {' '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / manifest["file"]
    with target.open("wb") as stream:
        for part in manifest["parts"]:
            stream.write((folder / part["name"]).read_bytes())
    if _sha256(target) != manifest["sha256"]:
        target.unlink()
        raise ValueError(f"the joined {manifest['file']} does not match its manifest's SHA-256")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cut = commands.add_parser("split", help="cut a file into parts with a manifest")
    cut.add_argument("file", type=Path)
    cut.add_argument("--out", type=Path, required=True, help="the parts folder")
    cut.add_argument("--part-mib", type=float, default=40.0, help="MiB a part at most (default: 40)")
    put = commands.add_parser("join", help="put the parts back together, or say which are missing")
    put.add_argument("folder", type=Path, help="the parts folder, with its manifest.json")
    goal = put.add_mutually_exclusive_group(required=True)
    goal.add_argument("--out", type=Path, help="where to write the file")
    goal.add_argument("--check", action="store_true", help="only say which parts are there")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            manifest = split(args.file, args.out, int(args.part_mib * (1 << 20)))
            print(f"{manifest['file']}: {len(manifest['parts'])} parts in {args.out}")
            return 0
        if args.check:
            manifest = json.loads((args.folder / MANIFEST).read_text())
            missing = missing_parts(args.folder, manifest)
            print(f"{manifest['file']}: {len(manifest['parts']) - len(missing)} of {len(manifest['parts'])} parts"
                  + (f"; missing: {' '.join(missing)}" if missing else ""))
            return 2 if missing else 0
        print(join(args.folder, args.out))
        return 0
    except (OSError, ValueError, KeyError) as error:
        print(f"carry_wheel: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
