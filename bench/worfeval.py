"""What does WorFBench's own metric (WorFEval) say about a predicted workflow, quirks included?

WorFEval scores an answer of the form ``Node: 1: … 2: … Edge: (START,1) (1,2) (2,END)`` against the
gold answer in two numbers, each a precision/recall/F1 averaged over a subset:

- **f1_chain** ("node" mode): nodes are matched one-to-one by sentence-embedding cosine
  (all-mpnet-base-v2; a pair can match when its cosine, negatives clipped to 0, is *above* 0.6;
  the matching maximises the total cosine), and the number right is the longest increasing
  subsequence of the predicted nodes, in the order written, under their matched position in a gold
  topological order. The best F1 over the gold's topological orders counts.
- **f1_graph** ("graph" mode): nodes matched the same way, START and END included as nodes; an
  edge is right when it is in both graphs; the size of the largest connected component of the
  matched nodes under the right edges is the number right, over every node (START and END
  included) on each side.

This module is written from that definition and from reading the public evaluator
(``evaluator/graph_evaluator.py`` and ``node_eval.py`` of zjunlp/WorFBench); none of its code is
copied. The networkx calls it makes — ``max_weight_matching`` for the node matching,
``all_topological_sorts`` for the gold orders — are made here too, because which of several equal
matchings, and which 20 orders, it picks are part of the numbers. What its code does that the
definition does not say, reproduced on purpose (``official_*``):

1. **Edges are compared by node index, not through the matching.** A predicted edge (2,3) is right
   when the gold has an edge (2,3), whatever gold nodes predicted nodes 2 and 3 matched.
2. **At most 20 gold orders**, the first 20 that networkx enumerates; a gold graph of 10 or more
   nodes *counting START and END* gets one order: its nodes as listed, START and END included
   (so recall there is at most n/(n+2)).
3. **The chain count is at least 1:** the subsequence search starts every position at 1, so a
   prediction with no matched node still counts one node right.
4. **An answer without a single ``(x,y)`` edge scores 0 in both modes**, and so does one without
   the word ``Node`` (the evaluator skips it but divides by the whole subset).
5. **Parsing is by pattern over the whole text:** every ``<digits>: text`` or ``<digits>. text``
   anywhere is a node, in order of appearance; every ``(a,b)`` with a a number or START and b a
   number or END is an edge; node numbers are positions, so an answer numbered from 0 or with a
   gap has its edges shifted. Fences, bold markers or prose around the block do not matter.

Where the evaluator itself would crash (an empty prediction after parsing, no matched START), the
item scores 0 here and ``ItemScore.notes`` says so.

``corrected_*`` beside them fix 1–3 and nothing else: predicted edges are mapped through the
matching before they are compared; the chain count is the longest run of matched predicted nodes
(in the order written) that some topological order of the gold allows, over every order, START and
END left out; no match means 0. They are reported beside the official numbers, never instead.

The similarity is a parameter (``Similarity``: two lists of texts → their cosine matrix), so the
tests run the metric on hand-worked items with a stub and need no torch; ``bench.embeddings``
provides the real one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice

__all__ = [
    "END",
    "START",
    "ItemScore",
    "OfficialGraph",
    "Prf",
    "Similarity",
    "corrected_f1_chain",
    "corrected_f1_graph",
    "match_nodes",
    "official_f1_chain",
    "official_f1_graph",
    "read_answer",
    "score_item",
    "topological_orders",
]

START, END = "START", "END"
THRESHOLD = 0.6
MAX_ORDERS = 20
ONE_ORDER_FROM = 10  # nodes, START and END included

Similarity = Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]]

_NODE = re.compile(r"\d+[:.] (.+)")
_EDGE = re.compile(r"\(\s*(\d+|START)\s*,\s*(\d+|END)\s*\)")


@dataclass(frozen=True)
class OfficialGraph:
    """An answer as the evaluator reads it: START, the nodes as written, END; edges by position."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]

    @property
    def inner(self) -> list[str]:
        """The nodes without START and END (by name, as the evaluator filters them)."""
        return [n for n in self.nodes if n not in (START, END)]


