"""The compiler's table of contents: each command runs a prefix of these stages, in order.

read → parse → resolve → lower → validate → graph → analyse → (lint → analyse availability →
plan → render → write)

Every stage checks every declaration it is given and collects every error; one mistake is
reported once. A declaration a stage finds wrong is set aside, with every declaration that
depends on it (compiler/quarantine.py), and the later stages check the rest: so later stages
may assume valid input *for the declarations they see*. Parse skips a declaration with a
syntax error and records the name it would have declared, which resolve then never reports
as unknown. The stages that need the whole program (policy analysis, lints, availability,
plan, render, write) run only when no stage reported an error.
"""

from __future__ import annotations

import gc
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harnessc.dsl.diagnostics import (
    Diagnostic,
    Suppressed,
    clipped,
    has_errors,
    os_reason,
    sort_diagnostics,
)
from harnessc.dsl.files import confined, display_path, read_source
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from harnessc.dsl.syntax import Module
from harnessc.runtime.model import Spec

from . import graph, quarantine, resolve, testing, validate
from .analysis.policy import PolicyAnalysis, analyse_policies
from .config import LintConfig
from .roots import file_roots, named_once
from .suppress import split_findings

if TYPE_CHECKING:
    from .codegen import Staleness, WriteReport
    from .embed import Progress


@dataclass(frozen=True)
class LoadedFile:
    """One file read and parsed; `module` is None when the file could not be read."""

    path: Path
    source: Source | None
    module: Module | None
    diagnostics: tuple[Diagnostic, ...]


def load_file(path: str | Path, shown_as: str | None = None) -> LoadedFile:
    """Stages read + parse for one file."""
    source, diagnostics = read_source(path, shown_as)
    if source is None:
        return LoadedFile(Path(path), None, None, tuple(diagnostics))
    parsed = parse_source(source)
    return LoadedFile(Path(path), source, parsed.module, parsed.diagnostics)


def _load_named(path: str | Path, shown: str, load: Load) -> LoadedFile:
    """A file named on the command line, unless it is a link out of its project (H009: not
    read, so nothing of it is shown)."""
    refused = confined(path, shown)
    if refused is not None:
        return LoadedFile(Path(path), None, None, (refused,))
    return load(path, shown)


@dataclass
class CheckResult:
    files: list[LoadedFile]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    resolution: resolve.Resolution | None = None
    model: Spec | None = None
    analysis: PolicyAnalysis | None = None
    suppressed: list[Suppressed] = field(default_factory=list)
    """The warnings and notes an ignore silenced: left out of `diagnostics`."""

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)

    def silence(self, config: LintConfig) -> None:
        """Move the warnings and notes that `config` or an inline comment silences from
        `diagnostics` to `suppressed`."""
        found = split_findings(self.diagnostics, self.resolution, config)
        self.diagnostics = found.kept
        self.suppressed.extend(found.suppressed)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a compiler run.

    A run builds millions of small objects that all live until it ends; with the collector on,
    its full collections rescan that growing heap again and again, and a 10,000-tool spec
    resolved several times slower than linear. Cycles created meanwhile are collected after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


Load = Callable[[str | Path, str | None], LoadedFile]
"""How a run reads and parses a file: `load_file`, or `loading_once()` for several builds."""


def loading_once() -> Load:
    """`load_file` that reads and parses each file once, however many builds load it (under
    the same name): the builds of files named together share the modules they import."""
    loaded: dict[tuple[str, str | None], LoadedFile] = {}

    def load(path: str | Path, shown_as: str | None = None) -> LoadedFile:
        key = (os.path.realpath(path), shown_as)
        if key not in loaded:
            loaded[key] = load_file(path, shown_as)
        return loaded[key]

    return load


def check(paths: list[str | Path], load: Load = load_file) -> CheckResult:
    """`harnessc check`: read, parse and resolve every root file and what it imports."""
    with paused_gc():
        return _check(paths, load=load)


def _check(
    paths: list[str | Path], shown: list[str] | None = None, load: Load = load_file
) -> CheckResult:
    """The stages of `check`; a `# harnessc: ignore[…]` comment silences the warnings and
    notes they report (never an error), for every command that checks, as it does for lint."""
    result = _stages(paths, shown, load)
    if result.resolution is not None:
        result.silence(LintConfig())
    return result


