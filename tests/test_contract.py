"""The goal's deliverable as a contract: declared, validated, and checked over the tools' data, in any language."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from planner_support import COMPACT

from soothe_planner.deliverable import Deliverable, parse_deliverable
from soothe_planner.execution import StepExecutor
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    PlanContext,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.contract import owed_writes, to_deliverable, unmet, writes_outside
from soothe_planner.planner.guard import guard_assessment
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.wire import DeclareDeliverable

PACKAGE = Path(__file__).resolve().parents[1] / "soothe_planner"


# ------------------------------------------------------------------ the deliverable itself


@pytest.mark.parametrize(("path", "rule"), [
    ("/etc/passwd", "absolute"), ("../out.md", "leaves the workspace"), ("", "empty"), ("notes/", "folder"),
])
def test_a_bad_file_is_refused_naming_the_value_and_the_rule(path: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        Deliverable(kind="file", files=[path])


def test_kind_and_files_must_agree_and_paths_are_normalised() -> None:
    with pytest.raises(ValueError, match="at least one file"):
        Deliverable(kind="file")
    with pytest.raises(ValueError, match="names no files"):
        Deliverable(kind="answer", files=["a.md"])
    assert Deliverable(kind="file", files=["./notes\\a.md", "notes/a.md"]).files == ["notes/a.md"]
    assert parse_deliverable("file:A.md,b/B.txt").files == ["A.md", "b/B.txt"]
    assert parse_deliverable("count:rows").count_of == "rows"
    with pytest.raises(ValueError, match="not one of"):
        parse_deliverable("report")


# ------------------------------------------------------------------ the model's declaration


@pytest.mark.parametrize(("goal", "declared", "kind", "files"), [
    ("Schreibe alle Zeilen mit TODO in BERICHT.md", ["BERICHT.md"], "file", ["BERICHT.md"]),
    ("Copia las filas del ensayo T3 a notas/t3.md como tabla", ["t3.md"], "file", ["notas/t3.md"]),
    ("Wie speichere ich die Ausgabe als JSON?", ["ausgabe.json"], "answer", []),  # a file the goal never names
    ("¿Cuántos archivos .csv hay?", [], "count", []),
])
def test_a_declaration_keeps_only_files_the_goal_names_in_any_language(
    goal: str, declared: list[str], kind: str, files: list[str]
) -> None:
    wire = DeclareDeliverable(kind="count" if kind == "count" else "file" if declared else "answer", files=declared, answer_is="text",
                              parts=["lo pedido"], every_match=False, count_of="archivos .csv" if kind == "count" else "")
    deliverable, _ = to_deliverable(wire, goal)
    assert (deliverable.kind, deliverable.files, deliverable.declared_by) == (kind, files, "model")
    assert deliverable.parts == ["lo pedido"]


def test_a_count_with_nothing_to_count_is_an_answer_that_is_a_number() -> None:
    wire = DeclareDeliverable(kind="count", files=[], answer_is="text", parts=["der Port"], every_match=False, count_of=" ")
    deliverable, warnings = to_deliverable(wire, "Welchen Port setzt config/server.toml?")
    assert (deliverable.kind, deliverable.answer_is, deliverable.count_of) == ("answer", "number", "")
    assert "nothing to count" in warnings[0]


def test_a_number_is_never_a_list_of_every_match() -> None:
    wire = DeclareDeliverable(kind="answer", files=[], answer_is="number", parts=["Zeilen mit 'veraltet'"],
                              every_match=True, count_of="")
    assert to_deliverable(wire, "Zähle die Zeilen in docs/api.md mit 'veraltet'.")[0].every_match is False
    listed = wire.model_copy(update={"answer_is": "text"})
    assert to_deliverable(listed, "Nenne jede Zeile in docs/api.md mit 'veraltet'.")[0].every_match is True


async def test_the_planner_declares_once_and_holds_the_first_plan_to_it(tmp_path: Path) -> None:
    """A German goal: the declaration names the file; a plan without its write is re-asked, the mended one stands."""
    from soothe_planner.tools import make_builtin_tools

    (tmp_path / "a.py").write_text("# TODO: x\n")
    executor = StepExecutor(tools=list(make_builtin_tools(tmp_path).values()))
    ctx = PlanContext(available_capabilities=executor.capabilities(), workspace=str(tmp_path))
    declared = {"kind": "file", "files": ["BERICHT.md"], "answer_is": "text", "parts": ["Zeilen mit TODO"],
                "every_match": True,
                "count_of": ""}
    no_write = {"steps": [{"id": "s1", "tool": "search_text", "args": {"pattern": "TODO"}, "depends_on": []},
                          {"id": "s2", "tool": "answer", "args": {"task": "liste sie"}, "depends_on": ["s1"]}]}
    mended = {"steps": [{"id": "s1", "tool": "search_text", "args": {"pattern": "TODO"}, "depends_on": []},
                        {"id": "s2", "tool": "write_file", "args": {"path": "BERICHT.md", "content": "{{s1.output}}"},
                         "depends_on": ["s1"]}]}
    model = ScriptedChatModel(responses=[declared, no_write, mended])
    planner = LLMPlanner(model, settings=COMPACT.model_copy(update={"declare_deliverable": True}))
    from soothe_planner.dag import PlanManager

    pm = PlanManager("g", capabilities=ctx.available_capabilities)
    goal = "Schreibe alle Zeilen mit TODO in BERICHT.md"
    result = await planner.generate_from_assessment(goal, LoopState(goal=goal), ctx, StatusAssessment(status="continue"), pm)
    assert result.deliverable is not None and result.deliverable.files == ["BERICHT.md"]
    assert pm.deliverable == result.deliverable
    assert result.decision is not None and result.decision.steps[-1].tool == "write_file"
    assert "no step writes BERICHT.md" in model.calls[2].messages[-1].content  # the re-ask told it the rule
    assert model.remaining == 0


# ------------------------------------------------------------------ rules and checks, a user's own tools


def _user_tools(folder: Path) -> list[Any]:
    def save(target: str, body: str) -> str:
        """Save text to a file."""
        (folder / target).write_text(body)
        return f"saved {target}"

    def tally(word: str) -> dict[str, Any]:
        """Count the lines of data.csv holding a word."""
        lines = (folder / "data.csv").read_text().splitlines()
        n = sum(word in line for line in lines)
        return {"count": n, "counted": f"lines of data.csv holding {word!r}"}

    return [StructuredTool.from_function(save, metadata={"writes_path_arg": "target"}),
            StructuredTool.from_function(tally, metadata={"counts": True, "read_only": True})]


def _caps(folder: Path) -> dict[str, Any]:
    return {c.name: c for c in StepExecutor(tools=_user_tools(folder)).capabilities()}


def _ran(step: StepAction, output: str, outcome: dict[str, Any] | None = None) -> tuple[PlanStep, StepResult]:
    result = StepResult(step_id=step.id, success=True, output=output, outcome=outcome or {})
    node = PlanStep(id=step.id, description=step.description, tool=step.tool, args=step.args, depends_on=step.depends_on,
                    status="completed", result=result)
    return node, result


def test_a_user_tool_declares_what_it_writes_and_the_rules_read_it(tmp_path: Path) -> None:
    caps = _caps(tmp_path)
    assert caps["save"].writes_path_arg == "target" and caps["tally"].counts
    report = Deliverable(kind="file", files=["RAPPORT.md"])
    stray = AgentDecision(steps=[StepAction(id="s1", description="save", tool="save", args={"target": "x.md", "body": "b"})])
    assert "writes 'x.md'" in writes_outside(report, stray, caps)[0]
    assert writes_outside(Deliverable(kind="answer"), stray, caps)[0].endswith("write no file")
    assert "save(target=\"RAPPORT.md\"" in owed_writes(report, stray, [], caps)[0]


def test_a_file_is_done_only_when_it_is_on_disk_as_written_and_carries_what_it_waited_for(tmp_path: Path) -> None:
    caps = _caps(tmp_path)
    report = Deliverable(kind="file", files=["RAPPORT.md"], holds=["alpha"])
    src = StepAction(id="s1", description="read", tool="tally", args={"word": "a"})
    write = StepAction(id="s2", description="save", tool="save", args={"target": "RAPPORT.md", "body": "{{s1.output}}"},
                       depends_on=["s1"])
    n1, r1 = _ran(src, "alpha beta")
    n2, r2 = _ran(write, "saved RAPPORT.md")
    decision = AgentDecision(steps=[src, write])
    assert "no such file" in unmet(report, decision, [n1, n2], [r1, r2], caps, str(tmp_path))[0]
    (tmp_path / "RAPPORT.md").write_text("alpha beta")
    assert unmet(report, decision, [n1, n2], [r1, r2], caps, str(tmp_path)) == []
    (tmp_path / "RAPPORT.md").write_text("something else")
    assert "no longer holds" in unmet(report, decision, [n1, n2], [r1, r2], caps, str(tmp_path))[0]
    literal = write.model_copy(update={"args": {"target": "RAPPORT.md", "body": "alpha, as found"}})
    n3, r3 = _ran(literal, "saved RAPPORT.md")
    (tmp_path / "RAPPORT.md").write_text("alpha, as found")
    assert "text of the plan's own" in unmet(report, AgentDecision(steps=[src, literal]), [n1, n3], [r1, r3], caps,
                                             str(tmp_path))[0]


def test_a_count_is_done_only_on_a_number_a_counting_tool_counted(tmp_path: Path) -> None:
    caps = _caps(tmp_path)
    count = Deliverable(kind="count", count_of="Zeilen mit coir")
    tally = StepAction(id="s1", description="tally", tool="tally", args={"word": "coir"})
    answer = StepAction(id="s2", description="sag die Zahl", depends_on=["s1"])
    n1, r1 = _ran(tally, '{"count": 3}', {"count": 3, "counted": "lines holding 'coir'"})
    decision = AgentDecision(steps=[tally, answer])
    n2, r2 = _ran(answer, "Es sind 3 Zeilen.")
    assert unmet(count, decision, [n1, n2], [r1, r2], caps, None) == []
    n2, r2 = _ran(answer, "Es sind 4 Zeilen.")
    problem = unmet(count, decision, [n1, n2], [r1, r2], caps, None)[0]
    assert "s1 counted 3 (lines holding 'coir')" in problem
    capped = r1.model_copy(update={"outcome": {"count": 3, "complete": False}})
    n2, r2 = _ran(answer, "Es sind 3 Zeilen.")
    assert "no counting tool counted" in unmet(count, decision, [n1, n2], [capped, r2], caps, None)[0]


def test_a_search_that_reports_every_line_it_found_has_counted_them(tmp_path: Path) -> None:
    caps = _caps(tmp_path)
    count = Deliverable(kind="count", count_of="amarres de tipo crucero")
    search = StepAction(id="s1", description="busca", tool="search_text", args={"pattern": "crucero", "path": "amarres.csv"})
    answer = StepAction(id="s2", description="di el número", depends_on=["s1"])
    lines = ["amarres.csv:2: B-01,crucero,14", "amarres.csv:3: B-02,crucero,15"]
    outcome = {"lines": lines, "exact": True, "complete": True, "pattern": "crucero", "path": "amarres.csv"}
    n1, r1 = _ran(search, "\n".join(lines), outcome)
    decision = AgentDecision(steps=[search, answer])
    n2, r2 = _ran(answer, "Hay 2 amarres.")
    assert unmet(count, decision, [n1, n2], [r1, r2], caps, None) == []
    n2, r2 = _ran(answer, "Hay 3 amarres.")
    assert "s1 counted 2 (lines of amarres.csv holding 'crucero')" in unmet(count, decision, [n1, n2], [r1, r2], caps, None)[0]
    # a search cut short, one that found only the nearest lines, or one over a folder counted nothing
    n2, r2 = _ran(answer, "Hay 2 amarres.")
    for cut in ({"complete": False}, {"exact": False}, {"path": "."}, {"lines": lines[:1]}):
        partial = r1.model_copy(update={"outcome": {**outcome, **cut}})
        assert "no counting tool counted" in unmet(count, decision, [n1, n2], [partial, r2], caps, None)[0]


def test_a_done_without_the_deliverable_becomes_replan_for_every_model(tmp_path: Path) -> None:
    caps = _caps(tmp_path)
    done = StatusAssessment(status="done", goal_progress=1.0, summary="fertig")
    answer = StepAction(id="s1", description="antworte")
    n1, r1 = _ran(answer, "Der Bericht ist fertig.")
    out, why = guard_assessment("Erstelle RAPPORT.md", done, Deliverable(kind="file", files=["RAPPORT.md"]),
                                AgentDecision(steps=[answer]), [n1], [r1], caps, str(tmp_path), plan_finished=True,
                                small_model=False, grounded=False)
    assert out.status == "replan" and "no completed step wrote it" in why


# ------------------------------------------------------------------ no rule reads the goal's words


def _pattern_words(path: Path, name: str) -> list[str]:
    """The words (three letters or more, outside backslash escapes) of the module-level regex ``name`` in ``path``."""
    import importlib
    import re

    module = importlib.import_module(".".join(("soothe_planner", *path.relative_to(PACKAGE).with_suffix("").parts)))
    source = getattr(module, name).pattern
    return re.findall(r"[A-Za-z]{3,}", re.sub(r"\\[A-Za-z]", "", source))


def test_no_pattern_or_word_list_is_applied_to_the_goals_text() -> None:
    """Outside the prompt templates, no regex with a word in it takes the goal as its subject: a value's shape
    (a number, an address) may be looked for, a word of some language may not."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in {"search", "match", "fullmatch", "findall", "finditer", "sub"}:
                continue
            args = [a for a in node.args if isinstance(a, ast.Name)]
            if any(a.id == "goal" for a in args) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                                     and func.value.id == "goal"):
                regex = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
                if not regex or regex in ("goal", "re", "regex") or _pattern_words(path, regex):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    for gone in ("_WRITE_VERB", "_COUNT_TASK", "_QUALIFIED", "_EVERY_LINE_GOAL", "files_to_write", "_MAKE_VERB"):
        assert gone not in source, gone


