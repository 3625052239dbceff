"""How does one line give a LangGraph user a planning agent, built the way a YAML config builds one?

``create_planner_agent(model, tools)`` returns the compiled StrangeLoop, ready for ``invoke`` /
``ainvoke`` / ``stream`` with ``goal_input(...)`` or chat ``messages``. It turns its arguments into
a ``SootheConfig`` and goes through ``resolve_run(...).graph(...)``, the one place that builds the
loop, so an option means here what the same key means in a YAML file.

``**policy`` takes any key of the config sections by name — ``PlannerSettings``
(``max_iterations``, ``max_plan_steps``, ``retries``, ...), ``ConcurrencyPolicy``
(``global_max_llm_calls``, ``max_total_llm_calls``, ...), the run's stages (``synthesize``,
``intake``) and execution (``failure_policy``, ``step_timeout_s``, ``read_only_tools``); an
unknown key is a ``TypeError`` listing the known ones, and a bad value the config's own error.

Weighed: taking a model *string* as well as a ``BaseChatModel`` makes the one line work with the
provider table and the embedded model (``"local"``) as the YAML does; tools come as any
``ToolSource`` (a list, a ``ToolNode``, a toolkit). The planner sees, while planning, the tools
that are read-only (``metadata={"read_only": True}``, or named in ``read_only_tools``); every
tool runs steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel

from soothe_planner.errors import ConfigError

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from soothe_planner.config.schema import SootheConfig
    from soothe_planner.execution import ToolSource

__all__ = ["create_planner_agent", "policy_config"]


def _sections() -> dict[str, set[str]]:
    from soothe_planner.concurrency import ConcurrencyPolicy
    from soothe_planner.config.schema import ExecutionConfig, RunConfig
    from soothe_planner.models import PlannerSettings

    return {
        "planner": set(PlannerSettings.model_fields),
        "concurrency": set(ConcurrencyPolicy.model_fields),
        "run": set(RunConfig.model_fields),
        "execution": set(ExecutionConfig.model_fields) - {"tools", "subagents", "workspace"},
    }


def policy_config(model: str | None, *, approval: bool, policy: dict[str, Any]) -> SootheConfig:
    """The ``SootheConfig`` that ``create_planner_agent``'s arguments describe (no tools of its own)."""
    from soothe_planner.config.load import config_from_dict

    sections = _sections()
    data: dict[str, dict[str, Any]] = {name: {} for name in sections}
    for key, value in policy.items():
        home = next((name for name, keys in sections.items() if key in keys), None)
        if home is None:
            known = sorted(k for keys in sections.values() for k in keys)
            raise TypeError(f"create_planner_agent() got an unknown option {key!r}; known options: {', '.join(known)}")
        data[home][key] = value
    data["run"]["approval"] = approval
    data["execution"]["tools"] = []  # the tools are the caller's, not the built-ins
    data["checkpoint"] = {"backend": "memory"}
    if model is not None:
        data["models"] = {"default": model}
    return config_from_dict(data, source="create_planner_agent()")


def create_planner_agent(
    model: BaseChatModel | str,
    tools: ToolSource = (),
    *,
    checkpointer: Any = None,
    approval: bool = False,
    **policy: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The StrangeLoop over ``model`` and ``tools``, compiled (see the module docstring).

    ``checkpointer``: any LangGraph checkpointer (needed for approval, follow-ups on a thread and
    resuming). ``approval``: pause for a human's approval of each validated plan.
    """
    from soothe_planner.config.resolve import resolve_run
    from soothe_planner.execution import as_tools

    if not isinstance(model, BaseChatModel | str):
        raise TypeError(
            f"create_planner_agent() needs a LangChain chat model or a model string such as "
            f"'openai:gpt-4o-mini', got {type(model).__name__}"
        )
    resolved_tools = as_tools(tools)
    try:
        config = policy_config(model if isinstance(model, str) else None, approval=approval, policy=policy)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("create_planner_agent(): ", "create_planner_agent(): option ")) from None
    run = resolve_run(config, model if isinstance(model, BaseChatModel) else None, tools=resolved_tools)
    if checkpointer is None:
        return run.graph()
    return run.graph(checkpointer=checkpointer)
