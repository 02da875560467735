"""Does checking a file take time in proportion to its length?

Generates flat modules of 5k, 10k, 20k and 50k lines (tensors built, moved and combined
at module level, small functions between them: the device analysis's worst case is one
huge scope), times libcst's parse and devlint's whole check of each, and prints the time
per line and the scaling exponent (the slope of log time against log lines; 1.0 is
linear).

    python benchmarks/bench_scaling.py            # 5k 10k 20k 50k
    python benchmarks/bench_scaling.py 2000 4000  # other sizes
"""

from __future__ import annotations

import math
import sys
import time


def flat_module(lines: int) -> str:
    out = [
        "import torch",
        "import torch.nn as nn",
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
        "",
    ]
    i = 0
    while len(out) < lines:
        out += [
            f"x{i} = torch.zeros({i % 7 + 1}, 3)",
            f"y{i} = x{i}.to(device) * 2",
            f"z{i} = y{i} + torch.ones(3, device=device)",
            f"m{i} = nn.Linear(3, 3)",
            f"def f{i}(a):",
            "    b = torch.randn(3) + a",
            "    return b.sum()",
            "",
        ]
        i += 1
    return "\n".join(out) + "\n"


def best_of(rounds: int, run) -> float:
    times = []
    for _ in range(rounds):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return min(times)


def exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of log(seconds) against log(lines)."""
    xs = [math.log(n) for n in sizes]
    ys = [math.log(max(t, 1e-9)) for t in seconds]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)


def main(argv: list[str]) -> int:
    import libcst as cst

    from devlint.engine import lint_source

    sizes = [int(a) for a in argv] or [5_000, 10_000, 20_000, 50_000]
    rounds = 2
    parse, check = [], []
    print(f"{'lines':>7} {'parse s':>8} {'devlint s':>10} {'devlint µs/line':>16} {'analysis+rules s':>17}")
    for size in sizes:
        source = flat_module(size)
        parse.append(best_of(rounds, lambda: cst.parse_module(source)))
        check.append(best_of(rounds, lambda: lint_source(source, "flat.py")))
        print(
            f"{size:>7} {parse[-1]:>8.2f} {check[-1]:>10.2f} {check[-1] / size * 1e6:>16.1f} "
            f"{check[-1] - parse[-1]:>17.2f}"
        )
    print(
        f"exponent: devlint {exponent(sizes, check):.2f}, libcst parse {exponent(sizes, parse):.2f}, "
        f"devlint beyond the parse {exponent(sizes, [max(c - p, 1e-3) for c, p in zip(check, parse)]):.2f}"
        " (1.0 is linear; the goal is <= 1.15)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