# ------------------------------------------------------------------ small-model rules seen on the new suites


def _done(step: StepAction, ok: bool = True, error: str = "") -> PlanStep:
    result = StepResult(step_id=step.id, success=ok, output="out" if ok else "", error=error or None,
                        error_type=None if ok else "tool_error")
    return PlanStep(id=step.id, description=step.description, tool=step.tool, args=step.args,
                    depends_on=step.depends_on, status="completed" if ok else "failed", result=result)


def test_a_failed_call_planned_again_unchanged_is_refused_with_its_error() -> None:
    from soothe_planner.planner.small_model.plan_rules import repeats_failed_calls

    bad = StepAction(id="s2", description="count", tool="count_files", args={"pattern": "go"})
    nodes = [_done(bad, ok=False, error="tool 'count_files' failed: use '*.go'")]
    again = AgentDecision(steps=[bad.model_copy(update={"id": "s3"})])
    assert "use '*.go'" in repeats_failed_calls(again, nodes)[0]
    changed = AgentDecision(steps=[bad.model_copy(update={"id": "s3", "args": {"pattern": "*.go"}})])
    assert repeats_failed_calls(changed, nodes) == []


def test_a_write_of_a_writes_receipt_is_refused_and_a_replaced_write_may_run_again(tmp_path: Path) -> None:
    from soothe_planner.planner.small_model.plan_rules import repeats_finished_work, writes_a_receipt
    from soothe_planner.tools import make_builtin_tools

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "FIXME"})
    first = StepAction(id="s2", description="write", tool="write_file",
                       args={"path": "F.md", "content": "{{s1.output}}"}, depends_on=["s1"])
    receipt = StepAction(id="s3", description="write", tool="write_file",
                         args={"path": "F.md", "content": "{{s2.output}}"}, depends_on=["s2"])
    assert "s2, which is a write" in writes_a_receipt(AgentDecision(steps=[search, first, receipt]), caps)[0]
    nodes = [_done(search), _done(first), _done(receipt)]
    mend = AgentDecision(steps=[first.model_copy(update={"id": "s4"})])
    assert repeats_finished_work(mend, nodes, caps) == []  # s2's file was replaced by s3: not a repeat
    assert repeats_finished_work(mend, nodes[:2], caps) != []  # s2's write stands: a repeat


