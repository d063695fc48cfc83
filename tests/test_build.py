"""`harnessc build`: the generated package, its docs, determinism, `--check`, hostile spec text."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import harnessc.runtime
import pytest
from harnessc.compiler import pipeline
from harnessc.compiler.cli import main
from harnessc.runtime import CallContext, Harness, MemoryStore, ModelSeal, PolicyEngine, Spec
from harnessc.runtime.log.store import StoreError
from harnessc.runtime.model import ir

from .conftest import ROOT, update_goldens

REMEDIATION = ROOT / "examples" / "remediation" / "remediation.harness"
EXAMPLES = sorted(
    p
    for p in (ROOT / "examples").glob("*/*.harness")
    if re.search(r"^harness ", p.read_text(encoding="utf-8"), re.MULTILINE)
)
"""Every example's root spec: the file with a `harness` header (scripts/test.sh builds the same)."""
GOLDENS = ROOT / "tests" / "build_goldens"
VENV_BIN = Path(sys.executable).parent

HOSTILE = r"""
harness hostile {
  version "1\"\"\"'); import os #"
  summary "Line one\n# Injected heading\n| a | b |\n<script>alert(1)</script>\"\"\""
}

mcp evil {
  transport stdio "run \"\"\" --x\n'); import os #"
  tool "import-os/x.y" {
    summary "Tool with `back``ticks` and | pipes\nand ```mermaid\n fences"
    effects read
    input { q: string pattern "^(\\'\\); import os #|\"\"\"|\\n)$" }
  }
}

tool t.unicode {
  summary "Ünïcode ✓ — \u2028 separators \"\"\" '); import os #"
  effects write
  risk medium
  input {
    mode: enum("a'b", "\"\"\"", "x\ny", "'); import os #")
    p: string pattern "['\"]\\)\n#"
  }
}

tool a_b { summary "a_b" effects read }
tool a.b { wire_name "a_dot_b" summary "collides with a_b once mangled" effects read }

policy p {
  default deny
  allow a_b, a.b
  allow t.unicode when args.mode == "a'b" and args.p matches "\"\"\"'\\); import os #"
  r2: deny mcp:evil:tool:* when args.q == "'); import os #\n" {
    reason "no \"\"\" here\n# nor here | ever ```"
    instead "'); import os #"
  }
  r3: ask t.unicode when args.mode == "'); import os #" {
    approver role "x\"y'); import os #"
    reason "line\n| cell |"
  }
}

agent a {
  persona "A \"\"\" persona\n'); import os #"
  policy p
}

workflow w {
  agent a
  step one = call t.unicode(mode: "a'b", p: "x")
  step two = decide "Really?\"]; click one\n```" after one {
    options yes, no  # harnessc: ignore[L101]
    by role "x\"y"
    timeout 1d default no
  }
  step three = call t.unicode(mode: "x\ny", p: "y") when two == yes
}
"""


def _build(spec: Path, out: Path, **options: object) -> pipeline.BuildResult:
    result = pipeline.build([spec], out, embed=False, **options)  # type: ignore[arg-type]
    assert result.ok, [d.message for d in result.check.diagnostics]
    return result


