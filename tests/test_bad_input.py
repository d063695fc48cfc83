"""Bad files and bad text get diagnostics and exit codes, never a traceback; bad calls at run
time (a tool name that is not a string, malformed execution parameters) get a structured
refusal, recorded as a `call.refused` event, never an exception."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler.cli import main
from harnessc.compiler.pipeline import check
from harnessc.dsl.parser import parse_source
from harnessc.dsl.render_formats import render
from harnessc.dsl.source import Source
from harnessc.runtime import Harness, PendingCall, Refusal
from harnessc.runtime.judge.availability import Facts
from harnessc.runtime.judge.normalize import REFUSAL_CODES, is_text
from harnessc.runtime.model import Spec
from harnessc.runtime.model.canonical import Execution
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .budget import examples
from .conftest import ROOT

EXAMPLE = (ROOT / "examples" / "remediation" / "remediation.harness").read_text(encoding="utf-8")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["check", "--format", "plain", *argv])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return code, output


@pytest.mark.parametrize(
    ("content", "code", "expected"),
    [
        (b"", 1, "error[H006]: `bad.harness` declares nothing"),
        (b"# only a comment\n", 1, "error[H006]"),
        (b'tool t {\n  summary "caf\xe9"\n}\n', 1, "error[H003]: `bad.harness` is not valid"),
        (b"tool t {\x00}\n", 1, "error[H004]: `bad.harness` contains a NUL byte"),
        (b'tool t {\n  summary "never closed\n}\n', 1, "error[H103]: unterminated string"),
        (b"policy p { allow t when " + b"(" * 10_000 + b"x" + b")" * 10_000 + b" }", 1,
         "error[H108]: brackets nest more than 64 levels deep"),
        (b"\xef\xbb\xbfconnection github\n", 0, ""),
    ],
    ids=["empty", "comments-only", "not-utf8", "nul", "unterminated", "deep", "bom"],
)  # fmt: skip
def test_bad_files(tmp_path: Path, capsys, content: bytes, code: int, expected: str) -> None:
    path = tmp_path / "bad.harness"
    path.write_bytes(content)
    exit_code, output = run(capsys, str(path))
    assert exit_code == code
    assert expected in output.replace(str(path), "bad.harness")


def test_missing_file_and_directory_are_io_errors(tmp_path: Path, capsys) -> None:
    code, output = run(capsys, str(tmp_path / "nope.harness"))
    assert code == 2
    assert "error[H001]: no such file" in output
    code, output = run(capsys, str(tmp_path))
    assert code == 2
    assert "is a directory, not a file" in output


def test_ten_megabyte_file_is_refused_quickly(tmp_path: Path, capsys) -> None:
    path = tmp_path / "huge.harness"
    line = b'connection c "padding padding padding padding padding padding padding"\n'
    path.write_bytes(line * (10 * 1024 * 1024 // len(line) + 1))
    code, output = run(capsys, str(path))
    assert code == 1
    assert "error[H005]" in output and "over the 8 MiB limit" in output


def test_a_build_that_cannot_write_its_package_says_where(tmp_path: Path, capsys) -> None:
    spec = ROOT / "examples" / "remediation" / "remediation.harness"
    out = tmp_path / "out"
    out.write_text("a file where the package's folder should be", encoding="utf-8")
    code = main(["build", "--no-embed", "--format", "plain", str(spec), "-o", str(out)])
    captured = capsys.readouterr()
    output = (captured.out + captured.err).replace(str(tmp_path), "TMP")
    assert code == 2
    assert "Traceback" not in output and "H901" not in output
    assert "error[H008]: cannot write `TMP/out/remediation`: not a directory" in output
    assert out.read_text(encoding="utf-8") == "a file where the package's folder should be"


def test_usage_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


_ENGINEERS = '  engineers_create: allow change.create when actor.role in ["engineer", "sre"]\n'


def _with_condition(condition: str) -> str:
    """The remediation example with one more rule: `deep: deny change.create when
    CONDITION { reason "deep" }`."""
    assert _ENGINEERS in EXAMPLE
    rule = f'  deep: deny change.create when {condition} {{ reason "deep" }}\n'
    return EXAMPLE.replace(_ENGINEERS, _ENGINEERS + rule)


@pytest.mark.parametrize(
    ("condition", "word"),
    [
        # far past the recursion limit, and under a condition's 10,000 nodes (H012)
        ("not " * 5_000 + 'actor.role == "x"', "not"),
        ("".join(f"all x{i} in args.tags: " for i in range(2_000)) + 'actor.role == "x"', "all"),
        ("(not " * 40 + "not " * 25 + 'actor.role == "x"' + ")" * 40, "not"),
    ],
    ids=["not-chain", "quantifier-chain", "not-inside-brackets"],
)
def test_nots_and_quantifiers_nest_at_most_64_deep(
    tmp_path: Path, capsys, condition: str, word: str
) -> None:
    # they nest without brackets: a long chain used to reach the compiler's recursive
    # stages and come back as an internal error (H901)
    path = tmp_path / "deep.harness"
    path.write_text(_with_condition(condition), encoding="utf-8")
    code, output = run(capsys, str(path))
    assert code == 1
    assert "error[H108]: `not`s and quantifiers nest more than 64 levels deep" in output
    assert "level 65 starts here" in output
    assert "H901" not in output
    [diagnostic] = parse_source(Source("deep.harness", _with_condition(condition))).diagnostics
    assert diagnostic.primary.span.text == word


def test_a_message_quotes_a_long_expression_by_its_ends(tmp_path: Path, capsys) -> None:
    # the caret line shows where it is; the message itself stays one readable line
    expression = "count(change.* when " * 30 + 'actor.role == "x"' + ")" * 30
    path = tmp_path / "long.harness"
    path.write_text(_with_condition(expression), encoding="utf-8")
    code, output = run(capsys, str(path))
    assert code == 1
    messages = [line for line in output.splitlines() if line.startswith("error[H325]")]
    assert "`count(change.* when count(change.* when …" in messages[0]
    assert messages and all(len(message) < 160 for message in messages)


def test_a_path_longer_than_the_file_system_allows(tmp_path: Path, capsys) -> None:
    # a path of 3,000 folders: H007 with the reason in words and the path by its ends
    path = tmp_path.joinpath(*["d"] * 3000, "spec.harness")
    code, output = run(capsys, str(path))
    assert code == 2  # the input could not be read
    [message] = [line for line in output.splitlines() if line.startswith("error[H007]")]
    assert message.endswith("spec.harness`: the path is longer than the file system allows")
    assert "…" in message and len(message) < 200


def test_64_nots_inside_61_brackets_compile_and_decide(tmp_path: Path, capsys) -> None:
    """The deepest condition the limits allow goes through every stage (check, format, build)
    and decides as the same condition written plainly."""
    scanner = ROOT / "examples" / "remediation" / "scanner.harness"
    (tmp_path / "scanner.harness").write_text(scanner.read_text(encoding="utf-8"), "utf-8")
    deep = tmp_path / "deep.harness"
    deep.write_text(
        _with_condition("(" * 61 + "not " * 64 + 'actor.role == "x"' + ")" * 61), "utf-8"
    )
    plain = tmp_path / "plain.harness"
    plain.write_text(_with_condition('actor.role == "x"'), "utf-8")
    assert run(capsys, str(deep)) == (0, "checked 1 file: no errors\n")
    assert main(["fmt", str(deep)]) == 0
    assert main(["build", str(deep), "-o", str(tmp_path / "out")]) == 0
    output = capsys.readouterr()
    assert "Traceback" not in output.out + output.err

    args = {
        "service": "api",
        "patch_ref": "artifacts/p.patch",
        "evidence_refs": ["r"],
        "rollback_plan": "revert",
    }
    decided = {}
    for path in (deep, plain):
        result = check([path])
        assert result.ok and result.model is not None
        h = Harness(result.model)
        for role in ("x", "engineer", "auditor"):
            facts = Facts.of({}, connected={"change_platform"})
            s = h.session("planner", actor={"user": "u", "role": role}, facts=facts)
            call = s.normalize("change.create", f"c-{role}", args)
            assert isinstance(call, PendingCall)
            d = s.decide(call)
            decided[path.name, role] = (d.effect, d.rule)
    for role in ("x", "engineer", "auditor"):
        assert decided["deep.harness", role] == decided["plain.harness", role]
    assert decided["deep.harness", "x"] == ("deny", "remediation.deep")
    assert decided["deep.harness", "engineer"][0] != "deny"


def test_several_errors_in_one_file_are_all_reported() -> None:
    text = (
        "tool a {\n  summary 1\n}\n"
        "tool b {\n  effects read\n}\n"
        "tool c {\n  risk\n}\n"
        "policy p {\n  allow a when args.x = 1\n}\n"
    )
    result = parse_source(Source("multi.harness", text))
    assert [(d.code, d.primary.span.line) for d in result.diagnostics] == [
        ("H101", 2),
        ("H101", 9),
        ("H107", 11),
    ]


def test_json_output_is_machine_readable(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.harness"
    path.write_text('tool t {\n  sumary "x"\n}\n', encoding="utf-8")
    code = main(["check", "--format", "json", str(path)])
    out = capsys.readouterr().out
    assert code == 1
    [diagnostic] = json.loads(out)
    assert diagnostic["code"] == "H106"
    assert diagnostic["slug"] == "unknown-keyword"
    assert diagnostic["help"] == "did you mean `summary`?"
    assert diagnostic["labels"][0]["start"] == {"line": 2, "column": 3, "offset": 11}
    assert diagnostic["labels"][0]["text"] == "sumary"


def test_human_output_is_capped(tmp_path: Path) -> None:
    text = "".join(f'tool t{i} {{\n  risk "x"\n}}\n' for i in range(15))
    result = parse_source(Source("many.harness", text))
    assert len(result.diagnostics) == 15
    rendered = render(result.diagnostics, "plain")
    assert rendered.count("error[H101]") == 10
    assert "... and 5 more diagnostics" in rendered


_ALPHABET = st.sampled_from(
    [*'{}()[]<>=!,;:."#*?\n \t-_0123456789', "tool", "policy", "allow", "when", "and",
     "args.x", "mcp:a:tool:b", "step", "=", "==", "30s", '"s"', "\\", "é", "\x00", "\x01"]
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_random_text_gives_a_module_or_diagnostics(text: str) -> None:
    result = parse_source(Source("fuzz.harness", text))
    for diagnostic in result.diagnostics:
        assert diagnostic.code.startswith("H")
        render([diagnostic], "human")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_example_gives_a_module_or_diagnostics(data: st.DataObject) -> None:
    text = EXAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete":
            end = data.draw(st.integers(pos, min(len(text), pos + 20)))
            text = text[:pos] + text[end:]
        elif op == "insert":
            text = text[:pos] + data.draw(_ALPHABET) + text[pos:]
        else:
            end = data.draw(st.integers(pos, min(len(text), pos + 40)))
            text = text[:end] + text[pos:end] + text[end:]
    result = parse_source(Source("mutated.harness", text))
    render(result.diagnostics, "human")


# ---------------------------------------------------------------------------------------------
# Bad calls at run time

RUNTIME_SPEC = """
harness h { version "1.0.0" }
tool shell.run { summary "Run a command."; effects write; input { cmd: string } }
policy p { default deny; allow shell.run }
surface s { expose shell.* }
agent a { surface s; policy p }
"""


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    path = tmp_path_factory.mktemp("shell") / "h.harness"
    path.write_text(RUNTIME_SPEC, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None
    return result.model


def refused_events(h: Harness) -> list[dict[str, Any]]:
    return [e.payload for e in h.store.read() if e.type == "call.refused"]


@pytest.mark.parametrize(
    ("tool", "call_id", "args", "code", "message"),
    [
        (None, "c-1", {}, "unknown-tool", "names its tool with a non-empty string, not null"),
        (5, "c-1", {}, "unknown-tool", "names its tool with a non-empty string, not a number"),
        ("", "c-1", {}, "unknown-tool", "not an empty one"),
        (["shell.run"], "c-1", {}, "unknown-tool", "not a list"),
        ("shell.run", None, {}, "invalid-args", "needs a non-empty `tool_call_id`, not null"),
        ("shell.run", 7, {}, "invalid-args", "`tool_call_id`, not a number"),
        ("shell.run", "c-1", 5, "invalid-args", "expected an object, got a number at `$`"),
        ("shell.run", "c-1", ["ls"], "invalid-args", "expected an object, got a list at `$`"),
    ],
    ids=["tool-none", "tool-int", "tool-empty", "tool-list", "id-none", "id-int", "args-int",
         "args-list"],
)  # fmt: skip
def test_normalize_refuses_parameters_of_the_wrong_type(
    shell: Spec, tool: Any, call_id: Any, args: Any, code: str, message: str
) -> None:
    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize(tool, call_id, args)
    assert isinstance(refused, Refusal)
    assert refused.code == code
    assert message in refused.message
    assert [e["code"] for e in refused_events(h)] == [code]


@pytest.mark.parametrize(
    ("tool", "call_id", "args", "code"),
    [
        ("\ud800", "c-1", {"cmd": "ls"}, "unknown-tool"),
        ("shell.run", "c-\ud800", {"cmd": "ls"}, "invalid-args"),
        ("shell.run", "c-1", {"cmd": 5, "\ud800": 1}, "invalid-args"),
        ("shell.run", "c-1", {"cmd": "\ud800"}, "invalid-execution"),
    ],
    ids=["tool", "tool-call-id", "args-error", "args-value"],
)
def test_a_lone_surrogate_is_refused_and_recorded_escaped(
    shell: Spec, tool: str, call_id: str, args: dict[str, Any], code: str
) -> None:
    """A lone surrogate is not text (no UTF-8, no JSON): the call is refused and the event
    shows its escape instead of failing to be written."""
    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize(tool, call_id, args)
    assert isinstance(refused, Refusal) and refused.code == code
    [event] = refused_events(h)
    assert event["code"] == code
    if code != "invalid-execution":  # its message names no argument
        assert "\\\\ud800" in json.dumps(event)


@pytest.mark.parametrize(
    ("execution", "path", "message"),
    [
        ("--cwd=/", "$.execution", "given as `Execution(...)`, not a string"),
        ({"cwd": "/repo"}, "$.execution", "not an object"),
        (Execution(env={"A": 1}), "$.execution.env.A", "`A` needs a string value, not a number"),
        (Execution(env={1: "x"}), "$.execution.env", "name is a non-empty string"),
        (Execution(env={"A=B": "x"}), "$.execution.env", "without `=`"),
        (Execution(env={"A": "x\0y"}), "$.execution.env.A", "`A` holds a NUL byte"),
        (Execution(env=["A"]), "$.execution.env", "env maps names to strings, not a list"),  # type: ignore[arg-type]
        (Execution(timeout_ms=-5), "$.execution.timeout_ms", "at least 1 ms, not -5"),
        (Execution(timeout_ms=0), "$.execution.timeout_ms", "at least 1 ms, not 0"),
        (Execution(timeout_ms=True), "$.execution.timeout_ms", "not a boolean"),
        (Execution(timeout_ms=1.5), "$.execution.timeout_ms", "not a number"),  # type: ignore[arg-type]
        (Execution(timeout_ms=2**31), "$.execution.timeout_ms", "at most 2147483647 ms"),
        (Execution(timeout_ms=10**30), "$.execution.timeout_ms", "at most 2147483647 ms"),
        (Execution(cwd="/repo\0/x"), "$.execution.cwd", "the cwd holds a NUL byte"),
        (Execution(cwd="../../etc"), "$.execution.cwd", "`../../etc` climbs above its start"),
        (Execution(cwd="src/../../etc"), "$.execution.cwd", "climbs above its start"),
        (Execution(cwd="/../etc"), "$.execution.cwd", "climbs above its start"),
        (Execution(cwd=""), "$.execution.cwd", "the cwd is empty"),
        (Execution(command="ls\0-la"), "$.execution.command", "a command holds a NUL byte"),
        (Execution(command=("ls", "a\0b")), "$.execution.command[1]", "holds a NUL byte"),
        (Execution(command=()), "$.execution.command", "needs at least the program"),
        (Execution(command=("ls", 3)), "$.execution.command[1]", "not a number"),  # type: ignore[arg-type]
        (Execution(target=5), "$.execution.target", "the target is a string, not a number"),  # type: ignore[arg-type]
    ],
)  # fmt: skip
def test_malformed_execution_parameters_are_refused(
    shell: Spec, execution: Any, path: str, message: str
) -> None:
    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize("shell.run", "c-1", {"cmd": "ls"}, execution=execution)
    assert isinstance(refused, Refusal), refused
    assert refused.code == "invalid-execution"
    assert message in refused.message
    assert refused.path == path
    assert [e["code"] for e in refused_events(h)] == ["invalid-execution"]
    assert not any(e.type == "action.transition" for e in h.store.read())


@pytest.mark.parametrize(
    ("cwd", "runs_in"),
    [("/repo/./src/../lib", "/repo/lib"), ("/repo/../etc", "/etc"), ("sub/./dir/", "sub/dir"),
     ("a/../b", "b"), (".", ".")],
)  # fmt: skip
def test_a_cwd_is_normalized_like_a_path_argument(shell: Spec, cwd: str, runs_in: str) -> None:
    """The executor runs in the directory policy judged: `.` and `..` resolved, a relative cwd
    relative to the executor's working directory."""
    h = Harness(shell)
    seen: list[str | None] = []
    h.implement("shell.run")(lambda args, ctx: seen.append(ctx.pending.execution.cwd) or {})
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"}, execution=Execution(cwd=cwd))
    assert isinstance(call, PendingCall), call
    assert call.execution.cwd == runs_in
    s.decide(call)
    assert s.invoke(call).ok
    assert seen == [runs_in]


