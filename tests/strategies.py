"""Hypothesis strategies that build random valid `.harness` syntax trees (spans left empty).

Every tree here is one the parser can produce: each attribute key sits in a block that allows it
with the values its grammar rule yields, and names come from a small alphabet of plain words
that are never keywords (a NAME that spells a keyword the parser accepts at that point is lexed
as the keyword, so `effects read risk` cannot name an effect `risk`). Keys, the words written
directly before `:` (fields, record entries, call arguments, rule labels), may be keywords: the
grammar lexes a word before `:` as a key first.
"""

from __future__ import annotations

import re

from harnessc.dsl import syntax as s
from harnessc.dsl.builder import grammar_text
from harnessc.runtime.model.semantics import OPERATORS
from hypothesis import strategies as st

# Every word the grammar spells out: reserved where the parser accepts it.
KEYWORDS = frozenset(re.findall(r'"([a-z_]+)"', grammar_text()))

WORDS = ("a", "b", "svc", "x1", "deploy_2", "Zeta", "_p")
TYPE_NAMES = ("string", "int", "float", "bool", "path", "url", "duration")
EFFECTS = ("allow", "deny", "ask")
COMPARE_OPS = tuple(OPERATORS)  # every operator of the grammar (tests/test_semantics.py)
TEST_RECORDS = ("actor", "resource", "facts", "task", "env", "execution")

assert not KEYWORDS & set(WORDS)

# -- words and names ---------------------------------------------------------------------------

word = st.sampled_from(WORDS)
dotted_text = st.lists(word, min_size=2, max_size=3).map(".".join)
name_or_dotted_text = st.one_of(word, dotted_text)
mcp_tool_text = st.tuples(word, st.one_of(word, st.sampled_from(("a-b", "x.y", "p/q")))).map(
    lambda t: f"mcp:{t[0]}:tool:{t[1]}"
)
# The parser checks patterns: one `*`, only at the end; MCP ids of the forms below.
mcp_pattern_text = st.one_of(
    mcp_tool_text,
    st.just("mcp:*"),
    word.map(lambda w: f"mcp:{w}:*"),
    st.tuples(word, word).map(lambda t: f"mcp:{t[0]}:tool:{t[1]}*"),
)
ref_text = st.one_of(word, dotted_text, mcp_tool_text)
key_text = st.one_of(word, dotted_text, st.sampled_from(sorted(KEYWORDS)))
glob_text = st.one_of(
    st.just("*"),
    word.map(lambda w: f"{w}.*"),
    dotted_text.map(lambda d: f"{d}.*"),
)
pattern_text = st.one_of(
    word,
    dotted_text,
    glob_text,
    mcp_pattern_text,
    st.tuples(st.sampled_from(("pack", "kind")), word).map(lambda t: f"{t[0]}:{t[1]}"),
)

# In a call's arguments a word or dotted name is read as a path: only these are patterns there.
call_patterns = st.one_of(
    glob_text,
    mcp_pattern_text,
    st.tuples(st.sampled_from(("pack", "kind")), word).map(lambda t: f"{t[0]}:{t[1]}"),
).map(s.Pattern)


def names(text: st.SearchStrategy[str] = word) -> st.SearchStrategy[s.Name]:
    return text.map(s.Name)


def name_list(text: st.SearchStrategy[str] = word) -> st.SearchStrategy[tuple[s.Name, ...]]:
    return st.lists(names(text), min_size=1, max_size=4).map(tuple)


# -- literals ----------------------------------------------------------------------------------

