"""`[tool.devlint]` configuration: discovery, validation and rule selection."""

from __future__ import annotations

import fnmatch
import keyword
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from devlint.codes import DEFAULT_SELECT, FAMILIES

_CODE_PREFIX = re.compile(r"^DEV\d{0,3}$")
# groups every build has: naming one needs no look-up (which would load the rules, and libcst)
_KNOWN_GROUPS = frozenset({"DEV", *FAMILIES})
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")


class ConfigError(ValueError):
    """A configuration problem the user must fix; the CLI exits 2 with this message."""


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = DEFAULT_SELECT
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    device_name: str = "device"
    device_style: str = "accelerator"
    torch_version: tuple[int, int] = (2, 6)
    root: str = field(default=".", compare=False)

    def is_enabled(self, code: str, path: str | None = None) -> bool:
        selected = _best_match(code, self.select + self.extend_select)
        ignored = _best_match(code, self.ignore + self._ignores_for(path))
        return selected > ignored

    def _ignores_for(self, path: str | None) -> tuple[str, ...]:
        if not path or not self.per_file_ignores:
            return ()
        relative = _relative(path, self.root)
        codes: list[str] = []
        for pattern, pattern_codes in self.per_file_ignores:
            if _glob_matches(relative, pattern):
                codes.extend(pattern_codes)
        return tuple(codes)

    def is_excluded(self, path: str) -> bool:
        relative = _relative(path, self.root)
        return any(_glob_matches(relative, pattern) for pattern in self.exclude)

    def cache_key(self, path: str) -> str:
        """Everything that decides what checking `path` reports."""
        return repr((self.select, self.ignore, self.extend_select, self._ignores_for(path),
                     self.device_name, self.device_style, self.torch_version))  # fmt: skip

    def with_overrides(
        self,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
        extend_select: list[str] | None = None,
    ) -> Config:
        changes: dict = {}
        if select is not None:
            changes["select"] = _codes(select, "--select")
            changes["extend_select"] = ()
        if extend_select is not None:
            changes["extend_select"] = changes.get("extend_select", self.extend_select) + _codes(
                extend_select, "--extend-select"
            )
        if ignore is not None:
            changes["ignore"] = self.ignore + _codes(ignore, "--ignore")
        return replace(self, **changes)


def _best_match(code: str, prefixes: tuple[str, ...]) -> int:
    """Length of the most specific prefix matching `code` (0: none)."""
    return max((len(p) for p in prefixes if code.startswith(p)), default=0)


def _relative(path: str, root: str) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _glob_matches(relative: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(os.path.basename(relative), pattern):
        return True
    # a directory pattern excludes everything below it
    parts = relative.split("/")
    return any(fnmatch.fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts) - 1))


def _codes(values: object, key: str) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{key}: expected a list of rule codes, got {values!r}")
    codes: list[str] = []
    for value in values:
        for code in value.split(","):
            code = code.strip().upper()
            if not code:
                continue
            if code == "ALL":
                code = "DEV"
            if not _CODE_PREFIX.match(code):
                raise ConfigError(f"{key}: {code!r} is not a devlint rule code or prefix (e.g. DEV1, DEV101)")
            if code not in _KNOWN_GROUPS and not any(known.startswith(code) for known in _known_codes()):
                raise ConfigError(f"{key}: {code!r} names no devlint rule (see `devlint rules`)")
            codes.append(code)
    return tuple(codes)


def _known_codes() -> list[str]:
    from devlint.rules import all_rules

    return [rule.code for rule in all_rules()]


