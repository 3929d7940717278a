"""The Lambda layer as `sam build` makes it (layers/candor/Makefile): what it holds, and
that each handler imports from it alone. pip is skipped here (the packages come from
this virtualenv); `make build` runs the whole recipe."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import local_models
from tests.support.edge import ORIGIN, SESSION_SECRET

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "candor"
FUNCTIONS = ("ask", "feedback", "ingest", "sync", "gaps")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("make") is None:
        local_models.unavailable("make is not installed (the layer's recipe is a Makefile)")
    work = tmp_path_factory.mktemp("layer")
    source = work / "source"
    # As SAM does: the recipe runs in a copy of the layer's folder.
    shutil.copytree(LAYER, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    artifacts = work / "artifacts"
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "build-CandorLayer",
            f"ARTIFACTS_DIR={artifacts}",
            f"PYTHON={sys.executable}",
            "PIP_INSTALL=true",
        ],
        cwd=source,
        check=True,
        capture_output=True,
    )
    return artifacts / "python"


def leave_out() -> list[str]:
    text = (LAYER / "Makefile").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("LEAVE_OUT :="))
    return line.removeprefix("LEAVE_OUT :=").split()


def test_the_layer_holds_the_library_compiled(built: Path) -> None:
    for module in ("__init__", "service", "traces", "observability", "api/feedback"):
        assert (built / "candor" / f"{module}.py").is_file(), module
    assert list((built / "candor").glob("__pycache__/service.*.pyc"))


def test_the_layer_ships_the_screening_model(built: Path) -> None:
    model = built / "candor" / "screening" / "model.npz"
    assert model.read_bytes() == (LAYER / "candor" / "screening" / "model.npz").read_bytes()


def test_the_layer_leaves_out_what_lambda_never_runs(built: Path) -> None:
    names = leave_out()
    assert "candor/evaluation" in names and "candor/cli" in names
    for name in names:
        assert (LAYER / name).exists(), f"LEAVE_OUT names {name}, which does not exist"
        assert not (built / name).exists(), f"the layer ships {name}"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_handler_imports_from_the_layer_alone(built: Path, function: str) -> None:
    code = ROOT / "functions" / function
    probe = (
        "import app, candor; "
        "assert callable(app.handler); "
        f"assert candor.__file__.startswith({str(built)!r}), candor.__file__"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=code,
        env={
            "PYTHONPATH": f"{code}:{built}",
            "PATH": "/usr/bin:/bin",
            "HOME": str(built),
            # What the template gives the functions behind the API (the key inline).
            "CANDOR_ALLOWED_ORIGINS": ORIGIN,
            "CANDOR_SESSION_SECRET": SESSION_SECRET,
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
