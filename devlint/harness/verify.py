"""`devlint verify`: run the original and the fixed program, compare what they computed.

The run matrix (SPEC §5). With a GPU: the original on CUDA (the baseline), the fixed
program on CUDA, the fixed program on the CPU with the GPU hidden. Without one: the
same three with the shadow accelerator standing in for CUDA, plus the fixed program on a
shadow Mac (`shadow:mps`: an accelerator that is not CUDA) and the original on the plain
CPU, which is expected to fail; the report says with what. The original is always
judged on CUDA, the machine it was written for.

Runs are isolated: each is a subprocess in a process group of its own, in an empty
temporary working folder, with stdin closed and a time limit; when verify ends, for
whatever reason (SIGTERM included), the groups still running are killed and the
temporary folder is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import devlint
from devlint.harness.runner import shadow_kind

_PACKAGE_ROOT = str(Path(devlint.__file__).resolve().parent.parent)
REFERENCE = Path(__file__).resolve().parent / "reference_polyfit.py"
DEFAULT_TIMEOUT = 600.0  # seconds per run: long enough for a small training script
SHADOW_KINDS = ("cuda", "mps", "xpu")


@dataclass(frozen=True)
class RunSpec:
    program: str  # "original" or "fixed"
    device: str  # "cuda", "cpu", "shadow" (shadow CUDA), "shadow:mps" or "shadow:xpu"
    expected_to_fail: bool = False

    @property
    def name(self) -> str:
        return f"{self.program}@{self.device}"


@dataclass
class RunResult:
    spec: RunSpec
    status: str  # "ok", "error", or "crashed" (the subprocess itself died)
    error: str | None = None
    location: str | None = None
    seconds: float = 0.0
    counts: dict = field(default_factory=dict)
    stdout_tail: str = ""
    stderr_tail: str = ""
    observables: dict = field(default_factory=dict)
    max_abs: float | None = None
    max_rel: float | None = None
    differences: list[str] = field(default_factory=list)
    # Set when the run failed while other runs ran, and this result is its run alone.
    failed_alongside_others: str | None = None

    @property
    def agrees(self) -> bool:
        return self.status == "ok" and not self.differences

    def to_json(self) -> dict:
        return {
            "run": self.spec.name,
            "program": self.spec.program,
            "device": self.spec.device,
            "expected_to_fail": self.spec.expected_to_fail,
            "status": self.status,
            "error": self.error,
            "failed_alongside_others": self.failed_alongside_others,
            "location": self.location,
            "seconds": round(self.seconds, 4),
            "counts": self.counts,
            "max_abs_diff": self.max_abs,
            "max_rel_diff": self.max_rel,
            "differences": self.differences,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }


# Runs on other hardware than the baseline's (fixed@cpu against original@cuda on a GPU
# machine) add their float32 sums in another order, and a training loop carries that on:
# on an H200, the reference's final gradients (about 17.5) differed by 5e-4 from the CPU's
# (relative 3e-5), four times --rtol's 1e-5. Shadow runs compute on the CPU, like the CPU
# run, so they are held to --rtol/--atol.
DEVICE_RTOL = 1e-3
DEVICE_ATOL = 1e-5


@dataclass
class Report:
    script: str
    device: str
    runs: list[RunResult]
    baseline: str  # the run the others are compared with: the original, or the first fixed run
    verdict: str
    reasons: list[str]
    fixes_applied: list[str]
    rtol: float
    atol: float
    device_rtol: float = DEVICE_RTOL
    device_atol: float = DEVICE_ATOL

    def to_json(self) -> dict:
        return {
            "script": self.script,
            "device": self.device,
            "baseline": self.baseline,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "fixes_applied": self.fixes_applied,
            "rtol": self.rtol,
            "atol": self.atol,
            "device_rtol": self.device_rtol,
            "device_atol": self.device_atol,
            "runs": [run.to_json() for run in self.runs],
        }


def plan(device: str) -> list[RunSpec]:
    """The runs for a resolved device: `cuda`, `cpu`, `shadow` or `shadow:mps`/`shadow:xpu`."""
    if device == "cpu":
        return [RunSpec("original", "cpu"), RunSpec("fixed", "cpu")]
    if device == "cuda":
        return [RunSpec("original", "cuda"), RunSpec("fixed", "cuda"), RunSpec("fixed", "cpu")]
    fixed_on = ["shadow", "shadow:mps"] if device == "shadow" else [device]
    return [
        RunSpec("original", "shadow"),
        *(RunSpec("fixed", accelerator) for accelerator in fixed_on),
        RunSpec("fixed", "cpu"),
        RunSpec("original", "cpu", expected_to_fail=True),
    ]


def resolve_device(choice: str) -> str:
    if choice == "shadow:cuda":
        return "shadow"
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "shadow"


class _Children:
    """The run processes still alive, so that verify can kill their groups when it ends."""

    def __init__(self):
        self._lock = threading.Lock()
        self._processes: set[subprocess.Popen] = set()

    def add(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes.add(process)

    def discard(self, process: subprocess.Popen) -> None:
        with self._lock:
            self._processes.discard(process)

    def kill_all(self) -> None:
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    # The run is its own session leader, so its group holds whatever it started too
    # (DataLoader workers, spawned helpers).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


_children = _Children()


def run_program(
    spec: RunSpec,
    source: str,
    path: str,
    *,
    seed: int,
    shadow_devices: int,
    workdir: str,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> RunResult:
    """One run in its own subprocess, process group and empty working folder."""
    result_path = os.path.join(workdir, spec.name.replace("@", "-").replace(":", "-") + ".json")
    display = path if spec.program == "original" else f"{path} (fixed)"
    job = {
        "source": source,
        "path": os.path.abspath(path),
        "display": display,
        "device": spec.device,
        "seed": seed,
        "shadow_devices": shadow_devices,
        "result": result_path,
    }
    job_path = result_path.replace(".json", ".job.json")
    Path(job_path).write_text(json.dumps(job), encoding="utf-8")
    # A program that writes relative paths writes here, not in the user's folder, and
    # concurrent runs do not see each other's files.
    run_folder = tempfile.mkdtemp(prefix=spec.name.replace("@", "-").replace(":", "-") + "-", dir=workdir)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = str(seed)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if spec.device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    process = subprocess.Popen(
        [sys.executable, "-m", "devlint.harness.runner", job_path],
        env=env,
        cwd=run_folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    _children.add(process)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return RunResult(spec, "crashed", error=f"timed out after {timeout:g} s (see --timeout)")
    finally:
        _children.discard(process)
    if process.returncode != 0 or not os.path.exists(result_path):
        return RunResult(
            spec,
            "crashed",
            error=f"the run's process exited with {process.returncode}",
            stderr_tail=stderr[-4000:],
            stdout_tail=stdout[-4000:],
        )
    data = json.loads(Path(result_path).read_text(encoding="utf-8"))
    import torch

    observables = torch.load(result_path + ".pt", weights_only=True, map_location="cpu")
    return RunResult(
        spec,
        data["status"],
        error=data["error"],
        location=data["location"],
        seconds=data["seconds"],
        counts=data["counts"],
        stdout_tail=data["stdout_tail"],
        stderr_tail=stderr[-4000:],
        observables=observables,
    )


class _Terminated(SystemExit):
    """SIGTERM, raised in the main thread so that verify's cleanup runs."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise _Terminated(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def compare(baseline: RunResult, other: RunResult, rtol: float, atol: float) -> None:
    """Fill `other`'s differences and largest deviations against the baseline."""
    import torch

    max_abs = max_rel = 0.0
    for name in sorted(set(baseline.observables) | set(other.observables)):
        label = "printed numbers" if name == "<printed>" else f"`{name}`"
        if name not in other.observables:
            other.differences.append(f"{label}: missing from {other.spec.name}")
            continue
        if name not in baseline.observables:
            other.differences.append(f"{label}: only in {other.spec.name}")
            continue
        expected, actual = baseline.observables[name], other.observables[name]
        if expected.shape != actual.shape:
            what = "count" if name == "<printed>" else "shape"
            other.differences.append(
                f"{label}: {what} {tuple(actual.shape)} instead of {tuple(expected.shape)}"
                + (_printed_preview(expected, actual) if name == "<printed>" else "")
            )
            continue
        if expected.numel() == 0:
            continue
        expected64 = expected.to(torch.float64) if not expected.is_complex() else expected
        actual64 = actual.to(torch.float64) if not actual.is_complex() else actual
        difference = (actual64 - expected64).abs()
        both_nan = expected64.isnan() & actual64.isnan()
        difference = torch.where(both_nan, torch.zeros_like(difference), difference)
        relative = difference / expected64.abs().clamp_min(torch.finfo(torch.float64).tiny)
        relative = torch.where(difference == 0, torch.zeros_like(relative), relative)
        largest_abs = float(difference.max())
        max_abs, max_rel = max(max_abs, largest_abs), max(max_rel, float(relative.max()))
        close = torch.isclose(actual64, expected64, rtol=rtol, atol=atol, equal_nan=True)
        if not bool(close.all()):
            where = int((~close).flatten().nonzero()[0])
            other.differences.append(
                f"{label}: {int((~close).sum())} of {close.numel()} values differ "
                f"(first at index {where}: {actual64.flatten()[where].item():.8g} instead of "
                f"{expected64.flatten()[where].item():.8g}; max abs diff {largest_abs:.3g})"
            )
    other.max_abs, other.max_rel = max_abs, max_rel