def _fresh_build(spec: Path, out: Path, cwd: Path = ROOT) -> None:
    """`harnessc build` in a process of its own. The analysis's witnesses (the generated tests'
    cases) depend on the z3 context's history, so only builds in fresh processes are compared
    byte for byte."""
    run = subprocess.run(
        [str(VENV_BIN / "harnessc"), "build", str(spec), "-o", str(out), "--no-embed", "-q"],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture(scope="module")
def remediation(examples: dict[str, Path]) -> Path:
    return examples["remediation"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    spec = folder / "hostile.harness"
    spec.write_text(HOSTILE, encoding="utf-8")
    _build(spec, folder / "out")
    return folder / "out"


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every example spec (a `harness` header: the root of its example), built: its example's
    folder name → the output folder, which holds the one package the build made."""
    out = tmp_path_factory.mktemp("examples")
    built = {}
    for spec in EXAMPLES:
        _fresh_build(spec, out / spec.parent.name)
        built[spec.parent.name] = out / spec.parent.name
    return built


def _package(out: Path) -> Path:
    (package,) = [p for p in out.iterdir() if p.is_dir()]
    return package


def _import(out: Path, name: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(out))
    try:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(out))


# -- what is generated ------------------------------------------------------------------------


def test_the_package_has_its_files(remediation: Path) -> None:
    files = set(_tree(remediation))
    assert {
        "remediation/__init__.py",
        "remediation/model.json",
        "remediation/tool_docs.json",
        "remediation/docs/README.md",
        "remediation/docs/tools.md",
        "remediation/docs/surfaces.md",
        "remediation/docs/policies.md",
        "remediation/docs/approvals.md",
        "remediation/docs/mcp.md",
        "remediation/docs/skills.md",
        "remediation/docs/agents.md",
        "remediation/docs/workflows.md",
        "remediation/docs/suppressions.md",
        "remediation/tests/__init__.py",
        "remediation/tests/cases.json",
        "remediation/tests/runner.py",
        "remediation/tests/test_policies.py",
        "remediation/tests/test_schemas.py",
        "remediation/tests/test_surfaces.py",
        "remediation/tests/test_workflows.py",
    } <= files


def test_every_text_file_says_it_is_generated_and_from_which_spec(remediation: Path) -> None:
    header = "generated by harnessc from examples/remediation/remediation.harness; do not edit"
    for rel, data in _tree(remediation).items():
        if rel.endswith(".py"):
            assert data.decode().startswith(f"# {header}\n"), rel
        elif rel.endswith(".md"):
            assert data.decode().startswith(f"<!-- {header} -->\n"), rel
        elif rel.endswith(("tool_docs.json", "cases.json")):
            assert json.loads(data)["generated"] == header


def test_no_absolute_path_or_timestamp_in_the_output(remediation: Path) -> None:
    for rel, data in _tree(remediation).items():
        text = data.decode("utf-8", errors="replace")
        assert str(ROOT) not in text, rel
        assert str(remediation) not in text, rel


def test_model_json_is_the_ir(remediation: Path) -> None:
    text = (remediation / "remediation" / "model.json").read_text(encoding="utf-8")
    spec = Spec.from_json(text)
    assert text == spec.to_json() + "\n"
    assert spec.tools["production.deploy"].origin is not None
    assert spec.tools["production.deploy"].origin.file == "examples/remediation/remediation.harness"


def test_load_returns_the_runtime_harness(remediation: Path, tmp_path: Path) -> None:
    package = _import(remediation, "remediation")
    harness = package.load(store="memory://")
    assert isinstance(harness, Harness)
    assert isinstance(harness.store, MemoryStore)
    assert harness.policy_version == package.POLICY_VERSION
    on_disk = package.load(store=f"sqlite:///{tmp_path / 'h.db'}")
    assert type(on_disk.store).__name__ == "SQLiteStore"
    assert (tmp_path / "h.db").exists()
    with pytest.raises(StoreError, match="no event store"):
        package.load(store="ftp://x")


def _copy_package(built: Path, into: Path) -> Path:
    """A copy of a built package, to change its files without touching the module's build."""
    shutil.copytree(built, into)
    return into


def _hashes_walked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the content hashes computed from here on (each walks the model once)."""
    walks: list[int] = []
    real = ir.without_origins

    def counting(value: object) -> object:
        if isinstance(value, Spec):
            walks.append(1)
        return real(value)

    monkeypatch.setattr(ir, "without_origins", counting)
    return walks


def test_load_takes_the_sealed_hash_of_the_model_it_built(
    remediation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _import(remediation, "remediation")
    data = (remediation / "remediation" / "model.json").read_bytes()
    assert package.MODEL_SEAL.admits(data)
    walks = _hashes_walked(monkeypatch)
    harness = package.load(store="memory://")
    assert walks == []  # the hash is the build's: the model is not walked again
    assert harness.policy_version == package.POLICY_VERSION
    assert harness.spec == Spec.from_json(data)
    monkeypatch.undo()
    assert harness.spec.content_hash() == Spec.from_json(data).content_hash()


def test_a_stale_model_is_hashed_again_and_refused(
    remediation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """model.json changed after the build (the spec's meaning, not the package's code): the
    seal does not admit it, its own hash is computed, and `load()` refuses it."""
    out = _copy_package(remediation, tmp_path / "stale")
    model = out / "remediation" / "model.json"
    spec = Spec.from_json(model.read_bytes())
    changed = spec.model_copy(update={"version": "99.0.0"})
    model.write_text(changed.to_json() + "\n", encoding="utf-8")
    package = _import(out, "remediation")
    assert not package.MODEL_SEAL.admits(model.read_bytes())
    walks = _hashes_walked(monkeypatch)
    with pytest.raises(RuntimeError, match="does not match this package"):
        package.load(store="memory://")
    assert walks == [1]


def test_a_tampered_model_is_never_given_the_sealed_hash(
    remediation: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes changed in place: a rule's effect is refused like a stale model; a change that
    keeps the meaning (an origin's line, which the content hash leaves out) loads, with the
    hash computed from what is there rather than taken from the seal."""
    out = _copy_package(remediation, tmp_path / "tampered")
    model = out / "remediation" / "model.json"
    text = model.read_text(encoding="utf-8")
    package = _import(out, "remediation")
    walks = _hashes_walked(monkeypatch)
    assert '"effect":"deny"' in text
    model.write_text(text.replace('"effect":"deny"', '"effect":"allow"', 1), encoding="utf-8")
    with pytest.raises(RuntimeError, match="does not match this package"):
        package.load(store="memory://")
    moved = re.sub(r'"line":(\d+)', lambda m: f'"line":{int(m[1]) + 1}', text, count=1)
    assert moved != text
    model.write_text(moved, encoding="utf-8")
    harness = package.load(store="memory://")
    assert harness.policy_version == package.POLICY_VERSION
    assert walks == [1, 1]


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.parent.name)
def test_the_sealed_lazy_load_decides_as_the_validated_eager_one(
    spec: Path, examples: dict[str, Path]
) -> None:
    """Every policy × tool of every example, over a few actors and arguments: the package's
    `load()` (sealed hash, each decider compiled on its tool's first call) decides as a
    `PolicyEngine` over the model validated anew that compiled every tool first."""
    out = examples[spec.parent.name]
    package = _import(out, _package(out).name)
    loaded = package.load(store="memory://")
    model = Spec.from_json((_package(out) / "model.json").read_bytes())
    eager = PolicyEngine(model)
    argument_sets: list[dict[str, object]] = [{}, {"path": "/repo/a", "env": "production"}]
    actors = [{}, {"role": "sre"}, {"role": "engineer", "user": "u-1"}]
    compared = 0
    for name in sorted(model.policies):
        reference = eager.decider(name)
        reference.compile_all()
        for tool_id in sorted(model.tools):
            for args in argument_sets:
                for actor in actors:
                    call = CallContext(tool_id, args, actor=actor)
                    got = loaded.engine.decider(name).decide(call)
                    assert got == reference.decide(call), (name, tool_id, args, actor)
                    compared += 1
    assert compared > 0


def test_a_seal_of_another_ir_is_not_taken(remediation: Path) -> None:
    data = (remediation / "remediation" / "model.json").read_bytes()
    package = _import(remediation, "remediation")
    seal = package.MODEL_SEAL
    other = ModelSeal(sha256=seal.sha256, policy_version="0" * 64, ir="another-ir")
    assert not other.admits(data)
    assert Spec.from_json(data, other).content_hash() == seal.policy_version


def test_the_package_ships_no_second_copy_of_its_policies(remediation: Path) -> None:
    """The runtime compiles `model.json` when it loads it: no Python of the policies ships."""
    package = remediation / "remediation"
    assert sorted(p.name for p in package.glob("*.py")) == ["__init__.py"]


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement of a generated Python file."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return found


def test_generated_python_imports_only_the_runtime(examples: dict[str, Path]) -> None:
    """Generated code reaches the runtime through its public API alone: `harnessc.runtime`'s
    `__all__`, never a submodule (which may change without notice)."""
    allowed = {
        "__future__",
        "ast",
        "collections.abc",
        "json",
        "pathlib",
        "pytest",
        "time",
        "typing",
    }
    paths = sorted(p for out in examples.values() for p in out.rglob("*.py"))
    assert len(EXAMPLES) >= 2 and len(paths) == len(EXAMPLES) * 7
    for path in paths:
        for module, names in _imports(path):
            if module.startswith("harnessc"):
                assert module == "harnessc.runtime", (path, module)
                assert set(names) <= set(harnessc.runtime.__all__), (path, names)
            else:
                assert module in allowed, (path, module)


def _spec_test_calls(spec: Spec) -> list[tuple[str, CallContext]]:
    calls = []
    for test in spec.tests.values():
        assert test.tool is not None and test.policy is not None
        facts = test.facts or {}
        calls.append(
            (
                spec.policy(test.policy).name,  # type: ignore[union-attr]
                CallContext(
                    test.tool,
                    test.args,
                    actor=test.actor or {},
                    resource=test.resource or {},
                    task=test.task or {},
                    env=test.env or {},
                    facts=facts,
                ),
            )
        )
    return calls


def _code_blocks(markdown: str) -> list[str]:
    """The Python code blocks of a Markdown page, in order."""
    blocks, current = [], None
    for line in markdown.splitlines():
        if current is None and line == "```python":
            current = []
        elif current is not None and line == "```":
            blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.parent.name)
