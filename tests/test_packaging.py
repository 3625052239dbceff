"""What the built distributions hold: the wheel carries its default config and metadata; the sdist
is the package and what builds it, without a test suite that could not run from it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILD = """
import sys
from setuptools import build_meta
out = sys.argv[1]
sdist = build_meta.build_sdist(out)
wheel = build_meta.build_wheel(out)
print("BUILT", sdist, wheel)
"""


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # Built from a copy: a build writes its egg-info next to the sources.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "langgraph.json"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in ("soothe_planner", "tests", "config"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-c", BUILD, str(out)], cwd=src, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    _, sdist, wheel = next(line for line in done.stdout.splitlines() if line.startswith("BUILT ")).split()
    return {"sdist": out / sdist, "wheel": out / wheel}


@pytest.mark.subprocess
def test_the_wheel_ships_the_default_config_prompts_and_metadata(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        metadata = next(wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "soothe_planner/config/default.yaml" in names
    assert "soothe_planner/py.typed" in names
    assert any(n.startswith("soothe_planner/planner/prompts/") and n.endswith(".txt") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    assert "Project-URL: Homepage," in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    assert "Classifier: Typing :: Typed" in metadata


@pytest.mark.subprocess
def test_the_sdist_has_the_package_and_no_test_suite(dists: dict[str, Path]) -> None:
    with tarfile.open(dists["sdist"]) as sdist:
        names = {"/".join(n.split("/")[1:]) for n in sdist.getnames()}
    assert {"pyproject.toml", "README.md", "soothe_planner/config/default.yaml"} <= names
    assert not any(n.startswith("tests/") for n in names), sorted(n for n in names if n.startswith("tests/"))[:5]