def test_execution_parameters_at_their_bounds_are_accepted(shell: Spec) -> None:
    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    for i, execution in enumerate(
        [
            Execution(timeout_ms=1),
            Execution(timeout_ms=2**31 - 1),
            Execution(command=["ls", "-la"], env={}, cwd="/", target="host-1"),
            Execution(env={"TOKEN": "s3cret", "EMPTY": ""}),
        ]
    ):
        assert isinstance(
            s.normalize("shell.run", f"c-{i}", {"cmd": "ls"}, execution=execution), PendingCall
        )


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.text(st.characters(categories=["Cs", "Lu", "Cc"]), max_size=4),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), st.integers(), max_size=3),
    st.builds(object),
)
EXECUTION_JUNK = st.one_of(
    JUNK,
    st.builds(
        Execution,
        command=st.one_of(st.none(), JUNK, st.lists(JUNK, max_size=3).map(tuple)),
        cwd=JUNK,
        env=st.one_of(
            st.none(), JUNK, st.dictionaries(JUNK.filter(lambda k: _hashable(k)), JUNK, max_size=3)
        ),
        timeout_ms=JUNK,
        target=JUNK,
    ),
)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    tool=st.one_of(JUNK, st.just("shell.run")),
    call_id=st.one_of(JUNK, st.just("c-1")),
    args=st.one_of(JUNK, st.just({"cmd": "ls"})),
    execution=st.one_of(st.none(), EXECUTION_JUNK),
)
@example(tool="shell.run", call_id="0", args={"cmd": "ls"}, execution=None)
def test_junk_for_any_parameter_of_normalize_is_refused_never_raised(
    shell: Spec, tool: Any, call_id: Any, args: Any, execution: Any
) -> None:
    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    result = s.normalize(tool, call_id, args, execution=execution)
    if isinstance(result, PendingCall):
        # junk may happen to be a good call id ("0" is one): any non-empty text is
        assert tool == "shell.run"
        assert isinstance(call_id, str) and call_id and is_text(call_id)
        assert args == {"cmd": "ls"}
        return
    assert isinstance(result, Refusal) and result.code in REFUSAL_CODES
    assert result.message
    assert [e["code"] for e in refused_events(h)] == [result.code]


