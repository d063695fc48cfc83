"""`harnessc init`: start a folder of specs — a commented starter spec, pre-commit hooks and a
one-page README for the team, or a copy of one of the examples (`--example`).

It asks nothing. What it writes checks, lints, tests and formats clean as written
(tests/test_init.py), and it overwrites no file unless told to (`--force`).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from harnessc.dsl.diagnostics import os_reason

from harnessc import __version__

EXIT_OK, EXIT_USAGE = 0, 2


@dataclass(frozen=True, kw_only=True)
class Example:
    folder: str  # under the project's examples/ (shipped as the package harnessc.examples)
    root: str  # the spec a build starts from


EXAMPLES = {
    "remediation": Example(folder="remediation", root="remediation.harness"),
    "workspace": Example(folder="workspace-agent", root="workspace.harness"),
}

STARTER_NAME = "team.harness"

STARTER = """\
# A starter spec written by `harnessc init`: one tool, the surface a planner sees, a policy with
# ALLOW, ASK and DENY rules, an agent, and a test that pins the policy. Check it with
# `harnessc check`, then grow it: docs/language.md is the reference.

harness team {
  version "0.1.0"
  summary "What our agent may do, and who approves the rest."
}

# The tools the agent can call, with what they touch (`effects`) and how much is at stake.
tool ticket.update {
  summary "Update the status of a support ticket."
  use_when "The customer's issue is resolved, or it needs another team."
  effects write reversible
  risk medium
  input {
    ticket_id: string pattern "^T-[0-9]+$"
    status: enum("open", "pending", "closed")
    note: string?
  }
}

# What the planner may see. Seeing a tool is not permission to call it: the policy decides.
surface support {
  expose ticket.update
  limit 10
}

# Every call is judged against a policy: the first matching DENY wins, then ASK, then ALLOW;
# no matching rule means the default.
policy support {
  default deny

  # Agents working for support staff update tickets directly.
  staff_update: allow ticket.update when actor.role == "support"

  # Anyone else's agent asks a support lead before closing a ticket.
  close_needs_lead: ask ticket.update when args.status == "closed" and not actor.role == "support" {
    approver role "support-lead"
    grant once ttl 15m
    reason "Closing a ticket for a customer needs a support lead."
  }

  # A note is free text: keep secrets out of the ticket history.
  no_secrets_in_notes: deny ticket.update
      when args has note and args.note matches "(?i)password|api[_-]?key" {
    reason "A ticket note never carries a credential."
    instead "Remove the credential from the note and share it through the vault."
  }
}

agent assistant {
  persona "Support assistant: triages and updates customer tickets."
  surface support
  policy support
}

# Tests pin what the policy decides for concrete calls (`harnessc test`).
test "support staff update tickets directly" {
  policy support
  call ticket.update(ticket_id: "T-1042", status: "pending")
  as actor { user: "u-7", role: "support" }
  expect allow
}

test "closing a ticket for someone else asks a support lead" {
  policy support
  call ticket.update(ticket_id: "T-1042", status: "closed")
  as actor { user: "u-9", role: "sales" }
  expect ask approver role "support-lead"
}

test "a note with a credential is refused" {
  policy support
  call ticket.update(ticket_id: "T-1042", status: "open", note: "the api_key is abc")
  as actor { user: "u-7", role: "support" }
  expect deny rule no_secrets_in_notes
}
"""

PRE_COMMIT = """\
# pre-commit (https://pre-commit.com) runs harnessc on the specs staged in each commit; run
# `pre-commit install` once. The hooks run the `harnessc` on your PATH (`repo: local`), so they
# judge with the version your team installed: pin it where you pin your tools (for example
# `harnessc=={version}` in a requirements file).
repos:
  - repo: local
    hooks:
      - id: harnessc-check
        name: harnessc check
        entry: harnessc check --quiet
        language: system
        files: \\.harness$
      - id: harnessc-lint
        name: harnessc lint
        entry: harnessc lint --strict --quiet
        language: system
        files: \\.harness$
      - id: harnessc-fmt
        name: harnessc fmt
        entry: harnessc fmt
        language: system
        files: \\.harness$
"""

README = """\
# {title}

This folder holds the `.harness` specs that govern what our AI agents may do: which tools
exist, which a planner may see, and which calls run, ask a person first, or are refused.
{what}
## Every day

