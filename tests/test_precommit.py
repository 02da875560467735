"""`pre-commit try-repo` of this checkout against a temporary repository."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT
from tests.test_cli import write

pytestmark = pytest.mark.slow


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_precommit_hooks(tmp_path, run):
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    path = write(repo, "train.py", "import torch\nx = torch.zeros(3).cuda()\n")
    vendored = write(repo, "vendor/lib.py", "import torch\ny = torch.ones(2).cuda()\n")
    write(repo, "pyproject.toml", '[tool.devlint]\nexclude = ["vendor/"]\n')
    _git(repo, "add", "train.py", "vendor/lib.py", "pyproject.toml")
    env_home = tmp_path / "pre-commit-home"
    common = dict(cwd=repo)
    check = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "devlint", "--all-files"],
        capture_output=True, text=True, timeout=900, env=_env(env_home), **common,
    )  # fmt: skip
    assert check.returncode == 1, check.stdout + check.stderr
    assert "DEV102" in check.stdout and "vendor" not in check.stdout  # pre-commit names every file
    fix = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "devlint-fix", "--all-files"],
        capture_output=True, text=True, timeout=900, env=_env(env_home), **common,
    )  # fmt: skip
    assert fix.returncode == 1, fix.stdout + fix.stderr  # files were modified
    assert "torch.zeros(3).to(device)" in path.read_text()
    assert vendored.read_text() == "import torch\ny = torch.ones(2).cuda()\n"  # `exclude` held


def test_hooks_force_exclude_and_run_on_python_and_notebooks():
    hooks = {hook["id"]: hook for hook in _hooks()}
    assert set(hooks) == {"devlint", "devlint-fix"}
    for hook in hooks.values():
        assert "--force-exclude" in hook["entry"].split()
        assert hook["types_or"] == ["python", "jupyter"]


def _hooks() -> list[dict]:
    yaml = pytest.importorskip("yaml")  # pre-commit's own dependency
    return yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def _env(home):
    import os
    import sys
    from pathlib import Path

    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