def _stages(
    paths: list[str | Path], shown: list[str] | None = None, load: Load = load_file
) -> CheckResult:
    # `shown`: how to name the files (build: relative to the build root, not the cwd)
    files = [
        _load_named(p, shown[i] if shown else display_path(p), load) for i, p in enumerate(paths)
    ]
    result = CheckResult(files, [d for f in files for d in f.diagnostics])
    # needs every root parsed, with errors or not: resolve loads imported modules through the
    # same load_file, and a name that a declaration skipped after a syntax error would have
    # declared is poisoned, never reported unknown
    result.resolution = resolve.resolve_program(files, load)
    result.diagnostics.extend(result.resolution.diagnostics)
    # needs every name resolved: from here each stage sees the declarations without errors
    # so far, less those that depend on one, and assumes them valid
    sound = quarantine.set_aside(result.resolution, result.diagnostics)
    model, sound = quarantine.lower_sound(sound, result.diagnostics)
    if model is None:
        return result
    if result.ok:
        result.model = model  # the whole program: after an error, a part of it was set aside
    # needs the typed model: these stages read it, none changes it
    result.diagnostics.extend(validate.validate_spec(model, sound))
    result.diagnostics.extend(graph.check_workflows(model, sound))
    result.diagnostics.extend(testing.check_tests(model, sound))
    if not result.ok:
        return result
    # needs the whole program valid: analysis reasons about every rule, and a rule set aside
    # would change its answers
    result.analysis = analyse_policies(model)
    return result


def lint(
    paths: list[str | Path], config: LintConfig | None = None, load: Load = load_file
) -> CheckResult:
    """`harnessc lint`: check, then the lint rules; `config` and inline `# harnessc:
    ignore[…]` comments silence warnings and notes, never errors."""
    from .lints import run_lints  # the rules: loaded by the commands that lint

    config = config or LintConfig()
    result = check(paths, load)
    if result.ok and result.model is not None and result.resolution is not None:
        # needs a valid model and its analysis: the rules read both and change neither
        result.diagnostics.extend(
            run_lints(result.model, result.resolution, result.analysis, config)
        )
    result.silence(config)
    return result


@dataclass
class FilesResult:
    """Files named together, each checked as the root of its own build (see `roots.py`)."""

    named: list[str | Path]
    """Every file named, once."""
    builds: list[CheckResult]
    """One build per root, in command-line order."""
    diagnostics: list[Diagnostic]
    """Every build's diagnostics, each once (a module several roots import is reported
    once), sorted by file and position."""
    suppressed: list[Suppressed]

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def check_each(paths: Sequence[str | Path]) -> FilesResult:
    """`harnessc check A B`: each file the root of its own build, unless another named file's
    build loads it (then it is checked in that build only); `check` is one shared build."""
    load = loading_once()
    return _merged(paths, [check([root], load) for root in file_roots(paths, load)])


def lint_each(
    paths: Sequence[str | Path], config_of: Callable[[str | Path], LintConfig] | None = None
) -> FilesResult:
    """`harnessc lint A B`: `lint` over each root, as `check_each` picks them; `config_of(root)`
    is the configuration of a root's build (the defaults when not given)."""
    load = loading_once()
    roots = file_roots(paths, load)
    return _merged(
        paths, [lint([root], config_of(root) if config_of else None, load) for root in roots]
    )


def _merged(paths: Sequence[str | Path], builds: list[CheckResult]) -> FilesResult:
    suppressed = [s for b in builds for s in b.suppressed]
    by_diagnostic = {id(s.diagnostic): s for s in suppressed}
    return FilesResult(
        named_once(paths),
        builds,
        sort_diagnostics(d for b in builds for d in b.diagnostics),
        [by_diagnostic[id(d)] for d in sort_diagnostics(s.diagnostic for s in suppressed)],
    )


