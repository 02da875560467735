"""`devlint verify` runs are isolated (issue 19, items 4 and 12): each reproduces the defect first."""

import inspect
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from devlint.harness.cli import _parser, main, read_source
from devlint.harness.verify import DEFAULT_TIMEOUT, RunResult, RunSpec, judge, run_program, verify

ROOT = Path(__file__).resolve().parents[2]
FIDELITY = ROOT / "fixtures" / "harness" / "fidelity"


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _run(tmp_path, source, device="cpu", timeout=120):
    script = tmp_path / "program.py"
    script.write_text(source)
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return run_program(
        RunSpec("original", device),
        source,
        str(script),
        seed=0,
        shadow_devices=1,
        workdir=str(workdir),
        timeout=timeout,
    )


def test_a_program_that_never_ends_is_stopped_by_the_default_timeout(tmp_path):
    assert DEFAULT_TIMEOUT > 0 and "time limit for each run" in _parser().format_help()
    for function in (run_program, verify):
        assert inspect.signature(function).parameters["timeout"].default == DEFAULT_TIMEOUT
    started = time.monotonic()
    result = _run(tmp_path, "while True:\n    pass\n", timeout=3)
    assert result.status == "crashed" and result.error == "timed out after 3 s (see --timeout)"
    assert time.monotonic() - started < 60


def test_runs_write_relative_files_in_a_folder_of_their_own(tmp_path, monkeypatch):
    user_folder = tmp_path / "user"
    user_folder.mkdir()
    monkeypatch.chdir(user_folder)
    program = "import os\nwith open('log.txt', 'a') as log:\n    log.write('run\\n')\nprint(os.getcwd())\n"
    result = _run(tmp_path, program)
    assert result.status == "ok"
    assert not (user_folder / "log.txt").exists()
    assert result.stdout_tail.strip() != str(user_folder)


def test_runs_read_no_input(tmp_path):
    result = _run(tmp_path, "import sys\nprint(len(sys.stdin.read()))\n")
    assert result.status == "ok" and result.stdout_tail.strip() == "0"


def test_globals_of_a_program_ending_in_sys_exit_0_are_compared(tmp_path, capsys):
    original, fixed = tmp_path / "original.py", tmp_path / "fixed.py"
    original.write_text("import sys\nimport torch\nweights = torch.ones(3)\nsys.exit(0)\n")
    fixed.write_text("import sys\nimport torch\nweights = torch.zeros(3)\nsys.exit(0)\n")
    assert main([str(original), "--fixed", str(fixed), "--device", "cpu"]) == 1
    assert "fixed@cpu: `weights`: 3 of 3 values differ" in capsys.readouterr().out


