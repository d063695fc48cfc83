"""The registry of diagnostic codes: one table feeds messages, `harnessc explain` and the docs.

Codes are numbered by stage: H0 files, H1 syntax, H2 names and modules, H3 validation,
H4 graphs, H5 build, H6 spec tests, H9 internal ("this is a bug in harnessc"); L for lints.
Every code any stage or lint rule can print is here, so `explain`, `--select`/`--ignore`,
`# harnessc: ignore[…]` and every output format know it without loading the stage that prints
it (a lint rule in compiler/lints/ names its code and adds only its check and examples).
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
    Code(
        "H008",
        "unwritable-output",
        "error",
        "the built package could not be written",
        "`harnessc build` could not write the package where `-o` points: the path names a "
        "file rather than a folder, a folder is not writable, or the disk is full. The message "
        "names the path and carries the system's reason. Each file is replaced whole, so one "
        "that was written is complete; run the build again once the cause is gone.",
    ),
    Code(
        "H009",
        "outside-project-root",
        "error",
        "a spec reads a file outside its project root",
        "A spec is untrusted input (it is checked in CI on pull requests), so the compiler reads "
        "only files inside the spec's project root and the standard library's `std.*` modules. "
        "The project root is the folder given by `--root`, else the nearest folder at or above "
        "the spec's with a `pyproject.toml` or a `harness.toml`, else the spec's own folder. An "
        "import that leaves it (`..` past the root, an absolute path elsewhere, a link that "
        "resolves elsewhere), or a spec named on the command line that is a link to a file "
        "elsewhere, is refused without being read: the diagnostic names the path and never "
        "shows what the file holds. Move the file into the project, add a `harness.toml` to a "
        "folder that holds both, or pass `--root`.",
    ),
    Code(
        "H010",
        "too-many-rules",
        "error",
        "a spec has more than 50,000 rules",
        "A spec — a root file and every module it imports — may hold at most 50,000 rules, so "
        "that no input keeps the compiler (and a CI job that checks pull requests) busy for "
        "long: the parse stops at the first rule past the limit and the diagnostic points at "
        "it, before any later stage runs. Split the policies into specs checked and built on "
        "their own, or merge rules that differ only in a value into one rule over a list.",
    ),
    Code(
        "H011",
        "too-many-expression-nodes",
        "error",
        "a spec has more than 100,000 expression nodes",
        "A spec — a root file and every module it imports — may hold at most 100,000 expression "
        "nodes: operators (`and`, `or`, `not`), comparisons, references such as `args.path`, "
        "calls, quantifiers, provenance tests, lists, records and their entries, numbers, "
        "durations and booleans (strings are not counted). The parse stops at the first node "
        "past the limit and the diagnostic points at it, before any later stage runs.",
    ),
    Code(
        "H012",
        "condition-too-large",
        "error",
        "a condition has more than 10,000 expression nodes",
        "One condition — a rule's `when`, a grant's, a tool's `requires`, a workflow step's "
        "`when` or `gate` — may hold at most 10,000 expression nodes (as counted for H011): "
        "the policy analysis reasons about each condition as a whole. A long chain of "
        "comparisons with constants is one `in [...]` test; otherwise split the condition over "
        "several rules.",
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
        "brackets, `not`s or quantifiers nest too deeply",
        "Brackets (conditions, lists, records, schemas, and the angle brackets of `list<…>` "
        "and `map<…>` types) may nest at most 64 levels deep, and so "
        "may `not`s and quantifiers (`all x in …:`, `any x in …:`) inside a condition, which "
        "nest without brackets: `not not x` is two levels.",
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
        "smallest without spaces (`1h30m`). Integers and durations (in milliseconds) are 64-bit "
        "and numbers are 64-bit floating point: a literal beyond that range is refused.",
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
        "`task`, `env`, `resource`, `tool`, `args`, `call`, `input`, `result`). The data "
        "labels `secret` and `pii` are built in and are not declared again.",
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
    Code(
        "H209",
        "result-out-of-scope",
        "error",
        "a condition reads `result.*` where no result exists",
        "A rule judges a call before it runs, so it has no result. `result.*` is read inside a "
        "history term, about an earlier call (`count(files.read when result.size > 1000)`, "
        "`sum(result.amount of payments.send)`), and in a tool's `on_success`, about the call "
        "that just succeeded.",
    ),
    Code(
        "H210",
        "shadowed-variable",
        "error",
        "a quantifier's variable hides another name",
        "In `all x in list: …` the variable `x` is bound in the body only. A variable named "
        "like a built-in root, a fact, a step or the variable of an enclosing quantifier would "
        "hide that name inside the body; give it a name of its own.",
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
        "a regular expression does not compile, or cannot be run in linear time",
        "`pattern` and `matches` take a regular expression that both Python's parser and RE2 "
        "accept: the runtime matches with RE2, in time linear in the text, so a text an agent "
        "sends can never make a decision or a schema check run for minutes (Python's "
        "backtracking engine takes exponential time on `^(a+)+$` and a line of `a`s ending in "
        "`!`). Back-references (`\\1`), lookarounds (`(?=…)`, `(?!…)`, `(?<=…)`), possessive "
        "repeats (`a++`), `\\Z` and repeats of more than 1000 are refused; `$` is the end of "
        "the text. The message carries the reason.",
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
        "Durations such as `ttl`, `expires` and `timeout` are positive; `limit`, `top`, a "
        "tool's `version` and a retry count are at least 1; a surface's recall `top` is at "
        "least its `limit`; "
        "a `wire_name` matches `[A-Za-z0-9_-]{1,64}`; a decide's `default` is one of its "
        "options.",
    ),
    Code(
        "H309",
        "grant-without-ask",
        "error",
        "a `grant`, `approver`, `expires` or `self_approval` on a rule that does not ask",
        "Grants, approvers, `expires` and `self_approval` only mean something on an ASK: a "
        "grant turns an approved ASK into ALLOW for a bounded scope and time, and `expires` "
        "bounds how long its request waits for an answer.",
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
    # H3 — cross-layer validation
    Code(
        "H320",
        "hidden-tool-on-surface",
        "error",
        "a legacy, primitive or skill-private tool is named on a surface",
        "Registered does not mean public. A legacy tool stays registered for old sessions, a "
        "primitive is called by the runtime, and a private tool only inside its skill; none of "
        "them is ever on a planner's surface, so naming one in `expose` or `hide` is a mistake. "
        "Expose the tool that replaces a legacy one.",
    ),
    Code(
        "H321",
        "unknown-mcp-server",
        "error",
        "an MCP tool id or pattern names a server the build does not declare",
        "`mcp:SERVER:*` selects the projected tools of an `mcp SERVER { … }` block, and "
        "`mcp:SERVER:tool:NAME` names one of them, wherever a tool is named (a surface, a rule, "
        "a call). Declare the server, or import the module that declares it.",
    ),
    Code(
        "H322",
        "selector-matches-nothing",
        "error",
        "an `expose` pattern selects no public tool",
        "Patterns on a surface select public tools only (public, dynamic and MCP-projected); "
        "a glob, `M.*`, `pack:` or `kind:` pattern that selects none is as wrong as an unknown "
        "name. A pattern that matches only legacy, primitive or private tools selects nothing.",
    ),
    Code(
        "H323",
        "call-in-availability",
        "error",
        "a `requires` condition reads `args` or `call`",
        "Availability is decided before the planner sees a tool, so no call and no arguments "
        "exist yet. `requires` may read facts, `actor`, `task`, `env`, `tool` and fact "
        "functions; test arguments and execution parameters in a policy rule.",
    ),
    Code(
        "H324",
        "unknown-field",
        "error",
        "a condition reads a field that its root or fact does not have",
        "`actor`, `tool` and `call` have fixed fields, a fact has its declared type, and a "
        "scalar has no fields at all. `task`, `env` and `resource` are open.",
    ),
    Code(
        "H325",
        "incompatible-types",
        "error",
        "a comparison mixes values of different types, or a value is used as a condition",
        'Values are typed: `args.count == "3"` compares an `int` with a string and is never '
        "true. Numbers compare with numbers, strings, paths and enums with each other, "
        "durations with durations. A condition on its own must be a `bool`.",
    ),
    Code(
        "H326",
        "operator-not-applicable",
        "error",
        "an operator is applied to a value it does not take",
        "`<` `<=` `>` `>=` order numbers, durations, risk levels and enum values; `matches` "
        "tests a string against a regular expression; `startswith` and `within` take strings "
        "and paths; the right side of `in` is a list; `has` tests a field of an object or map, "
        "or an element of a list.",
    ),
    Code(
        "H327",
        "unknown-argument",
        "error",
        "a condition reads an argument that no selected tool has",
        "`args.NAME` reads the call's argument NAME, so at least one tool the rule (or grant) "
        "selects must declare it in its `input`. When only some of them do, the value is "
        "absent for the others; lint reports that case.",
    ),
    Code(
        "H328",
        "not-an-enum-member",
        "error",
        "a name or string compared with an enum is not one of its values",
        "A bare name beside an enum-typed operand (a risk level, an effect, a tool kind, a "
        "schema enum) is a member of that enum, and a string literal must be one of its values "
        "too. A bare name beside anything else is not a value: write a string.",
    ),
    Code(
        "H329",
        "ask-without-approver",
        "error",
        "an ASK names no approver",
        "An `ask` rule, a `default ask` and a risk table's `ask` entry wait for a person; "
        'without `approver role "…"` or `approver user "…"` nobody could ever approve.',
    ),
    Code(
        "H330",
        "deny-without-reason",
        "error",
        "a DENY gives no reason",
        "A refusal is explained to the agent, in the trace and in test failures by its "
        '`reason "…"`. `default deny` has a reason of its own ("no rule allows this call").',
    ),
    Code(
        "H331",
        "delegation-too-deep",
        "error",
        "a delegation target delegates itself",
        "Delegation is exactly one level deep: a planner (an agent with `delegate`) starts "
        "sub-agents, and a sub-agent never delegates. The same holds for a workflow's "
        "`delegate` step.",
    ),
    Code(
        "H332",
        "private-tool-outside-skill",
        "error",
        "a skill-private tool is used outside its skill",
        "A private tool is called only inside its skill: by the skill's subagents, judged by "
        "the parent's policy and the skill's profile. Another skill's profile or subagents and "
        "workflows cannot name it.",
    ),
    Code(
        "H333",
        "subagent-tool-not-allowed",
        "error",
        "a subagent lists a tool that is neither its skill's private tool nor public",
        "A subagent calls its skill's private tools and public tools. Legacy tools are kept "
        "for old sessions and primitives for the runtime; list the tool that replaces them.",
    ),
    Code(
        "H334",
        "risk-selector-operator",
        "error",
        "a risk selector compares with an operator that does not order risk levels",
        "The sugar `risk OP level` selects the tools whose risk compares with `level` "
        "(`risk >= high` is `* when tool.risk >= high`). Risk levels are compared with `==`, "
        "`!=`, `<`, `<=`, `>` and `>=`; any other operator would select no tool at all.",
    ),
    Code(
        "H335",
        "bad-function-call",
        "error",
        "a function is called with arguments of the wrong form",
        "`called`, `succeeded` and `count` take tool selectors; `sum` takes a field (`args.x` "
        "or `result.x`) and `of` selectors; `seen` takes one data label; `len`, `urls`, "
        "`hosts`, `emails`, `params` and `segments` take one value; `connected` and `running` "
        "take one name. Only history terms take `within DURATION` and `when COND`, and only "
        "`sum` takes `of`.",
    ),
    Code(
        "H336",
        "window-without-unit",
        "error",
        "a history window is a number without a unit",
        "`within` takes a duration: `within 10m`, `within 24h`, `within 30s`. A bare number "
        "would leave the unit to guess.",
    ),
    Code(
        "H337",
        "history-selects-nothing",
        "error",
        "a history term's selector selects no tool",
        "`called(x)`, `count(x …)` and `sum(f of x)` count earlier calls of the tools that `x` "
        "selects. A selector that selects no tool makes the term always false (or zero), "
        "which is never what was meant.",
    ),
    Code(
        "H338",
        "unknown-result-field",
        "error",
        "a history term reads a result field that no selected tool returns",
        "`result.NAME` inside a history term reads a field of an earlier call's result, so at "
        "least one selected tool must declare NAME in its `output`.",
    ),
    Code(
        "H339",
        "function-argument-type",
        "error",
        "a function is applied to a value of a type it does not take",
        "`len` counts the items of a list or map, or the characters of a string; `urls`, "
        "`hosts`, `emails`, `params` and `segments` read a string (a text, or one URL); `sum` "
        "adds numbers, so its field must be an `int` or a `float`.",
    ),
    Code(
        "H340",
        "provenance-of-list",
        "error",
        "`from` is applied to a list",
        "Provenance is asked of one value: a list as a whole appeared nowhere. Ask it of each "
        "item with a quantifier: `all x in args.to: x from user`.",
    ),
    Code(
        "H341",
        "only-not-applicable",
        "error",
        "`only` follows `from nowhere` or `from label`",
        "`from K only` says a value's sources are exactly K (user, trusted or untrusted). A "
        "value from nowhere has no sources at all, and a label is not a kind of source, so "
        "`only` means nothing there.",
    ),
    Code(
        "H342",
        "quantifier-not-a-list",
        "error",
        "a quantifier ranges over a value that is not a list",
        "`all x in V: …` and `any x in V: …` take each item of the list V (an argument or field "
        "of type `list<…>`, a list literal, `urls(…)`, `hosts(…)`, `emails(…)`, `params(…)` "
        "or `segments(…)`).",
    ),
    Code(
        "H343",
        "bad-on-success",
        "error",
        "an `on_success` adds to something that is not a list fact, or adds a value the tool "
        "does not have",
        "`on_success add VALUE to FACT` appends VALUE to FACT when a call of the tool succeeds, "
        "and `on_success remove VALUE from FACT` takes it out. FACT must be a declared fact of "
        "type `list<…>` whose items take the value, and VALUE an argument (`args.x`, in the "
        "tool's `input`) or a result field (`result.x`, in its `output`); with `each`, every "
        "element of that list (or the field `: x.f` of each) must be of the fact's item type.",
    ),
    Code(
        "H344",
        "delegation-not-allowed",
        "error",
        "a workflow's `delegate` step names an agent the workflow's agent does not delegate to",
        "A workflow's steps run as its creator: under the `agent` it names, which may start "
        "only the sub-agents its `delegate` lists. A `delegate` step to another agent would be "
        "refused at run time, every time. Add the step's agent to the workflow agent's "
        "`delegate`, or judge the workflow by a `policy` (it then delegates to the agents its "
        "steps name).",
    ),
    Code(
        "H345",
        "provenance-of-context",
        "error",
        "`from` is asked of the actor, the task, the resource, the environment or the tool",
        "Provenance says where a value of the call appeared earlier in the session: in what the "
        "user said, in a result, in a fact. The actor, the task, the resource and the "
        "environment are given by the application when the session opens, and `tool.*` by the "
        "spec: none of them is a value the model chose, so asking where it came from means "
        "nothing. Ask it of the call's arguments (`args.to from user`).",
    ),
    Code(
        "H346",
        "extend-conflict",
        "error",
        "an `extend` sets something the tool, or another `extend` of it, already sets otherwise",
        "`extend tool A { … }` adds attributes to a tool declared elsewhere, as if its own block "
        "said them; it never overrides. A `trust`, a `risk` or a field's `trusted`/`untrusted` "
        "that the tool (or another `extend` of it) gives another value is a conflict, shown with "
        "both places: change the one that is wrong. Labels, `secret` and `on_success` only add, "
        "and never conflict.",
    ),
    Code(
        "H347",
        "not-extendable",
        "error",
        "an `extend` changes what a call of the tool is, not what it carries",
        "An `extend` may add `trust`, `risk` (to a tool without operations), `labels`, "
        "`on_success`, and, for a field of the tool, `secret` (input or output) or `trusted`, "
        "`untrusted` and `label NAME` (output). Everything else belongs to the tool's own "
        "declaration, which a generator or `harnessc mcp discover` writes: its arguments and their "
        "types, constraints and defaults, its effects, summary, kind, operations, availability "
        "and wire name. Change those where the tool is declared (regenerate the catalogue).",
    ),
    Code(
        "H348",
        "extended-field-unknown",
        "error",
        "an `extend` notes a field the tool does not have",
        "A field written in an `extend`'s `input { … }` or `output { … }` names a field of the "
        "tool's schema (a dotted name, `rollout.state`, reaches into a nested object or the "
        "items of a list). The diagnostic lists the fields the tool has there.",
    ),
    Code(
        "H349",
        "each-not-a-list",
        "error",
        "an `on_success` takes `each` element of a value that is not a list",
        "`on_success add each x in LIST to FACT` (and `remove each … from FACT`) adds or "
        "removes every element of LIST, an argument or a result field of type `list<…>`. Over "
        "a single value, add or remove the value itself (`on_success add args.iban to "
        "bank.payees`).",
    ),
    Code(
        "H350",
        "on-success-reads-outside-call",
        "error",
        "an `on_success` condition reads something other than the call's arguments and result",
        "`on_success when C add …` updates a fact only when C holds of the call that "
        "succeeded: C reads that call's `args.*` and `result.*` (with comparisons, `and`, "
        "`or`, `not`, `all`/`any`, `len`, `urls`, `hosts`, `emails`, `params`, `segments`). "
        "Facts, the actor, the "
        "task, `from` and history terms (`count`, `called`, …) are the session's, not the "
        "call's: a rule of a policy reads them, where they decide whether the call may run.",
    ),
    Code(
        "H351",
        "each-item-not-of-element",
        "error",
        "what an `on_success each` takes of an element does not read the element",
        "`on_success add each x in LIST: x.FIELD to FACT` takes FIELD of every element `x` of "
        "LIST. The part after `:` is a path from the bound element (`x` or `x.a.b`); leave "
        "it out to take each element whole.",
    ),
    Code(
        "H352",
        "invalid-map-entry",
        "error",
        "`X[KEY]` on a value that is not a map, or with a key that is not a text",
        "`FACT[KEY]` reads the entry of a map under a key (`bank.payees[args.account]`), and "
        "`on_success add VALUE to FACT[KEY]` adds to that entry, which is a list. The value "
        "indexed is a map (`fact bank.payees: map<list<string>>`), and the key a text: a "
        "`string` of the call, a literal, or an item of a quantifier. A list is asked with "
        "`in`; a record's field is read with a dot.",
    ),
    Code(
        "H353",
        "shape-outside-output",
        "error",
        "an open record, `any` or a union outside an `output`",
        "A tool's result may have a shape its author does not control: a record with more "
        "fields than the spec lists (`{ id: string, ... }`), a value of any type (`any`), or one "
        "of several types (`string | int`). These are allowed in an `output` (a tool's or a "
        "delegate step's) only. Arguments, facts and workflow inputs list every field with one "
        "type each: a policy's conditions read them, and a call must not carry what no rule "
        "sees.",
    ),
    Code(
        "H354",
        "reads-unlisted-field",
        "warning",
        "a condition reads a field that only an open record or `any` provides",
        "A field the output does not list is read from the unlisted part of an open record "
        "(`...`) or from an `any`: no check knows its type, a typo reads as an absent value, and "
        "the field's own trust or labels cannot be declared. Its value is still indexed with the "
        "tool's trust and labels. List the field in the output (with its type, and `trusted`, "
        "`untrusted` or `label` if it needs them) and the warning goes away.",
    ),
    Code(
        "H355",
        "invalid-union",
        "error",
        "a union lists `any` or one alternative twice",
        "The alternatives of `A | B` are distinct types, none of them `any` (which holds every "
        "value, so the others would say nothing). A `?` after the union makes the whole union "
        "optional.",
    ),
    Code(
        "H356",
        "invalid-output-shape",
        "error",
        "an `output` that is optional, or a field's trust where it cannot apply",
        "A tool's `output` is a type (a record `{ … }`, a list, a scalar, `any` or a union) "
        "and is never optional: a result without data has no `output` at all. `trusted` and "
        "`untrusted` apply to listed fields; on a field of type `any` they would speak for "
        "values no one listed, which carry the tool's trust: list the fields in a record "
        "type and declare their trust there.",
    ),
    Code(
        "H357",
        "result-source-in-history-when",
        "error",
        "`from result(…)` inside a history term's `when`",
        "A history term's `when` reads each earlier call as it was made: its arguments and "
        "where they came from then. `from result(…)` asks which earlier calls' results hold "
        "a value, which is a question about the session at the time of the decision; ask it "
        "in the rule itself (`allow bank.send when args.iban from result(files.read when "
        "args.name from user)`).",
    ),
    # H4 — graphs
    Code(
        "H401",
        "step-cycle",
        "error",
        "workflow steps wait for each other in a cycle",
        "A step runs after every step named in its `after` and every step it reads in its "
        "arguments, `context`, `when` or gate condition. When those references form a cycle, "
        "none of the steps in it can ever start. Remove one reference of the cycle.",
    ),
    Code(
        "H402",
        "unreachable-step",
        "error",
        "a workflow step can never run",
        "Steps on the main path start from the workflow's entry; a `compensation` step runs "
        "only when a step's `on_failure … compensate` triggers it. A compensation step that no "
        "step compensates with never runs.",
    ),
    Code(
        "H403",
        "compensation-on-main-path",
        "error",
        "a main-path step depends on a compensation step",
        "A `compensation` step is off the main path: it runs only when an `on_failure` triggers "
        "it. A main-path step that names it in `after` or reads its value would wait for it "
        "forever.",
    ),
    Code(
        "H404",
        "unbound-value",
        "error",
        "a workflow reads a value that no step or input provides",
        "Step values are typed: a `call` yields its tool's `output`, a `delegate` its declared "
        "`output`, a `decide` its chosen option and a `gate` nothing; `input.NAME` reads a field "
        "of the workflow's `input`. Reading a field that is not there, or the value of a gate, "
        "is an error. To wait for a step without reading it, use `after`.",
    ),
    Code(
        "H405",
        "unknown-option",
        "error",
        "a decide step is compared with a word that is not one of its options",
        "A `decide` step's value is the option a person chose, so `review == approve` must name "
        "one of `review`'s `options`.",
    ),
    Code(
        "H406",
        "unbound-in-compensation",
        "error",
        "a compensation step reads a value that is not bound where it is triggered",
        "A `compensation` step runs when a step's `on_failure` triggers it, so it may only read "
        "the values of steps that always run before EVERY step that compensates with it (steps "
        "those steps wait for, directly or through others). The failing step itself has no value.",
    ),
    Code(
        "H407",
        "not-a-compensation",
        "error",
        "`on_failure … compensate` names a step that is not a compensation step",
        "`compensate STEP` runs a step marked `compensation`; a main-path step already runs on "
        "its own. Mark the target `compensation`, or name the right step.",
    ),
    Code(
        "H408",
        "step-when-reads-facts",
        "error",
        "a step's `when` reads something other than `input` and step values",
        "A step's `when` selects work; it never authorises. It may read only the workflow's "
        "`input` and the values of other steps. Put authorisation (`actor.role`, …) in a policy "
        "rule, and wait for facts (`env.*`, declared facts) with a `gate` step.",
    ),
    # H5 — build (`harnessc build`)
    Code(
        "H501",
        "invalid-package-name",
        "error",
        "the harness name cannot name the generated Python package",
        "`harnessc build` writes a Python package named after the `harness` header (or, without "
        "a header, after the spec's file). The name must be a Python identifier, not a keyword "
        "(`class`, `None`), and not `tests` (the generated test suite's folder) or `harnessc`. "
        "Rename the harness, for example `harness my_agent { }`.",
    ),
    Code(
        "H502",
        "package-shadows-module",
        "error",
        "the generated package would shadow a standard-library or installed module",
        "The generated package is imported by its name, so a harness named `json`, `os` or `sys` "
        "(or after a module an installed distribution provides, such as `numpy`) would hide that "
        "module from every import in the project, or be hidden by it. Rename the harness, for "
        "example `harness json_agent { }`. A package that an earlier build wrote to the same "
        "output folder does not count, even when its project is installed.",
    ),
    # H6 — spec tests (`harnessc test`)
    Code(
        "H601",
        "test-without-policy",
        "error",
        "a test does not say which policy judges its call",
        "A test judges its call under the policy it names with `policy NAME`, under its "
        "agent's policy (`agent NAME`), or, when it names neither, under the only policy of its "
        "module. Name the policy when the module declares several, or none.",
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
    # L0 — lints over a checked spec (compiler/lints/: each rule's check and its examples)
    Code(
        "L001",
        "never-wins",
        "warning",
        "a policy rule can never decide a call",
        "A rule decides a call only when it is the first matching rule of the strongest matching "
        "effect (DENY beats ASK beats ALLOW). This rule is always beaten: every call it matches is "
        "also matched by a stronger rule, or by an earlier rule of the same effect, which the "
        "warning names. Its options (approver, reason) are never used, and whoever reads the "
        "policy is misled. Remove it or narrow the rule that beats it; moving it helps only "
        "against an earlier rule of the same effect, since a stronger effect wins in any order.",
    ),
    Code(
        "L002",
        "unsatisfiable-condition",
        "warning",
        "a rule's condition can never be true",
        "No call satisfies the condition, so the rule never matches: usually `and` where `or` was "
        "meant, or two comparisons of one value with different constants. A DENY or ASK that never "
        "matches protects nothing.",
    ),
    Code(
        "L003",
        "opposite-effects",
        "warning",
        "two rules with the same scope have opposite effects",
        "Two rules select the same calls under equivalent conditions, one allowing and one denying "
        "or asking. The stronger effect always wins, so the weaker rule is dead and the policy "
        "says two things at once. Keep the one you mean. (An ALLOW with a narrower DENY or ASK "
        "inside it is the normal shape of a policy and is not reported.)",
    ),
    Code(
        "L004",
        "absent-value-fails-open",
        "warning",
        "a DENY or ASK reads a value that may be absent, without a `has` guard",
        "Reading a value that is not there (an optional argument not given, a fact the application "
        "did not supply) makes a comparison false, `!=` included. So a DENY or ASK whose condition "
        "needs the value fails open: the call is not denied, not asked. Test presence with `has` "
        "and write the condition so that an absent value denies (`not actor.tenant == "
        "resource.tenant` rather than `resource.tenant != actor.tenant`).",
    ),
    Code(
        "L005",
        "default-allow",
        "warning",
        "a policy allows every call no rule matches",
        "`default allow` turns every tool added later, and every call no rule foresaw, into an "
        "allowed call. Use `default deny`, `default ask { approver … }` or a risk table such as "
        "`std.risk.defaults`, and allow what is meant with rules.",
    ),
    Code(
        "L006",
        "undecided",
        "note",
        "the policy analysis did not decide a question about a rule within its budget",
        "Each question the policy analysis asks z3 about a rule (can it decide a call, does it "
        "match any, does it fail open when a value is absent) has a budget of z3's resource "
        "units: 5,000,000, or `HARNESSC_QUERY_RLIMIT` (0 for none). z3 counts the same units for "
        "the same question on every machine and under any load, so a question is decided, or "
        "not, alike everywhere. A question not decided within its budget is neither taken as a "
        "yes nor as a no: the rule gets this note, and the warnings that would rest on the answer "
        "(L001, L002, L004) are not reported for it. Long regular expressions, or many text "
        "conditions on one value, are what usually make a question costly; simplify the "
        "condition or raise the budget.",
    ),
    Code(
        "L010",
        "ask-on-read-only",
        "warning",
        "an `ask` without a condition on a read-only, low-risk tool",
        "Asking a person to approve every call of a tool that only reads and is low risk teaches "
        "people to click yes without reading, and then the approvals that matter are clicked "
        "through too. Allow such a tool (the usual risk table already allows low risk), or ask "
        "only when a condition makes the call sensitive.",
    ),
    Code(
        "L011",
        "high-risk-allowed-unconditionally",
        "warning",
        "an `allow` without a condition selects a high- or critical-risk tool",
        "A high- or critical-risk tool sends, publishes, pays, deletes or changes production. An "
        "ALLOW with no `when` lets every call of it run, whatever its arguments, without a person "
        "seeing it. Narrow the rule with a condition on the arguments or the actor, or `ask`.",
    ),
    Code(
        "L012",
        "wildcard-allow",
        "warning",
        "an `allow` selects tools by `*` or a glob",
        "An ALLOW written with `*`, a glob (`change.*`) or a module glob (`std.github.*`) also "
        "allows every tool that is added later under that name, without anyone deciding so. Name "
        "the tools the rule is meant for; write wildcards in DENY and ASK rules, where growing the "
        "match is the safe direction.",
    ),
    Code(
        "L013",
        "missing-summary",
        "warning",
        "a tool has no `summary`",
        "The summary is what a planner reads to choose a tool, what ranking embeds when more tools "
        "are public than a surface's `limit`, and what traces and generated docs show. A tool "
        "without one is chosen by its name alone.",
    ),
    Code(
        "L014",
        "missing-use-when",
        "note",
        "a tool a planner can see has no `use_when`",
        "`use_when` tells a planner when to pick a tool rather than its neighbours, and ranking "
        "reads it with the summary. Public, dynamic and MCP tools are the ones a planner sees; "
        "legacy, primitive and skill-private tools are not reported.",
    ),
    Code(
        "L015",
        "unused-connection",
        "warning",
        "a connection or runtime is declared and never used",
        "A `connection` or `runtime` is a fact the application must supply at run time. One that "
        "no `requires`, condition or `provided_by` reads is work for the application with no "
        "effect: usually a tool that should `requires connected(…)` it and does not, so the tool "
        "stays available when the connection is gone.",
    ),
    Code(
        "L016",
        "unused-fact",
        "warning",
        "a fact is declared and never read",
        "A `fact` is a value the application supplies at run time for availability and policy. One "
        "that no `requires`, condition or gate reads is either left over or a check that was meant "
        "and never written.",
    ),
    Code(
        "L017",
        "surface-over-limit-without-rank",
        "warning",
        "a surface can have more public tools than its `limit` and has no `rank` block",
        "When more tools are public and available than a surface's `limit`, ranking decides which "
        "ones the planner sees in a turn (language.md §5). Without a `rank` block that choice is "
        "made by defaults nobody reviewed. Write the `rank` block (recall, rerank, preferences), "
        "raise the `limit`, or expose fewer tools. Ranking serves the context budget only; it is "
        "never a permission.",
    ),
    Code(
        "L018",
        "near-duplicate-description",
        "warning",
        "two tools have nearly the same `summary` and `use_when`",
        "A planner, and the ranking that picks which tools it sees, tell tools apart by their "
        "descriptions. When two tools share 80% or more of the words of their `summary` and "
        "`use_when`, the planner picks between them at random. Say what sets each apart, and point "
        "from one to the other with `not_for`.",
    ),
    Code(
        "L019",
        "self-approval-of-high-risk",
        "warning",
        "an `ask` lets the requester approve their own high- or critical-risk call",
        "Separation of duties: the person who asks for a high- or critical-risk call (a payment, a "
        "production deploy, a deletion) should not be the one who approves it, so one stolen "
        "account or one mistaken person cannot both start and authorise it. That is the default at "
        "risk `high` and above; `self_approval allow` turns it off. Keep it off only where one "
        "person really is the only approver, and say why with a suppression comment. An ASK whose "
        'only approver is `role "user"` is not reported: it asks the person the agent acts for '
        "to confirm the agent's call, and that person is the requester by design.",
    ),
    Code(
        "L020",
        "label-never-produced",
        "warning",
        "a `seen(L)` or `from label L` that no tool's result can carry",
        "A data label reaches a session only with the result of a tool that declares it: `labels "
        "L` on the tool, or `label L` on one of its output fields. When no tool does, `seen(L)` "
        "and `from label L` never hold, and the rule that tests them never fires (a DENY of leaked "
        "secrets that guards nothing). Declare the label on the tools whose results carry that "
        "data.",
    ),
    Code(
        "L021",
        "nothing-trusted",
        "warning",
        "a `from trusted` in a spec where nothing is trusted",
        "Every tool's results are untrusted unless the tool says `trust trusted` (or an output "
        "field says `trusted`), and facts are trusted. In a spec with no trusted tool and no fact, "
        "`from trusted` only ever holds for the spec's own constants and a workflow's input: an "
        "ALLOW that waits for a trusted value allows almost nothing, and a DENY of untrusted data "
        "written as `not … from trusted` refuses almost everything. Mark the systems of record "
        "`trust trusted`. A term about an argument that has a default in a tool the rule "
        "selects is not reported: the default is a trusted source of its own.",
    ),
    Code(
        "L022",
        "made-up-value-passes",
        "warning",
        "a DENY or ASK of `from untrusted only` lets a made-up value through",
        "`args.x from untrusted only` holds when the value appeared in untrusted data and nowhere "
        "else. A value that appeared nowhere (the model made it up, or rewrote the injected one: "
        "changed a digit, dropped a space) is not from untrusted data at all, so the DENY does not "
        "fire for it. When the policy has no rule for `from nowhere` on the same value, the "
        "attacker's easiest move gets through. Test both: `args.x from untrusted only or args.x "
        "from nowhere`.",
    ),
    Code(
        "L023",
        "history-of-uncallable-tools",
        "warning",
        "a history term whose tools no agent can call",
        "`called`, `succeeded`, `count` and `sum` look at earlier calls of the tools they select. "
        "When the selected tools are on no agent's surface, in no skill and in no workflow, no "
        "session ever makes such a call: the term is always false or zero and the rule does not do "
        "what it says. Select the tools the agents call.",
    ),
    Code(
        "L024",
        "delegation-widens",
        "warning",
        "a delegated agent may run calls its planner's policy denies or asks about",
        "A planner delegates work to a child agent, whose calls are judged by the child's own "
        "policy. The delegation ceiling: on every tool of the child's surface, the child's policy "
        "decides no call less strictly than the planner's — nothing the planner's policy denies is "
        "asked or allowed for the child, nothing it asks about is allowed. The compiler compares "
        "the two policies over the child's tools (the same exact analysis as `harnessc diff`) and "
        "reports each rule of the child that decides a call less strictly, with such a call. A "
        "child may be meant to do more: grant it explicitly with `# harnessc: ignore[L024] why` on "
        "the child's rule. Skills need no such check: a skill's calls are judged by the parent's "
        "policy and the skill's profile together, the strictest winning.",
    ),
    Code(
        "L025",
        "selector-never-wins",
        "warning",
        "a selector of a rule never decides a call",
        "A rule that names several selectors may decide calls of some of their tools and never of "
        "others: under one selector every call it matches is decided by other rules — a stronger "
        "effect (an `ask` of every MCP call beats an `allow` of one MCP tool), or an earlier rule "
        "of the same effect. The rule as a whole wins somewhere, so L001 says nothing; the "
        "selector still misleads whoever reads it. Remove the selector, or change the rules that "
        "beat it.",
    ),
    Code(
        "L026",
        "path-compared-as-text",
        "warning",
        "a path-like literal is compared as text with a `string` argument",
        "`startswith`, `endswith`, `==` and `!=` compare a `string` argument as text: "
        '`args.file startswith "/repo/secret"` misses `/repo/sub/../secret` and '
        "`/repo//secret`, which name the same file, so a `deny` on it can be walked around. A "
        "literal that looks like a path (it starts with `/`, `./`, `../` or `~/`, or holds "
        "`/../`) compared with a `string` argument is flagged. Declare the argument as `path`: "
        "its value is normalized (`.` and `..` resolved, repeated slashes joined) before any "
        "condition reads it, and `within` tests containment by whole segments. Neither "
        "resolves symbolic links: the executor that opens the file must still check where it "
        "leads.",
    ),
    Code(
        "L027",
        "all-over-optional-list",
        "warning",
        "`all x in args.L` over an optional list, with no `args has L` in the condition",
        "A quantifier over an absent list holds for no item: `all x in args.cc: …` is false "
        "when the call gives no `cc`, so `not (all x in args.cc: x from user)` is true and a "
        "DENY written with it refuses every mail without copies, while an ALLOW that waits for "
        "`all …` never allows one. Authors often expect `all` over nothing to hold. Say what an "
        "absent list means with `has`: `args has cc and all x in args.cc: …` (only a given "
        "list), or `not (args has cc) or all x in args.cc: …` (an absent list passes).",
    ),
    Code(
        "L028",
        "provenance-of-boolean",
        "warning",
        "`args.X from SOURCE` where `X` is a boolean: it never holds (or always, `from nowhere`)",
        "Provenance says where a value appeared; `true` and `false` appear in too many places to "
        "say that, so the runtime never indexes them: a boolean argument is found in no source. "
        "`args.flag from user` (or `trusted`, `untrusted`, `label L`) never holds and `args.flag "
        "from nowhere` always does, so a DENY written with it refuses every call and an ALLOW "
        "waiting for it never allows one. Compare the value instead (`args.flag == true`), or "
        "leave the term out. A boolean field with a default is not reported: its default is a "
        "source of its own (`from trusted` when the call leaves it or gives it).",
    ),
    Code(
        "L029",
        "trusted-label-passes",
        "warning",
        "a URL's values pass when `from trusted` after `seen(L)`, and a trusted tool gives L",
        "`deny web.fetch when seen(pii within 1h) and any v in params(args.url): not (v from "
        "user or v from trusted)` means: after personal data was read, a fetch may carry only "
        "values someone gave. When the data labelled `pii` comes from a tool declared `trust "
        "trusted` (a CRM, a directory: systems of record usually are), that data is itself "
        "`from trusted`, so the rule lets exactly the data it guards through, to whatever host "
        "the URL names. The warning is for the items of `params(…)` and `segments(…)`. Test "
        "the label "
        "too, in the rule (`(v from label pii or not (v from user or v from trusted))`) or in a "
        "DENY of its own in the same policy (`deny web.fetch when any v in params(args.url): v "
        "from label pii`).",
    ),
    # L1 — lints about workflows
    Code(
        "L101",
        "decide-option-ends-run",
        "note",
        "a decide option that no step depends on ends the run",
        "When no step's `when` compares a `decide` step with one of its options, choosing that "
        "option leads nowhere: the run ends with that outcome. That is often intended (`reject`); "
        "if it is not, add a step with `when STEP == OPTION`.",
    ),
]

CODES: dict[str, Code] = {c.code: c for c in _CODES}
BY_SLUG: dict[str, Code] = {c.slug: c for c in _CODES}


def lookup(code: str) -> Code:
    return CODES[code]
