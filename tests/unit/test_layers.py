"""The import rules of docs/design.md ("Layers"), read from the source: layers point down, and heavy libraries stay
in their corner.

A new module must be given a layer here, an engine module in LAYERS, a training module in TRAINING_LAYERS:
deciding where it sits is part of adding it. Imports inside functions count like those at the top of a file.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gtp_engine"

# A module may import engine modules of a strictly lower layer only.
LAYERS = {
    "coords": 0, "log": 0, "katago_config": 0, "symmetry": 0, "timecontrol": 0, "gtp.protocol": 0, "match_stats": 0,
    "native": 0,
    "board": 1,
    "game": 2,
    "sgf_io": 3, "features": 3, "endgame": 3,
    "evaluator": 4, "rollout": 4, "match": 4, "tree_core": 4, "position": 4,
    "network_evaluator": 5, "mcts": 5, "mixed_evaluator": 5,
    "onnx_evaluator": 6, "search.settings": 6, "search.limits": 6, "search.snapshot": 6, "search.threads": 6,
    "search.strength": 6,
    "search.choice": 7, "search.rounds": 7, "batching": 7,
    "search.searcher": 8,
    "search": 9,
    "player": 10,
    "config": 11, "gtp.values": 11, "analysis.settings": 11,
    "gtp.analyze_lines": 12, "analysis.query": 12, "analysis.responses": 12, "network_loader": 12,
    "gtp.commands": 13, "analysis.scheduler": 13,
    "gtp": 14, "analysis.engine": 14, "analysis": 14, "review": 14,
    "analysis.command": 15,
    "__main__": 16,
}
# Training modules (gtp_engine/training, training/alphago) sit above the whole engine, whose modules they may
# import; among themselves, a module may import training modules of a strictly lower layer only. The packages'
# __init__ files hold docstrings only.
TRAINING_LAYERS = {
    "training": 0, "training.alphago": 0, "training.files": 0, "training.metrics_csv": 0, "training.model": 0,
    "training.game_setups": 0, "training.probes": 0, "training.splits": 0,
    "training.alphago.policy_play": 1, "training.board_masks": 1, "training.checkpoint": 1, "training.dataset": 1,
    "training.gating": 1, "training.quantize": 1,
    "training.export_onnx": 2, "training.grow": 2, "training.selfplay": 2, "training.sgf_ingest": 2,
    "training.import_onnx": 3, "training.runs": 3,
    "training.alphago.policy_gradient": 4, "training.alphago.rollout_train": 4, "training.alphago.value_net": 4,
    "training.averaging": 4, "training.torch_evaluator": 4, "training.train": 4,
    "training.loop": 5,
    "training.distributed": 6,
    "training.__main__": 7,
}
# Training modules that import without the train extra (torch, tqdm): quantize writes the int8 network of the
# engine's tests (tests/conftest.py), which run with the test extra alone.
WITHOUT_TRAIN_EXTRA = ["training.quantize"]
# Third-party libraries that only some modules may import (docs/design.md, "Layers").
CONFINED = {
    "torch": {"training"},
    "onnxruntime": {"onnx_evaluator", "training.quantize"},  # the engine runs networks; quantize writes int8 ones
    "sgfmill": {"sgf_io", "training.sgf_ingest"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names imported by a file, `from gtp_engine import x` read as gtp_engine.x."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module.startswith("gtp_engine"):
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def engine_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "training" not in p.relative_to(PACKAGE).parts)


def training_modules() -> list[Path]:
    return sorted((PACKAGE / "training").rglob("*.py"))


def internal(name: str) -> str | None:
    """The module an import names (a training module without a layer: "training"), or None for the package itself
    and for things that are not modules."""
    if not name.startswith("gtp_engine."):
        return None
    rest = name[len("gtp_engine."):]
    while rest and rest not in LAYERS and rest not in TRAINING_LAYERS:
        rest = rest.rpartition(".")[0]
    return rest or None


@pytest.mark.parametrize("path", engine_modules(), ids=module_name)
def test_engine_imports_point_down(path):
    module = module_name(path)
    if module == "":
        return
    assert module in LAYERS, f"{module} has no layer in tests/unit/test_layers.py"
    for name in imports_of(path):
        target = internal(name)
        # A module may name its own package (`from gtp_engine.search import threads`), not import from its front
        # door (`from gtp_engine.search import Searcher`): the package sits above its parts.
        if target is None or target == module or (module.startswith(target + ".") and name == f"gtp_engine.{target}"):
            continue
        assert not target.startswith("training"), f"{module} imports {name}: the engine never imports training"
        assert LAYERS[target] < LAYERS[module], f"{module} (layer {LAYERS[module]}) imports {target} " \
                                                f"(layer {LAYERS[target]})"


@pytest.mark.parametrize("path", training_modules(), ids=module_name)
def test_training_imports_point_down(path):
    module = module_name(path)
    assert module in TRAINING_LAYERS, f"{module} has no layer in TRAINING_LAYERS (tests/unit/test_layers.py)"
    for name in imports_of(path):
        target = internal(name)
        if target is None or target == module or module.startswith(target + "."):
            continue
        if target in LAYERS:
            continue  # the engine lies below all of training
        assert TRAINING_LAYERS[target] < TRAINING_LAYERS[module], \
            f"{module} (training layer {TRAINING_LAYERS[module]}) imports {target} " \
            f"(training layer {TRAINING_LAYERS[target]})"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=module_name)
def test_heavy_libraries_stay_where_they_belong(path):
    module = module_name(path)
    for name in imports_of(path):
        library = name.split(".")[0]
        if library in CONFINED:
            allowed = CONFINED[library]
            assert any(module == a or module.startswith(a + ".") for a in allowed), \
                f"{module} imports {library}, which only {sorted(allowed)} may import"


def test_the_engine_imports_without_torch():
    """Importing every engine module, and the training modules of WITHOUT_TRAIN_EXTRA, must not pull torch or tqdm
    in (players install no training extras)."""
    import subprocess
    import sys

    modules = [f"gtp_engine.{module_name(p)}" if module_name(p) else "gtp_engine" for p in engine_modules()]
    modules = [m for m in modules if not m.endswith("__main__")] + [f"gtp_engine.{m}" for m in WITHOUT_TRAIN_EXTRA]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + \
        "print(sorted(m for m in ('torch', 'tqdm') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