def _printed_preview(expected, actual) -> str:
    shown = 6
    return f" (first: {actual[:shown].tolist()} instead of {expected[:shown].tolist()})"


def verify(
    path: str,
    original: str,
    fixed: str,
    *,
    device: str = "auto",
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    device_rtol: float = DEVICE_RTOL,
    device_atol: float = DEVICE_ATOL,
    shadow_devices: int = 1,
    timeout: float | None = DEFAULT_TIMEOUT,
    fixes_applied: list[str] | None = None,
) -> Report:
    resolved = resolve_device(device)
    specs = plan(resolved)
    # Runs are independent processes; on a GPU run them one at a time so that they do
    # not compete for the device.
    workers = 1 if resolved == "cuda" else max(1, min(len(specs), os.cpu_count() or 1))
    with _sigterm_raises(), tempfile.TemporaryDirectory(prefix="devlint-verify-") as workdir:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = []
            try:
                for spec in specs:
                    source = original if spec.program == "original" else fixed
                    futures.append(
                        pool.submit(
                            run_program,
                            spec,
                            source,
                            path,
                            seed=seed,
                            shadow_devices=shadow_devices,
                            workdir=workdir,
                            timeout=timeout,
                        )
                    )
                runs = [future.result() for future in futures]
            finally:
                # On SIGTERM or any error: the queued runs never start, the others die.
                for future in futures:
                    future.cancel()
                _children.kill_all()
        if workers > 1:
            try:
                runs = _rerun_alone(runs, fixed, path, seed, shadow_devices, workdir, timeout)
            finally:
                _children.kill_all()  # on SIGTERM too: a run again alone dies with verify
    verdict, reasons, baseline = judge(runs, rtol, atol, device_tolerances=(device_rtol, device_atol))
    return Report(
        script=path,
        device=resolved,
        runs=runs,
        baseline=baseline,
        verdict=verdict,
        reasons=reasons,
        fixes_applied=fixes_applied or [],
        rtol=rtol,
        atol=atol,
        device_rtol=device_rtol,
        device_atol=device_atol,
    )


