"""Fixtures for the JSON analysis engine: `python -m gtp_engine analysis` as a subprocess, one JSON object a line."""

from __future__ import annotations

import pytest
from analysis_support import AnalysisEngine


@pytest.fixture
def analysis(tiny_onnx_model):
    """analysis(*args) starts the analysis engine on the tiny test network; each is closed after the test."""
    started: list[AnalysisEngine] = []

    def start(*args: str) -> AnalysisEngine:
        process = AnalysisEngine(["-model", str(tiny_onnx_model), *args])
        started.append(process)
        return process

    yield start
    for process in started:
        process.close()
