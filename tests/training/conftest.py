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
