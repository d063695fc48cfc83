"""What `harnessc debug model|graph` prints: the typed model, the module and workflow graphs.

`debug tokens` and `debug tree` print the dsl's own outputs (`dsl/builder.py`, `dsl/syntax.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import networkx as nx
from harnessc.runtime import model as m
from harnessc.runtime.model.canonical import canonical_json

from .graph import step_graph
from .lower import module_name
from .resolve import Resolution


def model_json(spec: m.Spec) -> str:
    """The typed model as canonical JSON: keys sorted, no whitespace, the same bytes every run."""
    return canonical_json(spec.model_dump(mode="json"))


def module_graph(resolution: Resolution) -> nx.DiGraph:
    """An edge `a → b` when module `a` imports module `b`; every module of the build is a node."""
    graph = nx.DiGraph()
    for module in resolution.modules:
        graph.add_node(module_name(module))
        graph.add_edges_from((module_name(module), module_name(t)) for t in module.imported)
    return graph


def stage_graphs(resolution: Resolution, spec: m.Spec | None) -> list[tuple[str, nx.DiGraph]]:
    """The module graph, then each workflow's step graph (`compiler/graph.py`), by name."""
    graphs = [("modules", module_graph(resolution))]
    if spec is not None:
        for name in sorted(spec.workflows):
            graphs.append((f"workflow {name}", step_graph(spec.workflows[name])))
    return graphs


def _ordered(graph: nx.DiGraph) -> tuple[list[str], list[tuple[str, str]]]:
    """Nodes without an edge, then the edges, each sorted, so the output never depends on order."""
    alone = sorted(n for n in graph.nodes if graph.degree(n) == 0)
    return alone, sorted(graph.edges)


def _compensation(graph: nx.DiGraph, node: str) -> bool:
    return bool(graph.nodes[node].get("compensation"))


def render_text(graphs: Iterable[tuple[str, nx.DiGraph]]) -> str:
    """One block per graph: its title, then `a -> b` per edge and a lone node per line."""
    blocks = []
    for title, graph in graphs:
        alone, edges = _ordered(graph)
        lines = [f"{title}:"]
        lines += [f"  {node}" for node in alone]
        lines += [f"  {a} -> {b}" for a, b in edges]
        marked = sorted(n for n in graph.nodes if _compensation(graph, n))
        if marked:
            lines.append(f"  compensation: {', '.join(marked)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_dot(graphs: Iterable[tuple[str, nx.DiGraph]]) -> str:
    """Graphviz DOT, one `digraph` per graph (`dot -Tsvg` draws each); compensation is dashed."""
    quote = json.dumps  # a DOT string escapes `"` and `\` as JSON does
    blocks = []
    for title, graph in graphs:
        alone, edges = _ordered(graph)
        lines = [f"digraph {quote(title)} {{"]
        for node in sorted(graph.nodes):
            if node in alone or _compensation(graph, node):
                style = " [style=dashed]" if _compensation(graph, node) else ""
                lines.append(f"  {quote(node)}{style};")
        lines += [f"  {quote(a)} -> {quote(b)};" for a, b in edges]
        lines.append("}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
