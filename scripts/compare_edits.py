"""How many of a hand migration's device edits does `devlint --fix` reproduce?

    python scripts/compare_edits.py BEFORE HAND_AFTER [DEVLINT_AFTER]

BEFORE is a file before the migration, HAND_AFTER the same file as its maintainers
rewrote it, DEVLINT_AFTER the file after `devlint --fix --extend-select DEV5
--unsafe-fixes` (computed in memory when omitted). A device edit is a line of BEFORE
that the hand migration changed or removed and that names a backend (`cuda`, `mps`,
`xpu`, `nccl`, `.cuda(`); it is reproduced when devlint changed that line too. A missed
line where the backend is named only by the user's own words (an identifier such as
`use_cuda`, a command-line option, a help text or a printed message) is counted apart:
devlint keeps those on purpose. Prints per file: edits, reproduced, kept on purpose,
and the lines missed otherwise.
"""

from __future__ import annotations

import difflib
import re
import sys
from pathlib import Path

BACKEND = re.compile(r"cuda|\bmps\b|\bxpu\b|nccl", re.IGNORECASE)
# the backend named as code: an API, a device string, a method
_AS_CODE = re.compile(
    r"torch\.(cuda|mps|xpu|backends\.mps)|[\"'](cuda|mps|xpu|nccl)(:[^\"']*)?[\"']|\.(cuda|is_cuda)\b"
)
_USER_WORDS = re.compile(r"add_argument|help=|print\(|^\s*[\"']--")


def kept_on_purpose(line: str) -> bool:
    """Is the backend only in the user's words (names, options, messages)?"""
    return bool(_USER_WORDS.search(line)) or not _AS_CODE.search(line)


def changed_lines(before: list[str], after: list[str]) -> set[int]:
    """Indices of `before` lines that the edit replaced or deleted."""
    changed: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            changed.update(range(i1, i2))
    return changed


def device_edits(before: list[str], hand: list[str]) -> list[int]:
    return sorted(
        i for i in changed_lines(before, hand) if BACKEND.search(before[i]) and not before[i].lstrip().startswith("#")
    )


def devlint_output(path: Path, text: str) -> str:
    from devlint.config import Config
    from devlint.engine import fix_source

    config = Config().with_overrides(extend_select=["DEV5"])
    return fix_source(text, str(path), config, unsafe=True).output


def main(argv: list[str]) -> int:
    before_path, hand_path = Path(argv[0]), Path(argv[1])
    before_text = before_path.read_text(encoding="utf-8")
    tool_text = Path(argv[2]).read_text(encoding="utf-8") if len(argv) > 2 else devlint_output(before_path, before_text)
    before = before_text.splitlines()
    edits = device_edits(before, hand_path.read_text(encoding="utf-8").splitlines())
    ours = changed_lines(before, tool_text.splitlines())
    missed = [i for i in edits if i not in ours]
    kept = [i for i in missed if kept_on_purpose(before[i])]
    missed = [i for i in missed if i not in kept]
    print(f"{before_path}\tedits={len(edits)}\treproduced={len(edits) - len(missed) - len(kept)}\tkept={len(kept)}")
    for i in missed:
        print(f"  missed {i + 1}: {before[i].strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
