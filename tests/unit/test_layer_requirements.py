"""layers/candor/requirements.txt pins exactly pyproject.toml's production dependencies."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "layers" / "candor" / "requirements.txt"


def project_dependencies() -> dict[NormalizedName, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(line) for line in project["dependencies"]]
    return {canonicalize_name(r.name): r for r in requirements}


def layer_requirements() -> list[Requirement]:
    lines = (line.partition("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def test_layer_requires_the_same_packages_as_the_project() -> None:
    names = [canonicalize_name(r.name) for r in layer_requirements()]
    assert len(names) == len(set(names)), "a package is listed twice"
    assert set(names) == set(project_dependencies())


def test_every_layer_requirement_is_an_exact_pin() -> None:
    for requirement in layer_requirements():
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1, requirement
        assert specifiers[0].operator == "==", requirement
        assert not specifiers[0].version.endswith(".*"), requirement
        assert not requirement.marker and not requirement.extras, requirement


def test_every_pin_satisfies_the_project_specifier() -> None:
    wanted = project_dependencies()
    for requirement in layer_requirements():
        project = wanted.get(canonicalize_name(requirement.name))
        if project is None:
            continue  # an extra package: test_layer_requires_the_same_packages_as_the_project
        version = next(iter(requirement.specifier)).version
        specifier = project.specifier
        assert specifier.contains(version, prereleases=True), f"{requirement} vs {specifier}"


def test_the_tests_run_the_versions_the_layer_ships() -> None:
    # `make install` installs with the layer's pins as constraints; a venv built from
    # pyproject's ranges alone could test other versions than Lambda runs.
    from importlib.metadata import PackageNotFoundError, version

    for requirement in layer_requirements():
        pinned = next(iter(requirement.specifier)).version
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            pytest.fail(f"{requirement.name} is not installed")
        assert installed == pinned, (
            f"{requirement.name} {installed} installed, layer ships {pinned}"
        )
