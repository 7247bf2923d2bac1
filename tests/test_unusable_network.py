"""A network that cannot be used ends the process at once, in every front end (gtp-engine, gtp-engine analysis,
gtp-engine review): status 1, nothing on the protocol stream, and one last line on stderr naming the file and the
fix. The engine runs as a subprocess over pipes with its input left open, as a GUI that waits would leave it, on
the real onnxruntime; the damaged networks are written from the committed tiny one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from engine_process import start_engine

onnx = pytest.importorskip("onnx")

GAME = Path(__file__).parent / "review" / "fixtures" / "ogs_20803642.sgf"
EXIT_SECONDS = 60  # far above the seconds an onnxruntime import and a failed load take, even on a loaded machine
PROGRAMS = {"gtp": "gtp-engine", "analysis": "gtp-engine analysis", "review": "gtp-engine review"}


def truncated(tiny: Path, path: Path) -> None:
    path.write_bytes(tiny.read_bytes()[: tiny.stat().st_size // 2])


def empty(tiny: Path, path: Path) -> None:
    path.write_bytes(b"")


def random_bytes(tiny: Path, path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def against_the_contract(tiny: Path, path: Path) -> None:
    """A valid ONNX model with the tiny network's metadata but one input and one output, of other shapes."""
    from onnx import TensorProto, helper

    spatial = helper.make_tensor_value_info("spatial", TensorProto.FLOAT, ["N", 3, 9, 9])
    policy = helper.make_tensor_value_info("policy", TensorProto.FLOAT, ["N", 3, 9, 9])
    graph = helper.make_graph([helper.make_node("Identity", ["spatial"], ["policy"])], "wrong", [spatial], [policy])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnx.load(str(tiny)).ir_version
    for entry in onnx.load(str(tiny)).metadata_props:
        model.metadata_props.add(key=entry.key, value=entry.value)
    onnx.save(model, str(path))


def unreadable(tiny: Path, path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file whatever its permissions")
    path.write_bytes(tiny.read_bytes())
    path.chmod(0)


def directory(tiny: Path, path: Path) -> None:
    path.mkdir()


def missing(tiny: Path, path: Path) -> None:
    pass


BAD_NETWORKS = [truncated, empty, random_bytes, against_the_contract, unreadable, directory, missing]


def run_until_exit(args: list[str], cwd: Path, lines: bytes = b"") -> tuple[int, bytes, str]:
    """Starts the engine, sends it `lines` and leaves its input open, waits for it to end by itself:
    (status, stdout, stderr)."""
    process = start_engine(args, stderr=subprocess.PIPE, cwd=cwd)
    try:
        process.stdin.write(lines)
        process.stdin.flush()
        process.wait(EXIT_SECONDS)
        return process.returncode, process.stdout.read(), process.stderr.read().decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdin.close()


def front_end_args(mode: str, network: Path, tmp_path: Path) -> list[str]:
    if mode == "gtp":
        return ["--weights", str(network)]
    if mode == "analysis":
        return ["analysis", "-model", str(network)]
    return ["review", str(GAME), "-o", str(tmp_path / "reviewed.sgf"), "--weights", str(network), "--visits", "2"]


def assert_ended_with_one_line(result: tuple[int, bytes, str], program: str, network: Path) -> str:
    status, stdout, stderr = result
    assert status == 1, stderr
    assert stdout == b""  # the protocol stream carries nothing
    assert "\x1b[" not in stderr, stderr  # none of onnxruntime's coloured lines
    last = stderr.splitlines()[-1]
    assert last.startswith(f"{program}: cannot use network {network}: "), stderr
    return last


@pytest.mark.parametrize("mode", PROGRAMS)
@pytest.mark.parametrize("make", BAD_NETWORKS, ids=lambda make: make.__name__)
def test_a_network_that_cannot_be_used_ends_the_process_with_one_line(make, mode, tiny_onnx_model, tmp_path):
    network = tmp_path / "net.onnx"
    make(tiny_onnx_model, network)
    result = run_until_exit(front_end_args(mode, network, tmp_path), tmp_path)
    last = assert_ended_with_one_line(result, PROGRAMS[mode], network)
    assert last.endswith(f"give a network exported by python -m gtp_engine.training export, or omit "
                         f"{'-model' if mode == 'analysis' else '--weights'} to use the shipped one")
    assert not (tmp_path / "reviewed.sgf").exists()


def test_a_broken_network_in_the_weights_folder_is_found_at_start(tiny_onnx_model, tmp_path):
    # Without --weights the network of the first board size (19x19) loads at start-up: a broken one is found then.
    folder = tmp_path / "networks"
    folder.mkdir()
    truncated(tiny_onnx_model, folder / "19x19.onnx")
    result = run_until_exit(["--weights-dir", str(folder)], tmp_path)
    last = assert_ended_with_one_line(result, "gtp-engine", folder / "19x19.onnx")
    assert last.endswith(f"; replace it with a network exported by python -m gtp_engine.training export, or "
                         f"remove it from {folder}")


def test_int8_precision_without_the_int8_file_ends_the_process(tiny_onnx_model, tmp_path):
    result = run_until_exit(["--weights", str(tiny_onnx_model), "--precision", "int8"], tmp_path)
    sibling = tiny_onnx_model.with_name("tiny.int8.onnx")
    last = assert_ended_with_one_line(result, "gtp-engine", sibling)
    assert "no int8 version of tiny.onnx" in last and last.endswith("; or use --precision auto or fp32")


def test_a_gpu_device_that_cannot_run_here_ends_the_process(tiny_onnx_model, tmp_path):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        session = onnxruntime.InferenceSession(str(tiny_onnx_model), providers=["CUDAExecutionProvider"])
        if session.get_providers()[0] == "CUDAExecutionProvider":
            pytest.skip("CUDA runs here")
    result = run_until_exit(["--weights", str(tiny_onnx_model), "--device", "cuda"], tmp_path)
    last = assert_ended_with_one_line(result, "gtp-engine", tiny_onnx_model)
    assert "no usable device for --device cuda" in last and last.endswith("or use --device cpu")


def test_a_good_network_answers_the_handshake_and_plays_on_device_auto_quietly(tiny_onnx_model, tmp_path):
    process = start_engine(["--weights", str(tiny_onnx_model), "--visits", "3"], cwd=tmp_path)
    stdout, stderr = process.communicate(b"protocol_version\nboardsize 9\ngenmove b\nquit\n", timeout=EXIT_SECONDS)
    assert process.returncode == 0, stderr
    answers = stdout.decode().split("\n\n")
    assert answers[:2] == ["= 2", "="] and answers[2].startswith("= ")
    assert b"\x1b[" not in stderr and b"Error" not in stderr, stderr  # --device auto falls back to the CPU quietly


def test_an_analysis_query_waits_for_the_network_rather_than_blaming_the_query(tiny_onnx_model, tmp_path):
    network = tmp_path / "net.onnx"
    truncated(tiny_onnx_model, network)
    query = {"id": "q", "moves": [], "rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9,
             "maxVisits": 4}
    result = run_until_exit(["analysis", "-model", str(network)], tmp_path, (json.dumps(query) + "\n").encode())
    assert_ended_with_one_line(result, "gtp-engine analysis", network)