async def test_the_step_that_gives_the_final_text_is_shown_the_request_and_its_parts() -> None:
    """A plan's task may name less than the request asks; the last text step sees the request, a middle one not."""
    from soothe_planner.dag import PlanManager

    model = ScriptedChatModel(responses=["8181 and 8080", "8181 and 8080"])
    pm = PlanManager("Welcher Port für staging, und welchen öffnet das Dockerfile?")
    pm.deliverable = Deliverable(kind="answer", parts=["Port von staging", "Port im Dockerfile"])
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="find the staging port"),
                                   StepAction(id="s2", description="give the port", depends_on=["s1"])]), 0)
    await StepExecutor(agent_model=model).run(pm)
    middle, last = model.calls[0].last_text, model.calls[1].last_text
    assert "Welcher Port für staging" not in middle
    assert "Welcher Port für staging" in last and "Port von staging; Port im Dockerfile" in last


def test_a_reask_after_a_refusal_is_sampled_with_the_small_model_rules_and_reproducible() -> None:
    from langchain_openai import ChatOpenAI

    from soothe_planner.planner.small_model import REASK_TEMPERATURE

    model = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1", temperature=0)  # type: ignore[arg-type]
    small = LLMPlanner(model, settings=COMPACT)
    again = small._caller.reask_model(small.model, 1)
    assert again.temperature == REASK_TEMPERATURE and again.seed == 2  # type: ignore[attr-defined]
    assert small._caller.reask_model(small.model, 1).seed == again.seed  # type: ignore[attr-defined]
    provider = LLMPlanner(model)  # no small-model rules: the model's own temperature
    assert provider._caller.reask_model(provider.model, 0).temperature == 0  # type: ignore[attr-defined]