string_part = st.one_of(
    st.text(max_size=12),
    st.text(alphabet='ab "\\\n\t#{}é✓', max_size=8),
    st.text(alphabet="abcdefgh ", min_size=30, max_size=70),
)
strings = st.lists(string_part, min_size=1, max_size=3).map(lambda parts: s.Str(tuple(parts)))
ints = st.integers(min_value=-50, max_value=10**9).map(s.Int)
naturals = st.integers(min_value=0, max_value=500).map(s.Int)
floats = st.builds(
    lambda sign, whole, frac, exp: s.Float(f"{sign}{whole}.{frac}{exp}"),
    st.sampled_from(("", "-")),
    st.integers(0, 999),
    st.sampled_from(("0", "5", "25", "001")),
    st.sampled_from(("", "e3", "E-2", "e+10")),
)
# Compound durations go from the largest unit down (the parser checks it).
DURATION_UNITS = ("d", "h", "m", "s", "ms")
durations = st.builds(
    lambda units, numbers: s.Duration(
        "".join(
            f"{n}{unit}"
            for n, unit in zip(numbers, sorted(units, key=DURATION_UNITS.index), strict=False)
        )
    ),
    st.sets(st.sampled_from(DURATION_UNITS), min_size=1, max_size=3),
    st.lists(st.integers(0, 90), min_size=3, max_size=3),
)
bools = st.booleans().map(s.Bool)
paths = name_or_dotted_text.map(s.Path)

# -- values and conditions ---------------------------------------------------------------------


def operands(depth: int = 2) -> st.SearchStrategy[s.Expr]:
    leaves = st.one_of(strings, ints, floats, durations, bools, paths)
    if depth <= 0:
        return leaves
    inner = operands(depth - 1)
    call_args = st.lists(st.one_of(inner, call_patterns), min_size=1, max_size=3).map(tuple)
    return st.one_of(
        leaves,
        st.builds(s.FuncCall, names(), st.lists(inner, max_size=3).map(tuple)),
        st.builds(
            s.FuncCall,
            names(),
            call_args,
            st.lists(pattern_text.map(s.Pattern), max_size=2).map(tuple),
            st.none() | durations | naturals,
            st.none() | conditions(0) if depth >= 2 else st.none(),
        ),
        st.lists(values(depth - 1), max_size=3).map(lambda items: s.ListLit(tuple(items))),
    )


def records(depth: int = 1) -> st.SearchStrategy[s.Record]:
    entry = st.builds(s.Entry, names(key_text), values(depth - 1) if depth > 0 else operands(0))
    return st.lists(entry, max_size=3).map(lambda entries: s.Record(tuple(entries)))


def values(depth: int = 1) -> st.SearchStrategy[s.Value]:
    if depth <= 0:
        return operands(0)
    return st.one_of(operands(depth), records(depth))


SOURCES = ("user", "trusted", "untrusted", "nowhere")


def provenance(depth: int) -> st.SearchStrategy[s.Provenance]:
    value = operands(min(depth, 1))
    return st.one_of(
        st.builds(
            s.Provenance, value, st.sampled_from(SOURCES).map(s.Name), st.none(), only=st.booleans()
        ),
        st.builds(s.Provenance, value, st.just(s.Name("label")), names(), only=st.booleans()),
    )


def conditions(depth: int = 2) -> st.SearchStrategy[s.Cond]:
    atoms = st.one_of(
        st.builds(s.Compare, operands(1), st.sampled_from(COMPARE_OPS), operands(1)),
        operands(1),
        provenance(depth),
    )
    if depth <= 0:
        return atoms
    inner = conditions(depth - 1)
    return st.one_of(
        atoms,
        st.builds(s.Quantified, st.sampled_from(("all", "any")), names(), operands(1), inner),
        st.builds(s.Not, inner),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: s.And(tuple(items))),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: s.Or(tuple(items))),
    )


# -- schemas -----------------------------------------------------------------------------------


