"""A hostile environment: killed processes, links, read-only files, full disks, a stale
cache (issue 19, items 5, 6, 9 and 10). Each test is small: together a few seconds.

CI runs as root, where a read-only file is still writable by the process: the refusal to
rewrite one is decided from its mode bits as well as `os.access`, and tested that way.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import time

import pytest

from devlint import cli
from devlint.source import process_alive
from tests.conftest import tool
from tests.test_cli import write

SNIPPET = "import torch\nx = torch.zeros(3).cuda()\n"
FIXED = "x = torch.zeros(3).to(device)"

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


# -- item 5: workers die with their parent ---------------------------------------------


@linux_only
def test_workers_die_when_only_the_main_process_is_killed(tmp_path):
    body = "".join(f"def f{i}(x):\n    return x.cuda() + {i}\n" for i in range(1500))
    for index in range(16):
        write(tmp_path, f"m{index}.py", "import torch\n" + body)
    process = subprocess.Popen(
        [tool("devlint"), "--no-cache", "--jobs", "2", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
        workers = _children(process.pid)
    assert len(workers) >= 2, "the pool never started"
    os.kill(process.pid, signal.SIGKILL)
    started = time.monotonic()
    process.communicate(timeout=30)  # the workers held the pipes open: this would hang
    assert time.monotonic() - started < 10
    deadline = time.monotonic() + 10
    while any(map(process_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(process_alive, workers)), "workers outlived their parent"


# -- item 6: --fix and the file system ---------------------------------------------------


def test_fix_writes_through_a_symlink_to_its_target(tmp_path, run):
    target = write(tmp_path, "real.py", SNIPPET)
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    run("devlint", "--fix", str(link), check=0)
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert FIXED in target.read_text()


def test_fix_keeps_hard_links(tmp_path, run):
    first = write(tmp_path, "a.py", SNIPPET)
    second = tmp_path / "b.py"
    os.link(first, second)
    run("devlint", "--fix", str(first), check=0)
    assert os.stat(first).st_ino == os.stat(second).st_ino and os.stat(first).st_nlink == 2
    assert FIXED in second.read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_fix_keeps_the_owner(tmp_path, run):
    path = write(tmp_path, "train.py", SNIPPET)
    os.chown(path, 4321, 4321)
    os.chmod(path, 0o664)
    run("devlint", "--fix", str(path), check=0)
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4321, 0o664)
    assert FIXED in path.read_text()


def test_fix_refuses_a_read_only_file(tmp_path, run):
    """Decided from the mode bits, so that it holds for root (CI) too."""
    path = write(tmp_path, "train.py", SNIPPET)
    os.chmod(path, 0o444)
    result = run("devlint", "--fix", str(path), check=2)
    assert "cannot write the fixes: the file is read-only; file left unchanged" in result.stderr
    assert "All checks passed" not in result.stdout and "DEV102" in result.stdout
    assert path.read_text() == SNIPPET and stat.S_IMODE(os.stat(path).st_mode) == 0o444
    assert not list(tmp_path.glob(".devlint-*"))


def test_fix_removes_the_temporary_files_of_a_killed_run_only(tmp_path, run):
    path = write(tmp_path, "train.py", SNIPPET)
    dead = 2**22 + 1  # above the usual pid_max: no such process
    while process_alive(dead):
        dead += 1
    left = write(tmp_path, f".devlint-{dead}-abc123.tmp", "half a file")
    live = write(tmp_path, f".devlint-{os.getppid()}-def456.tmp", "another devlint's, still writing")
    run("devlint", "--fix", str(path), check=0)
    assert not left.exists() and live.exists()
    assert FIXED in path.read_text()


# -- item 9: an output that cannot be written -------------------------------------------

full_device = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")


@full_device
def test_stdout_on_a_full_device_is_a_clear_error(tmp_path):
    path = write(tmp_path, "train.py", SNIPPET)
    with open("/dev/full", "w") as full:
        completed = subprocess.run(
            [tool("devlint"), "--no-cache", str(path)], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert completed.returncode == 2
    assert "cannot write the report to standard output: No space left on device" in completed.stderr
    assert "Traceback" not in completed.stderr and "Exception ignored" not in completed.stderr


@full_device
def test_output_file_on_a_full_device_is_a_clear_error(tmp_path, run):
    path = write(tmp_path, "train.py", SNIPPET)
    result = run("devlint", "--output-format", "sarif", "--output-file", "/dev/full", str(path), check=2)
    assert "cannot write the report to /dev/full: No space left on device" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_full_disk_leaves_no_partial_sarif_file(tmp_path, monkeypatch, capsys):
    """A disk that fills while the report is written (the error injected where the bytes
    go out): no empty or partial file for a CI workflow to upload, no temporary file."""
    path = write(tmp_path, "train.py", SNIPPET)
    report = tmp_path / "out" / "devlint.sarif"
    report.parent.mkdir()
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, text):
            self.handle.write(text[: len(text) // 2])
            self.handle.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    code = cli.main(["--no-cache", "--output-format", "sarif", "--output-file", str(report), str(path)])
    captured = capsys.readouterr()
    assert code == 2
    assert f"cannot write the report to {report}: No space left on device" in captured.err
    assert list(report.parent.iterdir()) == []


def test_an_existing_report_is_kept_when_the_new_one_cannot_be_written(tmp_path, monkeypatch, capsys):
    path = write(tmp_path, "train.py", SNIPPET)
    report = write(tmp_path, "devlint.json", "[]\n")

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", no_space)
    assert cli.main(["--no-cache", "--output-format", "json", "--output-file", str(report), str(path)]) == 2
    assert report.read_text() == "[]\n" and sorted(p.name for p in tmp_path.iterdir()) == ["devlint.json", "train.py"]


# -- item 10: the cache ----------------------------------------------------------------


def _check_cached(path, cache_dir) -> int:
    return cli.main(["--cache-dir", str(cache_dir), "--jobs", "1", "--output-format", "json", str(path)])


def _entries(cache_dir) -> list:
    return sorted(p for p in cache_dir.glob("??/*") if p.is_file())


def test_the_cache_key_follows_devlint_s_own_source(tmp_path, monkeypatch, capsys):
    """An editable install changes devlint's code without changing its version."""
    import shutil

    from devlint import cache

    package = tmp_path / "package"
    shutil.copytree(os.path.dirname(cache.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    before = cache.source_hash.__wrapped__(str(package))
    with open(package / "engine.py", "a") as handle:
        handle.write("\n# an edit\n")
    assert cache.source_hash.__wrapped__(str(package)) != before
    path = write(tmp_path, "train.py", SNIPPET)
    cache_dir = tmp_path / "cache"
    assert _check_cached(path, cache_dir) == 1 and len(_entries(cache_dir)) == 1
    monkeypatch.setattr(cache, "source_hash", lambda: "edited")
    assert _check_cached(path, cache_dir) == 1 and len(_entries(cache_dir)) == 2  # a miss, not the old entry


@pytest.mark.parametrize(
    "entry",
    ["[]", "{}", "[[1, 2]]", '{"format": 1, "key": "another", "diagnostics": []}', '{"format": 1, "diagnostics": "x"}'],
)
def test_a_cache_entry_of_the_wrong_shape_is_a_miss(tmp_path, capsys, entry):
    path = write(tmp_path, "train.py", SNIPPET)
    cache_dir = tmp_path / "cache"
    assert _check_cached(path, cache_dir) == 1
    (stored,) = _entries(cache_dir)
    key = stored.name
    stored.write_text(entry.replace('"another"', '"another"' if "another" in entry else f'"{key}"'))
    capsys.readouterr()
    assert _check_cached(path, cache_dir) == 1  # not "no findings"
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["DEV102"]


def test_a_failed_cache_write_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    from devlint import cache

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache.json, "dump", disk_full)  # json's, for the text report does not use it
    path = write(tmp_path, "train.py", SNIPPET)
    cache_dir = tmp_path / "cache"
    assert cli.main(["--cache-dir", str(cache_dir), "--jobs", "1", str(path)]) == 1
    assert [p.name for p in cache_dir.rglob("*") if p.is_file() and p.parent != cache_dir] == []
