"""The two-shot prompt's worked examples as the planner's own (``bench/worfbench_examples.py``)."""

from __future__ import annotations

from bench.worfbench_score import parse_workflow


def test_the_two_shot_examples_become_plans_of_the_same_nodes_and_edges() -> None:
    from bench.worfbench_examples import plan_examples
    from bench.worfbench_variants import two_shot_examples

    for source in ("lumos", "os", "toolbench"):
        turns = two_shot_examples()[source]
        for example, shown in zip(plan_examples(source), turns[1::2], strict=True):
            wf = parse_workflow(shown["content"])
            assert [s.description for s in example.steps] == list(wf.nodes.values())
            edges = {(a, b) for a, b in wf.edges if a != "START" and b != "END"}
            assert {(d[1:], s.id[1:]) for s in example.steps for d in s.depends_on} == edges
            assert all(s.tool is None for s in example.steps)  # the nodes name no tool
            assert "api list" not in example.goal and "action list" not in example.goal
            assert not example.goal.startswith(("Here are", "Task:", "Now, I will"))
    assert plan_examples("seal_tools") == plan_examples("toolbench")  # as the two-shot call gets them

