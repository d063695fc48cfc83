"""Render a build plan into bytes: jinja2 templates that only loop and branch over the plan.

The environment is strict (`StrictUndefined`: a name missing from the plan is an error, never
an empty string), keeps trailing newlines, and escapes nothing itself: every string in a plan
is already a Python literal, a comment-safe line or escaped Markdown.
"""

from __future__ import annotations

from functools import cache

import jinja2

from .plan import BuildPlan

__all__ = ["render_plan"]


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("harnessc.compiler.codegen", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_plan(plan: BuildPlan) -> dict[str, bytes]:
    """Every file of the plan as bytes, keyed by its path relative to the output folder."""
    env = environment()
    out: dict[str, bytes] = {}
    for file in plan.files:
        if file.template is None:
            assert file.data is not None
            out[file.path] = file.data
            continue
        text = env.get_template(file.template).render(p=file.context)
        out[file.path] = text.encode("utf-8")
    return out
