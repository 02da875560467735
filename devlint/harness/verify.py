"""`devlint verify`: run the original and the fixed program, compare what they computed.

The run matrix (SPEC §5). With a GPU: the original on CUDA (the baseline), the fixed
program on CUDA, the fixed program on the CPU with the GPU hidden. Without one: the
same three with the shadow accelerator standing in for CUDA, plus the original on the
plain CPU, which is expected to fail; the report says with what.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import devlint

_PACKAGE_ROOT = str(Path(devlint.__file__).resolve().parent.parent)
REFERENCE = Path(__file__).resolve().parent / "reference_polyfit.py"


@dataclass(frozen=True)
class RunSpec:
    program: str  # "original" or "fixed"
    device: str  # "cuda", "shadow" or "cpu"
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
            "location": self.location,
            "seconds": round(self.seconds, 4),
            "counts": self.counts,
            "max_abs_diff": self.max_abs,
            "max_rel_diff": self.max_rel,
            "differences": self.differences,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }


@dataclass
class Report:
    script: str
    device: str
    runs: list[RunResult]
    verdict: str
    reasons: list[str]
    fixes_applied: list[str]
    rtol: float
    atol: float

    def to_json(self) -> dict:
        return {
            "script": self.script,
            "device": self.device,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "fixes_applied": self.fixes_applied,
            "rtol": self.rtol,
            "atol": self.atol,
            "runs": [run.to_json() for run in self.runs],
        }


def plan(device: str) -> list[RunSpec]:
    """The runs for a resolved device: `cuda`, `shadow` or `cpu`."""
    if device == "cpu":
        return [RunSpec("original", "cpu"), RunSpec("fixed", "cpu")]
    return [
        RunSpec("original", device),
        RunSpec("fixed", device),
        RunSpec("fixed", "cpu"),
        *([RunSpec("original", "cpu", expected_to_fail=True)] if device == "shadow" else []),
    ]


def resolve_device(choice: str) -> str:
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "shadow"


def run_program(
    spec: RunSpec,
    source: str,
    path: str,
    *,
    seed: int,
    shadow_devices: int,
    workdir: str,
    timeout: float | None,
) -> RunResult:
    """One run in its own subprocess."""
    result_path = os.path.join(workdir, spec.name.replace("@", "-") + ".json")
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
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = str(seed)
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    if spec.device != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "devlint.harness.runner", job_path],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as timeout_error:
        return RunResult(spec, "crashed", error=f"timed out after {timeout_error.timeout:g} s")
    if completed.returncode != 0 or not os.path.exists(result_path):
        return RunResult(
            spec,
            "crashed",
            error=f"the run's process exited with {completed.returncode}",
            stderr_tail=completed.stderr[-4000:],
            stdout_tail=completed.stdout[-4000:],
        )
    data = json.loads(Path(result_path).read_text(encoding="utf-8"))
    import torch

    observables = torch.load(result_path + ".pt", weights_only=True)
    return RunResult(
        spec,
        data["status"],
        error=data["error"],
        location=data["location"],
        seconds=data["seconds"],
        counts=data["counts"],
        stdout_tail=data["stdout_tail"],
        stderr_tail=completed.stderr[-4000:],
        observables=observables,
    )


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
    shadow_devices: int = 1,
    timeout: float | None = None,
    fixes_applied: list[str] | None = None,
) -> Report:
    resolved = resolve_device(device)
    specs = plan(resolved)
    # Runs are independent processes; on a GPU run them one at a time so that they do
    # not compete for the device.
    workers = 1 if resolved == "cuda" else max(1, min(len(specs), os.cpu_count() or 1))
    with tempfile.TemporaryDirectory(prefix="devlint-verify-") as workdir:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(
                    run_program,
                    spec,
                    original if spec.program == "original" else fixed,
                    path,
                    seed=seed,
                    shadow_devices=shadow_devices,
                    workdir=workdir,
                    timeout=timeout,
                )
                for spec in specs
            ]
            runs = [future.result() for future in futures]
    baseline = runs[0]
    reasons = []
    if baseline.status != "ok":
        reasons.append(f"the original program failed on {baseline.spec.device}: {baseline.error}")
    for run in runs[1:]:
        if run.status == "ok" and baseline.status == "ok":
            compare(baseline, run, rtol, atol)
        if run.spec.expected_to_fail:
            continue
        if run.status != "ok":
            reasons.append(f"{run.spec.name} failed: {run.error}")
        elif run.differences:
            reasons.append(f"{run.spec.name} computed something else than {baseline.spec.name}")
    return Report(
        script=path,
        device=resolved,
        runs=runs,
        verdict="FAIL" if reasons else "PASS",
        reasons=reasons,
        fixes_applied=fixes_applied or [],
        rtol=rtol,
        atol=atol,
    )


def _status_text(run: RunResult) -> str:
    if run.status == "ok":
        return "ok" if not run.differences else "differs"
    return "failed (expected)" if run.spec.expected_to_fail else "failed"


def _device_text(run: RunResult) -> str:
    return {"shadow": "shadow cuda", "cpu": "cpu", "cuda": "cuda"}[run.spec.device]


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
                "baseline" if run is report.runs[0] else _number(run.max_abs),
                "" if run is report.runs[0] else _number(run.max_rel),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"devlint verify {report.script} (device: {report.device}, rtol={report.rtol:g}, atol={report.atol:g})"]
    if report.fixes_applied:
        lines.append(f"fixes applied: {', '.join(report.fixes_applied)}")
    lines.append("")
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    details = []
    for run in report.runs:
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