```sh
harnessc check {root}   # names, types, the policy analysis
harnessc lint {root}    # rules that can never apply, reads without a `has` guard, ...
harnessc test {root}    # the `test` blocks: what the policy decides for concrete calls
harnessc fmt *.harness  # the canonical layout (`--check` in CI)
```

After `pre-commit install`, every commit that touches a spec runs `check`, `lint --strict` (a
warning fails too) and `fmt` on it (`.pre-commit-config.yaml`); run `test` in CI.
`harnessc build {root} -o build/` compiles the spec into the Python package the application
embeds.

## Changing a policy

1. Write the rule, with a `reason` for every DENY and ASK: it is what the user is told.
2. Add a `test` block for the call that made you change it, and one for a call it must not
   change.
3. `harnessc lint` and `harnessc test` pass before review; a reviewer reads the rule and its tests
   together.

Silence a lint finding only with a reason: `# harnessc: ignore[L004] why it is fine`.

## Where to read more

- The language: `docs/language.md` in harnessc's documentation.
- Every diagnostic: `harnessc explain CODE` (for example `harnessc explain L004`).
- The commands: `harnessc COMMAND --help`.
"""

STARTER_WHAT = """
`{root}` starts small: one tool, the surface the planner sees, a policy with an ALLOW, an ASK and
a DENY rule, the agent, and the tests that pin the policy. Replace the ticket tool with one of
ours and keep the shape.
"""

EXAMPLE_WHAT = """
The specs are a copy of harnessc's `{name}` example (`{root}` and what it imports); its own
`EXAMPLE.md` explains what it governs and why. Edit them into our own.
"""


class InitError(Exception):
    """`init` cannot write what it would: the message says why."""


def planned_files(example: str | None) -> dict[str, str]:
    """The files `init` writes, by path relative to the folder, with their text."""
    if example is None:
        root = STARTER_NAME
        files = {STARTER_NAME: STARTER}
        what = STARTER_WHAT.format(root=root)
        title = "Agent policies"
    else:
        chosen = EXAMPLES[example]
        source = examples_folder() / chosen.folder
        if not (source / chosen.root).is_file():
            raise InitError(f"the `{example}` example is not installed with this harnessc")
        root = chosen.root
        files = {
            path.name: path.read_text(encoding="utf-8") for path in sorted(source.glob("*.harness"))
        }
        readme = source / "README.md"
        if readme.is_file():
            files["EXAMPLE.md"] = readme.read_text(encoding="utf-8")
        what = EXAMPLE_WHAT.format(name=example, root=root)
        title = f"Agent policies (from the `{example}` example)"
    files[".pre-commit-config.yaml"] = PRE_COMMIT.format(version=__version__)
    files["README.md"] = README.format(title=title, what=what, root=root)
    return files


def examples_folder() -> Path:
    """The examples: the data package `harnessc.examples` of an install, or a checkout's folder."""
    spec = importlib.util.find_spec("harnessc.examples")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "examples"


def init_folder(folder: Path, *, example: str | None = None, force: bool = False) -> list[str]:
    """Write the starter (or the example) into `folder`; the paths written, relative to it.

    Raises InitError, writing nothing, when a file would be overwritten without `force`, or
    when `folder` is a file.
    """
    if folder.exists() and not folder.is_dir():
        raise InitError(f"`{folder}` is a file, not a folder")
    files = planned_files(example)
    existing = sorted(name for name in files if (folder / name).exists())
    if existing and not force:
        names = ", ".join(f"`{name}`" for name in existing)
        raise InitError(
            f"{names} already exist{'s' if len(existing) == 1 else ''} in `{folder}`; "
            "nothing was written (pass --force to overwrite)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return list(files)


def run(folder: str, *, example: str | None, force: bool) -> int:
    """`harnessc init`: write, then say what was written and what to run next."""
    where = Path(folder)
    try:
        written = init_folder(where, example=example, force=force)
    except (InitError, OSError) as error:
        message = (
            error
            if isinstance(error, InitError)
            else f"cannot write in `{error.filename or where}`: {os_reason(error)}"
        )
        sys.stderr.write(f"harnessc init: {message}\n")
        return EXIT_USAGE
    for name in written:
        print(f"wrote {where / name}")
    root = where / (STARTER_NAME if example is None else EXAMPLES[example].root)
    print(f"next: harnessc check {root} && harnessc test {root}")
    return EXIT_OK
