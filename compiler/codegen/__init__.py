"""Code generation for `harnessc build`: a typed plan, rendered by templates, written atomically.

plan.py assembles the package's files from modules with one job each: escape.py (how spec text
reaches generated files), spec_text.py (conditions written back as spec text), inputs.py (the
package's name, the build root, the tool embeddings), docs.py (the review docs), cases/ (the
generated tests' cases). The package's policies are its `model.json`, compiled by the runtime
when it loads it (docs/architecture.md), so no policy code is emitted here. render.py turns
the plan into bytes with jinja2 templates that only loop and branch; write.py writes those
bytes atomically or compares them with what is on disk (`--check`).
"""

from ..suppress import lint_suppressions
from .inputs import (
    build_root,
    check_package_name,
    check_package_name_of,
    relative_to_root,
    tool_embeddings,
)
from .plan import BuildPlan, GeneratedFile, plan_build
from .render import render_plan
from .write import Staleness, WriteReport, compare_files, write_files

__all__ = [
    "BuildPlan",
    "GeneratedFile",
    "Staleness",
    "WriteReport",
    "build_root",
    "check_package_name",
    "check_package_name_of",
    "compare_files",
    "lint_suppressions",
    "plan_build",
    "relative_to_root",
    "render_plan",
    "tool_embeddings",
    "write_files",
]
