"""Shadow accelerator and recorder overhead on the reference program (goal: about 3x plain CPU).

    python benchmarks/bench_shadow.py [--repeat N] [--json]

Runs the fixed reference in process: on the plain CPU, on the CPU under the device
recorder, under the shadow accelerator (CUDA) and under a shadow Mac (MPS); prints each
best time and its ratio to plain. The machine is noisy: compare best of several repeats.
"""

import argparse
import contextlib
import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402 -- after the path, so the checkout's devlint is used

from devlint import fix_source  # noqa: E402
from devlint.harness.recorder import DeviceCounts, recording  # noqa: E402
from devlint.harness.machine import shadow_accelerator  # noqa: E402
from devlint.harness.verify import REFERENCE  # noqa: E402


def timed(code, context) -> float:
    torch.manual_seed(0)
    namespace = {"__name__": "__main__"}
    with context, contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        exec(code, namespace)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    fixed = fix_source(REFERENCE.read_text(), path=str(REFERENCE)).output
    code = compile(fixed, str(REFERENCE), "exec")
    contexts = {
        "plain cpu": contextlib.nullcontext,
        "recorder": lambda: recording(DeviceCounts()),
        "shadow": shadow_accelerator,
        "shadow mps": lambda: shadow_accelerator("mps"),
    }
    timed(code, contextlib.nullcontext())  # warm-up
    best = {name: min(timed(code, make()) for _ in range(args.repeat)) for name, make in contexts.items()}
    ratios = {name: seconds / best["plain cpu"] for name, seconds in best.items()}
    for name in contexts:
        print(f"{name:11} {best[name]:.3f} s  {ratios[name]:.2f}x")
    if args.json:
        print(json.dumps({"seconds": best, "ratios": ratios}))


if __name__ == "__main__":
    main()
