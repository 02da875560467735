"""The `devlint` command: check, fix, diff, rules, explain, verify."""

from __future__ import annotations

import argparse
import difflib
import io
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from devlint import __version__
from devlint.cache import Cache, default_cache_dir
from devlint.config import Config, ConfigError, ConfigResolver
from devlint.diagnostics import Diagnostic
from devlint.files import expand, is_force_excluded
from devlint.output import FORMATS, write_statistics
from devlint.source import SourceDecodeError, SourceText, process_alive, remove_stale_temporaries, write_atomic

_SUBCOMMANDS = ("check", "fix", "rules", "explain", "verify", "lsp")
_PARALLEL_THRESHOLD = 8


@dataclass
class FileOutcome:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    fixed: int = 0
    diff: str = ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devlint",
        description="Find and fix PyTorch code that only runs on one kind of machine.",
    )
    parser.add_argument("paths", nargs="*", help="files or directories (default: .); - reads stdin")
    parser.add_argument("--version", action="version", version=f"devlint {__version__}")
    parser.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    parser.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    parser.add_argument("--diff", action="store_true", help="print the diff the fixes would make; change nothing")
    parser.add_argument("--select", help="rule codes or prefixes to enable, comma-separated (replaces the default)")
    parser.add_argument("--extend-select", help="rule codes or prefixes to enable in addition")
    parser.add_argument("--ignore", help="rule codes or prefixes to disable")
    parser.add_argument("--output-format", choices=tuple(FORMATS), default="text")
    parser.add_argument("--output-file", help="write the report here instead of stdout")
    parser.add_argument("--statistics", action="store_true", help="print counts by rule")
    parser.add_argument("--exit-zero", action="store_true", help="exit 0 even if findings remain")
    parser.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (default: all cores)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--cache-dir", help="where the cache lives")
    parser.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    parser.add_argument("--config", help="a pyproject.toml to read [tool.devlint] from")
    parser.add_argument("--stdin-filename", help="the name to report for code read from stdin")
    parser.add_argument(
        "--force-exclude", action="store_true",
        help="apply `exclude` to files named on the command line too (for pre-commit)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = "check"
    if argv and argv[0] in _SUBCOMMANDS:
        command = argv.pop(0)
    if command == "verify":
        return _verify(argv)
    if command == "lsp":
        from devlint.lsp import main as lsp_main

        return lsp_main(argv)
    if command == "rules":
        return _print_rules()
    if command == "explain":
        return _explain(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if command == "fix":
        args.fix = True
    try:
        return _check(args)
    except ConfigError as err:
        print(f"devlint: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _verify(argv: list[str]) -> int:
    try:
        from devlint.harness.cli import main as verify_main
    except ImportError as err:
        print(f"devlint verify needs the harness extra: pip install 'devlint[harness]' ({err})", file=sys.stderr)
        return 2
    return verify_main(argv)


def _print_rules() -> int:
    from devlint.rules import all_rules

    for rule in all_rules():
        fix = "[*]" if rule.fixable else "   "
        default = "" if rule.default else "  (opt-in)"
        print(f"{rule.code}  {fix}  {rule.name:<30} {rule.summary()}{default}")
    return 0


def _explain(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: devlint explain CODE", file=sys.stderr)
        return 2
    from devlint.rules import all_rules

    wanted = argv[0].upper()
    for rule in all_rules():
        if rule.code == wanted:
            print(f"# {rule.code} {rule.name}\n")
            print(rule.doc())
            return 0
    print(f"devlint: error: unknown rule {argv[0]!r} (see `devlint rules`)", file=sys.stderr)
    return 2


def _check(args: argparse.Namespace) -> int:
    listed = lambda value: None if value is None else [value]  # noqa: E731
    settings = ConfigResolver(
        args.config, select=listed(args.select), ignore=listed(args.ignore), extend_select=listed(args.extend_select)
    )
    settings.for_directory(os.getcwd())  # a broken configuration is an error before any work
    mode = "diff" if args.diff else "fix" if args.fix else "check"
    paths = args.paths or ["."]
    outcomes: list[FileOutcome] = []
    problems: list[str] = []
    if paths == ["-"]:
        name = args.stdin_filename or "-"
        data = sys.stdin.buffer.read()
        config = settings.for_path(name if args.stdin_filename else os.path.join(os.getcwd(), "stdin.py"))
        try:
            if args.force_exclude and args.stdin_filename and is_force_excluded(name, config):
                text = data.decode("utf-8", "surrogateescape")
                outcomes.append(FileOutcome(name, diff=text if mode == "fix" else ""))  # passed through
            else:
                outcomes.append(_process(name, data, config, mode, args.unsafe_fixes, write=False))
        except Exception as err:
            outcomes.append(FileOutcome(name, errors=[_internal_error(name, err)]))
    else:
        files = list(expand(paths, settings.for_path, force_exclude=args.force_exclude, problems=problems))
        if mode == "fix":
            for directory in sorted({os.path.dirname(os.path.realpath(path)) for path in files}):
                remove_stale_temporaries(directory)
        jobs = args.jobs or os.cpu_count() or 1
        cache_dir = None if args.no_cache else (args.cache_dir or default_cache_dir(_project_root()))
        work = [(path, settings.for_path(path), mode, args.unsafe_fixes, cache_dir) for path in files]
        progress = _Progress(len(work), enabled=not args.quiet and sys.stderr.isatty())
        if jobs > 1 and len(work) >= _PARALLEL_THRESHOLD:
            context = multiprocessing.get_context()
            forked = context.get_start_method() == "fork"  # else a fork server is the parent
            with ProcessPoolExecutor(
                max_workers=min(jobs, len(work)), mp_context=context,
                initializer=_die_with_parent, initargs=(os.getpid(), forked),
            ) as pool:  # fmt: skip
                outcomes = [progress.step(o) for o in pool.map(_process_path, work, chunksize=4)]
        else:
            outcomes = [progress.step(_process_path(item)) for item in work]
        progress.close()
    for outcome in outcomes:
        problems.extend(outcome.errors)
    return _report(args, mode, outcomes, problems)


def _die_with_parent(devlint: int, forked: bool) -> None:
    """In a worker: end when the devlint that started it ends, even by SIGKILL, as flake8's
    workers do; a worker left behind would go on rewriting files and hold the caller's pipes."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            pr_set_pdeathsig = 1
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    parent = os.getppid()  # devlint itself, or the fork server it started
    if (forked and parent != devlint) or not process_alive(devlint):  # it died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch, args=(devlint, parent), name="devlint-parent-watch", daemon=True).start()


def _watch(devlint: int, parent: int) -> None:
    """Where there is no PR_SET_PDEATHSIG: a worker is reparented when its parent dies."""
    while os.getppid() == parent and process_alive(devlint):
        time.sleep(0.5)
    os._exit(1)


class _Progress:
    """A one-line progress bar on stderr, for long runs in a terminal only."""

    _MIN_FILES = 50

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled and total >= self._MIN_FILES

    def step(self, outcome: FileOutcome) -> FileOutcome:
        self.done += 1
        if self.enabled and (self.done % 10 == 0 or self.done == self.total):
            width = 30
            filled = width * self.done // self.total
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files")
            sys.stderr.flush()
        return outcome

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _project_root() -> str:
    """The folder of the nearest pyproject.toml above the working directory, else it."""
    here = os.path.abspath(os.getcwd())
    folder = here
    while True:
        if os.path.isfile(os.path.join(folder, "pyproject.toml")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return here
        folder = parent


def _process_path(item: tuple[str, Config, str, bool, str | None]) -> FileOutcome:
    try:
        return _process_path_unguarded(item)
    except Exception as err:  # one file's crash must not lose the others' results
        return FileOutcome(item[0], errors=[_internal_error(item[0], err)])


def _internal_error(path: str, err: BaseException) -> str:
    return f"{path}: internal error: {type(err).__name__}: {err}"


def _process_path_unguarded(item: tuple[str, Config, str, bool, str | None]) -> FileOutcome:
    path, config, mode, unsafe, cache_dir = item
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        return FileOutcome(path, errors=[f"{path}: cannot read: {err.strerror}"])
    if cache_dir is None or path.endswith(".ipynb"):  # the cache keeps no cells
        return _process(path, data, config, mode, unsafe, write=(mode == "fix"))
    cache = Cache(cache_dir)
    key = cache.key(data, path, config)
    cached = cache.get(key, path)
    if cached is not None and not any(d.fix and (unsafe or d.fix.is_safe) for d in cached if mode != "check"):
        return FileOutcome(path, diagnostics=cached)
    outcome = _process(path, data, config, mode, unsafe, write=(mode == "fix"))
    if not outcome.errors and not outcome.fixed:
        cache.put(key, outcome.diagnostics)
    return outcome


def _process(path: str, data: bytes, config: Config, mode: str, unsafe: bool, *, write: bool) -> FileOutcome:
    if path.endswith(".ipynb"):
        return _process_notebook(path, data, config, mode, unsafe, write=write)
    from devlint.engine import fix_source, lint_source, unreadable  # loads libcst: only on a cache miss

    outcome = FileOutcome(path)
    try:
        source = SourceText.from_bytes(data)
    except SourceDecodeError as err:
        outcome.diagnostics = unreadable(path, f"could not read this file: {err}", config)
        return outcome
    if mode == "check":
        result = lint_source(source.text, path, config)
        outcome.diagnostics = result.diagnostics
        outcome.errors = [str(e) for e in result.errors]
        return outcome
    fixed = fix_source(source.text, path, config, unsafe=unsafe)
    outcome.errors = [str(e) for e in _unique(fixed.errors)]
    outcome.diagnostics = fixed.remaining
    if not fixed.changed:
        return outcome
    outcome.fixed = len(fixed.applied)
    if mode == "diff":
        outcome.diff = "".join(
            difflib.unified_diff(
                source.text.splitlines(keepends=True),
                fixed.output.splitlines(keepends=True),
                fromfile=path,
                tofile=path,
            )  # fmt: skip
        )
    elif write:
        try:
            write_atomic(path, source.to_bytes(fixed.output))
        except (OSError, UnicodeEncodeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            outcome.errors.append(f"{path}: cannot write the fixes: {reason}; file left unchanged")
            outcome.fixed = 0
            outcome.diagnostics = lint_source(source.text, path, config).diagnostics
    else:
        outcome.diff = fixed.output  # stdin: the fixed text goes to stdout
    return outcome


def _process_notebook(path: str, data: bytes, config: Config, mode: str, unsafe: bool, *, write: bool) -> FileOutcome:
    """A Jupyter notebook: its code cells checked as one program, findings placed in
    their cells, fixes written into the changed cells' `source` only."""
    from devlint.notebook import fix_notebook, lint_notebook

    outcome = FileOutcome(path)
    if mode == "check":
        result = lint_notebook(data, path, config)
        outcome.diagnostics = [d.flat() for d in result.diagnostics]
        outcome.errors = [str(e) for e in result.errors]
        return outcome
    fixed = fix_notebook(data, path, config, unsafe=unsafe)
    outcome.errors = [str(e) for e in _unique(fixed.errors)]
    outcome.diagnostics = [d.flat() for d in fixed.remaining]
    if not fixed.changed:
        return outcome
    outcome.fixed = len(fixed.applied)
    if mode == "diff":
        outcome.diff = fixed.diff(path)
    elif write:
        try:
            write_atomic(path, fixed.output)
        except OSError as err:
            outcome.errors.append(f"{path}: cannot write the fixes: {err.strerror or err}; file left unchanged")
            outcome.fixed = 0
            outcome.diagnostics = [d.flat() for d in lint_notebook(data, path, config).diagnostics]
    else:
        outcome.diff = fixed.output.decode("utf-8")  # stdin: the fixed notebook goes to stdout
    return outcome


def _unique(errors: list) -> list:
    return list(dict.fromkeys(errors))


def _report(args: argparse.Namespace, mode: str, outcomes: list[FileOutcome], problems: list[str]) -> int:
    diagnostics = sorted((d for o in outcomes for d in o.diagnostics), key=lambda d: d.sort_key)
    fixed = sum(o.fixed for o in outcomes)
    machine = args.output_format != "text"
    out = io.StringIO()  # written out whole, so that a failed write leaves no partial report
    stdin_fix = args.paths == ["-"] and mode == "fix"
    if stdin_fix:
        out.write(outcomes[0].diff or "")
    elif mode == "diff" and not machine:
        for outcome in outcomes:
            out.write(outcome.diff)
    if not stdin_fix:
        FORMATS[args.output_format](out, diagnostics)
    if args.statistics:
        # in machine formats stdout carries the format alone
        write_statistics(sys.stderr if stdin_fix or machine else out, diagnostics)
    if not args.quiet and not machine and not stdin_fix:
        _print_summary(out, mode, diagnostics, fixed, outcomes, errors=len(problems))
    try:
        _write_report(out.getvalue(), args.output_file)
    except OSError as err:
        where = args.output_file or "standard output"
        problems = [*problems, f"cannot write the report to {where}: {err.strerror or err}"]
    for problem in problems:
        print(f"devlint: error: {problem}", file=sys.stderr)
    if problems:
        return 2
    if mode == "diff":
        return 1 if any(o.diff for o in outcomes) else 0
    if args.exit_zero:
        return 0
    return 1 if diagnostics else 0


def _write_report(report: str, output_file: str | None) -> None:
    """Write the report to stdout or `output_file`; a file is replaced only once the whole
    report is written, and a failed write (a full disk) leaves no empty or partial file."""
    if output_file is None:
        try:
            sys.stdout.write(report)
            sys.stdout.flush()
        except BrokenPipeError:
            _discard_stdout()  # `devlint ... | head`: the reader left; that is not an error of ours
        except OSError:
            _discard_stdout()
            raise
        return
    if os.path.exists(output_file) and not os.path.isfile(output_file):
        with open(output_file, "w", encoding="utf-8") as handle:  # /dev/stdout, a pipe
            handle.write(report)
        return
    folder = os.path.dirname(os.path.abspath(output_file))
    fd, tmp = tempfile.mkstemp(prefix=".devlint-report-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(report)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, output_file)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what could not be
    written does not fail again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _print_summary(out, mode: str, diagnostics: list[Diagnostic], fixed: int, outcomes, *, errors: int = 0) -> None:
    fixable = sum(1 for d in diagnostics if d.fix is not None and d.fix.is_safe)
    remaining = len(diagnostics)
    # with an error (printed on stderr) the check is incomplete: never "All checks passed!"
    passed = (
        "All checks passed!"
        if not errors
        else f"No problems found, but {_plural(errors, 'error')} left the check incomplete."
    )
    if mode == "fix":
        if fixed or remaining:
            out.write(f"Found {_plural(fixed + remaining, 'problem')} ({fixed} fixed, {remaining} remaining).\n")
        else:
            out.write(passed + "\n")
        return
    if mode == "diff":
        changed = sum(1 for o in outcomes if o.diff)
        out.write(f"Would fix {_plural(sum(o.fixed for o in outcomes), 'problem')} in {_plural(changed, 'file')}.\n")
        return
    if not remaining:
        out.write(passed + "\n")
        return
    out.write(f"Found {_plural(remaining, 'problem')} ({fixable} fixable with --fix).\n")
    unsafe = sum(1 for d in diagnostics if d.fix is not None and not d.fix.is_safe)
    if unsafe:
        out.write(f"({unsafe} more fixable with --fix --unsafe-fixes.)\n")
