"""The changes `harnessc diff` reports besides the policy comparison: registry, surfaces,
availability and workflow steps, read from two compiled specs."""

from __future__ import annotations

from pathlib import Path

from harnessc.compiler.analysis.compare import compare_specs
from harnessc.compiler.pipeline import check
from harnessc.compiler.review.changes import Change, spec_changes, step_changes
from harnessc.runtime.model import Spec

BASE = """harness app { version "1" }
connection crm
fact office.open: bool
tool note.read {
  summary "Read a note."
  effects read
  input { id: string }
}
tool note.write {
  summary "Write a note."
  effects write
  risk medium
  input { id: string, text: string }
  requires connected(crm)
}
tool mail.send {
  summary "Send a mail."
  input { to: string, body: string }
  operation draft { effects write; risk low }
  operation send { effects external; risk high }
}
surface desk {
  expose note.*, mail.send
}
surface old_only {
  expose note.read
}
policy main {
  default deny
  allow note.read
  allow note.write
  ask mail.send { approver role "lead"; grant once ttl 10m }
}
agent clerk { surface desk; policy main }
workflow file_note {
  agent clerk
  input { id: string }
  step read = call note.read(id: input.id)
  step write = call note.write(id: input.id, text: "filed")
  step tell = call mail.send(to: "team@example.com", body: "filed", op: "send")
}
"""


def compiled(tmp_path: Path, name: str, text: str) -> Spec:
    path = tmp_path / name / "app.harness"
    path.parent.mkdir()
    path.write_text(text)
    result = check([path])
    assert result.ok and result.model is not None, result.diagnostics
    return result.model


def kinds(changes: list[Change]) -> dict[str, list[Change]]:
    out: dict[str, list[Change]] = {}
    for change in changes:
        out.setdefault(change.kind, []).append(change)
    return out


def test_the_same_spec_has_no_changes(tmp_path: Path) -> None:
    old, new = compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", BASE)
    assert spec_changes(old, new) == []
    assert step_changes(old, new, compare_specs(old, new)) == []


def test_registry_changes_name_each_difference(tmp_path: Path) -> None:
    text = (
        BASE.replace(
            "  input { id: string, text: string }", "  input { id: string, text: string? }"
        )
        .replace(
            "operation draft { effects write; risk low }",
            "operation draft { effects write; risk medium }",
        )
        .replace(
            'tool note.read {\n  summary "Read a note."\n  effects read\n'
            "  input { id: string }\n}\n",
            "",
        )
        .replace("expose note.*, mail.send", "expose note.*, mail.send, crm.lookup")
        + 'tool crm.lookup {\n  summary "Look a customer up."\n  effects read\n'
        + "  input { q: string }\n}\n"
    )
    text = text.replace("  allow note.read\n", "").replace(
        "  step read = call note.read(id: input.id)\n", ""
    )
    text = text.replace("expose note.read", "expose note.write")
    found = kinds(spec_changes(compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)))
    assert [c.subject for c in found["tool-removed"]] == ["note.read"]
    assert [c.subject for c in found["tool-added"]] == ["crm.lookup"]
    assert found["tool-added"][0].details == ("always available (asks nothing of the facts)",)
    details = {c.subject: c.details for c in found["tool-changed"]}
    assert details["note.write"] == (
        'input field `text`: {"type": "string"} → {"type": "string"} (optional)',
    )
    assert details["mail.send"] == ("operation `draft` risk: low → medium",)
    exposed = {(c.kind, c.subject) for c in found["tool-exposed"] + found["tool-hidden"]}
    assert exposed == {
        ("tool-exposed", "app.desk: crm.lookup"),
        ("tool-hidden", "app.desk: note.read"),
        ("tool-hidden", "app.old_only: note.read"),
        ("tool-exposed", "app.old_only: note.write"),
    }


def test_surfaces_declared_on_one_side_list_their_tools(tmp_path: Path) -> None:
    text = BASE.replace(
        "surface old_only {\n  expose note.read\n}", "surface new_only {\n  expose mail.send\n}"
    )
    found = kinds(spec_changes(compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)))
    assert [(c.subject, c.details) for c in found["surface-added"]] == [
        ("app.new_only", ("public: `mail.send`",))
    ]
    assert [(c.subject, c.details) for c in found["surface-removed"]] == [
        ("app.old_only", ("was public: `note.read`",))
    ]