def test_an_answer_with_facts_of_its_own_about_a_value_no_tool_returned_is_off_subject() -> None:
    from soothe_planner.planner.small_model.grounding import off_subject

    read = StepAction(id="s1", description="read", tool="read_file", args={"path": "CHANGELOG.md"})
    answer = StepAction(id="s2", description="die Änderungen", depends_on=["s1"])
    changelog = "## 1.2.1 (2024-05-14)\n- fixed the weekend surcharge"
    n1, r1 = _ran(read, changelog)
    decision = AgentDecision(steps=[read, answer])
    goal = "Was hat sich in 1.3.0 geändert?"
    n2, r2 = _ran(answer, "Am 2024-05-14: fixed the weekend surcharge")
    unseen, added = off_subject(goal, decision, [n1, n2], [r1, r2])
    assert unseen == ["1.3.0"] and "2024" in added
    n2, r2 = _ran(answer, "1.3.0 steht nicht im Changelog.")  # says so, adds no fact: not off subject
    assert off_subject(goal, decision, [n1, n2], [r1, r2]) == ([], [])
    n2, r2 = _ran(answer, "Am 2024-05-14: fixed the weekend surcharge")
    assert off_subject("Was hat sich in 1.2.1 geändert?", decision, [n1, n2], [r1, r2]) == ([], [])


