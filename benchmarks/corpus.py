"""Real published code to measure and test against: wheels (and sdists) from PyPI, unpacked.

python benchmarks/corpus.py timm torchvision   # prints the folders
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

WORK = Path(__file__).resolve().parent / ".work"


def unpack(package: str, work: Path = WORK) -> Path:
    """Download `package` (no dependencies) once and unpack it; return its folder."""
    target = work / "corpus" / package
    if target.exists():
        return target
    downloads = work / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    found = _downloaded(downloads, package)
    if found is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
             "-d", str(downloads), package],
            check=True, capture_output=True,
        )  # fmt: skip
        found = _downloaded(downloads, package)
        if found is None:
            raise RuntimeError(f"pip downloaded nothing for {package}")
    staging = target.with_suffix(".partial")
    if found.suffix == ".whl":
        with zipfile.ZipFile(found) as archive:
            archive.extractall(staging)
    else:
        with tarfile.open(found) as archive:
            archive.extractall(staging, filter="data")
    staging.rename(target)
    return target


def _downloaded(folder: Path, package: str) -> Path | None:
    prefixes = {package.lower(), package.lower().replace("-", "_")}
    for path in sorted(folder.iterdir()):
        if path.name.lower().split("-")[0] in prefixes:
            return path
    return None


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.is_file())


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(unpack(name))
