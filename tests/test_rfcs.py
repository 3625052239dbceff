"""The design records stay true to the code: what they cite exists, and each has its four sections."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RFC_DIR = ROOT / "rfcs"
RFCS = sorted(RFC_DIR.glob("[0-9][0-9][0-9][0-9]-*.md"))
SECTIONS = ("## Motivation", "## Design", "## Alternatives weighed", "## What the tests pin")

TEST_REF = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
MODULE_REF = re.compile(r"`(soothe_planner/[\w/]+(?:\.py|/))`")
RFC_REF = re.compile(r"\bRFC (\d{4})\b")


def _test_names(path: Path) -> set[str]:
    """Every test function (module level or in a class) defined in a test file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    }


def _section(text: str, heading: str) -> str:
    start = text.index(heading) + len(heading)
    nxt = text.find("\n## ", start)
    return text[start : nxt if nxt != -1 else len(text)]


def test_there_are_eight_records_and_an_index() -> None:
    assert [p.name[:4] for p in RFCS] == ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008"]
    index = (RFC_DIR / "README.md").read_text(encoding="utf-8")
    for path in RFCS:
        assert f"({path.name})" in index, f"rfcs/README.md does not link {path.name}"


@pytest.mark.parametrize("path", RFCS, ids=lambda p: p.name[:4])
def test_record_has_the_four_sections_in_order(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    positions = [text.find(s) for s in SECTIONS]
    missing = [s for s, pos in zip(SECTIONS, positions, strict=True) if pos == -1]
    assert not missing, f"{path.name} lacks {missing}"
    assert positions == sorted(positions), f"{path.name}: sections out of order"
    for heading in SECTIONS:
        assert _section(text, heading).strip(), f"{path.name}: {heading!r} is empty"


@pytest.mark.parametrize("path", RFCS, ids=lambda p: p.name[:4])
def test_every_cited_test_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    refs = TEST_REF.findall(text)
    pins = TEST_REF.findall(_section(text, "## What the tests pin"))
    assert pins, f"{path.name}: 'What the tests pin' names no test"
    for file, name in refs:
        test_file = ROOT / file
        assert test_file.is_file(), f"{path.name} cites {file}, which does not exist"
        if name:
            assert name in _test_names(test_file), f"{path.name} cites {file}::{name}, which does not exist"


@pytest.mark.parametrize("path", RFCS, ids=lambda p: p.name[:4])
def test_every_cited_module_exists(path: Path) -> None:
    for module in MODULE_REF.findall(path.read_text(encoding="utf-8")):
        assert (ROOT / module).exists(), f"{path.name} cites {module}, which does not exist"


@pytest.mark.parametrize("path", RFCS, ids=lambda p: p.name[:4])
def test_cross_references_name_existing_records(path: Path) -> None:
    numbers = {p.name[:4] for p in RFCS}
    for number in RFC_REF.findall(path.read_text(encoding="utf-8")):
        assert number in numbers, f"{path.name} refers to RFC {number}, which is not one of ours"


def test_the_citation_pattern_catches_a_missing_test(tmp_path: Path) -> None:
    # The checks above must be able to fail: a reference to a test that is not there is found.
    fake = "`tests/test_rfcs.py::test_that_does_not_exist`"
    ((file, name),) = TEST_REF.findall(fake)
    assert name not in _test_names(ROOT / file)
