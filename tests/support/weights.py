"""Model weights stay out of unit tests: onnxruntime's and llama.cpp's loaders refused.

tests/unit/conftest.py applies `refuse_weights` to every test under tests/unit, as
tests/conftest.py refuses sockets to tests marked unit. A test that loads a model
belongs in tests/integration (the embedder, about half a second) or tests/slow.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import pytest

# The calls that read a model's weights into memory: onnxruntime's session (the
# OnnxEmbedder) and llama.cpp's model (the LlamaChatModel).
LOADERS = (("onnxruntime", "InferenceSession"), ("llama_cpp", "Llama"))


class WeightsInUnitTest(RuntimeError):
    """A test under tests/unit tried to load model weights; move it to tests/integration."""


def refuse_weights(monkeypatch: pytest.MonkeyPatch, nodeid: str) -> None:
    """Make each installed loader raise WeightsInUnitTest for the rest of the test."""

    class Refused:
        # A class, not a function: llama_chat subclasses Llama before it builds one.
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise WeightsInUnitTest(f"{nodeid} loaded model weights: move it to tests/integration")

    for name, attribute in LOADERS:
        # Imported here if installed (once a session), so that a test importing the
        # package later still finds the refusal in place.
        if importlib.util.find_spec(name) is None:
            continue
        monkeypatch.setattr(importlib.import_module(name), attribute, Refused)