def _string_list(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
    return tuple(value)


def parse_config(table: dict, root: str, source: str = "pyproject.toml") -> Config:
    """Validate a `[tool.devlint]` table. Unknown keys and bad values raise ConfigError."""
    config = Config(root=root)
    changes: dict = {}
    for key, value in table.items():
        where = f"{source}: [tool.devlint] {key}"
        if key == "select":
            changes["select"] = _codes(value, where)
        elif key == "ignore":
            changes["ignore"] = _codes(value, where)
        elif key == "extend-select":
            changes["extend_select"] = _codes(value, where)
        elif key == "exclude":
            changes["exclude"] = _string_list(value, where)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected a table of glob = [codes]")
            changes["per_file_ignores"] = tuple((g, _codes(c, f"{where}.{g}")) for g, c in value.items())
        elif key == "device-name":
            if not isinstance(value, str) or not value.isidentifier() or keyword.iskeyword(value):
                raise ConfigError(f"{where}: expected a Python identifier that is not a keyword, got {value!r}")
            changes["device_name"] = value
        elif key == "device-style":
            if value not in ("accelerator", "cuda"):
                raise ConfigError(f'{where}: expected "accelerator" or "cuda", got {value!r}')
            changes["device_style"] = value
        elif key == "torch-version":
            if isinstance(value, float):
                raise ConfigError(f'{where}: write the version as a string, torch-version = "{value}": '
                                  f"a TOML number loses digits (2.10 reads as 2.1)")  # fmt: skip
            match = _VERSION.match(value) if isinstance(value, str) else None
            if not match:
                raise ConfigError(f'{where}: expected a version like "2.6", got {value!r}')
            changes["torch_version"] = (int(match.group(1)), int(match.group(2)))
        else:
            known = "select, ignore, extend-select, exclude, per-file-ignores, device-name, device-style, torch-version"
            raise ConfigError(f"{where}: unknown key (known keys: {known})")
    return replace(config, **changes)


def load_config_file(path: str) -> Config:
    """Read `[tool.devlint]` from a pyproject.toml (or a bare devlint table in any TOML file)."""
    data = _read_toml(path)
    table = data.get("tool", {}).get("devlint", {}) if isinstance(data.get("tool", {}), dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.devlint] must be a table")
    return parse_config(table, root=os.path.dirname(os.path.abspath(path)), source=path)


_TOML_CACHE: dict[str, tuple[tuple[int, int], dict]] = {}


def _read_toml(path: str) -> dict:
    """The parsed file, read again only when it changed (a language server lives long)."""
    try:
        info = os.stat(path)
        signature = (info.st_mtime_ns, info.st_size)
        cached = _TOML_CACHE.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read configuration: {err.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: not UTF-8 text (byte {err.start})") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    _TOML_CACHE[path] = (signature, data)
    return data


def find_config_file(start: str) -> str | None:
    """The nearest pyproject.toml with a [tool.devlint] table, at or above `start`.

    The TOML is parsed, so every spelling of the table counts (`[tool.devlint]`,
    `[tool]` with `devlint = {...}`, dotted keys `tool.devlint.select = ...`). A
    pyproject.toml that cannot be parsed is an error only if it mentions devlint."""
    directory = Path(os.path.abspath(start))
    if not directory.is_dir():
        directory = directory.parent
    for folder in (directory, *directory.parents):
        candidate = folder / "pyproject.toml"
        if not candidate.is_file():
            continue
        try:
            data = _read_toml(str(candidate))
        except ConfigError:
            if _mentions_devlint(candidate):
                raise
            continue
        tool = data.get("tool")
        if isinstance(tool, dict) and "devlint" in tool:
            return str(candidate)
    return None


def _mentions_devlint(path: Path) -> bool:
    try:
        return b"devlint" in path.read_bytes()
    except OSError:
        return False


def discover_config(start: str) -> Config:
    found = find_config_file(start)
    if found is None:
        return Config(root=os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or "."))
    return load_config_file(found)


class ConfigResolver:
    """The configuration of each checked file, shared by the CLI and the flake8 plugin: the
    nearest pyproject.toml's `[tool.devlint]` (or one `config_file`), then overrides the way
    `--select`, `--ignore` and `--extend-select` give them. A broken file raises ConfigError."""

    def __init__(
        self,
        config_file: str | None = None,
        *,
        select: list[str] | None = None,
        ignore: list[str] | None = None,
        extend_select: list[str] | None = None,
    ) -> None:
        self._overrides = {"select": select, "ignore": ignore, "extend_select": extend_select}
        self._fixed = self._override(load_config_file(config_file)) if config_file else None
        self._by_dir: dict[str, Config] = {}

    def _override(self, config: Config) -> Config:
        return config.with_overrides(**self._overrides)

    def for_path(self, path: str) -> Config:
        return self.for_directory(os.path.dirname(os.path.abspath(path)))

    def for_directory(self, directory: str) -> Config:
        if self._fixed is not None:
            return self._fixed
        config = self._by_dir.get(directory)
        if config is None:
            config = self._by_dir[directory] = self._override(discover_config(directory))
        return config