# ---------------------------------------------------------------------------------------------
# Regular expressions an agent's text runs through: linear time, one meaning

_PATTERNS = """\
harness patterns { version "1.0.0" }
tool note.write {
  summary "Write a note."
  use_when "A note is needed."
  effects write reversible
  input {
    title: string pattern "^(a+)+$"
    slug: string pattern "^[a-z]+$"
    body: string
  }
  output { ok: bool }
}
surface tools { expose note.* }
policy p {
  default allow
  deny note.write when args.body matches "^(x+x+)+y$" { reason "no" }
}
agent writer {
  surface tools
  policy p
}
"""


@pytest.fixture
def patterns(tmp_path: Path) -> Spec:
    path = tmp_path / "patterns.harness"
    path.write_text(_PATTERNS, encoding="utf-8")
    result = check([path])
    assert result.ok and result.model is not None
    return result.model


_ADVERSARIAL = """\
import json, sys
from harnessc.runtime import Harness, PendingCall
from harnessc.runtime.model import Spec

spec = Spec.from_json(open(sys.argv[1], "rb").read())
s = Harness(spec).session("writer", actor={"user": "u"})
out = []
for n, args in enumerate(json.loads(sys.stdin.read())):
    call = s.normalize("note.write", f"c-{n}", args)
    out.append(s.decide(call).effect if isinstance(call, PendingCall) else call.code)
print(json.dumps(out))
"""