def read_answer(text: str) -> OfficialGraph | None:
    """The graph the evaluator reads from ``text``, or None where it reads nothing (quirks 4 and 5)."""
    if "Node" not in text:
        return None
    nodes = (START, *(m.strip() for m in _NODE.findall(text)), END)
    pairs = _EDGE.findall(text)
    if not pairs:
        return None
    last = len(nodes) - 1
    edges = tuple((0 if a == START else int(a), last if b == END else int(b)) for a, b in pairs)
    return OfficialGraph(nodes, edges)


@dataclass(frozen=True)
class Prf:
    precision: float
    recall: float
    f1: float

    @staticmethod
    def of(right_pred: float, n_pred: int, right_gold: float, n_gold: int) -> Prf:
        p = right_pred / n_pred if n_pred else 0.0
        r = right_gold / n_gold if n_gold else 0.0
        return Prf(p, r, 2 * p * r / (p + r) if p + r else 0.0)


ZERO = Prf(0.0, 0.0, 0.0)


def match_nodes(
    pred: Sequence[str], gold: Sequence[str], similarity: Similarity, *, threshold: float = THRESHOLD
) -> list[int]:
    """For each predicted node, the index of its gold match or -1: a maximum-weight matching over
    the pairs whose cosine (negatives clipped to 0) is above ``threshold``."""
    import networkx as nx

    mapping = [-1] * len(pred)
    if not pred or not gold:
        return mapping
    cos = similarity(pred, gold)
    g = nx.Graph()
    for i in range(len(pred)):  # edges added in the evaluator's order: ties break the same way
        for j in range(len(gold)):
            w = max(float(cos[i][j]), 0.0)
            if w > threshold:
                g.add_edge(i, str(j), weight=w)
    for a, b in nx.max_weight_matching(g):
        if isinstance(a, int):
            mapping[a] = int(b)
        else:
            mapping[int(b)] = int(a)
    return mapping


def topological_orders(gold: OfficialGraph) -> list[list[str]]:
    """The gold orders the chain score is taken over (quirk 2)."""
    import networkx as nx

    if len(gold.nodes) >= ONE_ORDER_FROM:
        return [list(gold.nodes)]
    g = nx.DiGraph()
    g.add_nodes_from(range(len(gold.nodes)))
    g.add_edges_from(gold.edges)
    orders = islice(nx.all_topological_sorts(g), MAX_ORDERS)
    return [[gold.nodes[i] for i in order if gold.nodes[i] not in (START, END)] for order in orders]


def _chain_count(mapping: Sequence[int]) -> int:
    """Longest subsequence whose matched gold positions increase; every position starts at 1 (quirk 3)."""
    best = [1] * len(mapping)
    for i, mi in enumerate(mapping):
        for j in range(i):
            mj = mapping[j]
            if mi != -1 and mj != -1 and mi > mj:
                best[i] = max(best[i], best[j] + 1)
    return max(best)


def official_f1_chain(pred: OfficialGraph, gold: OfficialGraph, similarity: Similarity) -> Prf:
    nodes = pred.inner
    if not nodes:
        return ZERO  # the evaluator crashes here (max of an empty sequence)
    best = ZERO
    for order in topological_orders(gold):
        count = _chain_count(match_nodes(nodes, order, similarity))
        one = Prf.of(count, len(nodes), count, len(order))
        if one.f1 > best.f1:
            best = one
    return best


def _largest_component(nodes: Sequence[int], edges: Sequence[tuple[int, int]]) -> int:
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return max((len(c) for c in nx.connected_components(g)), default=0)


def official_f1_graph(pred: OfficialGraph, gold: OfficialGraph, similarity: Similarity) -> Prf:
    mapping = match_nodes(pred.nodes, gold.nodes, similarity)
    matched_pred = {i for i, j in enumerate(mapping) if j != -1}
    matched_gold = {j for j in mapping if j != -1}
    gold_edges = {e for e in gold.edges if e[0] in matched_gold and e[1] in matched_gold}
    # Quirk 1: a predicted edge is right when the gold has the same pair of *indices*.
    right = [e for e in pred.edges if e[0] in matched_pred and e[1] in matched_pred and e in gold_edges]
    return Prf.of(
        _largest_component(sorted(matched_pred), right),
        len(pred.nodes),
        _largest_component(sorted(matched_gold), right),
        len(gold.nodes),
    )


