#!/usr/bin/env python3
"""`devlint --fix` over copies of real published packages: nothing may break.

    python scripts/corpus_check.py                       # timm torchvision basicsr pytorch_pretrained_bert
    python scripts/corpus_check.py timm --json out.json

For each package: unpack a fresh copy, record the findings by code, run `devlint --fix`,
then check that every Python file still compiles, that a second `--fix` changes no byte,
and that devlint reported no internal error. Exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from corpus import python_files, unpack  # noqa: E402

DEFAULT = ("timm", "torchvision", "basicsr", "pytorch_pretrained_bert")
DEVLINT = [str(Path(sys.executable).parent / "devlint"), "--no-cache"]


def digest(files: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def check_package(name: str, scratch: Path) -> dict:
    source = unpack(name)
    copy = scratch / name
    shutil.copytree(source, copy, symlinks=True)
    files = python_files(copy)
    original = digest(files)
    # one cache for the three runs: files without fixes are analysed once
    devlint = [*DEVLINT, "--cache-dir", str(scratch / f".cache-{name}")]
    found = subprocess.run([*devlint, "--output-format", "json", "--exit-zero", str(copy)],
                           capture_output=True, text=True)  # fmt: skip
    before = collections.Counter(d["code"] for d in json.loads(found.stdout or "[]"))
    fixed = subprocess.run([*devlint, "--fix", "--exit-zero", str(copy)], capture_output=True, text=True)
    after_first = digest(files)
    changed = sum(1 for p in files if after_first[p] != original[p])
    broken = []
    for path in files:
        try:
            compile(path.read_bytes(), str(path), "exec")
        except SyntaxError as err:
            if _compiled_before(source / path.relative_to(copy)):
                broken.append(f"{path.relative_to(scratch)}: {err}")
    # a second pass must want nothing more: --diff changes no file and exits 0 when so
    again = subprocess.run([*devlint, "--diff", "--output-format", "json", str(copy)], capture_output=True, text=True)
    moved = [str(p.relative_to(scratch)) for p, h in digest(files).items() if h != after_first[p]]
    if again.returncode == 1:
        moved.append("--diff after --fix still wants changes")
    left = collections.Counter(d["code"] for d in json.loads(again.stdout or "[]"))
    errors = [line for line in (found.stderr + fixed.stderr + again.stderr).splitlines() if "error" in line]
    return {
        "package": name, "files": len(files), "findings": dict(sorted(before.items())),
        "files_changed": changed, "remaining": dict(sorted(left.items())), "broken": broken,
        "second_fix_changed": moved, "internal_errors": errors,
        "exit_codes": [found.returncode, fixed.returncode, again.returncode],
    }  # fmt: skip


def _compiled_before(path: Path) -> bool:
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("packages", nargs="*", default=list(DEFAULT))
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="devlint-corpus-") as scratch:
        for name in args.packages:
            result = check_package(name, Path(scratch))
            results.append(result)
            ok = not (result["broken"] or result["second_fix_changed"] or result["internal_errors"])
            print(f"{name}: {result['files']} files, findings {result['findings']}, "
                  f"{result['files_changed']} files fixed, remaining {result['remaining']} — "
                  f"{'OK' if ok else 'FAILED'}")  # fmt: skip
            for key in ("broken", "second_fix_changed", "internal_errors"):
                for line in result[key][:20]:
                    print(f"  {key}: {line}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    failed = any(r["broken"] or r["second_fix_changed"] or r["internal_errors"] for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