def test_a_pattern_takes_linear_time_on_any_text(patterns: Spec, tmp_path: Path) -> None:
    # Python's backtracking `re` takes seconds on 24 characters here, twice as long for each
    # one more, and cannot be interrupted: the calls run in a child process, given 60 s
    model = tmp_path / "model.json"
    model.write_text(patterns.to_json(), encoding="utf-8")
    calls = [
        {"title": "a" * 60 + "!", "slug": "x", "body": ""},  # `^(a+)+$`
        {"title": "a" * 100_000, "slug": "x", "body": "x" * 60},  # `^(x+x+)+y$`
        {"title": "aa", "slug": "x", "body": "x" * 100_000 + "y"},
    ]
    run = subprocess.run(
        [sys.executable, "-c", _ADVERSARIAL, str(model)],
        input=json.dumps(calls),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == ["invalid-args", "allow", "deny"]


def test_dollar_is_the_end_of_the_text(patterns: Spec) -> None:
    # Python's `$` also matches before a final newline: `^[a-z]+$` let "abc\n" through
    s = Harness(patterns).session("writer", actor={"user": "u"})
    refused = s.normalize("note.write", "c-1", {"title": "a", "slug": "abc\n", "body": ""})
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"
    assert isinstance(
        s.normalize("note.write", "c-2", {"title": "a", "slug": "abc", "body": ""}), PendingCall
    )


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"^(a)\\1$", "invalid escape sequence: \\1"),
        ("^a(?=b)", "invalid perl operator: (?="),
        ("^a(?<!b)", "invalid perl operator: (?<!"),
        ("^a++$", "bad repetition operator: ++"),
        (r"^a\\Z", "invalid escape sequence: \\Z"),
        ("^a{1001}$", "invalid repetition size: {1001}"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused(tmp_path: Path, pattern: str, reason: str) -> None:
    text = _PATTERNS.replace('"^(x+x+)+y$"', f'"{pattern}"')
    path = tmp_path / "patterns.harness"
    path.write_text(text, encoding="utf-8")
    [diagnostic] = check([path]).diagnostics
    assert diagnostic.code == "H306"
    assert diagnostic.message.startswith("unsupported regular expression")
    assert diagnostic.primary.message == reason


def test_a_model_with_a_pattern_re2_cannot_run_lets_no_value_through(patterns: Spec) -> None:
    # a model not built by the compiler (which refuses such a pattern): the field fails closed
    data = json.loads(patterns.to_json())
    data["tools"]["note.write"]["input"]["fields"][1]["pattern"] = r"^(a)\1$"
    s = Harness(Spec.model_validate(data)).session("writer", actor={"user": "u"})
    refused = s.normalize("note.write", "c-1", {"title": "a", "slug": "aa", "body": ""})
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"


# ---------------------------------------------------------------------------------------------
# An agent's call at its extremes: refused, never raised, and no secret reaches the log


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    from .test_approvals import SHELL, compile_text  # shell.run's `token` is secret

    return compile_text(tmp_path_factory.mktemp("guarded"), SHELL)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


def test_a_secret_sent_as_an_unknown_key_never_reaches_the_log(guarded: Spec) -> None:
    # the refusal's path named the key whole: `$.hunter2-…`, in its message and its event
    secret = "hunter2-hunter2-hunter2"
    h = Harness(guarded)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize("shell.run", "c-1", {"cmd": "ls", "token": secret, secret: 1})
    assert isinstance(refused, Refusal) and refused.code == "invalid-args"
    assert "unknown field" in refused.message
    assert secret not in f"{refused.message} {refused.path} {refused.errors}"
    assert not any(secret in e.payload_json for e in h.store.read())


def test_a_secret_nested_past_recursion_or_holding_itself_is_refused(guarded: Spec) -> None:
    looped: dict[str, Any] = {}
    looped["self"] = looped
    h = Harness(guarded)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    for n, token in enumerate((_nested(10_000), looped, 10**5000)):
        refused = s.normalize("shell.run", f"c-{n}", {"cmd": "ls", "token": token})
        assert isinstance(refused, Refusal) and refused.code == "invalid-args", refused


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"cmd": ' + "1" * 5000 + "}", "an integer of 5,000 digits is not a JSON number"),
        ('{"cmd": ' + "[" * 100_000 + "]" * 100_000 + "}", "it nests too deeply"),
        ('{"cmd": 1e400}', "`1e400` is beyond the largest JSON number"),
    ],
    ids=["5000-digits", "nested", "1e400"],
)
def test_arguments_json_cannot_hold_refuse_that_call_only(
    guarded: Spec, arguments: str, reason: str
) -> None:
    from harnessc.runtime import FunctionCalling

    offered = FunctionCalling([guarded.tools["shell.run"], guarded.tools["shell.peek"]])
    calls = [
        {"id": "call-1", "type": "function", "function": {"name": "shell_run", "arguments": a}}
        for a in (arguments, '{"cmd": "ls"}')
    ]
    calls[1]["id"] = "call-2"
    read = offered.read_openai({"choices": [{"message": {"tool_calls": calls}}]})
    refused, kept = read
    assert isinstance(refused, Refusal) and reason in refused.message
    assert not isinstance(kept, Refusal) and kept.tool_call_id == "call-2"


