"""One run of a program, in a subprocess of its own: `python -m devlint.harness.runner JOB`.

JOB is a JSON file naming the source to run, the path it stands for, the device
(`cuda`, `cpu`, `shadow` or `shadow:mps`/`shadow:xpu`), the seed and where to write the
result. The runner seeds
every generator, turns TF32 off and deterministic algorithms on, runs the program as
`__main__` and writes what it observed: the numbers it printed, in order, the tensors
and floats (and modules' tensors) left in its globals, the device counts, and the error
if it failed. Tensors go to `<result>.pt`, the rest to the JSON result.
"""

from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
import random
import re
import sys
import time
import traceback
import types

_DEVICE_TEXT = re.compile(
    r"device\(type='[^']*'(?:, index=\d+)?\)|device='[^']*'|dtype=torch\.\w+|<[^<>]*>"
    r"|\b(?:cuda|cpu|mps|xpu|npu|hpu|meta)(?::\d+)?\b"
)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:nan|inf)\b")
_TAIL = 4000


def shadow_kind(device: str) -> str | None:
    """ "cuda" for `shadow` and `shadow:cuda`, "mps" for `shadow:mps`...; None for real devices."""
    if device == "shadow":
        return "cuda"
    return device.split(":", 1)[1] if device.startswith("shadow:") else None


def printed_numbers(text: str) -> list[float]:
    """The numbers in what a program printed, devices and dtypes left out.

    `tensor([1.], device='cuda:0')` and `tensor([1.])` hold the same numbers; so do
    `Using cuda:0` and `Using cpu`.
    """
    return [float(match) for match in _NUMBER.findall(_DEVICE_TEXT.sub(" ", text))]


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream = stream
        self.parts: list[str] = []

    def write(self, text):
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    @property
    def encoding(self):
        return getattr(self.stream, "encoding", "utf-8")

    def isatty(self):
        return False


def _seed(seed: int, torch) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision("highest")
    torch.use_deterministic_algorithms(True, warn_only=True)


def _execute(source: str, path: str, display: str, module: types.ModuleType | None = None) -> dict:
    """Run `source` as the `__main__` module of `path`; return its globals.

    Pass `module` to keep the globals when the program ends by raising (`sys.exit(0)`).
    """
    module = module or types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    lines = source.splitlines(keepends=True)
    linecache.cache[display] = (len(source), None, lines, display)
    code = compile(source, display, "exec")
    saved_main, saved_argv, saved_path = sys.modules.get("__main__"), sys.argv, list(sys.path)
    sys.modules["__main__"] = module
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules["__main__"], sys.argv, sys.path[:] = saved_main, saved_argv, saved_path
    return module.__dict__


def _host_copy(tensor, torch):
    from devlint.harness.shadow import ShadowTensor

    if isinstance(tensor, ShadowTensor):
        with torch._C.DisableTorchFunction():
            tensor = torch.Tensor.as_subclass(tensor, torch.Tensor)
    return tensor.detach().to("cpu", copy=True)


def _observables(namespace: dict, torch) -> dict:
    found = {}
    for name, value in sorted(namespace.items()):
        if name.startswith("_"):
            continue
        if isinstance(value, torch.Tensor):
            found[name] = _host_copy(value, torch)
        elif isinstance(value, float):
            found[name] = torch.tensor(value, dtype=torch.float64, device="cpu")
        elif isinstance(value, torch.nn.Module):
            for key, tensor in value.state_dict().items():
                found[f"{name}.{key}"] = _host_copy(tensor, torch)
    return found


def _error_location(error: BaseException, display: str) -> str | None:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == display]
    if not frames:
        return None
    frame = frames[-1]
    return f"line {frame.lineno}: {frame.line}" if frame.line else f"line {frame.lineno}"


# The program's globals, kept until the process ends. Freeing them could run destructors
# that deadlock after the result is known: a DDP model's gloo process group joins its
# worker threads holding the GIL while a worker waits for the GIL to drop the recorder's
# Python state. The runner writes its result, then leaves without tearing them down.
_FINISHED: list[types.ModuleType] = []


def run_job(job: dict) -> dict:
    import torch

    from devlint.harness.recorder import DeviceCounts, recording
    from devlint.harness.randomness import cpu_randomness
    from devlint.harness.machine import shadow_accelerator

    _seed(job["seed"], torch)
    counts = DeviceCounts()
    tee = _Tee(sys.stdout)
    status, error, location, namespace = "ok", None, None, {}
    started = time.perf_counter()
    module = types.ModuleType("__main__")
    _FINISHED.append(module)
    kind = shadow_kind(job["device"])
    with contextlib.ExitStack() as stack:
        if kind is not None:
            stack.enter_context(shadow_accelerator(kind, device_count=job.get("shadow_devices", 1), counts=counts))
        else:
            stack.enter_context(recording(counts))
            if job["device"] == "cuda":
                stack.enter_context(cpu_randomness())
        stack.enter_context(contextlib.redirect_stdout(tee))
        try:
            namespace = _execute(job["source"], job["path"], job["display"], module)
        except SystemExit as exit_:
            # A clean exit still leaves globals to compare; dropping them would hide
            # differences (a false PASS).
            namespace = module.__dict__
            if exit_.code not in (None, 0):
                status, error = "error", f"SystemExit: {exit_.code}"
        except BaseException as exc:  # the program's own failure is the result
            status = "error"
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            error = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
            location = _error_location(exc, job["display"])
            namespace = {}
            traceback.print_exc(file=sys.stderr)
        if job["device"] == "cuda" and torch.cuda.is_available():
            torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    printed = "".join(tee.parts)
    observables = _observables(namespace, torch) if status == "ok" else {}
    # On the host whatever default device the program left set (on a GPU machine,
    # `torch.set_default_device("cuda")` would put the bookkeeping there).
    observables["<printed>"] = torch.tensor(printed_numbers(printed), dtype=torch.float64, device="cpu")
    torch.save(observables, job["result"] + ".pt")
    return {
        "status": status,
        "error": error,
        "location": location,
        "seconds": seconds,
        "counts": counts.to_json(),
        "stdout_tail": printed[-_TAIL:],
        "observables": sorted(name for name in observables if name != "<printed>"),
    }


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as handle:
        job = json.load(handle)
    result = run_job(job)
    with open(job["result"], "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no teardown of the program's objects (see _FINISHED)
