"""Finding the files to check: directories walked, `.gitignore` and `exclude` honoured."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

from devlint.config import Config

DEFAULT_EXCLUDES = frozenset(
    {".bzr", ".direnv", ".eggs", ".git", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytype",
     ".ruff_cache", ".svn", ".tox", ".venv", "__pypackages__", "__pycache__", "_build",
     "buck-out", "node_modules", "venv", ".devlint_cache"}
)  # fmt: skip
SUFFIXES = (".py", ".pyi", ".ipynb")


class PathProblem(Exception):
    """A named path that cannot be checked (missing, unreadable)."""


def expand(
    paths: list[str], config_for, *, force_exclude: bool = False, problems: list[str] | None = None
) -> Iterator[str]:
    """Files to check, in a stable order. Named files are checked unless `force_exclude`
    (ruff's `--force-exclude`, for pre-commit, which names every file) applies `exclude` to
    them too; files found by walking a directory skip git-ignored paths and `exclude`.

    A named path that cannot be checked raises PathProblem, or, given a `problems` list,
    is added to it and the other paths are still expanded (as ruff does)."""
    for path in paths:
        if os.path.isfile(path):
            if not (force_exclude and is_force_excluded(path, config_for(path))):
                yield path
            continue
        problem = None
        if not os.path.exists(path):
            problem = f"{path}: no such file or directory"
        elif not os.path.isdir(path):
            problem = f"{path}: not a file or directory"
        if problem is not None:
            if problems is None:
                raise PathProblem(problem)
            problems.append(problem)
            continue
        found = sorted(_walk(path))
        ignored = _git_ignored(path, found)
        for file in found:
            if file in ignored:
                continue
            config: Config = config_for(file)
            if config.is_excluded(file):
                continue
            yield file


def is_force_excluded(path: str, config: Config) -> bool:
    """Would walking a directory skip `path` (the configured `exclude`, or a folder such as
    `.venv` that is never walked)?"""
    if config.is_excluded(path):
        return True
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(config.root))
    parts = relative.split(os.sep)[:-1]
    return not relative.startswith("..") and any(part in DEFAULT_EXCLUDES for part in parts)


def _walk(root: str) -> Iterator[str]:
    seen: set[tuple[int, int]] = set()
    for directory, dirs, files in os.walk(root, followlinks=True):
        try:
            stat = os.stat(directory)
        except OSError:
            dirs[:] = []
            continue
        key = (stat.st_dev, stat.st_ino)
        if key in seen:  # a symlink loop
            dirs[:] = []
            continue
        seen.add(key)
        dirs[:] = sorted(d for d in dirs if d not in DEFAULT_EXCLUDES)
        for name in sorted(files):
            if name.endswith(SUFFIXES):
                full = os.path.join(directory, name)
                if os.path.isfile(full):
                    yield full


def _git_ignored(root: str, files: list[str]) -> set[str]:
    if not files:
        return set()
    try:
        completed = subprocess.run(
            ["git", "-C", root, "check-ignore", "--stdin", "-z"],
            input="\0".join(os.path.relpath(f, root) for f in files).encode(),
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if completed.returncode not in (0, 1):
        return set()  # not a git repository
    return {os.path.join(root, p) for p in completed.stdout.decode().split("\0") if p}