def test_an_unknown_tool_name_of_megabytes_is_refused(guarded: Spec) -> None:
    from harnessc.runtime.judge.normalize import near_name

    name = "shell.runn" + "x" * 5_000_000  # too long for any "did you mean"
    assert near_name(name, guarded.tools) is None
    assert near_name("shell.runn", guarded.tools) == "shell.run"
    h = Harness(guarded)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize(name, "c" * 1_000_000, {"cmd": "ls"})
    assert isinstance(refused, Refusal) and refused.code == "unknown-tool"
    assert "did you mean" not in refused.message
    # the message (sent back to the model) and the event quote the name by its two ends
    assert refused.tool == name and len(refused.message) < 1_000
    assert "shell.runnxxx" in refused.message and "(5,000,010 characters)" in refused.message
    [event] = refused_events(h)
    assert len(json.dumps(event)) < 2_000
    assert event["tool"].endswith("(5,000,010 characters)")
    assert event["tool_call_id"].endswith("(1,000,000 characters)")
    from harnessc.runtime import FunctionCalling

    offered = FunctionCalling([guarded.tools["shell.run"]])
    call = {"id": "call-1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    [read] = offered.read_openai({"choices": [{"message": {"tool_calls": [call]}}]})
    assert isinstance(read, Refusal) and len(read.message) < 1_000


def test_why_reads_its_json_flags_as_the_runtime_reads_arguments(capsys) -> None:
    spec = str(ROOT / "examples" / "remediation" / "remediation.harness")
    for text in ('{"n": ' + "1" * 5000 + "}", "[" * 100_000 + "]" * 100_000):
        argv = ["why", spec, "--agent", "incident_planner", "--tool", "production.deploy"]
        assert main([*argv, "--args", text]) == 2
        output = capsys.readouterr()
        assert "--args is not valid JSON" in output.err and "H901" not in output.err


def test_a_refusal_lists_the_first_hundred_violations_and_counts_the_rest(shell: Spec) -> None:
    # a million unknown fields were each recorded: a 44 MB `call.refused` event
    from harnessc.runtime.judge.normalize import MAX_ERRORS

    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize("shell.run", "c-1", {"cmd": "ls", **{f"k{i}": i for i in range(5000)}})
    assert isinstance(refused, Refusal) and refused.message.endswith("(and 4999 more)")
    assert len(refused.errors) == MAX_ERRORS == 100
    [event] = refused_events(h)
    assert len(event["errors"]) == MAX_ERRORS


def test_an_application_passing_a_refusal_or_none_for_a_call_is_told_so(shell: Spec) -> None:
    # `decide(None)`, `invoke(refusal)` raised AttributeError from inside the runtime
    import asyncio

    h = Harness(shell)
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    refused = s.normalize("no.such", "c-1", {})
    assert isinstance(refused, Refusal)
    for call, method in (
        (lambda v: s.decide(v), "decide"),
        (lambda v: s.invoke(v), "invoke"),
        (lambda v: asyncio.run(s.ainvoke(v)), "ainvoke"),
        (lambda v: s.request_approval(v), "request_approval"),
    ):
        with pytest.raises(TypeError, match=f"`{method}` takes the PendingCall .* a Refusal"):
            call(refused)
        with pytest.raises(TypeError, match="not `NoneType`"):
            call(None)


def test_an_approver_that_is_not_an_actor_is_told_so(guarded: Spec) -> None:
    h = Harness(guarded)
    s = h.session("a", actor={"user": "u-1", "role": "dev"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"})
    assert not isinstance(call, Refusal)
    rid = s.request_approval(call).request_id
    for answer, method in (
        (lambda by: h.approve(rid, by=by), "approve"),
        (lambda by: h.deny(rid, by=by, reason="no"), "deny"),
        (lambda by: h.approve_with_edits(rid, {"cmd": "df"}, by=by), "approve_with_edits"),
    ):
        for by in (None, "u-ops"):
            with pytest.raises(TypeError, match=f"`{method}` takes `by`, the approver"):
                answer(by)
    assert h.approvals.get(rid).status == "pending"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_session_takes_no_id_of_the_runtimes_own_records_nor_a_recorded_sessions(
    guarded: Spec, tmp_path: Path, kind: str
) -> None:
    # a session opened as `approval:<a pending request>` wrote into that request's claim, so
    # the request could never be answered ("already answered by someone else"); one opened
    # with a recorded session's id mixed two sessions in one stream; an id that is no text
    # failed with "an event needs a non-empty stream"
    from harnessc.runtime import HarnessError, MemoryStore, SQLiteStore

    def store() -> Any:
        return MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "log.db")

    h = Harness(guarded, store=store())
    s = h.session("a", actor={"user": "u-1"}, task="t-1")
    call = s.normalize("shell.run", "c-1", {"cmd": "ls"})
    assert isinstance(call, PendingCall)
    request = s.request_approval(call).request_id
    before = len(h.store.read())
    refused = {
        f"approval:{request}": "reserved-session-id",
        "grant:grt-1": "reserved-session-id",
        "workflow:wf-1/s1#1": "reserved-session-id",
        "harness": "reserved-session-id",
        s.id: "session-exists",
        "x" * 257: "invalid-session-id",
        "a\nforged line": "invalid-session-id",
        "lone \ud800": "invalid-session-id",
        12: "invalid-session-id",
        "": "invalid-session-id",  # names no session an operator could find
    }
    for sid, code in refused.items():
        with pytest.raises(HarnessError) as err:
            h.session("a", actor={"user": "u-2"}, session_id=sid)  # type: ignore[arg-type]
        assert err.value.code == code, sid
    assert len(h.store.read()) == before  # nothing written
    assert h.approve(request, by={"user": "u-ops", "role": "ops"}).status == "approved"
    assert h.session("a", actor={"user": "u-2"}, session_id="team-a/run 1 é").id == "team-a/run 1 é"
    if kind == "sqlite":  # a session another process recorded: its stream is taken there too
        other = Harness(guarded, store=store())
        with pytest.raises(HarnessError) as err:
            other.session("a", actor={"user": "u-3"}, session_id="team-a/run 1 é")
        assert err.value.code == "session-exists"


def test_a_session_opened_with_arguments_of_the_wrong_kind_is_told_which(guarded: Spec) -> None:
    # each failed inside with a message about dictionaries or iteration
    h = Harness(guarded)
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"actor": ["u-1"]},
            "a session's actor: a mapping (user, role, roles, tenant), not a list",
        ),
        # every call is recorded as its actor's: `{}` when no one is known, never None
        ({"actor": None}, "a session's actor: a mapping (user, role, roles, tenant), not None"),
        ({"actor": {"user": 7}}, "a session's actor.user: text, not a int"),
        ({"actor": {"user": None}}, "a session's actor.user: text, not None"),
        ({"task": 5}, "a session's task: an id or a mapping, not a int"),
        ({"facts": [1]}, "a session's facts: a `Facts` or a mapping"),
        ({"resource": "r"}, "a session's resource: a mapping, not a str"),
        ({"env": ("a", 1)}, "a session's env: a mapping, not a tuple"),
        ({"said": 5}, "a session's said: the user's messages (texts), not a int"),
    ]
    for options, message in cases:
        with pytest.raises(TypeError) as err:
            h.session("a", **{"actor": {"user": "u-1"}, **options})
        assert str(err.value).startswith(message), options
    assert not h.store.read()  # nothing opened
    s = h.session("a", actor={"user": "u-1"})
    for query in (None, 5, b"deploy"):
        with pytest.raises(TypeError, match="`expose` takes the request's text"):
            s.expose(query)  # type: ignore[arg-type]