def _rerun_alone(runs, fixed, path, seed, shadow_devices, workdir, timeout) -> list[RunResult]:
    """Run again, alone, each fixed run that raised while other runs ran.

    Concurrent runs share whatever lies outside their working folders: a checkpoint
    written to an absolute path, a port, a cache. A fixed run that raises there may only
    have met another run, and its verdict is then the one it earns alone. A run that
    crashed or timed out is not run again.
    """
    results = []
    for run in runs:
        if run.spec.program == "fixed" and run.status == "error":
            again = run_program(
                run.spec,
                fixed,
                path,
                seed=seed,
                shadow_devices=shadow_devices,
                workdir=workdir,
                timeout=timeout,
            )
            if again.status == "ok":  # only then was the other runs' company the cause
                again.failed_alongside_others = run.error
            run = again
        results.append(run)
    return results


def _hardware(run: RunResult) -> str:
    """What computes a run's numbers: the shadow computes on the CPU."""
    return run.spec.device if run.spec.device == "cuda" else "cpu"


def judge(
    runs: list[RunResult], rtol: float, atol: float, device_tolerances: tuple[float, float] = (DEVICE_RTOL, DEVICE_ATOL)
) -> tuple[str, list[str], str]:
    """PASS, FIXED or FAIL, why, and the name of the run the others were compared with.

    PASS: the original works on its accelerator and every fixed run computes the same.
    FIXED: the original fails on its accelerator (the bug being fixed), every fixed run
    succeeds and they agree with the first of them. FAIL: anything else. A run on other
    hardware than the baseline's is held to `device_tolerances`, if they are looser.
    """
    original, fixed_runs = runs[0], [run for run in runs[1:] if run.spec.program == "fixed"]
    failed = [run for run in runs[1:] if run.status != "ok" and not run.spec.expected_to_fail]
    if original.status == "ok":
        baseline, comparing = original, runs[1:]
    else:
        baseline, comparing = fixed_runs[0], [run for run in runs[1:] if run is not fixed_runs[0]]
    if baseline.status == "ok":
        for run in comparing:
            if run.status == "ok":
                if _hardware(run) == _hardware(baseline):
                    compare(baseline, run, rtol, atol)
                else:
                    compare(baseline, run, max(rtol, device_tolerances[0]), max(atol, device_tolerances[1]))
    reasons = [f"{run.spec.name} failed: {run.error}" for run in failed]
    reasons += [
        f"{run.spec.name} computed something else than {baseline.spec.name}"
        for run in comparing
        if run.status == "ok" and run.differences and not run.spec.expected_to_fail
    ]
    if original.status == "ok":
        return ("FAIL" if reasons else "PASS"), reasons, baseline.spec.name
    bug = f"the original program failed on {_device_text(original)}: {original.error}"
    if reasons:
        return "FAIL", [bug, *reasons], baseline.spec.name
    return "FIXED", [bug, "every fixed run succeeds and agrees with " + baseline.spec.name], baseline.spec.name


