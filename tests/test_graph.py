"""Workflow graphs: what a user sees for cycles, unreachable steps, unbound values and notes."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from harnessc.compiler.cli import main
from harnessc.compiler.graph import ENTRY, check_workflows, step_graph
from harnessc.compiler.pipeline import check
from harnessc.dsl.diagnostics import Diagnostic, Severity
from harnessc.dsl.render_formats import render

from .counting import count_calls

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "remediation" / "remediation.harness"

TOOLS = """
fact release.freeze: bool
connection change_platform
tool change.create { summary "Create."; effects write
                     input { patch_ref: string? }
                     output { change_id: string, meta: { owner: string }
                              labels: map<{ on: bool }> } }
tool change.get { summary "Read."; effects read; input { change_id: string? }
                  output { state: string } }
tool production.deploy { summary "Deploy."; effects external; input { change_id: string? }
                         output { deployment_id: string } }
tool change.revert { summary "Revert."; effects external; input { change_id: string?, d: string? } }
policy release { default allow }
agent generic { policy release }
"""


def run(tmp_path: Path, steps: str, inputs: str = "input { patch_ref: string }"):
    path = tmp_path / "main.harness"
    path.write_text(f"{TOOLS}\nworkflow ship {{\n  policy release\n  {inputs}\n{steps}\n}}\n")
    return check([path])


def found(result, code: str) -> list[Diagnostic]:
    return [d for d in result.diagnostics if d.code == code]


def only(result, code: str) -> Diagnostic:
    hits = found(result, code)
    assert len(hits) == 1, render(result.diagnostics, "plain", limit=None)
    return hits[0]


def codes(result) -> list[str]:
    return sorted(d.code for d in result.diagnostics)


def underlined(diagnostic: Diagnostic) -> str:
    assert diagnostic.primary is not None
    return diagnostic.primary.span.text


def line_of(diagnostic: Diagnostic) -> str:
    """The source line the primary label underlines."""
    assert diagnostic.primary is not None
    span = diagnostic.primary.span
    return span.source.line_text(span.line).strip()


def secondary(diagnostic: Diagnostic) -> list[tuple[str, str]]:
    return [(label.span.text, label.message) for label in diagnostic.labels if not label.primary]


# ---------------------------------------------------------------------------------------------
# The reference workflow and shipped specs


def test_the_remediation_workflow_only_notes_that_reject_ends_the_run() -> None:
    result = check([EXAMPLE])
    assert result.ok, render(result.diagnostics, "plain")
    assert result.model is not None and result.resolution is not None
    [note] = check_workflows(result.model, result.resolution)
    assert (note.code, note.severity) == ("L101", Severity.NOTE)
    assert underlined(note) == "reject"
    assert note.message == "option `reject` of decide step `review` ends the run"
    # the example says that is intended (`# harnessc: ignore[L101]`): check reports nothing
    assert result.diagnostics == []


def _unsuppressed(tmp_path: Path) -> Path:
    """The remediation example without its `ignore[L101]` comment."""
    folder = tmp_path / "remediation"
    folder.mkdir()
    for source in EXAMPLE.parent.glob("*.harness"):
        text = source.read_text(encoding="utf-8").replace("; harnessc: ignore[L101]", "")
        (folder / source.name).write_text(text, encoding="utf-8")
    return folder / EXAMPLE.name


def test_a_note_does_not_fail_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(_unsuppressed(tmp_path))]) == 0
    shown = capsys.readouterr()
    assert "note[L101]" in shown.out + shown.err


def test_a_suppressed_note_is_silent_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`# harnessc: ignore[L101]` silences the note for check, test, fmt and build too, not only
    for lint; `check -q` of a clean spec prints nothing."""
    for argv in (
        ["check", str(EXAMPLE)],
        ["check", "-q", str(EXAMPLE)],
        ["test", str(EXAMPLE)],
        ["fmt", "--diff", str(EXAMPLE)],
        ["build", str(EXAMPLE), "-o", str(tmp_path / "out"), "--no-embed", "-q"],
    ):
        assert main(argv) == 0, argv
        shown = capsys.readouterr()
        assert "L101" not in shown.out + shown.err, argv
    assert main(["check", "-q", str(EXAMPLE)]) == 0
    quiet = capsys.readouterr()
    assert quiet.out + quiet.err == ""


