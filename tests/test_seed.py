"""The article's code (../shared/seed-article.txt), cleaned so it runs: fixtures/seed/.

devlint must find what a reader of the article expects, and after `devlint --fix` the
program must run on a machine without CUDA, with the real torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devlint import check_source
from test_fixtures import test_findings_match_markers as check_markers
from test_fixtures import test_fixes_match_expected_output as check_fixes

SEED = Path(__file__).resolve().parent.parent / "fixtures" / "seed"
ARTICLE = SEED / "article.py"
EXPECTED = {
    ('"cuda:4"', "DEV103"),
    ('torch.device("cuda:0")', "DEV101"),
    ("torch.FloatTensor([4., 5., 6.])", "DEV104"),
    ("sample.to('cuda')", "DEV101"),
    ("torch.cuda.current_device()", "DEV106"),
    ("torch.cuda.get_device_name(0)", "DEV106"),
}


def test_findings_are_what_a_reader_expects() -> None:
    check_markers(ARTICLE)
    lines = ARTICLE.read_text().splitlines()
    found = {(lines[d.line - 1], d.code) for d in check_source(ARTICLE.read_text(), str(ARTICLE))}
    for snippet, code in EXPECTED:
        assert any(snippet in line and c == code for line, c in found), (snippet, code, sorted(found))


def test_fixed_article_matches_expectation() -> None:
    check_fixes(ARTICLE)


def _run_without_cuda(script: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)


def test_fixed_article_runs_without_cuda(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.accelerator.is_available() if hasattr(torch, "accelerator") else torch.cuda.is_available():
        pytest.skip("this check is about a machine without an accelerator")
    script = tmp_path / "article.py"
    shutil.copy(ARTICLE, script)
    original = _run_without_cuda(script)
    assert original.returncode != 0, "the original article needs CUDA"
    subprocess.run([sys.executable, "-m", "devlint", "--fix", str(script)], capture_output=True, text=True, timeout=300)
    assert script.read_text() == (SEED / "article.fixed.py").read_text()
    fixed = _run_without_cuda(script)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[0] == "cpu"
    assert "Result: y = " in fixed.stdout
