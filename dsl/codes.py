"""The registry of diagnostic codes: one table feeds messages, `harnessc explain` and the docs.

Codes are numbered by stage: H0 files, H1 syntax, H2 names and modules, H3 validation,
H4 graphs, H5 build, H9 internal ("this is a bug in harnessc"); L for lints.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Code:
    code: str
    slug: str
    severity: str
    summary: str
    explanation: str


_CODES = [
    # H0 — files
    Code(
        "H001",
        "file-not-found",
        "error",
        "a file does not exist",
        "The path does not name an existing file. Check the spelling and the working directory; "
        "relative imports are resolved against the importing file's folder.",
    ),
    Code(
        "H002",
        "not-a-file",
        "error",
        "a path names a directory or another non-regular file",
        "`harnessc` reads `.harness` files. Pass the files themselves, not their folder.",
    ),
    Code(
        "H003",
        "invalid-utf8",
        "error",
        "a file is not valid UTF-8",
        "Spec files are UTF-8 text. The diagnostic points at the first byte that is not valid "
        "UTF-8; re-save the file as UTF-8.",
    ),
    Code(
        "H004",
        "nul-byte",
        "error",
        "a file contains a NUL byte",
        "A NUL byte means the file is binary or corrupted; spec files are plain text.",
    ),
    Code(
        "H005",
        "file-too-large",
        "error",
        "a file is larger than the compiler accepts",
        "A single module may be at most 8 MiB. Split a very large spec into modules joined by "
        "`import`.",
    ),
    Code(
        "H006",
        "empty-module",
        "error",
        "a file declares nothing",
        "An empty file (or one with only comments) is almost always a mistake: a truncated "
        "write or the wrong path. Add a declaration or remove the file.",
    ),
    Code(
        "H007",
        "unreadable-file",
        "error",
        "a file could not be read",
        "The operating system refused to read the file (permissions, a broken link, or a "
        "device error). The message carries the system's reason.",
    ),
    # H1 — syntax
    Code(
        "H101",
        "unexpected-token",
        "error",
        "the parser met a token it did not expect",
        "The message names what was found and, in the words you would write, what could come "
        "there instead. The parser recovers at the next declaration, so one mistake does not "
        "hide the next.",
    ),
    Code(
        "H102",
        "unclosed-block",
        "error",
        "a `{`, `(` or `[` is never closed",
        "The file ended, or a new declaration began, while a block was still open. The "
        "diagnostic names the innermost open block and where it was opened.",
    ),
    Code(
        "H103",
        "unterminated-string",
        "error",
        "a string has no closing quote on its line",
        "Strings are written on one line with JSON escapes. Join long descriptions with "
        'adjacent strings: `"first part " "second part"`.',
    ),
    Code(
        "H104",
        "invalid-character",
        "error",
        "a character that can start no token",
        "The lexer met a character that no token of the language starts with.",
    ),
    Code(
        "H105",
        "invalid-escape",
        "error",
        "a string has an escape that JSON does not allow",
        r"Strings use JSON escapes: `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t` "
        r"and `\uXXXX`.",
    ),
    Code(
        "H106",
        "unknown-keyword",
        "error",
        "a word where a keyword was expected is not one",
        "A misspelled keyword; the diagnostic suggests the nearest keyword that fits there.",
    ),
    Code(
        "H107",
        "assignment-in-condition",
        "error",
        "`=` used where a comparison `==` was meant",
        "Conditions compare with `==`; a single `=` only binds a workflow step.",
    ),
    Code(
        "H108",
        "nesting-too-deep",
        "error",
        "brackets nest too deeply",
        "Conditions, lists and schemas may nest at most 64 levels deep.",
    ),
    Code(
        "H109",
        "misplaced-declaration",
        "error",
        "the header or an import is out of place",
        "A module is a header (root module only), then imports, then declarations.",
    ),
    Code(
        "H110",
        "invalid-pattern",
        "error",
        "a tool pattern is malformed",
        "In a pattern `*` may appear only once, at the end (`change.*`, `mcp:scanner:*`), and "
        "MCP ids have the form `mcp:<server>:tool:<name>`.",
    ),
    Code(
        "H111",
        "invalid-number",
        "error",
        "a number or duration is malformed",
        "Durations are integers with units `ms s m h d`, compoundable from largest to "
        "smallest without spaces (`1h30m`).",
    ),
    Code(
        "H112",
        "duplicate-header",
        "error",
        "a module has more than one `harness` header",
        "Only the root module may have a header, and only one.",
    ),
    Code(
        "H113",
        "duplicate-clause",
        "error",
        "a step has the same clause twice",
        "A workflow step takes at most one `when`, one option block `{ … }` and one "
        "`compensation`; `after` may repeat and its names are joined. Combine the conditions "
        "with `and` and the options into one block.",
    ),
    Code(
        "H114",
        "invalid-name",
        "error",
        "a quoted name contains characters a name may not have",
        'A quoted tool name (used for MCP tools such as `"create-issue"`) may contain letters, '
        "digits and `_ - . /`, and no spaces.",
    ),
    # H2 — names and modules
    Code(
        "H201",
        "unknown-name",
        "error",
        "a reference names nothing declared",
        "Every reference position expects one kind of name (a tool, a connection, a step, …). "
        "The name was not found among the declarations of this module and its imports; the "
        "help suggests near matches.",
    ),
    Code(
        "H202",
        "duplicate-name",
        "error",
        "a name is declared twice",
        "Tool ids, MCP server ids, facts, connections and runtimes are global to a build; "
        "surfaces, policies, risk tables, agents, workflows, skills and tests are per module; "
        "steps, operations and subagents per block.",
    ),
    Code(
        "H203",
        "unknown-module",
        "error",
        "an import names no module",
        '`import std.x` loads a module shipped with harnessc; `import "./x.harness"` loads a '
        "file relative to the importing one.",
    ),
    Code(
        "H204",
        "import-cycle",
        "error",
        "modules import each other in a cycle",
        "Imports form a tree: break the cycle by moving the shared declarations into a module "
        "both import. The diagnostic draws the cycle as a path.",
    ),
    Code(
        "H205",
        "unused-import",
        "warning",
        "an imported module is never referenced",
        "Remove the import, or reference a declaration of the module.",
    ),
    Code(
        "H206",
        "reserved-name",
        "error",
        "a declaration uses a reserved name",
        "`delegate_task` is the planner-only delegation protocol and the `std.` prefix belongs "
        "to the standard library; user facts may not start with a built-in root (`actor`, "
        "`task`, `env`, `resource`, `tool`, `args`, `call`, `input`).",
    ),
    Code(
        "H207",
        "wrong-kind-of-name",
        "error",
        "a reference names a declaration of another kind",
        "The name exists but is not of the kind this position expects, for example a policy "
        "where a surface is expected.",
    ),
    Code(
        "H208",
        "duplicate-import",
        "error",
        "two imports bind the same name",
        "Each import binds a name (the module's last segment, the file stem, or its `as` "
        "name). Use `as` to give one of them another name.",
    ),
    # H3 — validation
    Code(
        "H301",
        "unknown-word",
        "error",
        "a word of a closed vocabulary is not one of its words",
        "Effects (`read write external reversible idempotent preview`), risk levels (`low medium "
        "high critical`), transports (`stdio http sse websocket`), rank modes (`recall embedding|"
        "lexical`, `rerank hybrid|dense|lexical`, `prefer packs`) and type names (`string int "
        "float bool path url duration`) are plain names checked after parsing; the help "
        "suggests the nearest word.",
    ),
    Code(
        "H302",
        "duplicate-attribute",
        "error",
        "an attribute is given twice in one block",
        "Each attribute of a block (`summary`, `effects`, `risk`, `input`, `limit`, `grant`, "
        "`default`, a risk table's level, …) is written at most once; merge the two.",
    ),
    Code(
        "H303",
        "attribute-not-allowed",
        "error",
        "an attribute is not allowed in this block",
        "Some attributes only make sense in some blocks: `options`, `by` and `timeout … "
        "default` belong to a `decide` step, `context` and `output` to a `delegate` step, "
        "`approver` and `grant` to an `ask`, and an operation declares only its summaries, "
        "effects, risk, timeout and input. A tool with operations declares effects and risk per "
        "operation; an MCP or private tool has no kind attribute.",
    ),
    Code(
        "H304",
        "missing-attribute",
        "error",
        "a block lacks an attribute it needs",
        "A tool needs `effects` (or operations that have them), and a dynamic tool an `input` "
        "schema; a `decide` step needs `options`; an MCP server needs a `transport`; a risk "
        "table maps every level; a `test` needs a `call`.",
    ),
    Code(
        "H305",
        "invalid-schema",
        "error",
        "a schema type or constraint is malformed",
        "Enum values are distinct; `min` and `max` apply to numbers (value), strings and paths "
        "(length), lists (items) and maps (entries), with `min <= max`; `pattern` applies to "
        "strings; fields of one schema have distinct names; a tool with operations has the "
        "discriminator `op`, and if it declares it, as exactly the enum of operation names.",
    ),
    Code(
        "H306",
        "invalid-regex",
        "error",
        "a regular expression does not compile",
        "`pattern` and `matches` take a regular expression in the subset on which ECMA-262 "
        "(JSON Schema) and Python agree. This one is not valid; the message carries the reason.",
    ),
    Code(
        "H307",
        "invalid-default",
        "error",
        "a field's default does not fit its type or constraints",
        "A `default` is a value of the field's type (a string for `string`, a member for "
        "`enum`, a duration for `duration`, …) and satisfies its `min`, `max` and `pattern`.",
    ),
    Code(
        "H308",
        "invalid-value",
        "error",
        "an attribute's value is out of range",
        "Durations such as `ttl` and `timeout` are positive; `limit`, `top`, a tool's `version` "
        "and a retry count are at least 1; a surface's recall `top` is at least its `limit`; "
        "a `wire_name` matches `[A-Za-z0-9_-]{1,64}`; a decide's `default` is one of its "
        "options.",
    ),
    Code(
        "H309",
        "grant-without-ask",
        "error",
        "a `grant` or `approver` on a rule that does not ask",
        "Grants and approvers only mean something on an ASK: a grant turns an approved ASK "
        "into ALLOW for a bounded scope and time.",
    ),
    Code(
        "H310",
        "wire-name-collision",
        "error",
        "two tools have the same wire name",
        "Model APIs accept tool names matching `[A-Za-z0-9_-]{1,64}`, so `change.create` is "
        "sent as `change_create`. Two ids that map to one wire name cannot be told apart; give "
        "one of them a `wire_name`.",
    ),
    Code(
        "H311",
        "include-cycle",
        "error",
        "policies include each other in a cycle",
        "`include` expands a policy's rules in place, so a policy cannot include itself, "
        "directly or through others.",
    ),
    # H9 — internal
    Code(
        "H901",
        "internal-error",
        "error",
        "an internal error in harnessc",
        "This is a bug in harnessc, not in your spec. Please report it with the spec that "
        "triggered it.",
    ),
]

CODES: dict[str, Code] = {c.code: c for c in _CODES}
BY_SLUG: dict[str, Code] = {c.slug: c for c in _CODES}


def lookup(code: str) -> Code:
    return CODES[code]
