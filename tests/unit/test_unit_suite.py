"""What makes a test a unit test here: marked unit, and it loads no model weights.

tests/conftest.py refuses sockets to tests marked unit, tests/unit/conftest.py
refuses model weights to every test under tests/unit; a module there marked
otherwise would run with `pytest tests/unit` and escape the first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import local_models
from tests.support.weights import WeightsInUnitTest

pytestmark = pytest.mark.unit

UNIT = Path(__file__).resolve().parent


def marks(path: Path) -> set[str]:
    """The names of the marks in a module's `pytestmark` (pytest.mark.NAME)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = node.value.elts if isinstance(node.value, ast.List) else [node.value]
            return {v.attr for v in values if isinstance(v, ast.Attribute)}
    return set()


def test_every_module_under_tests_unit_is_marked_unit_and_nothing_heavier() -> None:
    modules = sorted(UNIT.glob("test_*.py"))
    assert len(modules) > 40
    wrong = {p.name: marks(p) for p in modules if marks(p) != {"unit"}}
    assert wrong == {}


def test_a_unit_test_cannot_load_an_onnx_model() -> None:
    local_models.require("onnxruntime")
    import onnxruntime

    with pytest.raises(WeightsInUnitTest, match="test_a_unit_test_cannot_load_an_onnx_model"):
        onnxruntime.InferenceSession(b"not a model")


def test_a_unit_test_cannot_load_a_llama_model(tmp_path: Path) -> None:
    local_models.require("llama_cpp")
    import llama_cpp

    with pytest.raises(WeightsInUnitTest, match="move it to tests/integration"):
        llama_cpp.Llama(model_path=str(tmp_path / "model.gguf"))