def run_test_files(
    paths: Sequence[str | Path], pattern: str | None = None
) -> list[testing.TestRun]:
    """Check each file as its own build and run its tests; a build with errors runs none."""
    runs: list[testing.TestRun] = []
    # a file's tests run with the file as the root, so every file named is a root here
    load = loading_once()
    for path in named_once(paths):
        result = check([path], load)
        shown = result.files[0].source.path if result.files[0].source else str(path)
        if not result.ok or result.model is None:
            runs.append(testing.TestRun(shown, diagnostics=list(result.diagnostics)))
            continue
        run = testing.run_spec_tests(result.model, pattern, shown)
        run.diagnostics = list(result.diagnostics)
        runs.append(run)
    return runs


@dataclass
class BuildResult:
    """What `build` did: the check, then the files it rendered and wrote (or compared)."""

    check: CheckResult
    out: Path
    package: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    written: WriteReport | None = None
    staleness: Staleness | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.check.ok


def _unloadable(spec: Spec) -> Diagnostic | None:
    """H901 when the model does not load back from its JSON as itself: a bug in lowering."""
    from pydantic import ValidationError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the serializer's: a value of an unexpected type
            same = Spec.from_json(spec.to_json()) == spec
        note = "it loads back as a different model"
    except ValidationError as error:
        same = False
        where = ".".join(str(p) for p in error.errors()[0]["loc"]) if error.errors() else ""
        note = f"the model rejects the value at `{where}`"
    except UserWarning as warning:
        same = False
        note = str(warning).strip().splitlines()[-1]
    if same:
        return None
    return Diagnostic.make(
        "H901",
        "internal error: the compiled model does not load back from its JSON",
        None,
        notes=[note],
        help="this is a bug in harnessc, not in your spec; please report it with this spec",
    )


def build(
    paths: list[str | Path],
    out: str | Path,
    check: bool = False,
    embed: bool = True,
    config: LintConfig | None = None,
    progress: Progress | None = None,
) -> BuildResult:
    """`harnessc build`: check → lint → analyse availability → plan → render → write
    (`check=True`: compare with `out` instead). A spec with errors writes nothing; the lints'
    warnings and notes (`config` and inline `# harnessc: ignore[…]` comments silence them, as
    in `lint`) do not stop it."""
    config = config or LintConfig()
    from . import codegen  # jinja2 and the runtime's policy engine: loaded only to build
    from .analysis.availability import analyse_availability
    from .lints import run_lints

    root = codegen.build_root(paths[0])
    shown = [codegen.relative_to_root(p, root) for p in paths]
    with paused_gc():
        result = _check(paths, shown)
    built = BuildResult(result, Path(out))
    if not result.ok or result.model is None or result.resolution is None:
        return built
    # needs a valid model and its analysis, as in `lint`
    result.diagnostics.extend(run_lints(result.model, result.resolution, result.analysis, config))
    result.silence(config)
    result.diagnostics.extend(
        codegen.check_package_name_of(result.model, result.resolution, built.out)
    )
    if not result.ok:
        return built
    # lowering builds the model unvalidated (`trusted`): the package's model.json is validated
    # here as the runtime will load it, so a bug of ours is reported, never shipped
    if (unloadable := _unloadable(result.model)) is not None:
        result.diagnostics.append(unloadable)
        return built
    # needs a valid model; a fresh z3 context of its own, after the first analysis
    available = analyse_availability(result.model)
    # needs a valid model: the plan assumes every name resolves and every condition type-checks
    embeddings = codegen.tool_embeddings(result.model, progress) if embed else None
    if not embed:
        built.notes.append("ranking will be lexical: built with --no-embed")
    elif embeddings is None:
        built.notes.append("ranking will be lexical: install the embed extra")
    plan = codegen.plan_build(
        result.model,
        ", ".join(shown),
        codegen.lint_suppressions(result.resolution),
        embeddings,
        analysis=result.analysis,
        available=available,
    )
    built.package = plan.package
    built.files = codegen.render_plan(plan)
    try:
        if check:
            built.staleness = codegen.compare_files(built.out, built.files, plan.package)
        else:
            built.written = codegen.write_files(built.out, built.files, plan.package)
    except OSError as error:  # `-o` names a file, a folder is read-only, the disk is full
        built.files = {}
        where = display_path(error.filename or built.out)
        result.diagnostics.append(
            Diagnostic.make(
                "H008",
                f"cannot write `{clipped(where)}`: {os_reason(error)}",
                None,
                path=display_path(built.out),
                help="`-o` names the folder the package goes into",
            )
        )
    return built