def _ancestors(gold: OfficialGraph) -> list[set[int]]:
    parents: list[set[int]] = [set() for _ in gold.nodes]
    for a, b in gold.edges:
        if 0 <= a < len(gold.nodes) and 0 <= b < len(gold.nodes):
            parents[b].add(a)
    out: list[set[int]] = []
    for n in range(len(gold.nodes)):
        seen: set[int] = set()
        stack = list(parents[n])
        while stack:
            p = stack.pop()
            if p not in seen:
                seen.add(p)
                stack.extend(parents[p])
        out.append(seen)
    return out


def corrected_f1_chain(pred: OfficialGraph, gold: OfficialGraph, similarity: Similarity) -> Prf:
    """The longest run of matched predicted nodes, in the order written, that some topological order
    of the gold allows (every order, START and END left out); no match counts 0."""
    nodes = pred.inner
    inner_ids = [i for i, n in enumerate(gold.nodes) if n not in (START, END)]
    mapping = match_nodes(nodes, [gold.nodes[i] for i in inner_ids], similarity)
    ancestors = _ancestors(gold)
    seq = [inner_ids[m] for m in mapping if m != -1]  # gold ids, in predicted order
    # Any two kept nodes must not be written against a gold dependency (the later one an ancestor of
    # the earlier); pairwise is enough. At most ~10 matched nodes: a plain search is instant.
    best = 0

    def extend(start: int, kept: list[int]) -> None:
        nonlocal best
        best = max(best, len(kept))
        if len(kept) + len(seq) - start <= best:
            return
        for k in range(start, len(seq)):
            g = seq[k]
            if all(g not in ancestors[x] for x in kept):
                extend(k + 1, [*kept, g])

    extend(0, [])
    return Prf.of(best, len(nodes), best, len(inner_ids))


def corrected_f1_graph(pred: OfficialGraph, gold: OfficialGraph, similarity: Similarity) -> Prf:
    """``official_f1_graph`` with predicted edges mapped through the matching before comparison."""
    mapping = match_nodes(pred.nodes, gold.nodes, similarity)
    matched_pred = [i for i, j in enumerate(mapping) if j != -1]
    gold_edges = set(gold.edges)
    right = [
        (a, b)
        for a, b in pred.edges
        if 0 <= a < len(mapping) and 0 <= b < len(mapping) and mapping[a] != -1 and mapping[b] != -1
        and (mapping[a], mapping[b]) in gold_edges
    ]
    size = _largest_component(matched_pred, right)  # the same component, seen from the gold side
    return Prf.of(size, len(pred.nodes), size, len(gold.nodes))


@dataclass
class ItemScore:
    """One predicted answer against its gold: the official numbers and the corrected ones."""

    parsed: bool
    f1_chain: Prf = ZERO
    f1_graph: Prf = ZERO
    f1_chain_corrected: Prf = ZERO
    f1_graph_corrected: Prf = ZERO
    notes: list[str] = field(default_factory=list)


def score_item(answer: str, gold_answer: str, similarity: Similarity) -> ItemScore:
    """Score ``answer`` (the model's text) against ``gold_answer`` (the item's gold text)."""
    gold = read_answer(gold_answer)
    if gold is None:
        raise ValueError("the gold answer has no Node block or no edges; the official evaluator cannot score it")
    pred = read_answer(answer)
    if pred is None:
        return ItemScore(False, notes=["no 'Node' or no '(x,y)' edge: scores 0 (quirk 4)"])
    notes = []
    if not pred.inner:
        notes.append("no node lines: the evaluator would crash; scored 0")
    out = ItemScore(
        True,
        official_f1_chain(pred, gold, similarity),
        official_f1_graph(pred, gold, similarity),
        corrected_f1_chain(pred, gold, similarity),
        corrected_f1_graph(pred, gold, similarity),
        notes,
    )
    if out.f1_graph == ZERO and pred.inner:
        out.notes.append("START matched nothing: the evaluator would crash; scored 0")
    return out
