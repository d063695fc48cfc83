"""The ``harnessc`` command line: a thin layer over the pipeline's stages.

Each command imports the stages it runs when it runs (the pipeline loads the parser, the
solver and the runtime's models), so `harnessc --version` and `--help` start at once.

Exit codes: 0 clean, 1 the spec has errors (or `fmt --check` found files to reformat), 2 a usage
or I/O problem (bad arguments, a missing or unreadable file), 124 a command that runs the policy
analysis ran out of its wall-clock limit (`HARNESSC_TIMEOUT`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from harnessc.dsl.codes import BY_SLUG, CODES
from harnessc.dsl.diagnostics import Diagnostic, Severity, has_errors
from harnessc.dsl.files import (
    confined,
    display_path,
    named_once,
    project_root,
    read_source,
    recording_reads,
    rooted_at,
)
from harnessc.dsl.render_formats import print_diagnostics

from harnessc import __version__

from .config import ConfigError, LintConfig, load_config
from .log_option import Parser, add_log_option
from .result_cache import Cached, ResultCache

if TYPE_CHECKING:
    from .pipeline import CheckResult, FilesResult

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
_IO_CODES = {"H001", "H002", "H007", "H008"}
FORMATS = ("human", "plain", "json")
# check and lint also speak the CI formats; they go to standard output, like json
REPORT_FORMATS = (*FORMATS, "sarif", "github")
MACHINE_FORMATS = ("json", "sarif", "github")


def _exit_code(diagnostics: Sequence[Diagnostic]) -> int:
    if any(d.code in _IO_CODES for d in diagnostics):
        return EXIT_USAGE
    return EXIT_ERRORS if has_errors(diagnostics) else EXIT_OK


def _cached(
    args: argparse.Namespace, options: Sequence[str], run: Callable[[], CheckResult | FilesResult]
) -> Cached:
    """`run` a check or lint, or answer it from the result cache when nothing the run would read
    has changed (compiler/result_cache.py); `options` is what else decides the result."""
    # the project root decides which imports may be read: a `--root`, or a `harness.toml` added
    # above a spec, changes the result without changing a file the run read
    roots = [f"root={project_root(name)}" for name in args.files]
    cache = ResultCache(args.command, args.files, [*options, *roots])
    use_cache = ResultCache.enabled(args.no_cache)
    if use_cache and (hit := cache.lookup()) is not None:
        return hit
    with recording_reads() as reads:
        result = run()
    found = Cached(list(result.diagnostics), list(result.suppressed))
    if use_cache:
        cache.store(reads, found)
    return found


def cmd_check(args: argparse.Namespace) -> int:
    def run() -> CheckResult | FilesResult:
        from .pipeline import check, check_each

        return check(args.files) if args.one_build else check_each(args.files)

    result = _cached(args, ["--one-build"] if args.one_build else [], run)
    machine = args.format in MACHINE_FORMATS
    print_diagnostics(
        result.diagnostics, args.format, sys.stdout if machine else None, result.suppressed
    )
    code = _exit_code(result.diagnostics)
    if code == EXIT_OK and not machine and not args.quiet:
        checked = len(named_once(args.files))
        sys.stderr.write(f"checked {checked} file{'s' if checked != 1 else ''}: no errors\n")
    return code


def _lint_config(
    files: Sequence[str], select: Sequence[str] | None = None, ignore: Sequence[str] | None = None
) -> LintConfig | None:
    """The lint configuration of a run (pyproject.toml), or None after reporting it unusable."""
    try:
        return load_config(files).extended(select, ignore)
    except ConfigError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return None


def _lint_configs(
    files: Sequence[str], select: Sequence[str] | None, ignore: Sequence[str] | None
) -> dict[str | Path, LintConfig] | None:
    """Each named file's lint configuration (the nearest pyproject.toml above it), or None
    after reporting one unusable; the files of a folder share theirs."""
    by_folder: dict[Path, LintConfig] = {}
    configs: dict[str | Path, LintConfig] = {}
    for name in files:
        folder = Path(name).resolve().parent
        if folder not in by_folder:
            config = _lint_config([name], select, ignore)
            if config is None:
                return None
            by_folder[folder] = config
        configs[name] = by_folder[folder]
    return configs


def cmd_lint(args: argparse.Namespace) -> int:
    if args.one_build:
        shared = _lint_config(args.files, args.select, args.ignore)
        configs = None if shared is None else dict.fromkeys(args.files, shared)
    else:
        # each build reads the configuration above its own root, whatever else is named
        configs = _lint_configs(args.files, args.select, args.ignore)
    if configs is None:
        return EXIT_USAGE
    found = configs

    def run() -> CheckResult | FilesResult:
        from .pipeline import lint, lint_each

        if args.one_build:
            return lint(args.files, found[args.files[0]])
        return lint_each(args.files, found.__getitem__)

    options = [f"{c.select}|{c.ignore}|{c.path}" for c in found.values()]
    result = _cached(args, ["--one-build", *options] if args.one_build else options, run)
    machine = args.format in MACHINE_FORMATS
    print_diagnostics(
        result.diagnostics, args.format, sys.stdout if machine else None, result.suppressed
    )
    code = _exit_code(result.diagnostics)
    warnings = sum(d.severity is Severity.WARNING for d in result.diagnostics)
    if code == EXIT_OK and args.strict and warnings:
        code = EXIT_ERRORS
    if not result.diagnostics and not machine and not args.quiet:
        linted = len(named_once(args.files))
        sys.stderr.write(f"linted {linted} file{'s' if linted != 1 else ''}: no findings\n")
    return code


def cmd_fmt(args: argparse.Namespace) -> int:
    import difflib

    from harnessc.dsl.printer import format_source

    diagnostics: list[Diagnostic] = []
    changed: list[str] = []
    for name in args.files:
        refused = confined(name, display_path(name))
        if refused is not None:
            diagnostics.append(refused)
            continue
        source, problems = read_source(name, display_path(name))
        diagnostics.extend(problems)
        if source is None:
            continue
        result = format_source(source)
        diagnostics.extend(result.diagnostics)
        if result.text is None or not result.changed:
            continue
        changed.append(source.path)
        if args.diff:
            sys.stdout.writelines(
                difflib.unified_diff(
                    source.text.splitlines(keepends=True),
                    result.text.splitlines(keepends=True),
                    f"a/{source.path}",
                    f"b/{source.path}",
                )
            )
        elif args.check:
            print(f"would reformat {source.path}")
        else:
            Path(name).write_text(result.text, encoding="utf-8")
            print(f"reformatted {source.path}")
    print_diagnostics(diagnostics, args.format)
    code = _exit_code(diagnostics)
    if code != EXIT_OK:
        return code
    if (args.check or args.diff) and changed:
        return EXIT_ERRORS
    return EXIT_OK


def cmd_debug(args: argparse.Namespace) -> int:
    from harnessc.dsl.builder import debug_tokens
    from harnessc.dsl.parser import parse_source

    if args.stage in ("model", "graph"):
        return _debug_checked(args)
    refused = confined(args.file, display_path(args.file))
    source, problems = (None, [refused]) if refused else read_source(args.file)
    if source is None:
        print_diagnostics(problems)
        return _exit_code(problems)
    if args.stage == "tokens":
        for tok in debug_tokens(source):
            line, column = source.location(tok.start_pos)
            print(f"{line}:{column}\t{tok.type}\t{json.dumps(str(tok), ensure_ascii=False)}")
        return EXIT_OK
    parsed = parse_source(source)
    print_diagnostics(parsed.diagnostics)
    if args.stage == "tree":
        from harnessc.dsl.syntax import dump

        print(dump(parsed.module))
    return _exit_code(parsed.diagnostics)


def _debug_checked(args: argparse.Namespace) -> int:
    """`debug model|graph`: check the file and what it imports, then print what the stages built."""
    from . import debug
    from .pipeline import check

    result = check([args.file])
    print_diagnostics(result.diagnostics)
    if args.stage == "model" and result.model is not None:
        print(debug.model_json(result.model))
    if args.stage == "graph" and result.resolution is not None:
        graphs = debug.stage_graphs(result.resolution, result.model)
        print(debug.render_dot(graphs) if args.dot else debug.render_text(graphs))
    return _exit_code(result.diagnostics)


def cmd_explain(args: argparse.Namespace) -> int:
    import difflib

    from harnessc.dsl.render_formats import EXPLAIN_URI

    # a SARIF rule's helpUri, `harnessc:explain/CODE`, names the same page
    args.code = args.code.removeprefix(f"{EXPLAIN_URI}/")
    key = args.code.upper() if args.code.upper() in CODES else args.code
    code = CODES.get(key) or BY_SLUG.get(args.code)
    if code is None:
        near = difflib.get_close_matches(args.code, [*CODES, *BY_SLUG], n=1)
        hint = f"; did you mean `{near[0]}`?" if near else ""
        sys.stderr.write(f"harnessc: unknown diagnostic code `{args.code}`{hint}\n")
        return EXIT_USAGE
    print(f"{code.code} {code.slug} ({code.severity})\n\n{code.summary}.\n\n{code.explanation}")
    return EXIT_OK


def cmd_test(args: argparse.Namespace) -> int:
    from .pipeline import run_test_files
    from .testing import print_run

    runs = run_test_files(args.files, args.k)
    diagnostics = [d for run in runs for d in run.diagnostics]
    if diagnostics or args.format != "json":
        print_diagnostics(diagnostics, args.format)
    code = _exit_code(diagnostics)
    if code == EXIT_USAGE:
        return code
    ran = [run for run in runs if run.outcomes or run.incomplete]
    if args.k is not None and not ran:
        sys.stderr.write(f"harnessc: no test matches `{args.k}`\n")
        return EXIT_ERRORS
    if ran or code == EXIT_OK:
        print_run(ran, args.format)
    failed = any(run.failed for run in runs)
    return EXIT_ERRORS if failed or code != EXIT_OK else EXIT_OK


def cmd_build(args: argparse.Namespace) -> int:
    config = _lint_config([args.spec])
    if config is None:
        return EXIT_USAGE
    from .embed import ProgressPrinter
    from .pipeline import build

    progress = None if args.quiet else ProgressPrinter(sys.stderr)
    result = build(
        [args.spec],
        args.out,
        check=args.check,
        embed=not args.no_embed,
        config=config,
        progress=progress,
    )
    print_diagnostics(result.check.diagnostics, args.format)
    code = _exit_code(result.check.diagnostics)
    if code != EXIT_OK or result.package is None:
        return code if code != EXIT_OK else EXIT_ERRORS
    for note in result.notes:
        sys.stderr.write(f"note: {note}\n")
    where = Path(args.out) / result.package
    if result.staleness is not None:
        stale = result.staleness
        found = (("missing", stale.missing), ("stale", stale.stale), ("extra", stale.extra))
        for word, paths in found:
            for rel in paths:
                print(f"{word}: {Path(args.out) / rel}")
        if stale.up_to_date:
            if not args.quiet:
                sys.stderr.write(f"{where} is up to date\n")
            return EXIT_OK
        sys.stderr.write(
            f"{where} is out of date; run `harnessc build {args.spec} -o {args.out}`\n"
        )
        return EXIT_ERRORS
    report = result.written
    assert report is not None
    for rel in report.kept:
        sys.stderr.write(f"warning: {Path(args.out) / rel} is not generated; left in place\n")
    if not args.quiet:
        sys.stderr.write(
            f"built {where}: {len(result.files)} files, {len(report.written)} written, "
            f"{len(report.removed)} removed\n"
        )
    return EXIT_OK


def cmd_workflow(args: argparse.Namespace) -> int:
    # the runtime's own operator view: each run carries its workflow's IR, so no spec is read
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.workflows.manage import WorkflowError, Workflows, render_run

    # said before DBOS creates its database beside the file
    if (problem := _not_a_log(args.log)) is not None:
        sys.stderr.write(f"harnessc: {problem}\n")
        return EXIT_USAGE
    try:
        ops = Workflows.operator(args.log)
    except WorkflowError as error:
        sys.stderr.write(f"harnessc: {error.message}\n")
        return EXIT_USAGE
    try:
        if args.action == "list":
            out: object = ops.list()
        elif args.action == "show":
            out = ops.status(args.id)
        elif args.action == "decide":
            by = {"user": args.by, "roles": args.role or []}
            out = ops.decide(args.id, args.gate, args.option, by=by).to_dict()
        else:
            out = ops.cancel(args.id)
    except WorkflowError as error:
        if args.format == "json":
            print(json.dumps({"error": error.to_dict()}, indent=2))
        else:
            sys.stderr.write(f"error[{error.code}]: {error.message}\n")
        return EXIT_ERRORS
    except StoreError as error:  # the log is not one (`file is not a database`)
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    finally:
        ops.close()
    print(json.dumps(out, indent=2) if args.format == "json" else render_run(args.action, out))
    return EXIT_OK


def cmd_log(args: argparse.Namespace) -> int:
    if args.action == "divergences":
        from .review.replay import divergences_main

        return divergences_main(args)
    # the runtime's own log check: no spec is read, and the log is opened read-only
    from harnessc.runtime.log.chain import StoreError, Verification
    from harnessc.runtime.log.integrity import Checkpoint, CheckpointError, LogKey, LogKeyError
    from harnessc.runtime.log.open import open_store

    try:
        key = LogKey.from_file(args.key_file) if args.key_file else LogKey.from_env()
        anchor = Checkpoint.parse(args.anchor) if getattr(args, "anchor", None) else None
    except (LogKeyError, CheckpointError) as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    if _missing(args.log):
        sys.stderr.write(f"harnessc: no event log at `{args.log}`\n")
        return EXIT_USAGE
    if args.action == "compact":
        return _compact(args, key)
    try:
        store = open_store(args.log, key=key, readonly=True)
    except StoreError as error:
        if args.action == "head" or not _sqlite_file(args.log):
            sys.stderr.write(f"harnessc: {error}\n")
            return EXIT_USAGE
        # a log file that cannot even be opened fails verification
        return _print_verification(Verification(False, 0, None, str(error)), args.format)
    with contextlib.closing(store):
        if args.action == "head":
            try:
                checkpoint = store.checkpoint()
            except StoreError as error:
                sys.stderr.write(f"harnessc: {error}\n")
                return EXIT_ERRORS
            text = checkpoint.to_text()
            out = {**checkpoint.to_dict(), "checkpoint": text}
            print(json.dumps(out, indent=2) if args.format == "json" else text)
            return EXIT_OK
        if args.archive:
            return _verify_across(store, args.archive, anchor, key, args.format)
        return _print_verification(store.verify(anchor), args.format)


def _verify_across(store: Any, archives: list[str], anchor: Any, key: Any, format: str) -> int:
    """`harnessc log verify --archive FILE…`: the archives' events and the log's as one chain."""
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.cut import CutError, read_archive, verify_across

    try:
        read = [read_archive(path) for path in archives]
        events = store.read()
    except (CutError, StoreError) as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    return _print_verification(verify_across(events, read, anchor, key=key), format)


def _compact(args: argparse.Namespace, key: Any) -> int:
    """`harnessc log compact --before POSITION|head | --older-than DURATION --to FILE`."""
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.cut import CutError, compact, last_older_than
    from harnessc.runtime.log.open import open_store
    from harnessc.runtime.model.ir import parse_duration

    before = (args.before or "").strip()
    older = parse_duration(args.older_than.strip()) if args.older_than is not None else None
    if args.older_than is not None and older is None:
        sys.stderr.write(
            f"harnessc: --older-than takes a duration (`90d`, `12h`), not `{args.older_than}`\n"
        )
        return EXIT_USAGE
    if older is None and before != "head" and not (before.isascii() and before.isdigit()):
        sys.stderr.write("harnessc: --before takes a position (a whole number) or `head`\n")
        return EXIT_USAGE
    try:
        store = open_store(args.log, key=key)
    except StoreError as error:
        sys.stderr.write(f"harnessc: {error}\n")
        return EXIT_USAGE
    with contextlib.closing(store):
        verified = store.verify()
        if not verified.ok:  # never archive what the chain does not vouch for
            sys.stderr.write(f"harnessc: the log does not verify: {verified.reason}\n")
            return EXIT_ERRORS
        try:
            if older is not None:
                moment = datetime.now(UTC) - timedelta(milliseconds=older)
                found = last_older_than(store, moment)
                if found is None:  # a scheduled run with nothing old enough: nothing to do
                    print(
                        f"nothing to archive: no event after the last cut is older than "
                        f"{args.older_than}"
                    )
                    return EXIT_OK
                position = found
            else:
                position = store.head()[0] if before == "head" else int(before)
            done = compact(store, before=position, archive=args.to)
        except (CutError, StoreError, OSError) as error:
            sys.stderr.write(f"harnessc: {error}\n")
            return EXIT_USAGE
    out = done.to_dict()
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(
            f"archived {done.archived} events at or before position {done.cut.before} to "
            f"`{args.to}` ({done.archive_bytes} bytes, sha256 {out['archive']['sha256']})\n"
            f"carried {done.carried} events of {done.streams_carried} live streams across the "
            f"cut\nrecorded the cut at position {done.cut.record}: keep the archive; "
            f"`harnessc log verify --log LOG --archive {args.to}` checks both"
        )
    return EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    from .init import run

    return run(args.dir, example=args.example, force=args.force)


def _sqlite_file(store: str) -> bool:
    """Whether a `--log` names a SQLite file (`PATH` or `sqlite:///PATH`), not a server."""
    return "://" not in store.removeprefix("sqlite:///")


def _missing(store: str) -> bool:
    """A SQLite path that names no file (opening it would create an empty log)."""
    return _sqlite_file(store) and not Path(store.removeprefix("sqlite:///")).exists()


def _not_a_log(store: str) -> str | None:
    """Why an operator's command may not open the SQLite file `store` names: it names no file
    (opening it would create an empty log) or a file that holds no log (opening it would add
    one to another application's database); None for a log, or a server's URL."""
    from harnessc.runtime.log.chain import StoreError
    from harnessc.runtime.log.open import open_store

    if _missing(store):
        return f"no event log at `{store}`"
    if _sqlite_file(store):
        try:
            open_store(store, readonly=True).close()
        except StoreError as error:
            return str(error)
    return None


def _print_verification(result: Any, format: str) -> int:
    if format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.describe())
    return EXIT_OK if result.ok else EXIT_ERRORS


def cmd_diff(args: argparse.Namespace) -> int:
    from .review.diff import run_diff  # the solver and the runtime: loaded only to compare

    return run_diff(args.targets, args.format, args.fail_on, args.out)


def cmd_why(args: argparse.Namespace) -> int:
    from .review.why import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="harnessc",
        description="Check, format and compile .harness specs that govern what AI agents may do.",
    )
    parser.add_argument("--version", action="version", version=f"harnessc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check", help="parse and check specs; report diagnostics")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--format", choices=REPORT_FORMATS, default="human")
    check.add_argument("-q", "--quiet", action="store_true", help="print nothing when clean")
    check.add_argument(
        "--no-cache", action="store_true", help="compile even when a stored result still holds"
    )
    check.add_argument(
        "--one-build",
        action="store_true",
        help="check the files as one program (by default each file is its own build)",
    )
    check.set_defaults(run=cmd_check)

    lint = sub.add_parser("lint", help="check specs, then report lint warnings and notes")
    lint.add_argument("files", nargs="+", metavar="FILE")
    lint.add_argument("--format", choices=REPORT_FORMATS, default="human")
    lint.add_argument(
        "--strict", action="store_true", help="exit 1 on warnings too (notes never fail)"
    )
    lint.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="report only these codes or prefixes (comma-separated; replaces the config's)",
    )
    lint.add_argument(
        "--ignore",
        action="append",
        metavar="CODES",
        help="never report these codes or prefixes (comma-separated; adds to the config's)",
    )
    lint.add_argument("-q", "--quiet", action="store_true", help="print nothing when clean")
    lint.add_argument(
        "--no-cache", action="store_true", help="compile even when a stored result still holds"
    )
    lint.add_argument(
        "--one-build",
        action="store_true",
        help="lint the files as one program (by default each file is its own build)",
    )
    lint.set_defaults(run=cmd_lint)

    fmt = sub.add_parser("fmt", help="rewrite specs in the canonical layout")
    fmt.add_argument("files", nargs="+", metavar="FILE")
    mode = fmt.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list files that would change; exit 1")
    mode.add_argument("--diff", action="store_true", help="print a diff instead of writing")
    fmt.add_argument("--format", choices=FORMATS, default="human", help="diagnostics format")
    fmt.set_defaults(run=cmd_fmt)

    debug = sub.add_parser("debug", help="print the output of a compiler stage")
    debug.add_argument("stage", choices=("tokens", "tree", "model", "graph"))
    debug.add_argument("file", metavar="FILE")
    debug.add_argument("--dot", action="store_true", help="`graph` as Graphviz DOT, not text")
    debug.set_defaults(run=cmd_debug)

    explain = sub.add_parser("explain", help="explain a diagnostic code (`H201` or `unknown-name`)")
    explain.add_argument("code", metavar="CODE")
    explain.set_defaults(run=cmd_explain)

    build = sub.add_parser("build", help="compile a spec into a Python package with its docs")
    build.add_argument("spec", metavar="SPEC")
    build.add_argument("-o", "--out", required=True, metavar="OUT", help="the output folder")
    build.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list missing, stale and extra files and exit 1 if there are any",
    )
    build.add_argument(
        "--no-embed", action="store_true", help="ship no tool embeddings (ranking is lexical)"
    )
    build.add_argument("--format", choices=FORMATS, default="human", help="diagnostics format")
    build.add_argument("-q", "--quiet", action="store_true", help="print nothing when it worked")
    build.set_defaults(run=cmd_build)

    test = sub.add_parser("test", help="run the `test` blocks of specs against their policies")
    test.add_argument("files", nargs="+", metavar="FILE")
    test.add_argument("-k", metavar="PATTERN", help="run only tests whose name contains PATTERN")
    test.add_argument("--format", choices=FORMATS, default="human")
    test.set_defaults(run=cmd_test)

    workflow = sub.add_parser("workflow", help="list, show, decide and cancel durable workflows")
    actions = workflow.add_subparsers(dest="action", required=True, metavar="ACTION")
    wf_list = actions.add_parser("list", help="every run with its status and waiting gates")
    wf_show = actions.add_parser("show", help="one run: steps, gates, artifacts")
    wf_show.add_argument("id", metavar="ID")
    wf_decide = actions.add_parser("decide", help="decide a waiting gate as a person")
    wf_decide.add_argument("id", metavar="ID")
    wf_decide.add_argument("gate", metavar="GATE")
    wf_decide.add_argument("option", metavar="OPTION")
    wf_decide.add_argument("--by", required=True, metavar="USER", help="who decides")
    wf_decide.add_argument(
        "--role", action="append", metavar="ROLE", help="a role of the decider (repeatable)"
    )
    wf_cancel = actions.add_parser("cancel", help="cancel a run")
    wf_cancel.add_argument("id", metavar="ID")
    for action in (wf_list, wf_show, wf_decide, wf_cancel):
        add_log_option(action)
        action.add_argument("--format", choices=("human", "json"), default="human")
    workflow.set_defaults(run=cmd_workflow)

    log = sub.add_parser("log", help="checkpoint and verify an event log")
    log_actions = log.add_subparsers(dest="action", required=True, metavar="ACTION")
    log_head = log_actions.add_parser("head", help="print a checkpoint of the log's head")
    log_head.add_argument("--format", choices=("text", "json"), default="text")
    log_verify = log_actions.add_parser("verify", help="verify the log's chain, checkpoint, MACs")
    log_verify.add_argument(
        "--anchor", metavar="CHECKPOINT", help="a checkpoint printed by `harnessc log head`"
    )
    log_verify.add_argument("--format", choices=("human", "json"), default="human")
    log_verify.add_argument(
        "--archive",
        action="append",
        default=[],
        metavar="FILE",
        help="an archive `harnessc log compact` wrote: verify the whole chain across the cut",
    )
    log_compact = log_actions.add_parser(
        "compact", help="archive the events before a position to a file; keep the live ones"
    )
    cut_at = log_compact.add_mutually_exclusive_group(required=True)
    cut_at.add_argument(
        "--before",
        metavar="POSITION",
        help="the last position to archive, or `head`",
    )
    cut_at.add_argument(
        "--older-than",
        metavar="DURATION",
        help="archive what was recorded longer ago than this (`90d`): a retention, for a "
        "scheduled run",
    )
    log_compact.add_argument(
        "--to", required=True, metavar="FILE", help="the archive to write (a new file)"
    )
    log_compact.add_argument("--format", choices=("text", "json"), default="text")
    for action in (log_head, log_verify, log_compact):
        add_log_option(action)
        action.add_argument(
            "--key-file",
            metavar="FILE",
            help="the log key (otherwise HARNESSC_LOG_KEY or HARNESSC_LOG_KEY_FILE)",
        )
    log_divergences = log_actions.add_parser(
        "divergences", help="the decisions a shadow spec would have taken otherwise"
    )
    add_log_option(log_divergences)
    log_divergences.add_argument("--format", choices=("text", "json"), default="text")
    log_divergences.add_argument(
        "--first", type=int, default=20, metavar="N", help="decision ids listed per group"
    )
    log.set_defaults(run=cmd_log)

    mcp = sub.add_parser("mcp", help="ask a live MCP server for its tools (the `mcp` extra)")
    mcp_actions = mcp.add_subparsers(dest="action", required=True, metavar="ACTION")
    mcp_discover = mcp_actions.add_parser(
        "discover",
        help="print an `mcp NAME { … }` block of a server's tools, or, given a spec, its drift "
        "(exit 0 none, 1 drift, 2 cannot connect)",
    )
    where = mcp_discover.add_mutually_exclusive_group(required=True)
    where.add_argument("--stdio", metavar='"CMD ARGS"', help="start the server with this command")
    where.add_argument("--http", metavar="URL", help="a streamable-HTTP server's URL")
    mcp_discover.add_argument("--name", help="the server's name in the block (or in SPEC)")
    mcp_discover.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="to connect and list"
    )
    mcp_discover.add_argument("--format", choices=("human", "json"), default="human")
    mcp_discover.add_argument("spec", nargs="?", metavar="SPEC", help="report drift against it")
    mcp_discover.add_argument(
        "--root", metavar="DIR", help="the project root of SPEC (see `check --root`)"
    )
    mcp.set_defaults(run=cmd_mcp)

    init = sub.add_parser("init", help="write a starter spec, pre-commit hooks and a README")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the folder (default: .)")
    init.add_argument(
        "--example",
        choices=("remediation", "workspace"),
        help="copy one of harnessc's examples instead of the starter spec",
    )
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.set_defaults(run=cmd_init)

    diff = sub.add_parser(
        "diff", help="what a change to specs does: calls decided differently, with witness calls"
    )
    diff.add_argument(
        "targets",
        nargs="+",
        metavar="SPEC",
        help="OLD NEW (two files or two folders), or REV..REV2 SPEC… or REV SPEC… (git)",
    )
    diff.add_argument("--format", choices=("text", "markdown", "json", "sarif"), default="text")
    diff.add_argument(
        "--fail-on",
        choices=("widened", "changed", "never"),
        default="widened",
        help="exit 1 when a call is newly allowed, confirmed by the runtime (default; 3 when "
        "only unconfirmed regions or undecided questions), on any change, or never",
    )
    diff.add_argument("-o", "--out", metavar="FILE", help="write the report to FILE")
    diff.set_defaults(run=cmd_diff)

    replay = sub.add_parser(
        "replay", help="re-decide every recorded decision of an event log under a new spec"
    )
    add_log_option(replay)
    replay.add_argument(
        "--spec", required=True, metavar="SPEC", help="a .harness file or folder, or a spec.json"
    )
    replay.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    replay.add_argument(
        "--fail-on",
        choices=("widened", "changed", "never"),
        default="widened",
        help="exit 1 when a decision widened (default), when any flipped, or never",
    )
    replay.add_argument(
        "--first", type=int, default=20, metavar="N", help="decision ids listed per group"
    )
    replay.add_argument(
        "--archive",
        action="append",
        default=[],
        metavar="FILE",
        help="an archive of the log (`harnessc log compact`): replay across the cut",
    )
    replay.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="read the log in N processes, each deciding a share of the sessions",
    )
    replay.add_argument(
        "--key-file",
        metavar="FILE",
        help="the log key (otherwise HARNESSC_LOG_KEY or HARNESSC_LOG_KEY_FILE)",
    )
    replay.set_defaults(run=cmd_replay)

    why = sub.add_parser(
        "why", help="explain one decision and the nearest calls decided differently"
    )
    why.add_argument("spec", metavar="SPEC")
    why.add_argument("--tool", metavar="TOOL", help="the tool called")
    for name, what in (
        ("args", "the call's arguments"),
        ("actor", "who calls (user, role, roles, tenant, …)"),
        ("facts", "the application's facts; connections and runtimes that are up as true"),
        ("resource", "the resource acted on"),
        ("task", "the task (id, stage, purpose)"),
        ("env", "the environment"),
    ):
        why.add_argument(f"--{name}", metavar="JSON", help=f"{what}, as a JSON object")
    why.add_argument(
        "--before",
        metavar="JSON",
        help='the session before the call: a JSON list of steps, {"said": …} or '
        '{"tool": …, "args": …, "result": …}',
    )
    judged = why.add_mutually_exclusive_group()
    judged.add_argument("--agent", metavar="AGENT", help="judge under this agent's policy")
    judged.add_argument("--policy", metavar="POLICY", help="judge under this policy")
    add_log_option(why, required=False, help="an event log: explain a recorded decision")
    why.add_argument("--decision", metavar="ID", help="the recorded decision's id (dec-…)")
    why.add_argument(
        "--archive",
        action="append",
        default=[],
        metavar="FILE",
        help="an archive of the log (`harnessc log compact`), read with it",
    )
    why.add_argument("--format", choices=("text", "json"), default="text")
    why.set_defaults(run=cmd_why)

    lsp_help = "run the language server on standard input and output (the `lsp` extra)"
    lsp = sub.add_parser("lsp", help=lsp_help, description=lsp_help)
    lsp.set_defaults(run=cmd_lsp)

    console_help = "serve the operations console: approvals, grants, sessions, workflow gates"
    console = sub.add_parser("console", help=console_help, description=console_help)
    add_log_option(console, required=False)
    console.add_argument("--spec", metavar="SPEC", help="a .harness file or folder, or spec JSON")
    console.add_argument("--host", default="127.0.0.1", help="address to listen on")
    console.add_argument("--port", type=int, default=8765)
    console.add_argument("--operators", metavar="FILE", help="the operators (TOML or JSON)")
    console.add_argument(
        "--hash-password",
        action="store_true",
        help="read a password on standard input, print its hash for the operators file",
    )
    console.set_defaults(run=cmd_console)

    from .serve_cli import add_parser as serve_parser

    serve_parser(sub, cmd_serve)

    from .approvals_cli import add_parsers as approvals_parsers

    approvals_parsers(sub, cmd_approvals, cmd_grants)

    from .gateway_cli import add_parser as gateway_parser

    gateway_parser(sub, cmd_gateway)
    for command in ROOTED:
        _choices(sub)[command].add_argument(
            "--root",
            metavar="DIR",
            help="the project root: a spec reads no file outside it but the standard library "
            "(default: the nearest folder above the spec with pyproject.toml or harness.toml)",
        )
    return parser


ROOTED = (
    "check",
    "lint",
    "fmt",
    "debug",
    "build",
    "test",
    "diff",
    "replay",
    "why",
    "lsp",
    "console",
    "gateway",
)
"""The commands that read specs, each with `--root` (`mcp discover` too)."""


def _choices(action: Any) -> dict[str, argparse.ArgumentParser]:
    return action.choices  # type: ignore[no-any-return]


def cmd_approvals(args: argparse.Namespace) -> int:
    from .approvals_cli import run_approvals

    return run_approvals(args, _not_a_log)


def cmd_grants(args: argparse.Namespace) -> int:
    from .approvals_cli import run_grants

    return run_grants(args, _not_a_log)


def cmd_mcp(args: argparse.Namespace) -> int:
    from .mcp_discover import run

    return run(args)


def cmd_lsp(args: argparse.Namespace) -> int:
    try:
        from .lsp.server import serve
    except ImportError as error:  # pygls is the `lsp` extra
        sys.stderr.write(
            f"harnessc: the language server needs the `lsp` extra "
            f"(pip install 'harnessc[lsp]'): {error}\n"
        )
        return EXIT_USAGE
    return serve(args.root)


def cmd_gateway(args: argparse.Namespace) -> int:
    from .gateway_cli import run

    return run(args, _not_a_log)


def cmd_console(args: argparse.Namespace) -> int:
    from .console.command import run

    return run(args, _not_a_log)


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve_cli import run

    return run(args)


def cmd_replay(args: argparse.Namespace) -> int:
    from .review.replay import replay_main

    return replay_main(args)


ANALYSING = frozenset({"check", "lint", "build", "test", "diff", "why"})
"""Commands that run the policy analysis, and so have a wall-clock limit (`_Deadline`)."""


class _Deadline:
    """The wall-clock limit of a command (analysis/budget.py): when it runs out, the command is
    aborted with `EXIT_TIMEOUT` and a message on standard error, whatever it is doing (a z3
    question included: z3 runs without Python's lock). Never a finding: each question of the
    analysis has a budget of z3's resource units, the same on every machine, and this limit is
    only the outer bound of a command that would otherwise run on."""

    def __init__(self, seconds: float) -> None:
        import threading

        self.seconds = seconds
        self.timer = threading.Timer(seconds, self.abort)
        self.timer.daemon = True
        self.timer.start()

    def abort(self) -> None:
        from .analysis.budget import EXIT_TIMEOUT, RLIMIT_VARIABLE, TIMEOUT_VARIABLE

        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(
                f"harnessc: aborted: the command did not finish within its wall-clock limit of "
                f"{self.seconds:g} s ({TIMEOUT_VARIABLE}); nothing it found is reported.\n"
                f"  The limit depends on the machine and its load, so it never decides a "
                f"finding: each question of the policy analysis has a fixed budget "
                f"({RLIMIT_VARIABLE}).\n"
                f"  Raise it with {TIMEOUT_VARIABLE}=SECONDS (0 for none).\n"
            )
            sys.stderr.flush()
        os._exit(EXIT_TIMEOUT)

    def cancel(self) -> None:
        self.timer.cancel()


def _deadline(command: str) -> _Deadline | None:
    if command not in ANALYSING:
        return None
    from .analysis.budget import command_timeout_s

    seconds = command_timeout_s()
    return _Deadline(seconds) if seconds else None


QUICK_EXIT = frozenset({"check", "lint", "fmt", "explain"})
"""Commands that hold nothing to close when they return (no store, no worker, no file open):
the console script leaves without tearing the interpreter down, which for a large spec is
freeing millions of objects one by one (a second of 3 at 5,000 tools)."""


def entry() -> NoReturn:
    """The `harnessc` console script and `python -m harnessc.compiler`: `main`, then exit."""
    code = main()
    if sys.argv[1:2] and sys.argv[1] in QUICK_EXIT:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to flush
                stream.flush()
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    # a text read from a log may hold a lone surrogate (`"\ud800"` is valid JSON): printed as
    # its escape rather than failing the whole command at the first one
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")
    args = build_parser().parse_args(argv)
    root = getattr(args, "root", None)
    if root is not None and not os.path.isdir(root):
        sys.stderr.write(f"harnessc: --root `{root}` is not a folder\n")
        return EXIT_USAGE
    deadline = _deadline(args.command)
    try:
        with rooted_at(root):
            return int(args.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as error:  # a bug in harnessc: say so, never show a raw traceback
        if os.environ.get("HARNESSC_DEBUG"):
            raise
        internal = Diagnostic.make(
            "H901",
            f"internal error: {type(error).__name__}: {error}",
            None,
            help="this is a bug in harnessc, not in your spec; rerun with HARNESSC_DEBUG=1 "
            "for the traceback and report it",
        )
        print_diagnostics([internal])
        return EXIT_ERRORS
    finally:
        if deadline is not None:
            deadline.cancel()