@pytest.mark.parametrize("stdlib", sorted((REPO / "stdlib").glob("*.harness")), ids=str)
def test_stdlib_modules_have_no_graph_findings(stdlib: Path) -> None:
    result = check([stdlib])
    assert result.model is not None
    assert check_workflows(result.model, result.resolution) == []  # type: ignore[arg-type]


def test_a_compensation_may_read_an_ancestor_that_is_not_a_dominator(tmp_path: Path) -> None:
    """`deploy` waits for `change` AND `window`: `change` always ran when `deploy` fails."""
    result = run(
        tmp_path,
        """
  step change = call change.create(patch_ref: input.patch_ref)
  step window = gate release.freeze == false
  step deploy = call production.deploy(change_id: change.change_id) after window {
    on_failure retry 2 then compensate revert
  }
  step revert = call change.revert(change_id: change.change_id) compensation
""",
    )
    assert result.diagnostics == []


# ---------------------------------------------------------------------------------------------
# Cycles


def test_a_cycle_is_drawn_and_reported_once_where_it_closes(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step create = call change.create(patch_ref: input.patch_ref) after verify
  step deploy = call production.deploy(change_id: create.change_id)
  step verify = call change.get(change_id: create.change_id) after deploy
""",
    )
    cycle = only(result, "H401")
    assert (
        cycle.message == "steps wait for each other in a cycle `create → deploy → verify → create`"
    )
    assert underlined(cycle) == "verify"
    assert line_of(cycle).startswith("step create =")
    assert secondary(cycle) == [
        ("create.change_id", "`deploy` waits for `create`"),
        ("deploy", "`verify` waits for `deploy`"),
    ]
    assert cycle.help == "remove one reference of the cycle, such as `verify` in step `create`"


def test_each_separate_cycle_and_each_self_wait_is_reported(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step a = call change.get() after b
  step b = call change.get() after a
  step c = call change.get() after d
  step d = call change.get(change_id: c.state)
  step e = call change.get(change_id: e.state)
""",
    )
    messages = sorted(d.message for d in found(result, "H401"))
    assert messages == [
        "step `e` waits for itself",
        "steps wait for each other in a cycle `a → b → a`",
        "steps wait for each other in a cycle `c → d → c`",
    ]


def test_a_long_cycle_is_drawn_shortened(tmp_path: Path) -> None:
    steps = [f"  step s{i} = call change.get() after s{(i - 1) % 20}" for i in range(20)]
    cycle = only(run(tmp_path, "\n".join(steps)), "H401")
    assert "`s0 → s1 → s2 → … → s18 → s19 → s0`" in cycle.message
    assert underlined(cycle) == "s19"


SHAPES_CHECK = """
import sys
from harnessc.compiler.pipeline import check
from harnessc.dsl.render_formats import render
result = check([sys.argv[1]])
print("networkx" in sys.modules)
print(render(result.diagnostics, "plain", limit=None))
"""


