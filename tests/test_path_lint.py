"""L026: a path-like literal compared as text with a `string` argument.

`/repo/sub/../secret` passes a `deny` on `args.file startswith "/repo/secret"`: the lint flags
such a comparison and suggests the `path` type and `within`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_lint import lint_text, only, underlined

TOOL = """\
tool files.read {
  summary "Read a file of the repository."
  use_when "Looking at a file's content."
  effects read
  risk low
  input {
    file: %s
    where: { dir: string }
  }
}
"""


def spec(condition: str, kind: str = "string") -> str:
    return (
        TOOL % kind
        + f"""
policy repo {{
  default deny
  guard: deny files.read when {condition} {{
    reason "kept out"
  }}
  reads: allow files.read
}}
"""
    )


@pytest.mark.parametrize(
    "condition",
    [
        'args.file startswith "/repo/secret"',
        'args.file endswith "/../secret"',
        'args.file == "./secret"',
        'args.file != "~/.ssh/id_rsa"',
        '"../outside" == args.file',
        'args.where.dir startswith "/etc"',
        'not args.file startswith "/repo/secret" and args.file startswith "/repo"',
    ],
)
def test_a_path_like_literal_compared_as_text_with_a_string_is_flagged(
    tmp_path: Path, condition: str
) -> None:
    found = only(lint_text(tmp_path, spec(condition)), "L026")
    assert found, condition
    assert "is a `string`" in found[0].message
    assert found[0].help and "`path`" in found[0].help and "`within`" in found[0].help
    assert underlined(found[0]).startswith(("args.", '"'))


@pytest.mark.parametrize(
    ("condition", "kind"),
    [
        ('args.file startswith "/repo/secret"', "path"),  # normalized before it is compared
        ('args.file within "/repo/secret"', "path"),
        ('args.file startswith "repo"', "string"),  # not path-like
        ('args.file endswith ".py"', "string"),
        ('args.file matches "^/repo/"', "string"),  # a pattern, not a text comparison
    ],
)
def test_a_path_or_a_literal_that_is_no_path_is_not_flagged(
    tmp_path: Path, condition: str, kind: str
) -> None:
    assert not only(lint_text(tmp_path, spec(condition, kind)), "L026"), condition