def types(depth: int = 2) -> st.SearchStrategy[s.TypeRef]:
    optional = st.booleans()
    leaves = st.builds(s.TypeRef, st.sampled_from(TYPE_NAMES + WORDS), optional=optional)
    enums = st.builds(
        lambda vals, opt: s.TypeRef("enum", values=tuple(vals), optional=opt),
        st.lists(strings, min_size=1, max_size=3),
        optional,
    )
    if depth <= 0:
        return st.one_of(leaves, enums)
    inner = types(depth - 1)
    return st.one_of(
        leaves,
        enums,
        st.builds(
            lambda kind, arg, opt: s.TypeRef(kind, (arg,), optional=opt),
            st.sampled_from(("list", "map")),
            inner,
            optional,
        ),
        st.builds(
            lambda fs, opt: s.TypeRef("object", fields=tuple(fs), optional=opt),
            st.lists(fields(depth - 1), max_size=3),
            optional,
        ),
    )


constraints = st.one_of(
    st.builds(s.Constraint, st.sampled_from(("min", "max")), st.one_of(ints, floats)),
    st.builds(s.Constraint, st.just("pattern"), strings),
    st.builds(s.Constraint, st.just("default"), values(1)),
    st.just(s.Constraint("secret")),
    st.just(s.Constraint("trusted")),
    st.just(s.Constraint("untrusted")),
    st.builds(s.Constraint, st.just("label"), names()),
)


def fields(depth: int = 1) -> st.SearchStrategy[s.Field]:
    """A field with its type, or a note without one (`body: untrusted`, as an `extend` writes
    it): the grammar takes both wherever a schema stands."""
    return st.one_of(
        st.builds(
            s.Field, names(key_text), types(depth), st.lists(constraints, max_size=3).map(tuple)
        ),
        st.builds(
            s.Field,
            names(key_text),
            st.none(),
            st.lists(constraints, min_size=1, max_size=3).map(tuple),
        ),
    )


def schemas(depth: int = 1) -> st.SearchStrategy[s.Schema]:
    return st.lists(fields(depth), max_size=4).map(lambda fs: s.Schema(tuple(fs)))


def schema_attr(key: str) -> st.SearchStrategy[s.SchemaAttr]:
    return schemas().map(lambda schema: s.SchemaAttr(key, schema))


# -- attributes --------------------------------------------------------------------------------


def attr(key: str, *parts: st.SearchStrategy) -> st.SearchStrategy[s.Attr]:
    return st.tuples(*parts).map(lambda vals: s.Attr(key, tuple(vals)))


def str_attr(*keys: str) -> st.SearchStrategy[s.Attr]:
    return st.one_of(*(attr(key, strings) for key in keys))


def ref_attr(*keys: str) -> st.SearchStrategy[s.Attr]:
    return st.one_of(*(attr(key, names(ref_text)) for key in keys))


def list_attr(key: str, text: st.SearchStrategy[str]) -> st.SearchStrategy[s.Attr]:
    return name_list(text).map(lambda vals: s.Attr(key, vals))


# -- tools -------------------------------------------------------------------------------------


def tool_items(depth: int = 1) -> st.SearchStrategy:
    items = [
        attr("version", ints),
        str_attr("summary", "use_when", "not_for", "wire_name"),
        list_attr("effects", word),
        attr("risk", names()),
        attr("timeout", durations),
        list_attr("packs", word),
        list_attr("tags", word),
        st.just(s.Attr("legacy", ())),
        attr("legacy", names(ref_text)),
        st.just(s.Attr("primitive", ())),
        attr("dynamic", names()),
        st.builds(s.Requires, conditions()),
        attr("trust", names()),
        list_attr("labels", word),
        st.builds(s.OnSuccess, paths, names(name_or_dotted_text)),
        schema_attr("input"),
        schema_attr("output"),
    ]
    if depth > 0:
        items.append(
            st.builds(s.Operation, names(), st.lists(tool_items(depth - 1), max_size=3).map(tuple))
        )
    return st.one_of(*items)


