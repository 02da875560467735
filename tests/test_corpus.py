"""`devlint --fix` over real published packages keeps every file compiling, idempotently.

The full run (timm, torchvision, basicsr, pytorch_pretrained_bert) is
`python scripts/corpus_check.py`; the suite runs the two small packages.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_fix_over_published_packages(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from corpus import unpack

        for name in ("basicsr", "pytorch_pretrained_bert"):
            unpack(name)
    except (subprocess.CalledProcessError, RuntimeError, OSError) as err:
        pytest.skip(f"cannot download the corpus here: {err}")
    finally:
        sys.path.pop(0)
    report = tmp_path / "corpus.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "corpus_check.py"), "basicsr", "pytorch_pretrained_bert",
         "--json", str(report)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = {r["package"]: r for r in json.loads(report.read_text())}
    assert results["basicsr"]["files_changed"] > 5  # it has many .cuda() and FloatTensor calls
    for result in results.values():
        assert not result["broken"] and not result["second_fix_changed"] and not result["internal_errors"]
