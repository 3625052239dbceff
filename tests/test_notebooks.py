"""The notebooks run top to bottom offline, and are committed without outputs."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def test_the_four_notebooks_are_there() -> None:
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name}: a code cell has outputs"
            assert cell.execution_count is None, f"{path.name}: a code cell has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_offers_one_model_switch_defaulting_to_scripted(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    switches = [
        c for c in nb.cells if c.cell_type == "code" and re.search(r'^MODEL = "scripted"', c.source, re.M)
    ]
    assert len(switches) == 1, f"{path.name}: expected exactly one MODEL switch cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_without_errors(path: Path, tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    # A kernel spec pointing at this interpreter, so the notebook imports this checkout's package
    # whatever kernels the machine has registered.
    spec_dir = tmp_path / "kernels" / "soothe-test"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "soothe-test",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    nb = nbformat.read(path, as_version=4)
    km = AsyncKernelManager(kernel_name="soothe-test", kernel_spec_manager=ksm)
    client = NotebookClient(nb, km=km, timeout=120, resources={"metadata": {"path": str(tmp_path)}})
    # raises CellExecutionError naming the cell on the first failure; nbclient stops only kernels of
    # managers it created itself, so ask it to stop this one, or the kernel outlives the test
    client.execute(cleanup_kc=True)
