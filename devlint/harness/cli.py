"""`devlint verify SCRIPT [--fixed FIXED] ...` and `devlint verify --reference`.

The main CLI hands everything after `verify` to `main`. Exit codes: 0 PASS or FIXED,
1 FAIL, 2 usage error (or torch missing, or `--device cuda` without a GPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tokenize
from pathlib import Path

from devlint.harness.verify import DEVICE_ATOL, DEVICE_RTOL

_DEVICES = ("auto", "cuda", "cpu", "shadow", "shadow:cuda", "shadow:mps", "shadow:xpu")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devlint verify",
        description="Run a program and its fixed version, and check that they compute the same numbers.",
    )
    parser.add_argument("script", nargs="?", help="the program to verify")
    parser.add_argument("--reference", action="store_true", help="verify the shipped reference program")
    parser.add_argument("--fixed", help="the fixed program (default: the original with devlint's safe fixes)")
    parser.add_argument(
        "--device",
        choices=_DEVICES,
        default="auto",
        help="auto: cuda if present, else shadow (CUDA simulated on the CPU, plus a run on shadow:mps)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument(
        "--device-rtol",
        type=float,
        default=DEVICE_RTOL,
        help="rtol for a run on other hardware than the one it is compared with, on a GPU machine (default: %(default)g)",
    )
    parser.add_argument("--device-atol", type=float, default=DEVICE_ATOL, help="its atol (default: %(default)g)")
    parser.add_argument("--json", metavar="REPORT", help="also write the report as JSON to REPORT")
    parser.add_argument(
        "--shadow-devices", type=int, default=1, metavar="N", help="how many GPUs the shadow accelerator simulates"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time limit for each run; a run past it is killed and reported as crashed (default: 600)",
    )
    return parser


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) if exit_.code in (0, None) else 2
    if args.reference == bool(args.script):
        print("devlint verify: give either SCRIPT or --reference", file=sys.stderr)
        return 2
    if args.shadow_devices < 1:
        print("devlint verify: --shadow-devices must be at least 1", file=sys.stderr)
        return 2
    if args.timeout is not None and args.timeout <= 0:
        print("devlint verify: --timeout must be positive", file=sys.stderr)
        return 2
    if importlib.util.find_spec("torch") is None:
        print("devlint verify needs torch: pip install 'devlint[harness]'", file=sys.stderr)
        return 2
    from devlint.harness.verify import DEFAULT_TIMEOUT, REFERENCE, render, verify

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print(
                "devlint verify: --device cuda needs a CUDA GPU, and torch.cuda.is_available() is False "
                "here; use --device shadow to simulate one",
                file=sys.stderr,
            )
            return 2
    script = Path(args.script) if args.script else REFERENCE
    try:
        if script.suffix == ".ipynb":
            original, fixed_text, applied = _notebook(script, args.fixed)
        else:
            original = read_source(script)
            fixed_text, applied = _fixed(script, original, args.fixed)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as error:
        print(f"devlint verify: {error}", file=sys.stderr)
        return 2
    report = verify(
        str(script),
        original,
        fixed_text,
        device=args.device,
        seed=args.seed,
        rtol=args.rtol,
        atol=args.atol,
        device_rtol=args.device_rtol,
        device_atol=args.device_atol,
        shadow_devices=args.shadow_devices,
        timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout,
        fixes_applied=applied,
    )
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if report.verdict in ("PASS", "FIXED") else 1


def read_source(path: Path) -> str:
    """A script's text in its declared encoding: a PEP 263 coding line or a UTF-8 BOM
    (what Python itself reads), UTF-8 otherwise."""
    with tokenize.open(path) as handle:
        return handle.read()


def _notebook(script: Path, fixed_path: str | None) -> tuple[str, str, list[str]]:
    """A notebook's code cells as a script (magics dropped), and the fixed notebook's."""
    from devlint.notebook import fix_notebook, notebook_to_script

    data = script.read_bytes()
    original = notebook_to_script(data, str(script))
    if fixed_path is not None:
        fixed = Path(fixed_path)
        if fixed.suffix == ".ipynb":
            return original, notebook_to_script(fixed.read_bytes(), fixed_path), []
        return original, read_source(fixed), []
    result = fix_notebook(data, str(script))
    applied = [f"{d.diagnostic.code} (cell {d.cell}, line {d.diagnostic.line})" for d in result.applied]
    return original, notebook_to_script(result.output, str(script)), applied


def _fixed(script: Path, original: str, fixed_path: str | None) -> tuple[str, list[str]]:
    """The fixed program's text, and the findings fixed when devlint made it."""
    if fixed_path is not None:
        return read_source(Path(fixed_path)), []
    from devlint import fix_source

    result = fix_source(original, path=str(script))
    applied = [f"{d.code} (line {d.line})" for d in result.applied]
    return result.output, applied


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
