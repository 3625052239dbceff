"""An answer made only of the request's own words answers nothing (small-model rules).

"Which module imports the requests library?" answered "requests", or "is it OK ...? yes or no, and
why" answered "yes, and why", repeats the request. Two places act on it: the done-guard refuses
such a final answer (``echoed_goal``), and the step that wrote it is asked once more before it ends
(``echo_reask``, given to the executor as its ``final_reply_check``). Words are compared as tokens
of any script, case aside; no word of any language is listed.
"""

from __future__ import annotations

from collections.abc import Sequence

from soothe_planner.models import AgentDecision, StepResult
from soothe_planner.planner.contract import final_outputs
from soothe_planner.planner.small_model.grounding import answer_facts, words

__all__ = ["ECHO_REASK", "echo_reask", "echoed_goal", "only_goal_words"]


def only_goal_words(goal: str, answer: str) -> bool:
    """Whether ``answer`` is made only of ``goal``'s own words, and is not a choice between the
    values the goal names ("which is longer, a.py or b.py?" answered "b.py" chooses).

    "Which module imports the requests library?" answered "requests" adds nothing to the question.
    Words are compared as tokens of any script, case aside; no word of any language is listed."""
    said = words(answer)
    if not said or not said <= words(goal):
        return False
    options = [f.casefold() for f in answer_facts(goal)]
    chosen = [f for f in answer_facts(answer) if f.casefold() in options]
    return not (len(options) >= 2 and chosen)


def echoed_goal(goal: str, decision: AgentDecision | None, results: Sequence[StepResult]) -> bool:
    """Whether the final answer is made only of the goal's own words (``only_goal_words``)."""
    texts = final_outputs(decision, results, model_steps_only=True)
    return bool(texts) and only_goal_words(goal, "\n".join(texts))


ECHO_REASK = (
    "Your reply only repeats words of the request: it answers nothing. Answer the request with what the "
    "data above says (the value, the name, the line it states, or yes or no with the reason the data "
    "gives), in the request's language."
)
"""The one re-ask a final answer step gets when its reply is only the request's words (``echo_reask``)."""


def echo_reask(goal: str, reply: str) -> str | None:
    """The re-ask for a final answer step's ``reply`` that only repeats ``goal``'s words, or None.

    Seen in the embedded 1.5B's suite runs: asked whether soil cores may stay in the fridge overnight ("yes
    or no, and why"), with the protocol that says they may not read, it answered "yes, and why" in
    every iteration; asked which module imports a library, it answered the library's name. The
    done-guard refused each (``echoed_goal``), and each re-plan's answer step echoed again. Shown
    its own reply and told it answered nothing, the step is asked once more before it ends; the
    guard still judges what it gives. Not yet measured on the suites."""
    return ECHO_REASK if only_goal_words(goal, reply) else None