def test_availability_changes_say_what_is_asked_before_and_after(tmp_path: Path) -> None:
    text = BASE.replace(
        "requires connected(crm)", "requires connected(crm) and office.open == true"
    )
    found = kinds(spec_changes(compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)))
    [change] = found["availability-changed"]
    assert change.subject == "note.write"
    assert change.details == (
        "before: requires `connected(crm)`",
        "after: requires `connected(crm) and office.open == true`",
        "no longer available, e.g. with connected(crm)",
    )
    assert change.origin is not None and change.origin.line == 9


def test_availability_written_another_way_with_the_same_meaning_is_no_change(
    tmp_path: Path,
) -> None:
    old = BASE.replace("requires connected(crm)", "requires connected(crm) and office.open == true")
    new = BASE.replace("requires connected(crm)", "requires office.open == true and connected(crm)")
    assert spec_changes(compiled(tmp_path, "a", old), compiled(tmp_path, "b", new)) == []


def test_a_root_module_renamed_still_pairs_its_surfaces(tmp_path: Path) -> None:
    text = BASE.replace("harness app", "harness renamed")
    assert spec_changes(compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)) == []


def test_steps_with_written_arguments_are_judged_and_steps_fed_by_input_are_affected(
    tmp_path: Path,
) -> None:
    text = BASE.replace(
        "  allow note.write\n",
        '  allow note.write when args.text != "filed"\n  ask note.write when args.text == "filed" '
        '{ approver role "lead"; grant once ttl 10m }\n',
    ).replace("  allow note.read\n", '  allow note.read when args.id != "secret"\n')
    text = text.replace(
        'ask mail.send { approver role "lead"',
        'deny mail.send when args.op == "draft" { reason "no drafts" }\n'
        '  ask mail.send { approver role "lead"',
    )
    old, new = compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)
    found = kinds(step_changes(old, new, compare_specs(old, new)))
    [judged] = found["step-judgement-changed"]
    assert judged.subject == "file_note.write" and judged.tool == "note.write"
    assert judged.summary.endswith("decided allow before and ask after")
    assert 'text: "filed"' in judged.details[2] and not judged.widens
    affected = {c.subject: c for c in found["step-affected"]}
    # `read` passes the input's id: it flips when the input is the witness's
    assert affected["file_note.read"].details[:2] == (
        "1 argument (`id`) from the workflow's input or an earlier step: the call below is one "
        "the step makes when they take its values",
        "allow→deny [policy app.main]",
    )
    assert 'note.read(id: "secret")' in affected["file_note.read"].details[-1]
    # `tell` sends (op "send") and only drafts changed: no witness flips, the step is named
    assert affected["file_note.tell"].details[0].startswith("no witness flips")
    assert not any(c.widens for c in found["step-affected"])


def test_a_step_rewritten_is_reported_with_its_arguments(tmp_path: Path) -> None:
    text = BASE.replace('text: "filed"', 'text: "archived"')
    old, new = compiled(tmp_path, "a", BASE), compiled(tmp_path, "b", text)
    [change] = step_changes(old, new, compare_specs(old, new))
    assert change.kind == "step-changed" and change.subject == "file_note.write"
    assert change.details == ('argument `text`: "filed" → "archived"',)


def test_a_root_module_renamed_is_the_spec_compiled_under_the_other_name(
    tmp_path: Path,
) -> None:
    # the remediation example (imports, includes, agents, workflows, skills, tests), compiled
    # once as it is and once with another header: renaming the first gives the second
    from harnessc.compiler.review.diff import renamed_root
    from harnessc.runtime.model import without_origins

    from .conftest import ROOT

    specs = []
    for side, header in (("a", "harness remediation {"), ("b", "harness other {")):
        folder = tmp_path / side
        folder.mkdir()
        for source in (ROOT / "examples" / "remediation").glob("*.harness"):
            text = source.read_text(encoding="utf-8")
            (folder / source.name).write_text(text.replace("harness remediation {", header))
        result = check([folder / "remediation.harness"])
        assert result.ok and result.model is not None
        specs.append(result.model)
    renamed = renamed_root(specs[0], "other")
    assert renamed is not None and renamed.root_module == "other"
    # the spec's own name (its header's) is not a module's: it stays
    assert without_origins(renamed.model_copy(update={"name": "other"})) == without_origins(
        specs[1]
    )
    # a name the spec already gives another module cannot be the root's
    assert renamed_root(specs[0], "scanner") is None