tools = st.one_of(
    st.builds(s.Tool, names(name_or_dotted_text), st.lists(tool_items(), max_size=5).map(tuple)),
    st.builds(
        lambda text, items: s.Tool(s.Name(text), tuple(items), quoted=True),
        st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,10}", fullmatch=True),
        st.lists(tool_items(), max_size=3),
    ),
)

extends = st.builds(
    s.Extend,
    st.lists(names(ref_text), min_size=1, max_size=3).map(tuple),
    st.lists(tool_items(), max_size=5).map(tuple),
)

# -- surfaces, policies, risk tables -----------------------------------------------------------

patterns = pattern_text.map(s.Pattern)
pattern_list = st.lists(patterns, min_size=1, max_size=5).map(tuple)

rank_items = st.one_of(
    attr("recall", names()),
    attr("recall", names(), naturals),
    attr("rerank", names()),
    attr("prefer", names()),
)
surfaces = st.builds(
    s.Surface,
    names(),
    st.lists(
        st.one_of(
            st.builds(s.Expose, pattern_list),
            st.builds(s.Hide, pattern_list),
            attr("limit", naturals),
            str_attr("summary"),
            st.lists(rank_items, max_size=3).map(lambda items: s.Rank(tuple(items))),
        ),
        max_size=5,
    ).map(tuple),
)

principals = st.sampled_from(("role", "user"))
option_items = st.one_of(
    st.builds(s.Approver, principals, strings),
    st.builds(s.Grant, st.sampled_from(("once", "task")), durations),
    st.builds(
        lambda ttl, sel, when: s.Grant("class", ttl, sel, when),
        durations,
        patterns,
        st.none() | conditions(1),
    ),
    str_attr("reason", "instead"),
    attr("self_approval", names(st.sampled_from(("allow", "deny")))),
    attr("expires", durations),
)
option_blocks = st.none() | st.lists(option_items, max_size=4).map(tuple)

selectors = st.one_of(
    patterns,
    st.builds(s.RiskSelector, st.sampled_from(COMPARE_OPS), names()),
    st.builds(s.EffectsSelector, names()),
)
rules = st.builds(
    s.Rule,
    st.none() | names(key_text),
    st.sampled_from(EFFECTS),
    st.lists(selectors, min_size=1, max_size=4).map(tuple),
    st.none() | conditions(),
    option_blocks,
)
defaults = st.one_of(
    st.builds(
        lambda effect, options: s.Default(effect, None, options),
        st.sampled_from(EFFECTS),
        option_blocks,
    ),
    st.builds(
        lambda table, options: s.Default(None, table, options),
        names(name_or_dotted_text),
        option_blocks,
    ),
)
policies = st.builds(
    s.Policy,
    names(),
    st.lists(
        st.one_of(
            rules, rules, defaults, st.builds(s.Include, names(ref_text)), str_attr("summary")
        ),
        max_size=5,
    ).map(tuple),
)
risk_tables = st.builds(
    s.RiskTable,
    names(),
    st.lists(
        st.builds(s.RiskEntry, names(), st.sampled_from(EFFECTS), option_blocks), max_size=4
    ).map(tuple),
)

# -- MCP, skills, agents -----------------------------------------------------------------------

mcps = st.builds(
    s.Mcp,
    names(),
    st.lists(
        st.one_of(
            attr("transport", names()),
            attr("transport", names(), strings),
            str_attr("summary"),
            tools,
        ),
        max_size=4,
    ).map(tuple),
)
subagents = st.builds(
    s.Subagent,
    names(),
    st.lists(
        st.one_of(list_attr("tools", ref_text), str_attr("persona", "summary")), max_size=3
    ).map(tuple),
)
skills = st.builds(
    s.Skill,
    names(),
    st.lists(
        st.one_of(
            ref_attr("profile"),
            str_attr("summary", "use_when"),
            tools.map(s.PrivateTool),
            subagents,
        ),
        max_size=4,
    ).map(tuple),
)
agents = st.builds(
    s.Agent,
    names(),
    st.lists(
        st.one_of(
            str_attr("persona", "summary"),
            ref_attr("surface", "policy"),
            list_attr("delegate", ref_text),
            list_attr("skills", ref_text),
        ),
        max_size=5,
    ).map(tuple),
)