def test_a_bare_number_the_goal_names_is_held_only_beside_the_words_around_it() -> None:
    from soothe_planner.planner.small_model.grounding import off_subject

    read = StepAction(id="s1", description="read", tool="read_file", args={"path": "protocolos/siembra.md"})
    answer = StepAction(id="s2", description="los cambios", depends_on=["s1"])
    protocol = "Versión actual: v2.1\n2. Sembrar a 3 mm de profundidad\n- v2.1: malla de sombra sobre 28 °C"
    n1, r1 = _ran(read, protocol)
    n2, r2 = _ran(answer, "En la versión 3 se añadió malla de sombra sobre 28 °C.")
    decision = AgentDecision(steps=[read, answer])
    goal = "¿Qué cambió en la versión 3 del protocolo de siembra?"
    unseen, added = off_subject(goal, decision, [n1, n2], [r1, r2])
    assert unseen == ["3"] and "28" in added  # "3 mm" is not version 3
    n1, r1 = _ran(read, protocol + "\n- versión 3: bandejas de 50 celdas")
    assert off_subject(goal, decision, [n1, n2], [r1, r2]) == ([], [])
    # words most of the workspace holds, or short ones, do not place a number
    n1, r1 = _ran(read, protocol)
    assert off_subject(goal, decision, [n1, n2], [r1, r2], common={"versión", "protocolo", "del", "la"}) == ([], [])


def test_an_echo_is_refused_in_any_language_but_a_choice_between_named_values_is_an_answer() -> None:
    from soothe_planner.planner.small_model.echo import echoed_goal
    from soothe_planner.planner.small_model.grounding import gave_no_answer

    answer = StepAction(id="s1", description="answer")
    decision = AgentDecision(steps=[answer])

    def said(text: str) -> list[StepResult]:
        return [StepResult(step_id="s1", success=True, output=text)]

    assert echoed_goal("Which Python module imports the requests library?", decision, said("requests"))
    assert echoed_goal("¿Qué módulo importa la biblioteca requests?", decision, said("Requests."))
    assert not echoed_goal("Which file is longer, setup.py or README.md?", decision, said("README.md"))
    assert not echoed_goal("Which module imports requests?", decision, said("src/sync.py"))
    search = StepAction(id="s0", description="search", tool="search_text", args={"pattern": "port"})
    assert gave_no_answer(AgentDecision(steps=[search]), [StepResult(step_id="s0", success=True, output="a:1: port")])
    assert not gave_no_answer(decision, said("8080"))