def test_the_policy_docs_show_the_code_the_runtime_compiled(
    spec: Path, examples: dict[str, Path]
) -> None:
    """docs/policies.md shows, per policy and tool, the source the runtime compiled when it
    loaded the package, after the names its constants are bound to."""
    package = _package(examples[spec.parent.name])
    harness = _import(package.parent, package.name).load(store="memory://")
    shown = _code_blocks((package / "docs" / "policies.md").read_text(encoding="utf-8"))
    expected = []
    for name in sorted(harness.spec.policies):
        decider = harness.engine.decider(name)
        if decider.constants:
            names = [line.split(" = ")[0] for line in shown[len(expected)].splitlines()]
            assert names == list(decider.constants)
            expected.append(shown[len(expected)])
        expected.extend(decider.source(tool_id) for tool_id in sorted(harness.spec.tools))
    assert len(shown) > len(harness.spec.tools)
    assert shown == expected


def test_each_rule_shows_its_bit_and_spec_line(remediation: Path) -> None:
    text = (remediation / "remediation" / "docs" / "policies.md").read_text(encoding="utf-8")
    section = text.split("### `production.deploy`\n", 2)[2].split("###", 1)[0]
    assert (
        '| `remediation.release_manager` | ASK | `args.environment == "production"` |'
    ) in section
    assert "examples/remediation/remediation.harness:296 |" in section
    assert "\n```python\ndef _d(x, " in section