def _status_text(run: RunResult) -> str:
    if run.status == "ok":
        return "ok" if not run.differences else "differs"
    return "failed (expected)" if run.spec.expected_to_fail else "failed"


def _device_text(run: RunResult) -> str:
    kind = shadow_kind(run.spec.device)
    return run.spec.device if kind is None else f"shadow {kind}"


def render(report: Report) -> str:
    """The table, the details of what went wrong, and the verdict."""
    header = ("run", "device", "status", "seconds", "ops", "mixed", "h2d", "d2h", "syncs", "max abs", "max rel")
    rows = [header]
    for run in report.runs:
        counts = run.counts or {}
        ops = sum((counts.get("ops") or {}).values())
        rows.append(
            (
                run.spec.name,
                _device_text(run),
                _status_text(run),
                f"{run.seconds:.2f}",
                str(ops) if counts else "-",
                str(counts.get("mixed", "-")),
                str(counts.get("host_to_device", "-")),
                str(counts.get("device_to_host", "-")),
                str(counts.get("syncs", "-")),
                "baseline" if run.spec.name == report.baseline else _number(run.max_abs),
                "" if run.spec.name == report.baseline else _number(run.max_rel),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    tolerances = f"rtol={report.rtol:g}, atol={report.atol:g}"
    if len({_hardware(run) for run in report.runs}) > 1:
        tolerances += f"; across devices rtol={report.device_rtol:g}, atol={report.device_atol:g}"
    lines = [f"devlint verify {report.script} (device: {report.device}, {tolerances})"]
    if report.fixes_applied:
        lines.append(f"fixes applied: {', '.join(report.fixes_applied)}")
    lines.append("")
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    details = []
    for run in report.runs:
        if run.failed_alongside_others:
            details.append(
                f"{run.spec.name}: failed while the other runs ran ({run.failed_alongside_others}); "
                "this is its run alone (do the runs share a file outside their working folders?)"
            )
        if run.status != "ok":
            where = f" ({run.location})" if run.location else ""
            details.append(f"{run.spec.name}: {run.error}{where}")
            if run.status == "crashed" and run.stderr_tail:
                details.extend("    " + line for line in run.stderr_tail.strip().splitlines()[-8:])
        details.extend(f"{run.spec.name}: {difference}" for difference in run.differences[:10])
    if details:
        lines += ["", *details]
    lines += ["", f"{report.verdict}" + (f": {'; '.join(report.reasons)}" if report.reasons else "")]
    return "\n".join(lines)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"
