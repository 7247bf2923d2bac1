"""gtp_engine: a Go engine that speaks GTP, searches with PUCT and evaluates with an ONNX network."""

__version__ = "0.1.0"