def test_a_small_models_answer_must_carry_something_the_tools_returned() -> None:
    from soothe_planner.planner.small_model.grounding import states_nothing_read

    read = StepAction(id="s1", description="read", tool="read_file", args={"path": "docs/ops.md"})
    answer = StepAction(id="s2", description="answer", depends_on=["s1"])
    n1, r1 = _ran(read, "Rollback: redeploy the previous binary; migrations are forward-only. Page Dariusz Mensah.")
    decision = AgentDecision(steps=[read, answer])
    for text, nothing in (("Yes, the rollback undoes the migrations.", True),
                          ("No: migrations are forward-only; page Dariusz Mensah.", False),
                          ("Llame a Dariusz Mensah.", False)):
        n2, r2 = _ran(answer, text)
        assert states_nothing_read("Who? Why?", decision, [n1, n2], [r1, r2]) is nothing, text


def test_an_answer_stating_fewer_facts_than_things_asked_left_one_out() -> None:
    from soothe_planner.planner.small_model.grounding import parts_left_unanswered

    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "port"})
    answer = StepAction(id="s2", description="answer", depends_on=["s1"])
    n1, r1 = _ran(search, "config/staging.toml:3: port = 8181\nDockerfile:9: EXPOSE 8080")
    decision = AgentDecision(steps=[search, answer])
    two = Deliverable(kind="answer", parts=["Port von staging", "Port im Dockerfile"])
    n2, r2 = _ran(answer, "8080")
    assert parts_left_unanswered("g", two, decision, [n1, n2], [r1, r2]) == (2, 1)
    n2, r2 = _ran(answer, "staging: 8181, Dockerfile: 8080")
    assert parts_left_unanswered("g", two, decision, [n1, n2], [r1, r2]) == (0, 0)
    assert parts_left_unanswered("g", Deliverable(kind="answer", parts=["x"]), decision, [n1, n2], [r1, r2]) == (0, 0)


@pytest.mark.parametrize(("lines", "promoted"), [(["a.py:1: # TODO: x", "b.md:2: TODO: y"], True),
                                                 (["README.md:5: ## Installation"], False)])
def test_a_file_of_every_line_found_ends_the_goal_only_for_two_lines_or_more(
    tmp_path: Path, lines: list[str], promoted: bool
) -> None:
    from soothe_planner.tools import make_builtin_tools

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO", "path": "."})
    write = StepAction(id="s2", description="write", tool="write_file",
                       args={"path": "OUT.md", "content": "{{s1.output}}"}, depends_on=["s1"])
    text = "\n".join(lines)
    pattern = "TODO" if promoted else "Installation"
    n1, r1 = _ran(search, text, {"lines": lines, "exact": True, "complete": True, "pattern": pattern, "path": "."})
    n2, r2 = _ran(write, "wrote", {"path": "OUT.md", "blank": False})
    (tmp_path / "OUT.md").write_text(text)
    goal = "Schreibe jede Zeile mit TODO aus der Installation in OUT.md"
    out, why = guard_assessment(goal, StatusAssessment(status="continue"),
                                Deliverable(kind="file", files=["OUT.md"], every_match=True, declared_by="model"),
                                AgentDecision(steps=[search, write]), [n1, n2], [r1, r2], caps, str(tmp_path),
                                plan_finished=True, small_model=True, grounded=True)
    assert (out.status == "done") is promoted, why


