"""The shadow answers each probe as a real GPU did.

fixtures/harness/probes.py is a list of small device cases (mixed devices in arithmetic,
modules, losses and indexing; host conversions; device queries; generators; checkpoints;
DataLoader workers; autocast). `scripts/gpu-check` ran it on an H200 and wrote
fixtures/harness/probes.cuda.txt; here it runs under the shadow, with one simulated GPU
as that machine had, and every line must be the same.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "fixtures" / "harness" / "probes.py"


def test_the_shadow_answers_every_probe_as_an_h200_did():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    completed = subprocess.run(
        [sys.executable, str(PROBES), "--shadow", "1"], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    expected = (PROBES.parent / "probes.cuda.txt").read_text().splitlines()
    answered = completed.stdout.splitlines()
    assert len(expected) > 60
    different = [(real, shadow) for real, shadow in zip(expected, answered) if real != shadow]
    assert not different, "\n".join(f"H200:   {real}\nshadow: {shadow}" for real, shadow in different)
    assert len(answered) == len(expected)