def test_docs_hold_the_policy_matrix_and_the_workflow_diagram(remediation: Path) -> None:
    docs = remediation / "remediation" / "docs"
    matrix = (docs / "policies.md").read_text(encoding="utf-8")
    deploy = matrix.split("### `production.deploy`\n", 2)[2].split("###", 1)[0]
    assert (
        "| `remediation.release_manager` | ASK | "
        '`args.environment == "production"` | Production deploys need a release manager. '
        "Approving the change request does not approve its deploy. | role `release-manager` |"
    ) in deploy
    workflows = (docs / "workflows.md").read_text(encoding="utf-8")
    assert "```mermaid\nflowchart TD\n" in workflows
    assert 's5 -.->|"on failure"| s7' in workflows
    suppressions = (docs / "suppressions.md").read_text(encoding="utf-8")
    assert "remediation.harness:477 | `L101` | reject ends the run on purpose" in suppressions
    tools = (docs / "tools.md").read_text(encoding="utf-8")
    assert "| `change.create` | public | medium | `idempotent`, `reversible`, `write` | yes |" in (
        tools
    )


# -- determinism --------------------------------------------------------------------------------


def test_the_same_spec_gives_the_same_bytes(remediation: Path, tmp_path: Path) -> None:
    _fresh_build(REMEDIATION, tmp_path / "again")
    assert _tree(tmp_path / "again") == _tree(remediation)


