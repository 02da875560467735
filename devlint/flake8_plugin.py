"""The flake8 plugin: the same engine, reported the way flake8 expects.

flake8 wants 1-based lines and 0-based columns (which is what the engine produces) and
applies `# noqa` itself, so the plugin does not. DEV4 is off by default, as in the CLI,
through flake8's extend-default-ignore.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from devlint import __version__
from devlint.config import Config, ConfigError, discover_config
from devlint.engine import lint_source

_STDIN_NAMES = frozenset({"-", "stdin", "<stdin>"})


class Plugin:
    name = "devlint"
    version = __version__

    _configs: dict[str, Config] = {}

    def __init__(self, tree: Any, filename: str, lines: list[str]) -> None:
        # `tree` is requested only so that flake8 hands over the file after its own parse
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        option_manager.extend_default_ignore(["DEV4"])

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        if text.startswith("\ufeff"):
            text = text[1:]
        config = self._config()
        # [tool.devlint] selects as in the CLI; DEV4 is computed too, and flake8's default
        # ignore hides it unless the user selects it there
        config = config.with_overrides(extend_select=["DEV4"])
        result = lint_source(text, self.filename, config, noqa=False)
        for diagnostic in result.diagnostics:
            yield diagnostic.line, diagnostic.col, f"{diagnostic.code} {diagnostic.message}", type(self)
        for error in result.errors:
            yield 1, 0, f"DEV999 devlint internal error: {error}", type(self)

    def _config(self) -> Config:
        path = self.filename
        start = os.getcwd() if path in _STDIN_NAMES else os.path.dirname(os.path.abspath(path))
        config = self._configs.get(start)
        if config is None:
            try:
                config = discover_config(start)
            except ConfigError:
                config = Config(root=start)
            self._configs[start] = config
        return config