# -- workflows ---------------------------------------------------------------------------------

args = st.lists(st.builds(s.Arg, names(key_text), values(1)), max_size=4).map(tuple)
actions = st.one_of(
    st.builds(s.CallAction, names(ref_text), args),
    st.builds(s.DelegateAction, names(ref_text), strings),
    st.builds(s.DecideAction, strings),
    st.builds(s.GateAction, conditions()),
)
failure_actions = st.one_of(
    st.builds(
        lambda count, backoff: s.FailureAction("retry", count=count, backoff=backoff),
        naturals,
        st.none() | durations,
    ),
    names().map(lambda target: s.FailureAction("compensate", target=target)),
    st.builds(
        lambda principal, who: s.FailureAction("escalate", principal=principal, who=who),
        principals,
        strings,
    ),
)
step_options = st.one_of(
    list_attr("options", word),
    st.builds(s.By, principals, strings),
    st.builds(s.Timeout, durations, st.none() | names()),
    st.lists(operands(1), min_size=1, max_size=3).map(lambda vals: s.Context(tuple(vals))),
    schema_attr("output"),
    st.lists(failure_actions, min_size=1, max_size=3).map(lambda acts: s.OnFailure(tuple(acts))),
)
steps = st.builds(
    s.Step,
    names(),
    actions,
    st.lists(names(), max_size=3).map(tuple),
    st.none() | conditions(1),
    st.booleans(),
    st.none() | st.lists(step_options, max_size=4).map(tuple),
)
workflows = st.builds(
    s.Workflow,
    names(),
    st.lists(
        st.one_of(ref_attr("agent", "policy"), str_attr("summary"), schema_attr("input"), steps),
        max_size=5,
    ).map(tuple),
)

# -- tests -------------------------------------------------------------------------------------

expect_details = st.one_of(
    st.builds(s.Approver, principals, strings),
    attr("rule", names(ref_text)),
    attr("reason", strings),
)
tests = st.builds(
    s.Test,
    strings,
    st.lists(
        st.one_of(
            ref_attr("policy", "agent"),
            st.builds(s.TestCall, names(ref_text), args),
            st.builds(s.Said, strings),
            st.builds(
                s.Earlier, names(ref_text), args, st.none() | values(1), st.none() | durations
            ),
            st.builds(s.TestRecord, st.sampled_from(TEST_RECORDS), records(2)),
            st.builds(
                s.Expect,
                st.sampled_from(EFFECTS),
                st.lists(expect_details, max_size=3).map(tuple),
            ),
        ),
        max_size=5,
    ).map(tuple),
)

# -- module ------------------------------------------------------------------------------------

headers = st.builds(
    s.Header,
    names(),
    st.lists(str_attr("version", "summary", "description"), max_size=3).map(tuple),
)
imports = st.one_of(
    st.builds(
        lambda target, alias: s.Import(target, False, alias),
        name_or_dotted_text,
        st.none() | names(),
    ),
    st.builds(
        lambda target, alias: s.Import(target, True, alias),
        st.text(max_size=12),
        st.none() | names(),
    ),
)
descriptions = st.none() | strings
declarations = st.one_of(
    headers,
    imports,
    st.builds(s.Connection, names(), descriptions),
    st.builds(s.Runtime, names(), descriptions),
    st.builds(s.Fact, names(key_text), types(), descriptions),
    st.builds(s.Label, names(), descriptions),
    tools,
    extends,
    surfaces,
    policies,
    risk_tables,
    mcps,
    skills,
    agents,
    workflows,
    tests,
)
modules = st.lists(declarations, min_size=1, max_size=4).map(lambda items: s.Module(tuple(items)))