async def test_a_plan_a_reask_mended_keeps_its_refusal_in_the_result_and_the_plan_event(tmp_path: Path) -> None:
    from soothe_planner.dag import PlanManager
    from soothe_planner.events import parse_event
    from soothe_planner.planner import REFUSED_NOTE
    from soothe_planner.tools import make_builtin_tools

    executor = StepExecutor(tools=list(make_builtin_tools(tmp_path).values()))
    ctx = PlanContext(available_capabilities=executor.capabilities(), workspace=str(tmp_path))
    stray = {"steps": [{"id": "s1", "tool": "write_file", "args": {"path": "x.md", "content": "x"}, "depends_on": []}]}
    mended = {"steps": [{"id": "s1", "tool": "list_dir", "args": {}, "depends_on": []},
                        {"id": "s2", "tool": "answer", "args": {"task": "name them"}, "depends_on": ["s1"]}]}
    planner = LLMPlanner(ScriptedChatModel(responses=[stray, mended]), settings=COMPACT)
    pm = PlanManager("g", capabilities=ctx.available_capabilities)
    pm.deliverable = Deliverable(kind="answer")
    result = await planner.generate_from_assessment("g", LoopState(goal="g"), ctx, StatusAssessment(status="continue"), pm)
    refused = [w for w in result.warnings if w.startswith(REFUSED_NOTE)]
    assert refused and "writes 'x.md'" in refused[0]
    event = {"event": "plan", "iteration": 0, "plan_action": "new", "steps": [], "degraded": False, "refused": refused}
    assert parse_event(event)["refused"] == refused  # type: ignore[typeddict-item]


def test_the_write_that_mends_a_lossy_report_is_prescribed_when_every_plan_was_refused(tmp_path: Path) -> None:
    from soothe_planner.errors import GenerationAttempt, PlanGenerationError
    from soothe_planner.planner.small_model.prescribed import prescribed_write
    from soothe_planner.tools import make_builtin_tools

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    lines = ["a.py:1: # TODO: x", "b.md:2: TODO: y"]
    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO"})
    write = StepAction(id="s2", description="write", tool="write_file",
                       args={"path": "OUT.md", "content": "TODO: x"}, depends_on=["s1"])
    n1, r1 = _ran(search, "\n".join(lines), {"lines": lines, "exact": True, "pattern": "TODO", "path": "."})
    n2, r2 = _ran(write, "wrote", {"path": "OUT.md", "blank": False})
    every = Deliverable(kind="file", files=["OUT.md"], every_match=True)
    refused = PlanGenerationError("plan-generate", [GenerationAttempt(phase="plan-generate", kind="structured",
                                                                      error="repeat", error_type="validation")])
    gen = prescribed_write(every, [n1, n2], [r1, r2], caps, lambda g: [], refused)
    assert gen is not None and gen.decision is not None
    (step,) = gen.decision.steps
    assert (step.tool, step.args, step.depends_on) == ("write_file", {"path": "OUT.md", "content": "{{s1.output}}"},
                                                       ["s1"])
    assert prescribed_write(every, [n1, n2], [r1, r2], caps, lambda g: ["no"], refused) is None  # a rule refuses it
    heard_not = PlanGenerationError("plan-generate", [GenerationAttempt(phase="plan-generate", kind="structured",
                                                                        error="down", error_type="transport")])
    assert prescribed_write(every, [n1, n2], [r1, r2], caps, lambda g: [], heard_not) is None


def test_a_phrase_of_the_goal_declared_as_a_file_is_no_file() -> None:
    wire = DeclareDeliverable(kind="file", files=["Zenodo DOI of our germination dataset"], answer_is="text", parts=[],
                              every_match=False,
                              count_of="")
    deliverable, warnings = to_deliverable(wire, "What's the Zenodo DOI of our germination dataset? I want to cite it.")
    assert deliverable.kind == "answer" and deliverable.files == [] and "phrase" in warnings[0]


def test_an_answer_of_another_kind_than_the_deliverable_says_is_not_done() -> None:
    from soothe_planner.planner.small_model.grounding import states_nothing_read, wrong_kind

    answer = StepAction(id="s1", description="answer")
    decision = AgentDecision(steps=[answer])

    def said(text: str) -> list[StepResult]:
        return [StepResult(step_id="s1", success=True, output=text)]

    who = Deliverable(kind="answer", answer_is="name")
    assert wrong_kind(who, decision, said("scripts/backup_db.sh")) == "a name"
    assert wrong_kind(who, decision, said("Llamen a Dariusz Mensah.")) == ""
    assert wrong_kind(Deliverable(kind="answer", answer_is="path"), decision, said("It is Priya Raman")) == "a path"
    assert wrong_kind(Deliverable(kind="answer", answer_is="number"), decision, said("twenty")) == "a number"
    # a fact the goal names says nothing, unless it is a choice between values the goal names
    read = StepAction(id="s0", description="search", tool="search_text", args={"pattern": "requests"})
    answer = StepAction(id="s1", description="answer", depends_on=["s0"])
    n0, r0 = _ran(read, "src/sync.py:3: import requests\nsetup.py:1: x\nREADME.md:1: y")
    for goal, text, nothing in (("Which module imports requests?", "It is `requests`.", True),
                                ("Which module imports requests?", "src/sync.py", False),
                                ("Which is longer, setup.py or README.md?", "README.md", False)):
        n1, r1 = _ran(answer, text)
        assert states_nothing_read(goal, AgentDecision(steps=[read, answer]), [n0, n1], [r0, r1]) is nothing, text


