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
import sys
import time

import pytest

from devlint import cli
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


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
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, workers)), "workers outlived their parent"
