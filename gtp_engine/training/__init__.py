"""Training: the torch side of the project (model, checkpoints, export to ONNX). It imports the engine; the
engine never imports it, so playing needs neither torch nor this package."""
