"""WorFEval (``bench/worfeval.py``): the official evaluator's numbers on items worked out by hand.

Each expected number below was worked out from the evaluator's definition (see the module
docstring), with a stub similarity — 1.0 for identical texts, else a listed value or 0 — so no
embedding model is needed. The last test checks the real model's cosines where it is installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import pytest

from bench.worfeval import (
    Prf,
    corrected_f1_chain,
    corrected_f1_graph,
    official_f1_chain,
    official_f1_graph,
    read_answer,
    score_item,
    topological_orders,
)

CHAIN_ABC = "Node:\n1: a\n2: b\n3: c\nEdge: (START,1) (1,2) (2,3) (3,END)"


def stub(extra: dict[tuple[str, str], float] | None = None):  # type: ignore[no-untyped-def]
    def sim(pred: Sequence[str], gold: Sequence[str]) -> list[list[float]]:
        table = extra or {}
        return [[1.0 if p == g else table.get((p, g), 0.0) for g in gold] for p in pred]

    return sim


def approx(prf: Prf, p: float, r: float, f1: float) -> bool:
    return prf == Prf(pytest.approx(p), pytest.approx(r), pytest.approx(f1))  # type: ignore[arg-type]


def g(text: str):  # type: ignore[no-untyped-def]
    out = read_answer(text)
    assert out is not None
    return out


def test_swapped_nodes_lose_one_on_the_chain_but_keep_a_full_graph_score_because_edges_match_by_index() -> None:
    pred, gold = g("Node:\n1: b\n2: a\n3: c\nEdge: (START,1) (1,2) (2,3) (3,END)"), g(CHAIN_ABC)
    # Chain: mapped positions b->1, a->0, c->2; the longest increasing run is 2 of 3.
    assert approx(official_f1_chain(pred, gold, stub()), 2 / 3, 2 / 3, 2 / 3)
    # Graph: every predicted edge has the same index pair in the gold, so all 5 nodes are one component.
    assert approx(official_f1_graph(pred, gold, stub()), 1.0, 1.0, 1.0)
    # Mapped through the matching only (c,END) is right: a component of 2 of 5 nodes.
    assert approx(corrected_f1_graph(pred, gold, stub()), 0.4, 0.4, 0.4)
    assert approx(corrected_f1_chain(pred, gold, stub()), 2 / 3, 2 / 3, 2 / 3)


def test_only_the_first_twenty_gold_orders_count_so_a_perfect_wide_answer_scores_point_six() -> None:
    wide = (
        "Node:\n1: a\n2: b\n3: c\n4: d\n5: e\nEdge: (START,1) (START,2) (START,3) (START,4) (START,5) "
        "(1,END) (2,END) (3,END) (4,END) (5,END)"
    )
    orders = topological_orders(g(wide))
    # networkx takes the last ready node first: the first 20 of the 120 orders all start with e,
    # and none of them holds four of a..e in written order; the best is three (e.g. "ebcda").
    assert len(orders) == 20 and all(o[0] == "e" for o in orders)
    assert approx(official_f1_chain(g(wide), g(wide), stub()), 0.6, 0.6, 0.6)
    assert approx(corrected_f1_chain(g(wide), g(wide), stub()), 1.0, 1.0, 1.0)
    assert approx(official_f1_graph(g(wide), g(wide), stub()), 1.0, 1.0, 1.0)


def test_a_gold_of_ten_nodes_with_start_and_end_has_one_order_that_includes_them() -> None:
    body = "\n".join(f"{i}: n{i}" for i in range(1, 9))
    edges = " ".join(["(START,1)", *(f"({i},{i + 1})" for i in range(1, 8)), "(8,END)"])
    chain8 = g(f"Node:\n{body}\nEdge: {edges}")
    assert topological_orders(chain8) == [["START", *(f"n{i}" for i in range(1, 9)), "END"]]
    # 8 right of 8 predicted, of 10 in the order: recall 0.8, F1 8/9.
    assert approx(official_f1_chain(chain8, chain8, stub()), 1.0, 0.8, 8 / 9)
    assert approx(corrected_f1_chain(chain8, chain8, stub()), 1.0, 1.0, 1.0)


def test_an_answer_matching_nothing_still_counts_one_chain_node_and_start_end_on_the_graph() -> None:
    pred = g("Node:\n1: x\n2: y\nEdge: (START,1) (1,2) (2,END)")
    # Chain: count starts at 1: P 1/2, R 1/3, F1 0.4. Corrected: 0.
    assert approx(official_f1_chain(pred, g(CHAIN_ABC), stub()), 0.5, 1 / 3, 0.4)
    assert corrected_f1_chain(pred, g(CHAIN_ABC), stub()).f1 == 0.0
    # Graph: START and END match themselves, no edge joins them: component 1; P 1/4, R 1/5.
    assert approx(official_f1_graph(pred, g(CHAIN_ABC), stub()), 0.25, 0.2, 2 / 9)


def test_a_cosine_must_be_above_the_cut_and_the_matching_maximises_the_total() -> None:
    at_cut = stub({("A", "a"): 0.6})
    pred = g("Node:\n1: A\n2: b\n3: c\nEdge: (START,1) (1,2) (2,3) (3,END)")
    assert approx(official_f1_chain(pred, g(CHAIN_ABC), at_cut), 2 / 3, 2 / 3, 2 / 3)  # A unmatched: b,c
    # p1 could take a (0.9) or b (0.7), p2 only a (0.8): the heavier total pairs p1-b and p2-a (1.5 > 0.9).
    crossing = stub({("p1", "a"): 0.9, ("p1", "b"): 0.7, ("p2", "a"): 0.8})
    two = g("Node:\n1: p1\n2: p2\nEdge: (START,1) (1,2) (2,END)")
    # p1->b (1), p2->a (0): decreasing, so the chain count is 1: P 1/2, R 1/3.
    assert approx(official_f1_chain(two, g(CHAIN_ABC), crossing), 0.5, 1 / 3, 0.4)


def test_the_parser_reads_fenced_and_bolded_blocks_and_refuses_answers_without_edges() -> None:
    fenced = "Here is the plan.\n```\n**Node:**\n1. a\n2. b\n3. c\n**Edge:** (START,1) (1,2) (2,3) (3,END)\n```"
    item = score_item(fenced, CHAIN_ABC, stub())
    assert item.parsed and item.f1_chain.f1 == pytest.approx(1.0) and item.f1_graph.f1 == pytest.approx(1.0)
    no_edges = score_item("Node:\n1: a\n2: b\n3: c", CHAIN_ABC, stub())
    assert not no_edges.parsed and no_edges.f1_chain.f1 == 0.0 and no_edges.f1_graph.f1 == 0.0
    assert read_answer("nodes:\n1: a\nEdge: (START,1)") is None  # "Node" is case-sensitive
    # Numbering from 0 shifts every edge by one position: (0,1) means START -> the first node.
    shifted = g("Node:\n0: a\n1: b\nEdge: (START,0) (0,1) (1,END)")
    assert shifted.nodes == ("START", "a", "b", "END") and shifted.edges == ((0, 0), (0, 1), (1, 3))


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers is not installed (the bench extra brings it)",
)
def test_the_real_embedding_model_gives_the_documented_cosines() -> None:
    from bench.embeddings import EmbeddingSimilarity

    try:
        sim = EmbeddingSimilarity()
    except RuntimeError as exc:  # the part packages are missing
        pytest.skip(str(exc))
    (near, far), = sim(["Search for flights to Paris"], ["search flights", "execute bash code"])
    assert near == pytest.approx(0.736, abs=0.002)
    assert far == pytest.approx(-0.024, abs=0.002)
