"""The generated test suite's cases: every decision about what to test, made from the spec alone.

`plan_cases(spec, analysis, findings, available)` returns plain JSON data that the generated test
modules (templates `tests_*.py.j2`) read through one generic runner. Spec text (ids, summaries,
reasons, regexes) therefore only ever reaches the generated tests as JSON strings, never as code.

What is planned, section by section:

- `witnesses`: per policy and rule, a witness call and the decision it must get, made with the
  call's tool available (`available`: the analysis again, over available tools only, so z3 solves
  `requires` together with the rule; the pipeline runs it, `analysis.availability`); a rule that
  wins only while its tool is unavailable keeps its first witness, decided by the policy alone, and
  a session must refuse that call `unavailable`; rules without a witness are listed with the reason
  the lints give (skipped);
- `spec_tests`: the spec's `test` blocks, in the same shape, judged by the policy alone as
  `harnessc test` judges them (language.md §13);
- `schemas`: per tool, a minimal valid input (required fields, enums, patterns) and an invalid
  one (a required field missing, or an unknown field) with the refusal it must get, normalized
  under facts that make the tool available;
- `surfaces`, `mcp`, `delegation`: exposure, the six MCP conditions (each false: unavailable,
  not exposed, refused `unavailable` at normalize), one-level delegation;
- `availability`: per tool with a provider or `requires`, and per item of them, facts under
  which only that item is false: the call is refused `unavailable` naming it, and an
  authorised call stops before it runs once the item breaks;
- `workflows`: every path through each workflow (each option of a `decide` or `gate`), as a
  list of steps with stub outputs that the runner walks through the harness;
- `exact_invocation`: per ASK rule with a `once` grant, an approved call and its variants
  (another tool_call_id, each argument changed, each execution parameter changed).

The runtime (the same one the generated package loads) is used here only to check the examples
it generates (a valid example must validate; a variant must still be asked), never to decide
what a test expects: expected decisions come from the analysis and the spec, and expected
availability from the compiler's own evaluator of conditions (`analysis.concrete`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessc.runtime.model import Spec

from ...analysis.examples import NoExampleError
from ...analysis.policy import Finding, PolicyAnalysis
from .calls import plan_spec_tests, plan_witnesses
from .context import CaseContext
from .facts import available_facts
from .invocation import plan_exact_invocation
from .surfaces import plan_availability, plan_delegation, plan_mcp, plan_schemas, plan_surfaces
from .values import example_input, example_value
from .workflows import plan_workflows

__all__ = ["NoExampleError", "example_input", "example_value", "plan_cases"]


def plan_cases(
    spec: Spec,
    analysis: PolicyAnalysis | None,
    findings: Sequence[Finding] = (),
    available: PolicyAnalysis | None = None,
) -> dict[str, Any]:
    """Every case of the generated suite, as JSON-able data (see the module docstring);
    `available` is `analyse_availability(spec)`, None when no tool has availability conditions."""
    analysis = analysis if analysis is not None else PolicyAnalysis()
    cx = CaseContext(spec)
    solved = available
    facts = available_facts(spec)
    witnesses = plan_witnesses(cx, analysis, findings, solved, facts["mcp"])
    planned = {
        "witnesses": witnesses,
        "spec_tests": plan_spec_tests(cx),
        "schemas": plan_schemas(cx, solved, facts["mcp"]),
        "surfaces": plan_surfaces(spec, facts),
        "mcp": plan_mcp(cx, facts, solved),
        "availability": plan_availability(cx, solved, facts["mcp"], witnesses),
        "delegation": plan_delegation(spec),
        "workflows": plan_workflows(cx, facts, solved),
        "exact_invocation": plan_exact_invocation(spec, witnesses),
    }
    return planned
