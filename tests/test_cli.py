"""The real `devlint` script, run as a user runs it."""

from __future__ import annotations

import json
import os
import stat

import pytest

SAMPLE = """import torch

x = torch.zeros(3).cuda()
y = torch.ones(2, device="cuda")  # noqa: DEV101
print(torch.cuda.get_device_name(0))
"""


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, newline="")
    return path


def test_check_reports_and_exits_one(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    result = run("devlint", str(path), check=1)
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}:3:5: DEV102 [*] `.cuda()` only runs with CUDA: use `.to(device)`"
    assert lines[1].startswith(f"{path}:5:7: DEV106 ")
    assert lines[-1] == "Found 2 problems (1 fixable with --fix)."


def test_clean_file_exits_zero(tmp_path, run):
    path = write(tmp_path, "ok.py", "import torch\nx = torch.zeros(3)\n")
    result = run("devlint", str(path), check=0)
    assert result.stdout.strip() == "All checks passed!"


def test_check_subcommand_and_module_entry(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    assert run("devlint", "check", str(path)).returncode == 1
    import subprocess
    import sys

    completed = subprocess.run([sys.executable, "-m", "devlint", str(path)], capture_output=True, text=True)
    assert completed.returncode == 1 and "DEV102" in completed.stdout


def test_fix_rewrites_and_second_fix_is_noop(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    os.chmod(path, 0o640)
    result = run("devlint", "--fix", str(path), check=1)  # DEV106 on get_device_name remains
    assert "1 fixed, 1 remaining" in result.stdout
    fixed = path.read_text()
    assert "x = torch.zeros(3).to(device)" in fixed
    assert (
        'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'
        in fixed
    )
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    run("devlint", "fix", str(path), check=1)
    assert path.read_text() == fixed


def test_diff_changes_nothing(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    result = run("devlint", "--diff", str(path), check=1)
    assert "+x = torch.zeros(3).to(device)" in result.stdout
    assert path.read_text() == SAMPLE
    clean = write(tmp_path, "clean.py", "import torch\n")
    assert run("devlint", "--diff", str(clean)).returncode == 0


def test_select_ignore_prefixes(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    only = run("devlint", "--select", "DEV106", str(path), check=1)
    assert "DEV102" not in only.stdout and "DEV106" in only.stdout
    rest = run("devlint", "--ignore", "DEV1", str(path), check=0)
    assert "All checks passed!" in rest.stdout
    assert run("devlint", "--select", "NOPE1", str(path)).returncode == 2


def test_json_output(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    result = run("devlint", "--output-format", "json", str(path), check=1)
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == ["DEV102", "DEV106"]
    first = data[0]
    assert (first["line"], first["col"], first["end_line"], first["end_col"]) == (3, 5, 3, 26)
    assert first["fix"]["safety"] == "safe" and first["fix"]["edits"]
    assert data[1]["fix"] is None


def test_statistics_and_exit_zero(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    result = run("devlint", "--statistics", "--exit-zero", str(path), check=0)
    assert any(line.split()[:2] == ["1", "DEV102"] for line in result.stdout.splitlines())


def test_stdin(tmp_path, run):
    result = run("devlint", "--stdin-filename", "model.py", "-", stdin=SAMPLE, check=1)
    assert result.stdout.startswith("model.py:3:5: DEV102")
    fixed = run("devlint", "--fix", "-", stdin=SAMPLE)
    assert "torch.zeros(3).to(device)" in fixed.stdout


def test_unparseable_file_is_a_finding_and_others_still_checked(tmp_path, run):
    write(tmp_path, "pkg/bad.py", "import torch\ndef f(:\n")
    write(tmp_path, "pkg/good.py", SAMPLE)
    result = run("devlint", str(tmp_path / "pkg"), check=1)
    assert "bad.py:2:" in result.stdout and "DEV000" in result.stdout
    assert "good.py:3:5: DEV102" in result.stdout


def test_missing_path_is_exit_two(tmp_path, run):
    result = run("devlint", str(tmp_path / "nope.py"), check=2)
    assert "no such file" in result.stderr


def test_gitignore_and_exclude_when_walking(tmp_path, run):
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, ".gitignore", "generated/\n")
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nexclude = ["vendor/"]\n')
    write(tmp_path, "generated/a.py", SAMPLE)
    write(tmp_path, "vendor/b.py", SAMPLE)
    write(tmp_path, "src/c.py", SAMPLE)
    result = run("devlint", ".", cwd=tmp_path, check=1)
    assert "c.py" in result.stdout
    assert "a.py" not in result.stdout and "b.py" not in result.stdout
    named = run("devlint", "generated/a.py", cwd=tmp_path, check=1)
    assert "a.py:3:5" in named.stdout


def test_config_errors_are_exit_two(tmp_path, run):
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nselekt = ["DEV1"]\n')
    write(tmp_path, "a.py", SAMPLE)
    result = run("devlint", "a.py", cwd=tmp_path, check=2)
    assert "selekt" in result.stderr
    write(tmp_path, "pyproject.toml", '[tool.devlint]\ndevice-style = "gpu"\n')
    assert "device-style" in run("devlint", "a.py", cwd=tmp_path, check=2).stderr
    write(tmp_path, "bad.toml", "this is [not toml")
    assert "not valid TOML" in run("devlint", "--config", "bad.toml", "a.py", cwd=tmp_path, check=2).stderr


def test_rules_and_explain(run):
    table = run("devlint", "rules", check=0).stdout
    assert "DEV101" in table and "hardcoded-device" in table
    explained = run("devlint", "explain", "DEV102", check=0).stdout
    assert "## What it does" in explained and "## Fix safety" in explained
    assert run("devlint", "explain", "DEV999").returncode == 2


def test_version(run):
    assert run("devlint", "--version", check=0).stdout.startswith("devlint ")


def test_parallel_jobs_match_serial(tmp_path, run):
    for i in range(12):
        write(tmp_path, f"m{i:02}.py", SAMPLE)
    serial = run("devlint", "--jobs", "1", str(tmp_path)).stdout
    parallel = run("devlint", "--jobs", "2", str(tmp_path)).stdout
    assert serial == parallel and serial.count("DEV102") == 12


def test_cache_hits_keep_results_and_edits_invalidate(tmp_path, run):
    cache = tmp_path / "cache"
    path = write(tmp_path, "train.py", SAMPLE)
    cold = run("devlint", "--cache-dir", str(cache), "--output-format", "json", str(path)).stdout
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text() == "*\n"
    warm = run("devlint", "--cache-dir", str(cache), "--output-format", "json", str(path)).stdout
    assert warm == cold and '"DEV102"' in warm
    path.write_text(SAMPLE.replace(".cuda()", ""))
    edited = run("devlint", "--cache-dir", str(cache), str(path)).stdout
    assert "DEV102" not in edited
    # --fix on a cached file with fixes still fixes it
    path.write_text(SAMPLE)
    run("devlint", "--cache-dir", str(cache), str(path))
    run("devlint", "--cache-dir", str(cache), "--fix", str(path))
    assert "to(device)" in path.read_text()


def test_force_exclude_applies_exclude_to_named_files(tmp_path, run):
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nexclude = ["vendor/", "gen_*.py"]\n')
    vendored = write(tmp_path, "vendor/lib.py", SAMPLE)
    generated = write(tmp_path, "gen_model.py", SAMPLE)
    own = write(tmp_path, "train.py", SAMPLE)
    named = [str(vendored), str(generated), str(own)]
    assert run("devlint", *named, cwd=tmp_path).stdout.count("DEV102") == 3  # named: checked, as before
    result = run("devlint", "--force-exclude", *named, cwd=tmp_path, check=1)
    assert result.stdout.count("DEV102") == 1 and "train.py" in result.stdout
    run("devlint", "--fix", "--force-exclude", *named, cwd=tmp_path)
    assert vendored.read_text() == SAMPLE and generated.read_text() == SAMPLE and SAMPLE != own.read_text()
    piped = run(
        "devlint", "--force-exclude", "--stdin-filename", "vendor/lib.py", "-", cwd=tmp_path, stdin=SAMPLE, check=0
    )
    assert "DEV102" not in piped.stdout


def test_a_missing_path_is_reported_and_the_rest_is_checked(tmp_path, run):
    path = write(tmp_path, "train.py", SAMPLE)
    missing = tmp_path / "nope.py"
    result = run("devlint", "--no-cache", str(missing), str(path), check=2)
    assert f"devlint: error: {missing}: no such file or directory" in result.stderr
    assert f"{path}:3:5: DEV102" in result.stdout and "All checks passed" not in result.stdout
    clean = write(tmp_path, "clean.py", "import torch\n")
    result = run("devlint", "--no-cache", str(missing), str(clean), check=2)
    assert "All checks passed!" not in result.stdout  # not beside an exit-2 error
    assert "1 error left the check incomplete" in result.stdout


@pytest.mark.parametrize(
    ("text", "skipped"),
    [
        ("# devlint: skip-file\n", True),
        ("#devlint:skip-file  # generated\n", True),
        ('"""How to opt out:\n\n# devlint: skip-file\n"""\n', False),
        ("s = '# devlint: skip-file'\n", False),
        ("# devlint: skip-file-not\n", False),
        ("# devlint: skip-files\n", False),
    ],
)
def test_skip_file_only_as_a_comment_of_its_own(text, skipped):
    from devlint.engine import lint_source

    found = lint_source(text + SAMPLE, "t.py").diagnostics
    assert (found == []) is skipped
