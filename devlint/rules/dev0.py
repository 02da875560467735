"""DEV0: files devlint cannot read."""

from __future__ import annotations

from devlint.rules.base import Rule


class ParseError(Rule):
    """
    ## What it does
    Reports a file that could not be parsed as Python.

    ## Why is this bad?
    devlint (and Python) cannot check or run a file with a syntax error; the other
    files are still checked.

    ## Example
        def f(:
            pass

    ## Use instead
        def f():
            pass

    ## Fix safety
    No fix: the engine reports this itself, when parsing fails.
    """

    code = "DEV000"
    name = "parse-error"
