from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A console script installed beside the running interpreter (the real thing)."""
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment")
    return str(path)


@pytest.fixture
def run(tmp_path_factory):
    env = dict(os.environ, DEVLINT_CACHE_DIR=str(tmp_path_factory.mktemp("cache")))

    def _run(*args: str, cwd: str | os.PathLike | None = None, stdin: str | None = None, check=None):
        completed = subprocess.run(
            [tool(args[0]), *args[1:]], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300, env=env
        )
        if check is not None:
            assert completed.returncode == check, completed.stdout + completed.stderr
        return completed

    return _run
