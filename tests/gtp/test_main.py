"""The composition root: where the shipped network is looked for, and the loader that builds Players from it."""

from __future__ import annotations

import shutil

import pytest

from gtp_engine import __main__ as main_module
from gtp_engine import config
from gtp_engine.gtp.commands import NetworkUnavailable


def test_shipped_weights_prefer_the_board_size(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    folders = (first, second)
    assert main_module.shipped_weights(9, 9, folders) is None
    (second / "default.onnx").write_bytes(b"")
    assert main_module.shipped_weights(9, 9, folders) == second / "default.onnx"
    (second / "9x9.onnx").write_bytes(b"")
    assert main_module.shipped_weights(9, 9, folders) == second / "9x9.onnx"
    assert main_module.shipped_weights(19, 19, folders) == second / "default.onnx"


def test_weights_dir_replaces_the_shipped_folders(tmp_path, tiny_onnx_model):
    loader = main_module.NetworkLoader(config.build({"device": "cpu", "weights-dir": str(tmp_path)}))
    with pytest.raises(NetworkUnavailable, match=f"no network for 19x19 boards in {tmp_path}"):
        loader.get(19, 19)
    shutil.copy(tiny_onnx_model, tmp_path / "19x19.onnx")
    assert loader.get(19, 19) is not None


def test_loader_builds_one_player_per_network_and_explains_failures(tmp_path, monkeypatch, tiny_onnx_model):
    monkeypatch.setattr(main_module, "WEIGHTS_DIRS", (tmp_path,))
    loader = main_module.NetworkLoader(config.build({"device": "cpu"}))
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
