"""`devlint lsp`: a language server over stdio.

pygls is an optional dependency (`pip install 'devlint[lsp]'`); it is imported only when
the server starts, so the rest of devlint never needs it.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="devlint lsp",
        description="Run devlint as a language server on stdin/stdout (for editors).",
    )
    parser.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default and only transport)")
    parser.parse_args(argv)
    try:
        from devlint.lsp.server import serve
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] not in ("pygls", "lsprotocol"):
            raise
        print(f"devlint lsp needs pygls: pip install 'devlint[lsp]' ({err})", file=sys.stderr)
        return 2
    return serve()
