"""Specs whose rules read the session (`count`, `sum`, `called`, provenance) build, and the
built package decides their calls exactly as the in-process runtime does; every scenario spec
of `tests/scenarios/`, the language guide's history example and the spec of provenance inside
history terms build, and their generated suites pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harnessc.compiler import pipeline
from harnessc.runtime.session.harness import Harness

from .conftest import ROOT
from .test_build import _build, _import, _package
from .test_build_tests import run_suite
from .test_markdown_specs import spec_blocks

SESSION_SPEC = """\
harness quota {
  version "1.0.0"
}

tool files.delete {
  summary "Delete a file."
  effects write
  input {
    path: path
    recursive: bool?
  }
}

tool payments.send {
  summary "Send a payment."
  effects external
  input {
    iban: string
    amount: int
  }
}

surface all_tools {
  expose files.delete, payments.send
}

policy quota {
  default allow
  wipe: deny files.delete when count(files.delete) > 5 {
    reason "too many"
  }
  deep: deny files.delete when count(files.delete when args.recursive == true) > 2 {
    reason "too many recursive deletions"
  }
  daily: ask payments.send when sum(args.amount of payments.send within 24h) > 300 {
    approver role "owner"
    reason "over the daily limit"
  }
}

agent bot {
  persona "A bot."
  surface all_tools
  policy quota
}
"""

CALLS: list[tuple[str, dict[str, Any]]] = [
    *[("files.delete", {"path": f"/w/f{n}.txt"}) for n in range(7)],
    *[("files.delete", {"path": f"/w/d{n}", "recursive": True}) for n in range(2)],
    *[("payments.send", {"iban": "DE89370400440532013000", "amount": 100}) for _ in range(4)],
]


def _decisions(harness: Harness) -> list[tuple[str, str | None]]:
    """The decisions of `CALLS` in one session, each allowed call run."""
    for tool_id in ("files.delete", "payments.send"):
        harness.bind(tool_id, lambda args: {"ok": True})
    session = harness.session("bot", actor={"user": "u", "role": "owner"})
    out = []
    for n, (tool_id, args) in enumerate(CALLS):
        pending = session.normalize(tool_id, f"c{n}", args)
        decision = session.decide(pending)
        if decision.effect == "allow":
            session.invoke(pending)
        out.append((decision.effect, decision.rule))
    return out


def test_a_spec_with_count_and_sum_builds_and_its_package_decides_as_the_runtime(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "quota.harness"
    spec.write_text(SESSION_SPEC, encoding="utf-8")
    out = tmp_path / "out"
    _build(spec, out)
    package = _package(out)
    built = _import(out, package.name).load(store="memory://")
    model = pipeline.check([spec]).model
    assert model is not None
    in_process = _decisions(Harness(model))
    assert _decisions(built) == in_process
    # the threshold is crossed: the sixth deletion is the first refused, the third recursive
    # one is refused too, and the fourth payment of 100 asks
    assert in_process[:5] == [("allow", None)] * 5
    assert in_process[5:7] == [("deny", "quota.wipe")] * 2
    assert in_process[7:9] == [("deny", "quota.wipe")] * 2
    assert in_process[9:12] == [("allow", None)] * 3
    assert in_process[12] == ("ask", "quota.daily")
    assert "_hsel(" in (package / "docs" / "policies.md").read_text(encoding="utf-8")
    run = run_suite(package / "tests", tmp_path / "report.xml")
    assert run.returncode == 0, run.output


def _history_example(tmp_path: Path) -> Path:
    """The language guide's example of history terms (§7.4), as a file."""
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    (block,) = [b for b in spec_blocks(text) if "count(files.delete within 10m when" in b.body]
    spec = tmp_path / "history.harness"
    spec.write_text(block.body, encoding="utf-8")
    return spec


SPECS = [
    *sorted((ROOT / "tests" / "scenarios").glob("*.harness")),
    ROOT / "tests" / "fixtures" / "history_provenance.harness",
]


@pytest.mark.parametrize("spec", [*SPECS, None], ids=[*(p.stem for p in SPECS), "language-7.4"])
def test_each_scenario_spec_builds_and_its_generated_suite_passes(
    spec: Path | None, tmp_path: Path
) -> None:
    if spec is None:
        spec = _history_example(tmp_path)
    out = tmp_path / "out"
    _build(spec, out)
    package = _package(out)
    run = run_suite(package / "tests", tmp_path / "report.xml")
    assert run.returncode == 0, run.output
    assert not run.failed()