@pytest.mark.skipif(_has_gpu(), reason="this machine has the GPU the test asks for the absence of")
def test_device_cuda_without_a_gpu_is_a_usage_error(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    assert main([str(script), "--device", "cuda"]) == 2
    assert "--device cuda needs a CUDA GPU" in capsys.readouterr().err


def test_scripts_are_read_in_their_declared_encoding(tmp_path, capsys):
    latin = tmp_path / "latin.py"
    latin.write_bytes("# -*- coding: latin-1 -*-\nlabel = 'café'\nprint(len(label))\n".encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes("\ufeffprint('ü', 2)\n".encode("utf-8"))
    assert "café" in read_source(latin) and read_source(bom).startswith("print")
    assert main([str(latin), "--fixed", str(bom), "--device", "cpu"]) == 1  # they print 4 vs 2
    assert "printed numbers" in capsys.readouterr().out


@pytest.mark.slow
def test_sigterm_kills_every_run_and_removes_the_temporary_folder(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "forever.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, time
        open(os.path.join({str(pids)!r}, str(os.getpid())), "w").close()
        while True:
            time.sleep(0.1)
    """)
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, TMPDIR=str(temporary), PYTHONPATH=str(ROOT))
    verify = subprocess.Popen(
        [sys.executable, "-m", "devlint.harness.cli", str(script), "--fixed", str(script), "--device", "cpu"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    runs = [int(path.name) for path in pids.iterdir()]
    assert len(runs) == 2
    verify.send_signal(signal.SIGTERM)
    assert verify.wait(timeout=60) != 0
    for pid in runs:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert list(temporary.glob("devlint-verify-*")) == []


def _result(program, device, status="ok", observables=None, expected_to_fail=False):
    import torch

    values = observables if observables is not None else {"<printed>": torch.tensor([1.0, 2.0])}
    return RunResult(
        RunSpec(program, device, expected_to_fail),
        status,
        error=None if status == "ok" else "E: boom",
        observables=values if status == "ok" else {},
    )


def test_fixed_when_the_original_fails_on_its_accelerator_and_the_fixed_runs_agree():
    import torch

    runs = [
        _result("original", "shadow", "error"),
        _result("fixed", "shadow"),
        _result("fixed", "shadow:mps"),
        _result("fixed", "cpu"),
        _result("original", "cpu", "error", expected_to_fail=True),
    ]
    verdict, reasons, baseline = judge(runs, 1e-5, 1e-6)
    assert verdict == "FIXED" and baseline == "fixed@shadow"
    assert reasons[0] == "the original program failed on shadow cuda: E: boom"
    runs[3] = _result("fixed", "cpu", observables={"<printed>": torch.tensor([1.0, 3.0])})
    for run in runs:
        run.differences.clear()
    verdict, reasons, _ = judge(runs, 1e-5, 1e-6)
    assert verdict == "FAIL" and "fixed@cpu computed something else than fixed@shadow" in reasons
    runs[2] = _result("fixed", "shadow:mps", "error")
    assert judge(runs, 1e-5, 1e-6)[0] == "FAIL"


def test_a_run_on_other_hardware_is_held_to_the_device_tolerances():
    """On an H200 the reference's fixed@cpu ended with grad_c -17.500969 where CUDA had
    -17.500444: float32 sums in another order, not a wrong fix. Shadow runs compute on
    the CPU, like the CPU run, and stay held to --rtol/--atol."""
    import torch

    def gradient(value):
        return {"<printed>": torch.tensor([12.28]), "grad_c": torch.tensor(value, dtype=torch.float64)}

    runs = [
        _result("original", "cuda", observables=gradient(-17.500444)),
        _result("fixed", "cuda", observables=gradient(-17.500444)),
        _result("fixed", "cpu", observables=gradient(-17.500969)),
    ]
    assert judge(runs, 1e-5, 1e-6)[0] == "PASS"
    assert judge(runs, 1e-5, 1e-6, device_tolerances=(1e-5, 1e-6))[0] == "FAIL"
    runs[2] = _result("fixed", "cpu", observables=gradient(-17.6))
    assert judge(runs, 1e-5, 1e-6)[0] == "FAIL"
    runs[1] = _result("fixed", "cuda", observables=gradient(-17.500969))  # same hardware: exact
    runs[2] = _result("fixed", "cpu", observables=gradient(-17.500444))
    verdict, reasons, _ = judge(runs, 1e-5, 1e-6)
    assert verdict == "FAIL" and reasons == ["fixed@cuda computed something else than original@cuda"]
    shadow = [
        _result("original", "shadow", observables=gradient(-17.500444)),
        _result("fixed", "shadow", observables=gradient(-17.500444)),
        _result("fixed", "cpu", observables=gradient(-17.500969)),
    ]
    assert judge(shadow, 1e-5, 1e-6)[0] == "FAIL"


@pytest.mark.slow
def test_verifying_a_bug_fix_says_fixed_and_shows_the_original_error(capsys):
    original = FIDELITY / "variable_weights_on_cpu.py"
    fixed = original.with_name("variable_weights_on_cpu.fixed.py")
    assert main([str(original), "--fixed", str(fixed), "--device", "shadow"]) == 0
    out = capsys.readouterr().out
    assert "original@shadow: RuntimeError: Expected all tensors to be on the same device, but got mat2 is on cpu" in out
    assert out.rstrip().splitlines()[-1].startswith("FIXED: the original program failed on shadow cuda")


def test_a_default_device_the_program_leaves_set_does_not_reach_the_bookkeeping(tmp_path):
    """On a GPU, a program that ends with `torch.set_default_device("cuda")` had its
    printed numbers and float globals stored on the GPU, and comparing them with a CPU
    run's raised (seen on an H200). The meta device stands in for it here."""
    program = "import torch\nrate = 0.5\nprint(1.25)\ntorch.set_default_device('meta')\n"
    result = _run(tmp_path, program)
    assert result.status == "ok"
    assert {tensor.device.type for tensor in result.observables.values()} == {"cpu"}
    assert result.observables["rate"].item() == 0.5 and result.observables["<printed>"].tolist() == [1.25]