def test_a_model_may_not_declare_a_file_the_workspace_has_as_one_to_write() -> None:
    wire = DeclareDeliverable(kind="file", files=["src/notes.py", "README.md"], answer_is="path", parts=[],
                              every_match=False, count_of="")
    goal = "Which file is longer, src/notes.py or README.md?"
    deliverable, warnings = to_deliverable(wire, goal, lambda path: path in {"src/notes.py", "README.md"})
    assert deliverable.kind == "answer" and deliverable.files == [] and "the workspace has" in warnings[0]
    kept, _ = to_deliverable(wire, goal, lambda path: False)  # new files: kept
    assert kept.files == ["src/notes.py", "README.md"]


def test_what_a_search_quotes_back_of_its_own_pattern_is_no_evidence(tmp_path: Path) -> None:
    from soothe_planner.planner.contract import as_evidence
    from soothe_planner.planner.small_model.grounding import off_subject, ungrounded_facts
    from soothe_planner.tools.builtins import make_builtin_tools

    (tmp_path / "CHANGELOG.md").write_text("## [1.2.1] - 2024-05-14\n- harbor export: bookings as CSV\n"
                                           "- check = \"Dariusz Mensah\" in pages\n")
    search_text = make_builtin_tools(tmp_path, small_model_aids=True)["search_text"]

    def searched(pattern: str) -> tuple[StepAction, PlanStep, StepResult]:
        msg = search_text.invoke({"type": "tool_call", "id": "c1", "name": "search_text",
                                  "args": {"pattern": pattern, "path": "CHANGELOG.md"}})
        step = StepAction(id="s1", description="search", tool="search_text", args={"pattern": pattern, "path": "CHANGELOG.md"})
        node, result = _ran(step, str(msg.content), msg.artifact)
        return step, node, result

    search, n1, r1 = searched("harbor 1.3.0")
    assert "'harbor 1.3.0'" in r1.output  # the nearest lines' note says what was looked for
    answer = StepAction(id="s2", description="die Änderungen", depends_on=["s1"])
    n2, r2 = _ran(answer, "- harbor export: bookings as CSV (2024-05-14)")
    decision = AgentDecision(steps=[search, answer])
    goal = "Was hat sich in harbor 1.3.0 geändert?"
    assert off_subject(goal, decision, [n1, n2], [r1, r2])[0] == ["1.3.0"]  # 1.3.0 stood only in the note
    seen = as_evidence(search, r1).output
    assert "1.3.0" not in seen and seen.splitlines()[:-1] == r1.output.splitlines()[:-1]  # the lines themselves stay
    # a value guessed into a search that found nothing is not found by it
    search, n1, r1 = searched("Priya Raman")
    n2, r2 = _ran(answer, "Page Priya Raman.")
    assert "'Priya Raman'" in r1.output
    assert ungrounded_facts("Who is paged?", AgentDecision(steps=[search, answer]), [n1, n2], [r1, r2])[1] == ["Priya Raman"]
    # nor by a count of the lines that hold it, which counted none
    msg = make_builtin_tools(tmp_path, small_model_aids=True)["count_lines"].invoke(
        {"type": "tool_call", "id": "c2", "name": "count_lines", "args": {"path": "CHANGELOG.md", "pattern": "Priya Raman"}})
    count = StepAction(id="s1", description="count", tool="count_lines", args={"path": "CHANGELOG.md", "pattern": "Priya Raman"})
    n1, r1 = _ran(count, str(msg.content), msg.artifact)
    assert "'Priya Raman'" in r1.output
    assert ungrounded_facts("Who is paged?", AgentDecision(steps=[count, answer]), [n1, n2], [r1, r2])[1] == ["Priya Raman"]
    # a found line that quotes the pattern is file text, kept whole
    search, n1, r1 = searched("Dariusz Mensah")
    assert as_evidence(search, r1) is r1 and '"Dariusz Mensah"' in r1.output
