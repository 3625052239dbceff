"""How close is a predicted workflow graph to a WorFBench gold graph?

WorFBench items answer with text of the form ``Node:\\n1: ...\\n2: ...\\nEdge: (START,1) (1,2) (2,END)``.
This module parses that form, checks a graph's validity and scores a prediction against the gold.

What was weighed:

- **Validity** is structural only: the text parses into at least one node, node ids are unique,
  every edge names a known node (or START/END), and the graph is acyclic. A missing ``Edge:`` line
  is valid (a few gold items have none) and means "no dependencies".
- **Node matching** is one-to-one. The paper matches by sentence-embedding similarity; no embedding
  model can be loaded here, so the similarity is lexical: rapidfuzz's token-set ratio (0..1), which
  rewards a prediction that restates a gold node in other order or with extra words. Pairs below
  ``threshold`` (0.6, as the paper's similarity cut) cannot match. Among the allowed pairs the
  matching maximises the total similarity exactly (a small Hungarian algorithm: plans have tens of
  nodes, so O(n^3) is nothing; greedy-by-similarity can lose a whole match on ties).
- **Edges** are compared on transitive reductions: ``(START,1) (1,2) (START,2)`` says the same as
  ``(START,1) (1,2)``. Each graph is reduced on its own nodes (START and END included), predicted
  ids are renamed to their matched gold ids (an unmatched predicted node keeps a name that matches
  nothing), and edge precision/recall/F1 are taken on those sets.
- Two empty sets score 1.0 (nothing predicted, nothing expected: nothing wrong).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz

__all__ = [
    "END",
    "START",
    "GraphScore",
    "Workflow",
    "anchored_edges",
    "match_nodes",
    "parse_workflow",
    "score",
    "similarity",
    "transitive_reduction",
    "validity_errors",
    "workflow_to_text",
]

START = "START"
END = "END"
DEFAULT_THRESHOLD = 0.6

_NODE_LINE = re.compile(r"^\s*(\d+)\s*[:.)]\s*(.*\S)?\s*$")
_EDGE = re.compile(r"\(\s*(START|END|\d+)\s*,\s*(START|END|\d+)\s*\)", re.IGNORECASE)


@dataclass
class Workflow:
    """A workflow graph: ordered nodes (id → text) and directed edges, START/END allowed in edges."""

    nodes: dict[str, str] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Problems found while parsing (duplicate ids, lines that are neither nodes nor edges)."""


def _norm_end(node: str) -> str:
    return node.upper() if node.upper() in (START, END) else node


def parse_workflow(text: str) -> Workflow:
    """Parse ``Node:`` / ``Edge:`` text. Never raises: problems land in ``Workflow.errors``."""
    wf = Workflow()
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        head = line.split(":", 1)[0].strip().lower()
        if head in {"node", "nodes"}:
            section = "node"
            continue
        if head in {"edge", "edges"}:
            section = "edge"
            line = line.split(":", 1)[1] if ":" in line else ""
        elif head == "graph":
            # Prose may follow "Graph:"; from here on only "(a,b)" pairs count.
            section = "edge"
            continue
        if section == "edge" or (section == "node" and line.startswith("(")):
            section = "edge"
            wf.edges.extend((_norm_end(a), _norm_end(b)) for a, b in _EDGE.findall(line))
            continue
        if section == "node":
            m = _NODE_LINE.match(line)
            if not m:
                wf.errors.append(f"line {line[:60]!r} is not a node ('N: text')")
                continue
            node_id, body = m.group(1), (m.group(2) or "").strip()
            if node_id in wf.nodes:
                wf.errors.append(f"duplicate node id {node_id!r}")
                continue
            wf.nodes[node_id] = body
    if not wf.nodes:
        wf.errors.append("no nodes")
    return wf


def workflow_to_text(wf: Workflow) -> str:
    """The WorFBench answer text for a workflow (the inverse of ``parse_workflow``)."""
    lines = ["Node:"] + [f"{k}: {v}" for k, v in wf.nodes.items()]
    lines.append("Edge: " + " ".join(f"({a},{b})" for a, b in wf.edges))
    return "\n".join(lines)


def _find_cycle(nodes: Iterable[str], edges: Sequence[tuple[str, str]]) -> list[str] | None:
    adj: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, [])
    colour: dict[str, int] = dict.fromkeys(adj, 0)
    for root in adj:
        if colour[root]:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                colour[node] = 1
                path.append(node)
            if i < len(adj[node]):
                stack.append((node, i + 1))
                nxt = adj[node][i]
                if colour[nxt] == 1:
                    return [*path[path.index(nxt) :], nxt]
                if colour[nxt] == 0:
                    stack.append((nxt, 0))
            else:
                colour[node] = 2
                path.pop()
    return None


def validity_errors(wf: Workflow) -> list[str]:
    """Why ``wf`` is not a valid workflow graph; empty when it is."""
    errors = list(wf.errors)
    known = set(wf.nodes) | {START, END}
    for a, b in wf.edges:
        for end in (a, b):
            if end not in known:
                errors.append(f"edge ({a},{b}) names unknown node {end!r}")
        if b == START or a == END:
            errors.append(f"edge ({a},{b}) runs into START or out of END")
    cycle = _find_cycle(wf.nodes, wf.edges)
    if cycle:
        errors.append("cycle: " + " -> ".join(cycle))
    return errors


