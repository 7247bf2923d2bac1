"""tools/carry_wheel.py: a file cut into parts comes back whole, and missing or damaged parts are named."""

from __future__ import annotations

import os

from tools import carry_wheel


def test_parts_join_into_the_same_file_and_missing_ones_are_named(tmp_path, capsys):
    source = tmp_path / "pkg-1.0-py3-none-any.whl"
    data = os.urandom(5 * 1024 + 17)
    source.write_bytes(data)
    parts = tmp_path / "parts"
    assert carry_wheel.main(["split", str(source), "--out", str(parts), "--part-mib", str(2048 / (1 << 20))]) == 0
    names = sorted(p.name for p in parts.glob("*.part-*"))
    assert names == [f"{source.name}.part-{i:02d}" for i in range(3)]

    arrived = tmp_path / "arrived"  # the parts as they arrive on the other machine, one call at a time
    arrived.mkdir()
    (arrived / "manifest.json").write_bytes((parts / "manifest.json").read_bytes())
    for name in names[:2]:
        (arrived / name).write_bytes((parts / name).read_bytes())
    assert carry_wheel.main(["join", str(arrived), "--check"]) == 2
    assert f"2 of 3 parts; missing: {names[2]}" in capsys.readouterr().out
    assert carry_wheel.main(["join", str(arrived), "--out", str(tmp_path / "wheels")]) == 2
    assert names[2] in capsys.readouterr().err

    (arrived / names[2]).write_bytes((parts / names[2]).read_bytes()[:-1] + b"x")  # damaged on the way
    assert carry_wheel.main(["join", str(arrived), "--check"]) == 2
    (arrived / names[2]).write_bytes((parts / names[2]).read_bytes())
    assert carry_wheel.main(["join", str(arrived), "--check"]) == 0
    assert carry_wheel.main(["join", str(arrived), "--out", str(tmp_path / "wheels")]) == 0
    assert (tmp_path / "wheels" / source.name).read_bytes() == data
