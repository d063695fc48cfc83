"""The productions of the grammar (`dsl/harness.lark`) as the construct matrix counts them, and
which of them a parse uses (tests/test_matrix.py).

A production is a named rule with one alternative (`tool`, `schema`), or one alternative of a
rule with several, named by the rule, the alternative's first symbol (a keyword in quotes, a
terminal or a rule) and its alias (`tool_item "trust" -> attr`, `compare_op "=="`,
`operand NAME -> func_call`); an alternative that only passes another rule through
(`_item: tool`) is that rule's. An optional group that starts with a keyword is a production of
its own (`import_ ["as"]`, `atom_cond operand -> provenance ["only"]`). Each function a
condition may call is an entry too (`func_call count`): the grammar has one production for all
of them, and each means something of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from harnessc.compiler.resolve_session import FUNCTIONS
from harnessc.dsl.builder import build_lark, grammar_text
from lark import Lark, Token, Tree
from lark.grammar import NonTerminal, Rule, Terminal
from lark.lexer import PatternStr


@dataclass(frozen=True)
class Production:
    rule: str
    alias: str | None
    first: str | None
    """The alternative's first symbol: a keyword's text, a terminal's or a rule's name; None
    when it starts with an optional group (it matches whatever comes first)."""
    keyword: bool
    """Whether `first` is a keyword."""
    optional: str | None = None
    """For an optional group of the alternative: the keyword it starts with."""

    @property
    def id(self) -> str:
        text = self.rule
        if self.first is not None:
            text += f' "{self.first}"' if self.keyword else f" {self.first}"
        if self.alias is not None:
            text += f" -> {self.alias}"
        if self.optional is not None:
            text += f' ["{self.optional}"]'
        return text


def _symbol(item: object) -> tuple[str, bool] | None:
    """The name of a grammar symbol and whether it is a keyword, for a `value` node."""
    if isinstance(item, Tree) and item.data == "value":
        inner = item.children[0]
        if isinstance(inner, Tree) and inner.data == "literal":
            return str(inner.children[0]).strip('"'), True
        if isinstance(inner, (Terminal, NonTerminal)):
            return inner.name, False
    return None


def _optional_keywords(expansion: Tree) -> Iterator[str]:
    """The keywords that start the optional groups (`(…)?`, `[…]`) of an alternative."""
    for item in expansion.children:
        if not isinstance(item, Tree):
            continue
        optional = len(item.children) == 2 and str(item.children[1]) == "?"
        if not ((item.data == "expr" and optional) or item.data == "maybe"):
            continue
        group = item.children[0]
        if isinstance(group, Tree) and group.data == "expansions" and len(group.children) == 1:
            group = group.children[0]
        head = group.children[0] if isinstance(group, Tree) and group.data == "expansion" else group
        found = _symbol(head)
        if found is not None and found[1]:
            yield found[0]


def productions(grammar: str | None = None) -> list[Production]:
    """Every production of the grammar (`dsl/harness.lark`, or the text given), in order."""
    from lark.load_grammar import GrammarBuilder

    builder = GrammarBuilder()
    builder.load_grammar(grammar if grammar is not None else grammar_text(), "harness")
    found: list[Production] = []
    for key, definition in builder._definitions.items():
        name = str(key)
        if definition.is_term or name == "start":
            continue
        tree = definition.tree
        alternatives = tree.children if tree.data == "expansions" else [tree]
        for alternative in alternatives:
            alias = None
            expansion = alternative
            if alternative.data == "alias":
                expansion, alias_name = alternative.children
                alias = alias_name.name if alias_name is not None else None
            items = expansion.children if expansion.data == "expansion" else [expansion]
            first = _symbol(items[0])
            passes = first is not None and not first[1] and first[0].islower()
            if len(alternatives) > 1 and alias is None and len(items) == 1 and passes:
                continue  # `_item: tool`: the rule passed through is the production
            several = len(alternatives) > 1
            base = Production(
                name,
                alias,
                first[0] if several and first else None,
                bool(several and first and first[1]),
            )
            found.append(base)
            if expansion.data == "expansion":
                for keyword in _optional_keywords(expansion):
                    found.append(
                        Production(base.rule, base.alias, base.first, base.keyword, keyword)
                    )
    found.extend(Production("func_call", None, name, False) for name in FUNCTIONS)
    return found


class Recorder:
    """A Lark parser over the grammar that records the productions each parse reduces."""

    def __init__(self) -> None:
        self.lark: Lark = build_lark()
        self.productions = productions()
        self.used: set[str] = set()
        callbacks = self.lark.parser.parser.parser.callbacks
        for rule, callback in list(callbacks.items()):
            callbacks[rule] = self._wrap(rule, callback)

    def _keyword(self, symbol: object) -> str | None:
        if isinstance(symbol, Terminal):
            pattern = self.lark.get_terminal(symbol.name).pattern
            if isinstance(pattern, PatternStr):
                return str(pattern.value)
        return None

    def _name(self, symbol: object) -> tuple[str, bool]:
        keyword = self._keyword(symbol)
        if keyword is not None:
            return keyword, True
        return str(getattr(symbol, "name", symbol)), False

    def _wrap(self, rule: Rule, callback: object) -> object:
        def recorded(children: list[object]) -> object:
            self.used.update(self.matching(rule))
            return callback(children)  # type: ignore[operator]

        return recorded

    def matching(self, rule: Rule) -> list[str]:
        """The productions a compiled rule (an expansion of one alternative) is."""
        origin = rule.origin.name
        if origin.startswith("__"):
            return []  # Lark's own rules for repetitions
        candidates = [
            p
            for p in self.productions
            if p.rule == origin and p.alias == rule.alias and p.optional is None
        ]
        if len(candidates) > 1 and rule.expansion:
            name = self._name(rule.expansion[0])
            named = [p for p in candidates if (p.first, p.keyword) == name]
            candidates = named or [p for p in candidates if p.first is None]
        keywords = {self._keyword(symbol) for symbol in rule.expansion}
        found = [p.id for p in candidates]
        for p in candidates:
            found.extend(
                o.id
                for o in self.productions
                if o.optional is not None
                and (o.rule, o.alias, o.first) == (p.rule, p.alias, p.first)
                and o.optional in keywords
            )
        return found

    def parse(self, text: str) -> set[str]:
        """The productions a parse of `text` uses (the functions it calls among them)."""
        self.used = set()
        tree = self.lark.parse(text)
        used = set(self.used)
        for node in tree.iter_subtrees():
            if node.data == "func_call":
                head = node.children[0]
                if isinstance(head, Token):
                    used.add(Production("func_call", None, str(head), False).id)
        return used