def test_the_working_directory_does_not_change_the_output(
    remediation: Path, tmp_path: Path
) -> None:
    _fresh_build(Path("remediation.harness"), tmp_path / "from-example", REMEDIATION.parent)
    relative = Path(os.path.relpath(REMEDIATION, tmp_path))
    _fresh_build(relative, tmp_path / "from-tmp", tmp_path)
    assert _tree(tmp_path / "from-example") == _tree(remediation)
    assert _tree(tmp_path / "from-tmp") == _tree(remediation)


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.parent.name)
def test_goldens_of_every_example(spec: Path, examples: dict[str, Path]) -> None:
    """Every example builds byte for byte to its package as recorded under tests/build_goldens
    (`pytest --update-goldens` rewrites them)."""
    package = _package(examples[spec.parent.name]).name
    built = _tree(examples[spec.parent.name])
    if update_goldens():
        shutil.rmtree(GOLDENS / package, ignore_errors=True)
        for rel, data in built.items():
            (GOLDENS / rel).parent.mkdir(parents=True, exist_ok=True)
            (GOLDENS / rel).write_bytes(data)
    golden = {k: v for k, v in _tree(GOLDENS).items() if k.startswith(package + "/")}
    assert golden == built


# -- the output passes ruff and compileall ------------------------------------------------------


@pytest.mark.parametrize("which", ["remediation", "hostile"])
def test_ruff_and_compileall_pass_on_the_output(
    which: str, remediation: Path, hostile: Path
) -> None:
    out = remediation if which == "remediation" else hostile
    ruff = VENV_BIN / "ruff"
    for config in (["--isolated"], ["--config", str(ROOT / "pyproject.toml")]):
        run = subprocess.run(
            [str(ruff), "check", "--no-cache", *config, str(out)], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


# -- hostile spec text --------------------------------------------------------------------------


def test_hostile_text_never_becomes_code(hostile: Path) -> None:
    package = _import(hostile, "hostile")
    assert "os" not in vars(package)
    spec = Spec.from_json((hostile / "hostile" / "model.json").read_bytes())
    engine = PolicyEngine(spec)
    calls = [
        ("hostile.p", CallContext("t.unicode", {"mode": "a'b", "p": 'x"""\'); import os #'})),
        ("hostile.p", CallContext("t.unicode", {"mode": "'); import os #", "p": "y"})),
        ("hostile.p", CallContext("mcp:evil:tool:import-os/x.y", {"q": "'); import os #\n"})),
        ("hostile.p", CallContext("a.b", {})),
        ("hostile.p", CallContext("a_b", {})),
    ]
    expected = [("allow", "p#2"), ("ask", "p.r3"), ("deny", "p.r2"), ("allow", "p#1")]
    for (policy, call), want in zip(calls, [*expected, ("allow", "p#1")], strict=True):
        decision = engine.decide(policy, call)
        assert (decision.effect, decision.rule) == want
    # the compiled code shown in the docs carries no spec text: only bound names
    docs = (hostile / "hostile" / "docs" / "policies.md").read_text(encoding="utf-8")
    for block in _code_blocks(docs)[1:]:
        assert "import os" not in block and "a'b" not in block, block


def test_hostile_text_cannot_break_the_markdown(hostile: Path) -> None:
    for path in (hostile / "hostile" / "docs").glob("*.md"):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        assert not any(line.startswith("# Injected") for line in lines), path.name
        assert "<script>" not in text, path.name
        # a fence opened for a diagram is closed by the template, never by spec text
        assert sum(line.startswith("```") for line in lines) % 2 == 0, path.name
        for line in lines:
            if line.startswith("| ") and not line.startswith("| ---"):
                cells = line.replace("\\|", "").count("|")
                header = next(x for x in lines if x.startswith("| ") and x != line)
                assert cells == header.count("|"), (path.name, line)
    readme = (hostile / "hostile" / "docs" / "README.md").read_text(encoding="utf-8")
    assert "Line one<br>\\# Injected heading<br>\\| a \\| b \\|" in readme
    workflows = (hostile / "hostile" / "docs" / "workflows.md").read_text(encoding="utf-8")
    assert 's1["two: decide: Really?#quot;]; click one\\n#96;#96;#96; (yes, no)"]' in workflows


# -- `--check` and refusals -------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "harnessc"), *args], capture_output=True, text=True, cwd=ROOT
    )


