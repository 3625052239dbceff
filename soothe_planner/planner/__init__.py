"""The LLM planner: both protocols, its model calls, reflection and prompts.

The front door of ``soothe_planner.planner``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.planner.calls import (
    Caller,
    Tally,
    counting_calls,
    raw_text_of,
    resolve_method,
)
from soothe_planner.planner.generation import REFUSED_NOTE
from soothe_planner.planner.llm_planner import (
    LLMPlanner,
)
from soothe_planner.planner.prompts import (
    CHARS_PER_TOKEN,
    DATA_TAGS,
    Prompt,
    build,
    escape_data,
    render_assessment,
    render_capabilities,
    render_results,
    template,
    template_names,
    trim_text,
)
from soothe_planner.planner.prompts.phases import (
    answer_prompt,
    assess_prompt,
    compact_system_fields,
    continuation_prompt,
    files_overview,
    generate_prompt,
    intake_prompt,
    latest_results,
    new_results,
    reflect_prompt,
    revise_prompt,
)
from soothe_planner.planner.reflection import (
    deterministic_reflection,
    split_failures,
)
from soothe_planner.planner.run_steps import (
    RunSteps,
)
from soothe_planner.planner.small_model import reask_temperature, sampled, small_model_rules_on
from soothe_planner.planner.small_model.echo import echo_reask
from soothe_planner.planner.stats import (
    PlannerStats,
)
from soothe_planner.planner.transport import (
    TRANSPORT_ERRORS,
    is_transport_error,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "DATA_TAGS",
    "REFUSED_NOTE",
    "TRANSPORT_ERRORS",
    "Caller",
    "LLMPlanner",
    "PlannerStats",
    "Prompt",
    "RunSteps",
    "Tally",
    "answer_prompt",
    "assess_prompt",
    "build",
    "compact_system_fields",
    "continuation_prompt",
    "counting_calls",
    "deterministic_reflection",
    "echo_reask",
    "escape_data",
    "files_overview",
    "generate_prompt",
    "intake_prompt",
    "is_transport_error",
    "latest_results",
    "new_results",
    "raw_text_of",
    "reask_temperature",
    "reflect_prompt",
    "render_assessment",
    "render_capabilities",
    "render_results",
    "resolve_method",
    "revise_prompt",
    "sampled",
    "small_model_rules_on",
    "split_failures",
    "template",
    "template_names",
    "trim_text",
]
