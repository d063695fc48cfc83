"""The command line as a user runs it: outputs, files written, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harnessc.compiler import cli, pipeline
from harnessc.compiler.cli import main

MESSY = 'tool   change.create {summary "Create a change."; effects write;input{service:string}}\n'
CANONICAL = (
    "tool change.create {\n"
    '  summary "Create a change."\n'
    "  effects write\n"
    "  input { service: string }\n"
    "}\n"
)


def spec(tmp_path: Path, text: str, name: str = "spec.harness") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_check_clean_spec_exits_0(tmp_path: Path, capsys) -> None:
    assert main(["check", str(spec(tmp_path, CANONICAL))]) == 0
    assert "checked 1 file: no errors" in capsys.readouterr().err
    assert main(["check", "-q", str(spec(tmp_path, CANONICAL))]) == 0
    assert capsys.readouterr().err == ""


def test_fmt_rewrites_in_place(tmp_path: Path, capsys) -> None:
    path = spec(tmp_path, MESSY)
    assert main(["fmt", str(path)]) == 0
    assert path.read_text(encoding="utf-8") == CANONICAL
    assert "reformatted" in capsys.readouterr().out
    assert main(["fmt", str(path)]) == 0  # idempotent: nothing to do the second time
    assert "reformatted" not in capsys.readouterr().out


def test_fmt_check_lists_files_and_exits_1_without_writing(tmp_path: Path, capsys) -> None:
    messy, clean = spec(tmp_path, MESSY, "a.harness"), spec(tmp_path, CANONICAL, "b.harness")
    assert main(["fmt", "--check", str(messy), str(clean)]) == 1
    out = capsys.readouterr().out
    assert "would reformat" in out and "a.harness" in out and "b.harness" not in out
    assert messy.read_text(encoding="utf-8") == MESSY
    assert main(["fmt", "--check", str(clean)]) == 0


def test_fmt_diff_prints_a_unified_diff(tmp_path: Path, capsys) -> None:
    path = spec(tmp_path, MESSY)
    assert main(["fmt", "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("--- a/") and "+  effects write" in out
    assert path.read_text(encoding="utf-8") == MESSY


def test_fmt_refuses_a_file_with_syntax_errors(tmp_path: Path, capsys) -> None:
    path = spec(tmp_path, 'tool t {\n  sumary "x"\n}\n')
    assert main(["fmt", str(path)]) == 1
    assert "error[H106]" in capsys.readouterr().err
    assert path.read_text(encoding="utf-8") == 'tool t {\n  sumary "x"\n}\n'


def test_debug_tokens_and_tree(tmp_path: Path, capsys) -> None:
    path = spec(tmp_path, 'connection github "GitHub"  # linked\n')
    assert main(["debug", "tokens", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == '1:1\tCONNECTION\t"connection"'
    assert lines[1] == '1:12\tNAME\t"github"'
    assert lines[-1] == '1:29\tCOMMENT\t"# linked"'
    assert main(["debug", "tree", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Connection @1:1" in out and "text: 'github'" in out


def test_explain_by_code_and_slug(capsys) -> None:
    assert main(["explain", "H102"]) == 0
    assert capsys.readouterr().out.startswith("H102 unclosed-block (error)")
    assert main(["explain", "unknown-name"]) == 0
    assert capsys.readouterr().out.startswith("H201 unknown-name")
    assert main(["explain", "H1O2"]) == 2
    assert "unknown diagnostic code `H1O2`" in capsys.readouterr().err


def test_an_internal_error_is_a_diagnostic_not_a_traceback(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "check", broken)
    monkeypatch.delenv("HARNESSC_DEBUG", raising=False)
    assert cli.main(["check", str(spec(tmp_path, CANONICAL))]) == 1
    err = capsys.readouterr().err
    assert "error[H901]: internal error: RuntimeError: boom" in err
    assert "Traceback" not in err


def test_console_script_runs(tmp_path: Path) -> None:
    path = spec(tmp_path, CANONICAL)
    done = subprocess.run(
        [sys.executable, "-m", "harnessc.compiler", "check", "--format", "json", str(path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_debug_model_prints_the_typed_model_as_canonical_json(tmp_path: Path, capsys) -> None:
    path = spec(tmp_path, CANONICAL)
    assert main(["debug", "model", str(path)]) == 0
    out = capsys.readouterr().out
    model = json.loads(out)
    assert model["tools"]["change.create"]["summary"] == "Create a change."
    assert (
        out == json.dumps(model, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    )
    broken = spec(tmp_path, "tool t {\n", "broken.harness")
    assert main(["debug", "model", str(broken)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "error[H102]" in captured.err


WORKFLOW = """\
harness w { version "1" }
import "./lib.harness" as lib
tool a.run { summary "Run."; effects read }
policy open { default allow }
workflow build {
  policy open
  step first = call a.run()
  step second = call lib.x() after first { on_failure compensate undo }
  step undo = call a.run() compensation
}
"""


def test_debug_graph_prints_the_import_graph_and_each_workflow_dag(tmp_path: Path, capsys) -> None:
    spec(tmp_path, 'tool lib.x {\n  summary "X."\n  effects read\n}\n', "lib.harness")
    path = spec(tmp_path, WORKFLOW)
    assert main(["debug", "graph", str(path)]) == 0
    assert capsys.readouterr().out == (
        "modules:\n  w -> lib\n\n"
        "workflow w.build:\n  undo\n  <entry> -> first\n  first -> second\n"
        "  compensation: undo\n"
    )
    assert main(["debug", "graph", "--dot", str(path)]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith('digraph "modules" {\n  "w" -> "lib";\n}\n')
    assert '  "undo" [style=dashed];\n  "<entry>" -> "first";\n' in dot


def test_version_and_help_load_no_stage() -> None:
    """`harnessc --version` and `--help` start at once: they import neither the parser (lark),
    the solver (z3), the models (pydantic) nor the templates (jinja2)."""
    program = (
        "import sys\n"
        "from harnessc.compiler.cli import main\n"
        "for argv in (['--version'], ['--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('lark', 'z3', 'pydantic', 'jinja2', 'networkx', 'numpy')\n"
        "               if m in sys.modules)\n"
        "print('loaded:', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stderr, done.stderr


def test_check_after_an_edit_loads_only_the_stages_it_runs(tmp_path: Path) -> None:
    """`check` of a spec whose workflow graphs and analysis answers are cached (the first check
    after an edit) loads neither the lint rules, the runtime's engine, networkx nor z3, and
    builds no validator of the model (lowering has checked every value it builds)."""
    example = Path(__file__).resolve().parent.parent / "examples" / "remediation"
    program = (
        "import sys\n"
        "from harnessc.compiler.cli import main\n"
        f"code = main(['check', '-q', '--no-cache', {str(example / 'remediation.harness')!r}])\n"
        "heavy = ('harnessc.compiler.lints', 'harnessc.compiler.analysis.availability',\n"
        "         'harnessc.runtime.judge.policy', 'harnessc.runtime.judge.history',\n"
        "         'networkx', 'z3')\n"
        "from harnessc.runtime.model.ir import _Model, _models\n"
        "built = [c.__name__ for c in _models(_Model) if c.__pydantic_complete__]\n"
        "print(code, sorted(m for m in heavy if m in sys.modules), built)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-home")}
    env.pop("HARNESSC_CACHE_DIR", None)
    runs = [
        subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True
        ).stdout
        for _ in range(2)
    ]
    assert "networkx" in runs[0] and "z3" in runs[0]  # the first run answers and caches
    assert runs[1] == "0 [] []\n"
