"""Bad files and bad text get diagnostics and exit codes, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.dsl.diagnostics import render
from harnessc.dsl.parser import parse_source
from harnessc.dsl.source import Source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def test_usage_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=60).map("".join))
def test_random_text_gives_a_module_or_diagnostics(text: str) -> None:
    result = parse_source(Source("fuzz.harness", text))
    for diagnostic in result.diagnostics:
        assert diagnostic.code.startswith("H")
        render([diagnostic], "human")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