@pytest.mark.parametrize(
    "steps",
    [
        """
  step a = call change.get() after b
  step b = call change.get() after a
  step c = call change.get() after d
  step d = call change.get(change_id: c.state)
  step e = call change.get(change_id: e.state)
""",
        """
  step create = call change.create(patch_ref: input.patch_ref) { on_failure compensate revert }
  step deploy = call production.deploy(change_id: create.change_id) {
    on_failure compensate revert
  }
  step after_deploy = call change.get() after deploy
  step revert = call change.revert(change_id: create.change_id, d: after_deploy.state) compensation
""",
    ],
)
def test_a_workflow_whose_steps_did_not_change_is_checked_without_networkx(
    tmp_path: Path, steps: str
) -> None:
    path = tmp_path / "main.harness"
    path.write_text(f"{TOOLS}\nworkflow ship {{\n  policy release\n  input {{}}\n{steps}\n}}\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache-home")}
    env.pop("HARNESSC_CACHE_DIR", None)

    def run_check() -> tuple[str, str]:
        done = subprocess.run(
            [sys.executable, "-c", SHAPES_CHECK, str(path)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        loaded, _, shown = done.stdout.partition("\n")
        return loaded, shown

    loaded, first = run_check()
    assert loaded == "True" and ("H401" in first or "H406" in first), first
    # the step graph's answers are read back from the cache, and say the same
    assert run_check() == ("False", first)
    # an edit elsewhere in the workflow keeps the graph's shape: still no networkx
    path.write_text(path.read_text().replace("input {}", "input { note: string? }"))
    loaded, edited = run_check()
    assert loaded == "False" and edited.count("H40") == first.count("H40")


# ---------------------------------------------------------------------------------------------
# Main path, compensation, reachability


def test_a_main_path_step_may_not_wait_for_a_compensation(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step deploy = call production.deploy() { on_failure compensate revert }
  step revert = call change.revert() compensation
  step verify = call change.get() after revert
""",
    )
    error = only(result, "H403")
    assert error.message == "compensation step `revert` is on the main path"
    assert underlined(error) == "revert"
    assert line_of(error).startswith("step verify =")
    assert codes(result) == ["H403"]


def test_a_compensation_nobody_triggers_is_unreachable(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step deploy = call production.deploy() { on_failure retry 2 }
  step revert = call change.revert() compensation
  step undo_undo = call change.revert() compensation { on_failure compensate revert }
""",
    )
    errors = found(result, "H402")
    assert sorted(d.message for d in errors) == [
        "compensation step `revert` is never triggered",
        "compensation step `undo_undo` is never triggered",
    ]
    assert errors[0].help is not None and "on_failure compensate" in errors[0].help


def test_a_compensation_triggered_by_a_triggered_compensation_is_reachable(
    tmp_path: Path,
) -> None:
    result = run(
        tmp_path,
        """
  step deploy = call production.deploy() { on_failure compensate revert }
  step revert = call change.revert() compensation { on_failure compensate page }
  step page = call change.get() compensation
""",
    )
    assert result.diagnostics == []


def test_compensate_must_name_a_compensation_step(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step deploy = call production.deploy() { on_failure retry 2 then compensate revert }
  step revert = call change.revert() after deploy
  step rollback = call change.revert() compensation
""",
    )
    error = only(result, "H407")
    assert error.message == "step `revert` is not a compensation step"
    assert underlined(error) == "revert"
    assert secondary(error) == [("revert", "`revert` is on the main path")]


def test_unknown_compensate_target_is_a_name_error(tmp_path: Path) -> None:
    result = run(
        tmp_path, "  step deploy = call production.deploy() { on_failure compensate rvert }"
    )
    assert codes(result) == ["H201"]


@pytest.mark.parametrize(
    ("reads", "label"),
    [
        ("deploy.deployment_id", "`deploy` failed, so it has no value"),
        ("check.state", "`check` does not always run before `deploy`"),
        ("after_deploy.state", "`after_deploy` runs after `deploy`"),
    ],
)
def test_a_compensation_reads_only_what_is_bound_where_it_is_triggered(
    tmp_path: Path, reads: str, label: str
) -> None:
    result = run(
        tmp_path,
        f"""
  step create = call change.create(patch_ref: input.patch_ref)
  step check = call change.get(change_id: create.change_id)
  step deploy = call production.deploy(change_id: create.change_id) {{
    on_failure compensate revert
  }}
  step after_deploy = call change.get() after deploy
  step revert = call change.revert(change_id: create.change_id, d: {reads}) compensation
""",
    )
    error = only(result, "H406")
    assert error.message == f"`{reads}` is not bound when `deploy` triggers `revert`"
    assert underlined(error) == reads
    assert error.primary is not None and error.primary.message == label
    assert secondary(error) == [("revert", "`deploy` triggers `revert` here")]


def test_a_compensation_must_be_bound_at_every_trigger(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step create = call change.create(patch_ref: input.patch_ref) { on_failure compensate revert }
  step deploy = call production.deploy(change_id: create.change_id) {
    on_failure compensate revert
  }
  step revert = call change.revert(change_id: create.change_id) compensation
""",
    )
    error = only(result, "H406")
    assert error.message == "`create.change_id` is not bound when `create` triggers `revert`"


def test_a_compensation_may_wait_for_its_own_trigger(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step deploy = call production.deploy() { on_failure compensate revert }
  step revert = call change.revert() after deploy compensation
""",
    )
    assert result.diagnostics == []


# ---------------------------------------------------------------------------------------------
# Values


def test_a_gate_yields_nothing(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step window = gate release.freeze == false
  step deploy = call production.deploy(change_id: window) after window
""",
    )
    error = only(result, "H404")
    assert error.message == "gate step `window` has no value"
    assert underlined(error) == "window"
    assert line_of(error).startswith("step deploy =")
    assert error.help == "to wait for `window` without reading it, write `after window`"


@pytest.mark.parametrize(
    ("read", "message", "help"),
    [
        ("create.change_ib", "step `create` has no field `change_ib`",
         "did you mean `change_id`?"),
        ("create.meta.ownr", "`create.meta` has no field `ownr`", "did you mean `owner`?"),
        ("create.meta.owner.x", "`create.meta.owner` has no field `x`",
         "read `create.meta.owner` itself"),
        ("create.labels.prod.of", "`create.labels.prod` has no field `of`",
         "did you mean `on`?"),
        ("revert_step.x", "step `revert_step` has no field `x`",
         "declare `output { x: … }` on tool `change.revert`"),
        ("patch.rollbak", "step `patch` has no field `rollbak`", "did you mean `rollback`?"),
        ("review.answer", "decide step `review` has no field `answer`",
         "compare `review` itself with one of its options, such as `review == yes`"),
        ("input.patch_rf", "the input of workflow `ship` has no field `patch_rf`",
         "did you mean `patch_ref`?"),
    ],
)  # fmt: skip
def test_a_read_must_name_a_field_the_value_has(
    tmp_path: Path, read: str, message: str, help: str
) -> None:
    result = run(
        tmp_path,
        f"""
  step create = call change.create(patch_ref: input.patch_ref)
  step revert_step = call change.revert()
  step patch = delegate generic "Write a patch." {{ output {{ patch: string, rollback: string }} }}
  step review = decide "Ship?" {{ options yes, no; by role "security"; timeout 1d default no }}
  step use = call change.get(change_id: {read}) when review == yes or review == no
""",
    )
    error = only(result, "H404")
    assert error.message == message
    assert underlined(error) == read
    assert error.help == help


def test_whole_values_and_map_keys_may_be_read(tmp_path: Path) -> None:
    result = run(
        tmp_path,
        """
  step create = call change.create(patch_ref: input.patch_ref)
  step patch = delegate generic "Write a patch." { context create, create.labels.any.on }
""",
    )
    assert result.diagnostics == []


def test_a_workflow_without_input_has_no_input_fields(tmp_path: Path) -> None:
    result = run(tmp_path, "  step get = call change.get(change_id: input.id)", inputs="")
    error = only(result, "H404")
    assert error.message == "workflow `ship` has no input"


@pytest.mark.parametrize(
    ("when", "bad", "help"),
    [
        ("review == aprove", "aprove", "did you mean `approve`?"),
        ('review == "rejected"', '"rejected"', "did you mean `reject`?"),
        ("review in [approve, later]", "later", "compare with one of `approve` or `reject`"),
        ("approv != review", "approv", "did you mean `approve`?"),
    ],
)
def test_a_decide_is_compared_with_its_options(
    tmp_path: Path, when: str, bad: str, help: str
) -> None:
    result = run(
        tmp_path,
        f"""
  step review = decide "Ship?" {{ options approve, reject; by role "security" }}
  step change = call change.create(patch_ref: input.patch_ref) when {when}
""",
    )
    error = only(result, "H405")
    assert underlined(error) == bad
    assert error.message == f"`{bad.strip(chr(34))}` is not an option of decide step `review`"
    assert error.help == help
    assert secondary(error) == [("options approve, reject", "the options of `review`")]
    assert found(result, "L101") == []  # the misspelling is the finding, not the outcome


# ---------------------------------------------------------------------------------------------
# `when` never authorises


@pytest.mark.parametrize(
    ("when", "bad", "help"),
    [
        ('actor.role == "sre"', "actor.role", "put authorisation in a policy rule"),
        ("release.freeze == false", "release.freeze", "wait for facts with a `gate` step, "
         "or pass the value in the workflow's `input`"),
        ("connected(change_platform)", "connected(change_platform)", "wait for facts with a "
         "`gate` step, or pass the value in the workflow's `input`"),
        ('env.region == "eu"', "env.region", "wait for facts with a `gate` step, or pass the "
         "value in the workflow's `input`"),
    ],
)  # fmt: skip
def test_a_step_when_reads_only_input_and_step_values(
    tmp_path: Path, when: str, bad: str, help: str
) -> None:
    result = run(
        tmp_path,
        f"""
  step get = call change.get()
  step change = call change.create() when input.patch_ref != "" and get.state == "open" and {when}
""",
    )
    error = only(result, "H408")
    assert error.message == f"the `when` of step `change` reads `{bad}`"
    assert underlined(error) == bad
    assert error.help == help


def test_a_gate_condition_may_read_facts(tmp_path: Path) -> None:
    result = run(tmp_path, '  step window = gate release.freeze == false and actor.role == "x"')
    assert result.diagnostics == []


# ---------------------------------------------------------------------------------------------
# L101: decide options that end the run


@pytest.mark.parametrize(
    ("whens", "ends"),
    [
        (["review == approve"], ["reject", "later"]),
        (["review != reject"], ["reject"]),
        (["not review == reject"], ["reject"]),
        (["review in [approve, later]", "review == reject"], []),
        (["review == input.patch_ref"], []),
        ([], ["approve", "reject", "later"]),
    ],
)
def test_an_option_no_when_tests_ends_the_run(
    tmp_path: Path, whens: list[str], ends: list[str]
) -> None:
    steps = "\n".join(
        f"  step s{i} = call change.get() when {when}" for i, when in enumerate(whens)
    )
    result = run(
        tmp_path,
        f"""
  step review = decide "Ship?" {{ options approve, reject, later; by role "security" }}
  step window = gate release.freeze == false after review
{steps}
""",
    )
    notes = found(result, "L101")
    assert [underlined(n) for n in notes] == ends
    assert all(n.severity is Severity.NOTE for n in notes)
    assert result.ok


# ---------------------------------------------------------------------------------------------
# The graph and its size


def test_the_entry_precedes_main_path_steps_without_dependencies(tmp_path: Path) -> None:
    result = check([EXAMPLE])
    assert result.model is not None
    graph = step_graph(result.model.workflows["remediation.remediate"])
    assert sorted(graph.successors(ENTRY)) == ["scan"]
    assert graph.has_edge("review", "change") and graph.has_edge("change", "revert")


def _long_workflow(tmp_path: Path, n: int):
    """A valid workflow of about `n` steps: decides, joins on either option, compensations."""
    steps = ["  step s0 = call change.create(patch_ref: input.patch_ref)"]
    for i in range(1, n):
        if i % 10 == 5:
            steps.append(
                f'  step s{i} = decide "q" after s{i - 1} {{ options yes, no; by role "r" }}'
            )
        elif i % 10 == 6:
            steps.append(
                f"  step s{i} = call production.deploy(change_id: s{i - 2}.change_id) "
                f"when s{i - 1} == yes or s{i - 1} == no {{ on_failure compensate c{i} }}"
            )
            steps.append(f"  step c{i} = call change.revert(change_id: s0.change_id) compensation")
        elif i % 10 == 7:
            steps.append(f"  step s{i} = call change.create(patch_ref: s{i - 1}.deployment_id)")
        else:
            steps.append(f"  step s{i} = call change.create(patch_ref: s{i - 1}.change_id)")
    result = run(tmp_path, "\n".join(steps))
    assert result.diagnostics == [], render(result.diagnostics, "plain")
    assert result.model is not None and result.resolution is not None
    return result


def test_checking_a_workflow_is_linear_in_its_steps(tmp_path: Path) -> None:
    counts = []
    for n in (100, 1000):
        result = _long_workflow(tmp_path, n)
        found, calls = count_calls(partial(check_workflows, result.model, result.resolution))
        assert found == []
        counts.append(calls)
    # ten times the steps: about ten times the calls (a quadratic check makes a hundred)
    assert counts[1] < 12 * counts[0]
