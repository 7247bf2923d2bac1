"""Fixtures shared by the training tests."""

import pytest


@pytest.fixture
def one_thread():
    """torch on one thread for the test: small models train faster and deterministically so on a shared machine."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_checkpoint_with_seed(tmp_path_factory):
    """make(seed) -> path of a checkpoint of a randomly initialised "tiny" network said to be trained on 5x5
    (written once per seed)."""
    pytest.importorskip("torch")
    from gtp_engine.training import checkpoint as checkpoint_lib
    from gtp_engine.training import export_onnx

    folder = tmp_path_factory.mktemp("tiny-checkpoints")

    def make(seed: int):
        path = folder / f"tiny-{seed}.pt"
        if not path.exists():
            net = export_onnx.random_model("tiny", seed=seed)
            checkpoint_lib.save(checkpoint_lib.from_model(net, trained_sizes=[5],
                                                          provenance={"data": "random weights", "steps": 0}), path)
        return path

    return make