def similarity(a: str, b: str) -> float:
    """Lexical similarity in 0..1 (token-set ratio, case-folded)."""
    return float(fuzz.token_set_ratio(a.lower(), b.lower())) / 100.0


def _hungarian_max(weights: list[list[float]]) -> list[int]:
    """For each row, the column assigned (-1 for none) maximising the total weight (rows ≤ cols)."""
    n, m = len(weights), len(weights[0]) if weights else 0
    inf = float("inf")
    # Potentials-based Hungarian on costs = -weight, 1-indexed as in the textbook formulation.
    u = [0.0] * (n + 1)
    v = [0.0] * (m + 1)
    p = [0] * (m + 1)
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = p[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -weights[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    assignment = [-1] * n
    for j in range(1, m + 1):
        if p[j]:
            assignment[p[j] - 1] = j - 1
    return assignment


def match_nodes(
    pred: Mapping[str, str], gold: Mapping[str, str], *, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, str]:
    """A one-to-one map predicted id → gold id maximising total similarity; pairs below threshold never match."""
    p_ids, g_ids = list(pred), list(gold)
    if not p_ids or not g_ids:
        return {}
    sims = [[similarity(pred[p], gold[g]) for g in g_ids] for p in p_ids]
    # A pair under the threshold weighs 0, so the matching never prefers it; it is dropped after.
    weights = [[s if s >= threshold else 0.0 for s in row] for row in sims]
    transpose = len(p_ids) > len(g_ids)
    if transpose:
        weights = [list(col) for col in zip(*weights, strict=True)]
    assign = _hungarian_max(weights)
    out: dict[str, str] = {}
    for r, c in enumerate(assign):
        if c < 0:
            continue
        pi, gi = (c, r) if transpose else (r, c)
        if sims[pi][gi] >= threshold:
            out[p_ids[pi]] = g_ids[gi]
    return out


def transitive_reduction(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The edges of an acyclic graph that no longer path implies."""
    adj: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        if a != b:
            adj.setdefault(a, set()).add(b)
            adj.setdefault(b, set())
    reach: dict[str, set[str]] = {}

    def reachable(n: str) -> set[str]:
        # Iterative post-order so deep chains cannot overflow the recursion limit.
        if n in reach:
            return reach[n]
        stack = [(n, iter(adj[n]))]
        seen = {n}
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                acc: set[str] = set()
                for c in adj[node]:
                    acc |= reach[c] | {c}
                reach[node] = acc
            elif nxt not in reach and nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(adj[nxt])))
        return reach[n]

    kept: set[tuple[str, str]] = set()
    for a, succ in adj.items():
        for b in succ:
            if not any(b in reachable(c) for c in succ if c != b):
                kept.add((a, b))
    return kept


def anchored_edges(wf: Workflow) -> list[tuple[str, str]]:
    """``wf``'s edges plus START → every node without a predecessor and every node without a successor → END.

    The answer format says a graph starts at START and ends at END; some answers (and a few gold
    items) leave those edges out. Adding them to both sides compares what the graphs mean.
    """
    edges = list(wf.edges)
    has_pred = {b for _, b in edges}
    has_succ = {a for a, _ in edges}
    edges += [(START, n) for n in wf.nodes if n not in has_pred]
    edges += [(n, END) for n in wf.nodes if n not in has_succ]
    return edges


def _prf(tp: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    if n_pred == 0 and n_gold == 0:
        return 1.0, 1.0, 1.0
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


@dataclass
class GraphScore:
    valid: bool
    node_precision: float
    node_recall: float
    node_f1: float
    edge_precision: float
    edge_recall: float
    edge_f1: float
    errors: list[str] = field(default_factory=list)


def score(pred: Workflow, gold: Workflow, *, threshold: float = DEFAULT_THRESHOLD) -> GraphScore:
    """Score ``pred`` against ``gold``. An invalid prediction scores 0 on edges (its nodes still count)."""
    errors = validity_errors(pred)
    mapping = match_nodes(pred.nodes, gold.nodes, threshold=threshold)
    np_, nr, nf = _prf(len(mapping), len(pred.nodes), len(gold.nodes))
    if errors:
        return GraphScore(False, np_, nr, nf, 0.0, 0.0, 0.0, errors)
    gold_red = transitive_reduction([*gold.nodes, START, END], anchored_edges(gold))
    pred_red = transitive_reduction([*pred.nodes, START, END], anchored_edges(pred))

    def rename(n: str) -> str:
        return n if n in (START, END) else mapping.get(n, f"pred:{n}")

    pred_edges = {(rename(a), rename(b)) for a, b in pred_red}
    ep, er, ef = _prf(len(pred_edges & gold_red), len(pred_edges), len(gold_red))
    return GraphScore(True, np_, nr, nf, ep, er, ef, [])
