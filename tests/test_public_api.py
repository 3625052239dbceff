"""The public surface grows only on purpose: this list is the contract."""

from __future__ import annotations

import subprocess
import sys

import soothe_planner

EXPECTED = {
    "__version__",
    # errors
    "PlannerError",
    "ConfigError",
    "CheckpointDamagedError",
    "ModelIntegrityError",
    "PlanValidationError",
    "PlanParseError",
    "PlanGenerationError",
    "GenerationAttempt",
    "LLMBudgetExceeded",
    "ExecutionError",
    "ScriptExhaustedError",
    # data model
    "AgentDecision",
    "Capability",
    "ContinuationAssessment",
    "FailurePolicy",
    "GoalDirective",
    "LoopState",
    "Plan",
    "PlanContext",
    "PlanResult",
    "PlanStep",
    "PlannerSettings",
    "Reflection",
    "StatusAssessment",
    "StepAction",
    "StepResult",
    # protocols
    "PlannerProtocol",
    "LoopPlannerProtocol",
    # machinery
    "ConcurrencyPolicy",
    "ConcurrencyController",
    "PlanDAG",
    "PlanManager",
    "ParsedDecision",
    "parse_decision",
    "LLMPlanner",
    "StepExecutor",
    "build_strange_loop",
    "goal_input",
    "run_config",
    "create_planner_agent",
    "SootheConfig",
    "load_config",
    "resolve_planner",
    "resolve_loop_planner",
    "resolve_executor",
}


def test_all_is_exactly_the_pinned_surface() -> None:
    assert set(soothe_planner.__all__) == EXPECTED
    assert len(soothe_planner.__all__) == len(EXPECTED), "duplicate names in __all__"


def test_every_public_name_resolves() -> None:
    for name in soothe_planner.__all__:
        assert getattr(soothe_planner, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        soothe_planner.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:  # pragma: no cover - the assertion is the point
        raise AssertionError("expected AttributeError")


def test_planner_implements_both_protocols() -> None:
    from soothe_planner import LLMPlanner, LoopPlannerProtocol, PlannerProtocol
    from soothe_planner.protocols import protocol_mismatches
    from soothe_planner.testing import ScriptedChatModel

    planner = LLMPlanner(ScriptedChatModel(responses=[]))
    assert isinstance(planner, PlannerProtocol)
    assert isinstance(planner, LoopPlannerProtocol)
    assert protocol_mismatches(planner, PlannerProtocol) == protocol_mismatches(planner, LoopPlannerProtocol) == []


def test_importing_the_package_does_not_import_langgraph() -> None:
    code = "import sys, soothe_planner; print('langgraph' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_moved_module_paths_still_import_with_a_deprecation_warning() -> None:
    import importlib
    import warnings

    from soothe_planner.concurrency import limit_model
    from soothe_planner.dag import PlanManager
    from soothe_planner.local import local_chat_model
    from soothe_planner.planner import deterministic_reflection

    moved = {
        "soothe_planner.plan_manager": ("PlanManager", PlanManager),
        "soothe_planner.limited_model": ("limit_model", limit_model),
        "soothe_planner.local_llm": ("local_chat_model", local_chat_model),
        "soothe_planner.reflection": ("deterministic_reflection", deterministic_reflection),
    }
    for path, (name, value) in moved.items():
        sys.modules.pop(path, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(path)
        assert getattr(module, name) is value, path
        assert any(issubclass(w.category, DeprecationWarning) and path in str(w.message) for w in caught), path
