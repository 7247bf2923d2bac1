"""The network loader all front ends use: where the shipped network is looked for, and how Players are built."""

from __future__ import annotations

import shutil

import pytest

from gtp_engine import config, native, network_loader
from gtp_engine.network_loader import NetworkUnavailable


def test_shipped_weights_prefer_the_board_size(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    folders = (first, second)
    assert network_loader.shipped_weights(9, 9, folders) is None
    (second / "default.onnx").write_bytes(b"")
    assert network_loader.shipped_weights(9, 9, folders) == second / "default.onnx"
    (second / "9x9.onnx").write_bytes(b"")
    assert network_loader.shipped_weights(9, 9, folders) == second / "9x9.onnx"
    assert network_loader.shipped_weights(19, 19, folders) == second / "default.onnx"


def test_weights_dir_replaces_the_shipped_folders(tmp_path, tiny_onnx_model):
    loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights-dir": str(tmp_path)}))
    with pytest.raises(NetworkUnavailable, match=f"no network for 19x19 boards in {tmp_path}"):
        loader.get(19, 19)
    shutil.copy(tiny_onnx_model, tmp_path / "19x19.onnx")
    assert loader.get(19, 19) is not None


def test_the_loader_says_which_sizes_it_knows_it_cannot_play(tmp_path, tiny_onnx_model, fixed_size_network):
    loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights-dir": str(tmp_path)}))
    assert loader.prepare(9, 9) is None  # no network at all: the rules and the record still work
    shutil.copy(tiny_onnx_model, tmp_path / "13x13.onnx")
    assert "no network for 9x9 boards" in loader.prepare(9, 9)  # networks, but none for this size
    fixed_size_network(9, name="default.onnx")
    assert loader.prepare(9, 9) is None  # the load starts
    assert loader.get(9, 9) is not None
    assert "outside the sizes this network accepts (9..9)" in loader.prepare(11, 11)  # the loaded network says so
    with pytest.raises(NetworkUnavailable, match="9..9"):
        loader.get(11, 11)


def test_boardsize_is_refused_for_a_size_the_engine_has_no_network_for(engine, tmp_path, tiny_onnx_model):
    shutil.copy(tiny_onnx_model, tmp_path / "9x9.onnx")
    gtp = engine("--weights-dir", str(tmp_path), "--device", "cpu", "--visits", "3", cwd=tmp_path)
    gtp.ok("boardsize 9")
    gtp.ok("play b e5")
    refused = gtp("boardsize 19")
    assert not refused.ok and refused.text == "unacceptable size"
    assert gtp.ok("genmove w")  # the 9x9 game goes on


def test_loader_builds_one_player_per_network_and_explains_failures(tmp_path, monkeypatch, tiny_onnx_model):
    monkeypatch.setattr(network_loader, "WEIGHTS_DIRS", (tmp_path,))
    loader = network_loader.NetworkLoader(config.build({"device": "cpu"}))
    with pytest.raises(NetworkUnavailable, match="no network for 9x9 boards"):
        loader.get(9, 9)
    shutil.copy(tiny_onnx_model, tmp_path / "default.onnx")
    player = loader.get(9, 9)
    assert loader.get(13, 13) is player  # the same network serves both sizes
    assert player.config.search.batch_size == 8
    (tmp_path / "7x7.onnx").write_bytes(b"not a network")
    with pytest.raises(NetworkUnavailable, match="7x7.onnx"):
        loader.get(7, 7)
    loader.clear_cache()


def test_precision_picks_the_int8_sibling_of_a_network_in_the_weights_folder(tmp_path, tiny_onnx_model,
                                                                             tiny_int8_model):
    def chosen(**options):
        loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights-dir": str(tmp_path), **options}))
        return loader._files(9, 9).network.name

    shutil.copy(tiny_onnx_model, tmp_path / "9x9.onnx")
    with pytest.raises(NetworkUnavailable, match=r"9x9.int8.onnx: no int8 version of 9x9.onnx"):
        chosen(precision="int8")
    assert chosen(precision="auto") == "9x9.onnx"  # no sibling: fp32
    shutil.copy(tiny_int8_model, tmp_path / "9x9.int8.onnx")
    assert chosen(precision="auto") == chosen(precision="int8") == "9x9.int8.onnx"
    assert chosen() == "9x9.int8.onnx"  # the default is auto
    assert chosen(precision="fp32") == "9x9.onnx"
    # A file named with --weights follows --precision too: its int8 sibling under auto and int8, itself at fp32.
    assert chosen(weights=str(tmp_path / "9x9.onnx"), precision="auto") == "9x9.int8.onnx"
    assert chosen(weights=str(tmp_path / "9x9.onnx")) == "9x9.int8.onnx"
    assert chosen(weights=str(tmp_path / "9x9.onnx"), precision="int8") == "9x9.int8.onnx"
    assert chosen(weights=str(tmp_path / "9x9.onnx"), precision="fp32") == "9x9.onnx"
    assert chosen(weights=str(tmp_path / "9x9.int8.onnx")) == "9x9.int8.onnx"
    assert chosen(weights=str(tmp_path / "9x9.int8.onnx"), precision="fp32") == "9x9.int8.onnx"  # named: kept
    loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights-dir": str(tmp_path),
                                                     "precision": "auto"}))
    loader.get(9, 9)
    (_, networks, _), = [future.result() for future in loader._loads.values()]
    assert networks[0].info.precision == "int8"


def test_an_unusable_network_reaches_on_unusable_as_one_line_with_its_fix(tmp_path):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a network")
    lines = []
    loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights": str(broken)}),
                                          on_unusable=lines.append)
    with pytest.raises(NetworkUnavailable) as refused:
        loader.get(9, 9)
    assert lines == [str(refused.value)]
    assert lines[0].startswith(f"cannot use network {broken}: onnxruntime cannot load it (")
    assert lines[0].endswith("; give a network exported by python -m gtp_engine.training export, or omit --weights "
                             "to use the shipped one")
    assert "\n" not in lines[0]


def test_each_load_is_told_in_one_line_that_gtp_writes_at_the_default_log_level(engine, tiny_onnx_model):
    told: list[str] = []
    loader = network_loader.NetworkLoader(config.build({"device": "cpu", "weights": str(tiny_onnx_model)}),
                                          on_loaded=told.append)
    loader.get(9, 9)
    loader.get(19, 19)  # the same network: no second load
    assert told == [f"network {tiny_onnx_model} (tiny, trained on sizes it does not record) on cpu, fp32; "
                    f"core: {native.describe()}"]
    gtp = engine("--weights", str(tiny_onnx_model), "--device", "cpu", "--visits", "2")
    gtp.ok("genmove b")
    assert gtp.close() == 0
    assert gtp.stderr_text() == f"gtp-engine: {told[0]}\n"  # as it is, without a log record's time and level
