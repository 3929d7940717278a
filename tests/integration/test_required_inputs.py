"""A test whose input is missing skips only when inputs are not required.

`make test` sets CANDOR_REQUIRE_LOCAL_MODELS=1 and CANDOR_REQUIRE_NETWORK_NAMESPACE=1
and provides every input: the local models, the dev corpus, the test PDF, `make`,
`unshare` and `ip`. Five test modules used to skip when theirs was missing whatever
those variables said, so a broken install passed `make test` quietly. Each is copied
here into a tree of its own, as in a fresh clone that fetched nothing (no .candor, no
layer), and run by pytest in a child process with llama.cpp hidden, nothing on PATH
(no `make`, no `unshare`), and neither CANDOR_TEST_PDF nor CANDOR_TEST_CORPUS set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import local_models, namespaces

# Two child pytest runs, a few seconds each: not fast enough for unit.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# Each module and the input it goes without here.
MODULES = {
    "slow/test_prompt_injection.py": "llama.cpp",
    "e2e/test_local_end_to_end.py": "llama.cpp, or the dev corpus",
    "unit/test_pdf_loader.py": "CANDOR_TEST_PDF",
    "integration/test_layer_build.py": "make",
    "integration/test_serve_network.py": "unshare and ip",
}
# Each variable that makes a missing input fail instead of skip.
REQUIRE_ENVS = (local_models.REQUIRE_ENV, namespaces.REQUIRE_ENV)
# pytest in a process where llama_cpp cannot be found or imported (find_spec gives
# None for a module that sys.modules holds as None).
RUN_PYTEST = "; ".join(
    [
        "import sys",
        "sys.modules['llama_cpp'] = None",
        "import pytest",
        "sys.exit(pytest.main(sys.argv[1:]))",
    ]
)


def outcomes(*, required: bool, tmp_path: Path) -> dict[str, set[str]]:
    """module -> the outcomes of its tests ("passed", "skipped", "failed", "error")."""
    tree = tmp_path / "clone"
    for module in MODULES:
        target = tree / "fresh" / module
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "tests" / module, target)
    (tree / "pytest.ini").write_text("[pytest]\n")
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    report = tmp_path / "report.xml"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CANDOR_") and name not in {"PATH", "PYTHONPATH"}
    }
    env["PATH"] = str(empty_path)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "layers" / "candor"), str(ROOT)])
    if required:
        env.update(dict.fromkeys(REQUIRE_ENVS, "1"))
    subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_PYTEST,
            "-c",
            str(tree / "pytest.ini"),
            "--rootdir",
            str(tree),
            "--import-mode=importlib",
            "-p",
            "no:cacheprovider",
            "--continue-on-collection-errors",
            f"--junitxml={report}",
            "-q",
            str(tree / "fresh"),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    found: dict[str, set[str]] = defaultdict(set)
    for case in ET.parse(report).iter("testcase"):
        where = f"{case.get('classname', '')} {case.get('name', '')}"
        (module,) = [m for m in MODULES if Path(m).stem in where]
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        found[module].add(
            {"failure": "failed", "error": "error", "skipped": "skipped"}[kinds.pop()]
            if kinds
            else "passed"
        )
    return dict(found)


def test_a_missing_input_fails_the_modules_that_need_it_when_inputs_are_required(
    tmp_path: Path,
) -> None:
    found = outcomes(required=True, tmp_path=tmp_path)

    for module, missing in MODULES.items():
        seen = found.get(module, set())
        assert "skipped" not in seen, f"{module} skipped without {missing}"
        assert seen & {"failed", "error"}, f"{module} did not fail without {missing}: {seen}"


def test_a_missing_input_skips_the_modules_that_need_it_otherwise(tmp_path: Path) -> None:
    found = outcomes(required=False, tmp_path=tmp_path)

    for module, missing in MODULES.items():
        seen = found.get(module, set())
        assert "skipped" in seen, f"{module} did not skip without {missing}: {seen}"
        assert not seen & {"failed", "error"}, f"{module} failed without {missing}: {seen}"
