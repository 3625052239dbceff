"""How is the WorFBench harness checked end to end without a model (``--scripted``)?

A ``FunctionChatModel`` that answers every call with the gold plan of the item whose task is in
the prompt, in the form the run in progress asks for (``worfbench_variants.RUNNING``): the gold
answer text for the two-shot call; the gold steps as calls lines for a plan in the calls syntax;
as the compact JSON plan (``answer`` steps carrying each node's text) or the full one
(descriptions) for a structured call. Everything between — the planner, its prompts and schemas,
the call records, the scoring — is the production path, so a scripted run exercises what a model
run does in seconds, and every variant should score as the gold against itself.

The model declares what the embedded model declares (the compact profile and the calls syntax for
``auto``, the small-model rules), so the planner resolves its settings and applies its rules as it
would on that model; it takes no grammar (the embedded server's own request field).
Token counts are the test double's (characters / 4), seconds are the harness's own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bench.worfbench_score import END, START, Workflow, parse_workflow, transitive_reduction
from bench.worfbench_variants import RUNNING, task_of

__all__ = ["EMBEDDED_METADATA", "gold_as_calls", "gold_as_compact", "gold_as_full", "scripted_model"]

EMBEDDED_METADATA = {"soothe_prompt_profile": "compact", "soothe_plan_syntax": "calls", "soothe_small_model_rules": True}


def _deps(wf: Workflow) -> dict[str, list[str]]:
    inner = [(a, b) for a, b in transitive_reduction(list(wf.nodes), wf.edges) if a != START and b != END]
    deps: dict[str, list[str]] = {k: [] for k in wf.nodes}
    for a, b in sorted(inner):
        deps[b].append(a)
    return deps


def gold_as_full(wf: Workflow) -> dict[str, Any]:
    """A gold workflow as the planner's full ``GeneratePlan`` answer (dependencies = reduced edges)."""
    deps = _deps(wf)
    steps = [{"id": k, "description": v, "depends_on": deps[k]} for k, v in wf.nodes.items()]
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "follow the workflow", "steps": steps}


def _sid(node: str) -> str:
    return f"s{node}" if node.isdigit() else node


def gold_as_compact(wf: Workflow) -> dict[str, Any]:
    """The compact JSON plan: each node an ``answer`` step whose task is the node's text."""
    deps = _deps(wf)
    return {"steps": [{"id": _sid(k), "tool": "answer", "args": {"task": v}, "depends_on": [_sid(d) for d in deps[k]]}
                      for k, v in wf.nodes.items()]}


def gold_as_calls(wf: Workflow) -> str:
    """The plan in the calls syntax: ``sN = answer(s1, s2, task="...")`` per node."""
    deps = _deps(wf)
    lines = [f"{_sid(k)} = answer({''.join(_sid(d) + ', ' for d in deps[k])}task={json.dumps(v)})"
             for k, v in wf.nodes.items()]
    return "```python\n" + "\n".join(lines) + "\n```"


def scripted_model(items: Sequence[dict[str, Any]]) -> Any:
    """The scripted model for ``items`` (see the module docstring)."""
    from soothe_planner.testing import FunctionChatModel

    golds = [(task_of(it), str(it["conversations"][-1]["content"])) for it in items]

    def gold_in(call: Any) -> str:
        text = "\n".join(m.text for m in call.messages)
        found = [g for task, g in golds if task in text]
        if not found:
            raise LookupError("a scripted WorFBench call names no item's task")
        return found[0]

    def answer(call: Any) -> Any:
        run = RUNNING.get()
        if not run:
            return "OK"  # the harness's warm-up call
        gold = gold_in(call)
        if run == "two-shot":
            return gold
        wf = parse_workflow(gold)
        if call.schema_name is None:
            return gold_as_calls(wf)
        return gold_as_compact(wf) if run == "compact" else gold_as_full(wf)

    return FunctionChatModel(answer, metadata=dict(EMBEDDED_METADATA))
