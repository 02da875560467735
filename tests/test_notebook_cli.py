"""Notebooks through the surfaces (SPEC §1): the CLI's check, --diff, --fix, JSON and
SARIF, directory walks, a broken notebook, and `devlint verify nb.ipynb`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOKS = ROOT / "fixtures" / "notebooks"


def devlint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devlint", "--no-cache", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(NOTEBOOKS / "cross_cells.ipynb", tmp_path / "train.ipynb")
    shutil.copy(NOTEBOOKS / "broken.ipynb", tmp_path / "broken.ipynb")
    return tmp_path


def test_check_names_the_cell(project: Path) -> None:
    result = devlint("train.ipynb", cwd=project)
    assert result.returncode == 1
    assert "train.ipynb:cell 3:1:9: DEV102 [*]" in result.stdout
    assert "train.ipynb:cell 4:1:5: DEV102 [*]" in result.stdout
    assert "All checks passed" not in result.stdout


def test_a_directory_walk_reads_notebooks(project: Path) -> None:
    result = devlint(".", cwd=project)
    assert "train.ipynb:cell 3" in result.stdout
    assert "broken.ipynb:" in result.stdout and "DEV000" in result.stdout


def test_json_and_sarif_carry_the_cell(project: Path) -> None:
    found = json.loads(devlint("--output-format", "json", "train.ipynb", cwd=project).stdout)
    assert {f["cell"] for f in found} == {3, 4}
    edits = [e for f in found for e in f["fix"]["edits"]]
    assert {e["cell"] for e in edits} == {1, 3, 4}  # the binding goes after the imports, in cell 1
    sarif = json.loads(devlint("--output-format", "sarif", "train.ipynb", cwd=project).stdout)
    assert {r["properties"]["cell"] for r in sarif["runs"][0]["results"]} == {3, 4}


def test_diff_is_per_cell_and_fix_writes_only_sources(project: Path) -> None:
    before = (project / "train.ipynb").read_bytes()
    diff = devlint("--diff", "train.ipynb", cwd=project)
    assert diff.returncode == 1
    assert "--- train.ipynb:cell 3" in diff.stdout and "+model = nn.Linear(4, 2).to(device)" in diff.stdout
    assert (project / "train.ipynb").read_bytes() == before
    fixed = devlint("--fix", "train.ipynb", cwd=project)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (project / "train.ipynb").read_bytes() == (NOTEBOOKS / "cross_cells.fixed.ipynb").read_bytes()
    assert devlint("train.ipynb", cwd=project).returncode == 0


def test_a_broken_notebook_is_a_finding_and_is_never_written(project: Path) -> None:
    before = (project / "broken.ipynb").read_bytes()
    result = devlint("--fix", "broken.ipynb", cwd=project)
    assert result.returncode == 1
    assert "broken.ipynb:" in result.stdout and "DEV000" in result.stdout
    assert (project / "broken.ipynb").read_bytes() == before


def test_verify_runs_a_notebook(project: Path) -> None:
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, "-m", "devlint", "verify", "train.ipynb"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout and "fixed@shadow:mps" in result.stdout
