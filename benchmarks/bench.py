#!/usr/bin/env python3
"""Time devlint against the libcst parse floor, flake8 and TorchFix on published code.

    python benchmarks/bench.py                 # timm + torchvision wheels, all tools
    python benchmarks/bench.py --files 60      # a quicker subset (same files for every tool)
    python benchmarks/bench.py --no-torchfix   # skip TorchFix (about 10 CPU-minutes on timm)

It downloads the wheels with pip (no dependencies), unzips them under benchmarks/.work/,
creates side venvs there for flake8 alone and for TorchFix, and runs every tool on the
same files, single-process, printing CPU seconds and the ratios the project's goals are
stated in. A shared machine is noisy (runs of one command differ by 15% here), so the
measures are taken in rounds (`--repeat`, default 3), one of each per round, and each
figure is its best round, as `timeit` advises; the spread is printed beside it. TorchFix
runs once: at about 15 times devlint, its noise does not matter. Compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import WORK, python_files, unpack  # noqa: E402

PACKAGES = ("timm", "torchvision")


def sh(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kwargs)


def build_corpus(limit: int | None) -> list[Path]:
    files: list[Path] = []
    for package in PACKAGES:
        files.extend(python_files(unpack(package)))
    if limit:
        files = files[:: max(1, len(files) // limit)][:limit]
    return files


def side_venv(name: str, *requirements: str) -> Path:
    venv = WORK / f"venv-{name}"
    python = venv / "bin" / "python"
    if not python.exists():
        sh(sys.executable, "-m", "venv", str(venv))
        sh(str(python), "-m", "pip", "install", "-q", *requirements)
    return venv / "bin"


def cpu_seconds(command: list[str], **kwargs) -> tuple[float, float, int, str]:
    """(CPU seconds of the children, wall seconds, exit code, stderr) for one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, completed.returncode, completed.stderr


# flake8 with the plugin, also reporting the CPU time spent inside the plugin: the
# difference of two whole flake8 runs carries the noise of both
_FLAKE8_TIMING_PLUGIN = """
import sys, time
from devlint.flake8_plugin import Plugin
from flake8.main.cli import main
spent = [0.0]
run = Plugin.run
def timed(self):
    start = time.process_time()
    found = list(run(self))
    spent[0] += time.process_time() - start
    return iter(found)
Plugin.run = timed
try:
    main(sys.argv[1:])
finally:
    print(f"plugin-cpu {spent[0]:.3f}", file=sys.stderr)
"""


def plugin_seconds(stderr: str) -> float:
    for line in stderr.splitlines():
        if line.startswith("plugin-cpu "):
            return float(line.split()[1])
    raise RuntimeError(f"flake8 with the plugin did not report its time: {stderr[-500:]}")


def peak_rss_kib(command: list[str]) -> int:
    completed = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True, text=True)
    try:
        return int(completed.stderr.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, help="use an evenly spaced subset of this many files")
    parser.add_argument("--no-torchfix", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of measures; each figure is its best round")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    files = build_corpus(args.files)
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    listing = WORK / "files.txt"
    listing.write_text("\n".join(map(str, files)))
    print(f"corpus: {len(files)} files, {lines} lines ({', '.join(PACKAGES)}); {platform.platform()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")  # fmt: skip

    bin_dir = Path(sys.executable).parent
    devlint = [str(bin_dir / "devlint"), "--jobs", "1", "--exit-zero", "-q"]
    cache = WORK / "cache"
    flake8_alone = side_venv("flake8", "flake8")
    commands = {
        "libcst parse": [sys.executable, "-c",
                         "import sys, libcst\n"
                         "for p in open(sys.argv[1]).read().split('\\n'):\n"
                         "    libcst.parse_module(open(p, 'rb').read())\n", str(listing)],
        "devlint cold": [*devlint, "--no-cache", *map(str, files)],
        "devlint warm": [*devlint, "--cache-dir", str(cache), *map(str, files)],
        "flake8 alone": [str(flake8_alone / "flake8"), "--jobs", "1", "--exit-zero", *map(str, files)],
        "flake8 + devlint": [sys.executable, "-c", _FLAKE8_TIMING_PLUGIN, "--jobs", "1", "--exit-zero",
                             *map(str, files)],
    }  # fmt: skip
    subprocess.run(["rm", "-rf", str(cache)])
    cpu_seconds(commands["devlint warm"])  # fills the cache
    rounds: dict[str, list[float]] = {name: [] for name in [*commands, "devlint inside flake8"]}
    for _ in range(args.repeat):
        for name, command in commands.items():
            cpu, _, _, stderr = cpu_seconds(command)
            rounds[name].append(cpu)
            if name == "flake8 + devlint":
                rounds["devlint inside flake8"].append(plugin_seconds(stderr))
    figures: dict[str, float] = {name: min(times) for name, times in rounds.items()}
    if not args.no_torchfix:
        torchfix = side_venv("torchfix", "torchfix")
        figures["torchfix"] = cpu_seconds([str(torchfix / "torchfix"), *map(str, files)])[0]
        rounds["torchfix"] = [figures["torchfix"]]

    half = files[: len(files) // 2]
    rss_half = peak_rss_kib([*devlint, "--no-cache", *map(str, half)])
    rss_all = peak_rss_kib([*devlint, "--no-cache", *map(str, files)])

    for name, seconds in figures.items():
        spread = f"(rounds: {', '.join(f'{t:.2f}' for t in rounds[name])})" if len(rounds[name]) > 1 else ""
        print(f"{name:<18} {seconds:8.2f} CPU s  {spread}")
    ratios = {
        "devlint cold / libcst parse": (lambda r: r["devlint cold"] / r["libcst parse"], "<= 1.3"),
        "devlint warm / cold": (lambda r: r["devlint warm"] / r["devlint cold"], "<= 0.05"),
        "flake8 plugin cost / parse": (
            lambda r: (r["flake8 + devlint"] - r["flake8 alone"]) / r["libcst parse"],
            "<= 1.3 (with - without)",
        ),
        "  the same, timed inside flake8": (lambda r: r["devlint inside flake8"] / r["libcst parse"], "<= 1.3"),
    }
    figures["ratios"] = {}  # type: ignore[assignment]
    print("ratios: of the best rounds, and the median of each round's own ratio")
    for label, (ratio, goal) in ratios.items():
        best = ratio(figures)
        per_round = sorted(ratio({name: times[i] for name, times in rounds.items() if len(times) > i})
                           for i in range(args.repeat))  # fmt: skip
        median = per_round[len(per_round) // 2]
        figures["ratios"][label.strip()] = {"best": best, "median": median}  # type: ignore[index]
        print(f"{label:<34} {best:6.3f}  median {median:6.3f}   (goal {goal})")
    if "torchfix" in figures:
        cold = figures["devlint cold"]
        print(f"{'torchfix / devlint cold':<34} {figures['torchfix'] / cold:6.1f}   (goal >= 15)")
    print(f"peak RSS, half / all files       {rss_half} / {rss_all} KiB (goal: flat)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "machine": platform.platform(), "cores": os.cpu_count(),
            "python": platform.python_version(), "files": len(files), "lines": lines, **figures,
            "rounds": rounds, "rss_half_kib": rss_half, "rss_all_kib": rss_all,
        }, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
