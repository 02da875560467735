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
    _git(repo, "add", "train.py")
    env_home = tmp_path / "pre-commit-home"
    common = dict(cwd=repo)
    check = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "devlint", "--all-files"],
        capture_output=True, text=True, timeout=900, env=_env(env_home), **common,
    )  # fmt: skip
    assert check.returncode == 1, check.stdout + check.stderr
    assert "DEV102" in check.stdout
    fix = subprocess.run(
        ["pre-commit", "try-repo", str(ROOT), "devlint-fix", "--all-files"],
        capture_output=True, text=True, timeout=900, env=_env(env_home), **common,
    )  # fmt: skip
    assert fix.returncode == 1, fix.stdout + fix.stderr  # files were modified
    assert "torch.zeros(3).to(device)" in path.read_text()


def _env(home):
    import os
    import sys
    from pathlib import Path

    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