def test_check_reports_missing_stale_and_extra_files(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    args = [str(REMEDIATION), "-o", str(out), "--no-embed"]
    run = _cli("build", "--check", *args)
    assert run.returncode == 1
    assert f"missing: {out / 'remediation' / 'model.json'}" in run.stdout
    assert f"missing: {out / 'remediation' / 'tests' / 'cases.json'}" in run.stdout
    assert _cli("build", *args).returncode == 0
    run = _cli("build", "--check", *args)
    assert run.returncode == 0, run.stdout
    assert "is up to date" in run.stderr
    package = out / "remediation"
    (package / "docs" / "tools.md").write_text("edited\n", encoding="utf-8")
    (package / "docs" / "policies.md").unlink()
    (package / "notes.txt").write_text("mine\n", encoding="utf-8")
    (package / "tests" / "test_workflows.py").unlink()
    (package / "tests" / "cases.json").write_text("{}\n", encoding="utf-8")
    (package / "tests" / "test_mine.py").write_text("# mine\n", encoding="utf-8")
    before = _tree(out)
    run = _cli("build", "--check", *args)
    assert run.returncode == 1
    assert run.stdout.splitlines() == [
        f"missing: {package / 'docs' / 'policies.md'}",
        f"missing: {package / 'tests' / 'test_workflows.py'}",
        f"stale: {package / 'docs' / 'tools.md'}",
        f"stale: {package / 'tests' / 'cases.json'}",
        f"extra: {package / 'notes.txt'}",
        f"extra: {package / 'tests' / 'test_mine.py'}",
    ]
    assert "is out of date; run `harnessc build" in run.stderr
    assert _tree(out) == before  # --check writes nothing


def test_a_rebuild_removes_files_it_no_longer_makes_and_keeps_others(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    _build(REMEDIATION, out)
    old = out / "remediation" / "docs" / "retired.md"
    old.write_text("<!-- generated by harnessc from x.harness; do not edit -->\n", "utf-8")
    old_test = out / "remediation" / "tests" / "test_retired.py"
    old_test.write_text("# generated by harnessc from x.harness; do not edit\n", "utf-8")
    mine = out / "remediation" / "mine.txt"
    mine.write_text("mine\n", "utf-8")
    my_test = out / "remediation" / "tests" / "test_mine.py"
    my_test.write_text("# mine\n", "utf-8")
    result = _build(REMEDIATION, out)
    assert result.written is not None
    assert result.written.removed == [
        "remediation/docs/retired.md",
        "remediation/tests/test_retired.py",
    ]
    assert result.written.kept == ["remediation/mine.txt", "remediation/tests/test_mine.py"]
    assert not old.exists() and not old_test.exists()
    assert mine.exists() and my_test.exists()


def test_a_spec_with_errors_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "bad.harness"
    spec.write_text('harness bad { version "1" }\npolicy p { allow nosuch.tool }\n', "utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "--no-embed"]) == 1
    assert "error[H201]" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [("class", "is a Python keyword"), ("tests", "is reserved"), ("None", "is a Python keyword")],
)
def test_a_name_that_cannot_be_a_package_is_refused(
    name: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = tmp_path / "spec.harness"
    spec.write_text(f'harness {name} {{ version "1" }}\n', "utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "--no-embed"]) == 1
    err = capsys.readouterr().err
    assert f"error[H501]: the harness name `{name}` {why}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("json", "is a module of Python's standard library"),
        ("os", "is a module of Python's standard library"),
        ("sys", "is a module of Python's standard library"),
        ("numpy", "is a module installed by `numpy`"),
    ],
)
def test_a_name_that_would_shadow_a_module_is_refused(
    name: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = tmp_path / "spec.harness"
    spec.write_text(f'harness {name} {{ version "1" }}\n', "utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "--no-embed"]) == 1
    err = capsys.readouterr().err
    assert f"error[H502]: the harness name `{name}` {why}, which the generated package" in err
    assert f"harness {name} {{" in err and "^" * len(name) in err
    assert not (tmp_path / "out").exists()


def test_a_headerless_spec_named_like_a_module_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = tmp_path / "json.harness"
    spec.write_text('tool t { summary "t" effects read }\n', "utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "--no-embed"]) == 1
    assert "error[H502]: the spec's name `json` (its file name)" in capsys.readouterr().err


def test_the_package_an_earlier_build_wrote_shadows_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a project that holds its generated package and is installed lists the package as its own
    out = tmp_path / "out"
    (out / "agent").mkdir(parents=True)
    (out / "agent" / "__init__.py").write_text("", "utf-8")
    monkeypatch.syspath_prepend(str(out))
    monkeypatch.setattr(
        importlib.metadata, "packages_distributions", lambda: {"agent": ["my-project"]}
    )
    spec = tmp_path / "spec.harness"
    spec.write_text('harness agent { version "1" }\n', "utf-8")
    assert pipeline.build([spec], out, embed=False).ok
    assert [
        d.code
        for d in pipeline.build([spec], tmp_path / "elsewhere", embed=False).check.diagnostics
    ] == ["H502"]


def test_a_headerless_spec_is_named_after_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    spec = tmp_path / "my-spec.harness"
    spec.write_text('tool t { summary "t" effects read }\n', "utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "out"), "--no-embed"]) == 1
    err = capsys.readouterr().err
    assert "the spec's name `my-spec` (its file name) is not a Python identifier" in err
    assert "help: add a header `harness NAME { }`" in err


def test_without_embeddings_the_build_says_ranking_is_lexical(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["build", str(REMEDIATION), "-o", str(tmp_path), "--no-embed"]) == 0
    assert "note: ranking will be lexical: built with --no-embed" in capsys.readouterr().err
    assert not (tmp_path / "remediation" / "tool_embeddings.npy").exists()


def test_with_the_embed_extra_the_package_ships_tool_embeddings(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from harnessc.compiler.codegen import tool_embeddings

    spec = pipeline.check([REMEDIATION]).model
    assert spec is not None
    try:
        found = tool_embeddings(spec)
    except Exception as error:  # the model's files may be missing offline
        pytest.skip(f"embeddings unavailable: {error}")
    if found is None:
        pytest.skip("the embed extra is not usable here")
    result = pipeline.build([REMEDIATION], tmp_path)
    assert result.ok
    package = tmp_path / "remediation"
    assert (package / "tool_embeddings.npy").exists()
    ids = json.loads((package / "tool_embedding_ids.json").read_text("utf-8"))
    assert "production.deploy" in ids
    again = pipeline.build([REMEDIATION], tmp_path / "again")
    embedded = [k for k in result.files if "embedding" in k]
    assert embedded and all(again.files[k] == result.files[k] for k in embedded)


def test_a_build_runs_the_lints_and_their_warnings_do_not_stop_it(tmp_path: Path) -> None:
    spec = tmp_path / "lenient.harness"
    spec.write_text(
        "harness lenient {}\n"
        'tool t { summary "Reads a thing." use_when "A thing is needed." effects read }\n'
        "policy p {\n  default allow\n}\n",
        encoding="utf-8",
    )
    run = _cli("build", str(spec), "-o", str(tmp_path / "out"), "--no-embed")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "L005" in run.stderr
    assert (tmp_path / "out" / "lenient" / "model.json").exists()
    spec.write_text(
        spec.read_text("utf-8").replace(
            "default allow", "default allow  # harnessc: ignore[L005] on purpose"
        ),
        encoding="utf-8",
    )
    run = _cli("build", str(spec), "-o", str(tmp_path / "out"), "--no-embed")
    assert run.returncode == 0 and "L005" not in run.stderr, run.stderr


# -- the analysis is the pipeline's -----------------------------------------------------------


@pytest.mark.parametrize(
    ("requires", "runs"),
    [("", 1), ("requires connected(c)", 2)],
    ids=["no-availability", "availability"],
)
def test_a_build_runs_the_policy_analysis_as_often_as_its_stages_ask(
    requires: str, runs: int, tmp_path: Path
) -> None:
    # the check's analysis, then (only when a tool has availability conditions) the analysis
    # over available tools; planning runs none of its own
    from harnessc.compiler.analysis.policy import analyse_policies

    from .counting import count_calls

    spec = tmp_path / "counted.harness"
    spec.write_text(
        'harness counted { version "1" }\n'
        "connection c\n"
        f'tool t {{ summary "t" effects read input {{ n: int }} {requires} }}\n'
        "surface s { expose t }\n"
        "policy p {\n  default deny\n  first: allow t when args.n > 1\n}\n"
        "agent a { surface s\n policy p }\n",
        encoding="utf-8",
    )
    built, calls = count_calls(
        lambda: pipeline.build([spec], tmp_path / "out", embed=False), of=analyse_policies
    )
    assert built.ok and built.written is not None
    assert calls == runs


def test_a_workflow_diagram_labels_only_the_edges_its_when_reads(tmp_path: Path) -> None:
    """`when review == approve` labels the edge from `review`, not the edges of the steps the
    call only takes data from; a `when` that reads no step is written in the step's box; the
    docs name a decide step's deciders, timeout and default."""
    from harnessc.compiler.codegen.docs import workflow_diagram

    spec = tmp_path / "w.harness"
    spec.write_text(
        'tool t {\n  summary "t"\n  effects read\n  input { x: string? }\n'
        "  output { x: string }\n}\n"
        "policy p {\n  default allow\n}\n"
        "workflow w {\n  policy p\n  input { fast: bool }\n"
        "  step a = call t()\n"
        '  step review = decide "Go?" after a {\n'
        "    options go, stop  # harnessc: ignore[L101] stop ends the run\n"
        '    by role "security"\n    timeout 1h default stop\n  }\n'
        "  step b = call t(x: a.x) when review == go\n"
        "  step c = call t() after a when input.fast == true\n}\n",
        encoding="utf-8",
    )
    result = pipeline.check([spec])
    assert result.model is not None, result.diagnostics
    steps = result.model.workflows["w.w"].steps
    lines = workflow_diagram(steps)
    ids = {step.name: f"s{i}" for i, step in enumerate(steps)}
    assert f'{ids["review"]} -->|"review == go"| {ids["b"]}' in lines
    assert f"{ids['a']} --> {ids['b']}" in lines
    assert f'{ids["c"]}["c: call t when input.fast == true"]' in lines
    assert f"{ids['a']} --> {ids['c']}" in lines

    out = tmp_path / "out"
    assert main(["build", str(spec), "-o", str(out), "--no-embed", "-q"]) == 0
    page = next(out.rglob("docs/workflows.md")).read_text(encoding="utf-8")
    assert "decide: Go? (go, stop); by role `security`; timeout 1h; default `stop`" in page
    assert "1 workflow." in next(out.rglob("docs/README.md")).read_text(encoding="utf-8")
