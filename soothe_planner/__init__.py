"""soothe-planner: LLM planners for LangGraph agents.

The public surface is this module: every name in ``__all__`` is importable from here, and
``tests/test_public_api.py`` pins the list so it grows only on purpose. Names are loaded on first
use, so ``import soothe_planner`` stays cheap for a CLI that only prints its version.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # errors
    "PlannerError": "errors",
    "ConfigError": "errors",
    "CheckpointDamagedError": "errors",
    "ModelIntegrityError": "errors",
    "PlanValidationError": "errors",
    "PlanParseError": "errors",
    "PlanGenerationError": "errors",
    "GenerationAttempt": "errors",
    "LLMBudgetExceeded": "errors",
    "ExecutionError": "errors",
    "ScriptExhaustedError": "errors",
    # data model
    "AgentDecision": "models",
    "Capability": "models",
    "ContinuationAssessment": "models",
    "FailurePolicy": "models",
    "GoalDirective": "models",
    "LoopState": "models",
    "Plan": "models",
    "PlanContext": "models",
    "PlanResult": "models",
    "PlanStep": "models",
    "PlannerSettings": "models",
    "Reflection": "models",
    "StatusAssessment": "models",
    "StepAction": "models",
    "StepResult": "models",
    # protocols
    "PlannerProtocol": "protocols",
    "LoopPlannerProtocol": "protocols",
    # concurrency
    "ConcurrencyPolicy": "concurrency",
    "ConcurrencyController": "concurrency",
    # the DAG
    "PlanDAG": "dag",
    "PlanManager": "dag",
    # the lenient parser
    "ParsedDecision": "parsing",
    "parse_decision": "parsing",
    # the planner
    "LLMPlanner": "planner",
    # execution and the loop
    "StepExecutor": "execution",
    "build_strange_loop": "graph.loop",
    "goal_input": "graph.loop",
    "run_config": "graph.loop",
    "create_planner_agent": "config",
    # configuration
    "SootheConfig": "config",
    "load_config": "config",
    "resolve_planner": "config",
    "resolve_loop_planner": "config",
    "resolve_executor": "config",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'soothe_planner' has no attribute {name!r}")
    value = getattr(import_module(f"soothe_planner.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # static analysers see the eager imports
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.config import (
        SootheConfig,
        create_planner_agent,
        load_config,
        resolve_executor,
        resolve_loop_planner,
        resolve_planner,
    )
    from soothe_planner.dag import PlanDAG, PlanManager
    from soothe_planner.errors import (
        CheckpointDamagedError,
        ConfigError,
        ExecutionError,
        GenerationAttempt,
        LLMBudgetExceeded,
        ModelIntegrityError,
        PlanGenerationError,
        PlannerError,
        PlanParseError,
        PlanValidationError,
        ScriptExhaustedError,
    )
    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.models import (
        AgentDecision,
        Capability,
        ContinuationAssessment,
        FailurePolicy,
        GoalDirective,
        LoopState,
        Plan,
        PlanContext,
        PlannerSettings,
        PlanResult,
        PlanStep,
        Reflection,
        StatusAssessment,
        StepAction,
        StepResult,
    )
    from soothe_planner.parsing import ParsedDecision, parse_decision
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.protocols import LoopPlannerProtocol, PlannerProtocol
