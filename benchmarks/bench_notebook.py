#!/usr/bin/env python3
"""Time checking a notebook against checking the same code as a `.py` file.

    python benchmarks/bench_notebook.py             # the repository's fixtures as notebooks
    python benchmarks/bench_notebook.py --repeat 9

The goal (issue 18): a notebook costs no more than the same code as a `.py` file plus
reading its JSON. Each `.py` input under fixtures/ (rules, binding, seed) becomes a
notebook the way such code usually sits in one: a code cell per top-level block, a
markdown cell between blocks, a line magic in the first cell, and outputs (text and a
PNG) on the code cells, so that the JSON is heavier than the code. Both forms are written
to a temporary folder and read from disk, as the CLI reads them. A shared machine is
noisy, so each round runs every measure once, interleaved; each figure is its best round
(`timeit`'s advice) and each ratio is also given as the median of the rounds' own ratios.
"notebook layer" is what a notebook adds by itself: reading the JSON, the structural
checks, masking and joining the cells (no linting).
"""

from __future__ import annotations

import argparse
import base64
import json
import tempfile
import statistics
import time
from pathlib import Path

from devlint.engine import fix_source, lint_source
from devlint.notebook import Notebook, fix_notebook, lint_notebook

ROOT = Path(__file__).resolve().parent.parent
_PNG = base64.b64encode(bytes(range(256)) * 24).decode()  # about 8 KB, like a small plot


def inputs() -> list[Path]:
    found = []
    for folder in sorted((ROOT / "fixtures").iterdir()):
        if folder.name.startswith("DEV") or folder.name in ("binding", "seed"):
            found.extend(p for p in sorted(folder.glob("*.py")) if not p.name.endswith(".fixed.py"))
    return found


def blocks(text: str) -> list[str]:
    """The text cut before each top-level line that follows a blank line."""
    cells, current = [], []
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if current and line[:1] not in ("", " ", "\t", "\n", "#", ")", "]", "}") and i and not lines[i - 1].strip():
            cells.append("".join(current))
            current = []
        current.append(line)
    if current:
        cells.append("".join(current))
    return cells


def as_notebook(code_cells: list[str]) -> bytes:
    cells = []
    for number, source in enumerate(code_cells):
        if number == 0:
            source = "%matplotlib inline\n" + source
        if number:
            cells.append({"cell_type": "markdown", "id": f"m{number}", "metadata": {},
                          "source": [f"## Step {number}\n", "What this cell does, in a sentence or two."]})  # fmt: skip
        lines = source.rstrip("\n").splitlines(keepends=True)
        cells.append({
            "cell_type": "code", "execution_count": number + 1, "id": f"c{number}", "metadata": {},
            "outputs": [
                {"name": "stdout", "output_type": "stream", "text": ["loss 0.25\n", "done\n"]},
                {"data": {"image/png": _PNG, "text/plain": ["<Figure size 640x480 with 1 Axes>"]},
                 "metadata": {}, "output_type": "display_data"},
            ],
            "source": lines,
        })  # fmt: skip
    notebook = {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}  # fmt: skip
    return (json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        pairs = []
        for index, path in enumerate(inputs()):
            code_cells = blocks(path.read_text(encoding="utf-8"))
            script = Path(folder, f"{index}.py")
            script.write_text("".join(c if c.endswith("\n") else c + "\n" for c in code_cells), encoding="utf-8")
            notebook = Path(folder, f"{index}.ipynb")
            notebook.write_bytes(as_notebook(code_cells))
            pairs.append((script, notebook))

        def lint_scripts() -> None:
            for script, _ in pairs:
                lint_source(script.read_bytes().decode("utf-8"), str(script))

        def lint_notebooks() -> None:
            for _, notebook in pairs:
                lint_notebook(notebook.read_bytes(), str(notebook))

        def read_json() -> None:
            for _, notebook in pairs:
                json.loads(notebook.read_bytes().decode("utf-8"))

        def fix_scripts() -> None:
            for script, _ in pairs:
                fix_source(script.read_bytes().decode("utf-8"), str(script))

        def fix_notebooks() -> None:
            for _, notebook in pairs:
                fix_notebook(notebook.read_bytes(), str(notebook))

        def notebook_layer() -> None:
            for _, notebook in pairs:
                Notebook.from_bytes(notebook.read_bytes(), str(notebook)).program  # noqa: B018

        measures = {"check .py": lint_scripts, "read JSON": read_json, "notebook layer": notebook_layer,
                    "check .ipynb": lint_notebooks, "fix .py": fix_scripts, "fix .ipynb": fix_notebooks}  # fmt: skip
        lint_scripts(), lint_notebooks()  # warm up: imports, rule registry
        rounds = [{name: timed(work) for name, work in measures.items()} for _ in range(args.repeat)]
        cells = sum(len(json.loads(nb.read_bytes())["cells"]) for _, nb in pairs)
        size = sum(nb.stat().st_size for _, nb in pairs)
    best = {name: min(r[name] for r in rounds) for name in measures}
    print(f"{len(pairs)} notebooks, {cells} cells, {size / 1e6:.1f} MB of JSON; best of {args.repeat} rounds")
    for name, seconds in best.items():
        print(f"  {name:<16}{seconds * 1e3:9.1f} ms")

    def ratio(top: str, *bottom: str) -> str:
        of_best = best[top] / sum(best[b] for b in bottom)
        median = statistics.median(r[top] / sum(r[b] for b in bottom) for r in rounds)
        return f"{of_best:.3f} (median of rounds {median:.3f})"

    print(
        f"ratio check .ipynb / (check .py + read JSON): {ratio('check .ipynb', 'check .py', 'read JSON')}   goal: <= 1"
    )
    print(f"ratio check .ipynb / check .py:               {ratio('check .ipynb', 'check .py')}")
    print(f"ratio fix .ipynb / (fix .py + read JSON):     {ratio('fix .ipynb', 'fix .py', 'read JSON')}")
    print(f"notebook layer / check .py:                   {ratio('notebook layer', 'check .py')}")


if __name__ == "__main__":
    main()
