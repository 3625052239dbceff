"""A small model's ``done`` against a blind second reading of the tool outputs (``small_model/crosscheck.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner_support import COMPACT

from soothe_planner.deliverable import Deliverable
from soothe_planner.execution import StepExecutor
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    PlanContext,
    PlannerSettings,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.small_model.crosscheck import crosscheck_prompt, disagreements, evidence_of
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.tools import make_builtin_tools
from soothe_planner.wire import CrossCheck

CONFIGS = ("[staging]\nhost = db.stg.internal\npassword = stg-Kelp-2291\n\n"
           "[production]\nhost = db.prod.internal\npassword = prd-Reef-7781\n")


def _evidence(output: str, tool: str = "read_file", args: dict[str, Any] | None = None) -> list[tuple[StepAction, StepResult]]:
    step = StepAction(id="s1", description="read", tool=tool, args=args or {"path": "db.ini"})
    return [(step, StepResult(step_id="s1", success=True, output=output))]


def _reading(*values: str) -> CrossCheck:
    return CrossCheck(values=list(values))


def test_a_value_read_from_the_wrong_place_is_not_confirmed_and_the_reading_is_not_revealed() -> None:
    goal = "What is the production database password?"
    d = Deliverable(kind="answer", parts=["the production database password"])
    why = disagreements(goal, d, _reading("prd-Reef-7781"), "The password is stg-Kelp-2291.", _evidence(CONFIGS))
    assert len(why) == 1 and "the production database password" in why[0]
    assert "prd-Reef-7781" not in why[0]  # told the value, the next plan would copy the reading's own error
    assert disagreements(goal, d, _reading("prd-Reef-7781"), "It is `prd-Reef-7781`.", _evidence(CONFIGS)) == []


def test_the_comparison_reads_tokens_in_any_language() -> None:
    goal = "Welches Passwort hat die Produktionsdatenbank?"
    d = Deliverable(kind="answer", parts=["Passwort der Produktionsdatenbank"])
    assert disagreements(goal, d, _reading("prd-Reef-7781"), "Das Passwort lautet stg-Kelp-2291.", _evidence(CONFIGS))
    assert disagreements(goal, d, _reading("prd-Reef-7781"), "Das Passwort lautet prd-Reef-7781.", _evidence(CONFIGS)) == []


def test_a_reading_that_says_nothing_checkable_confirms_nothing_and_refuses_nothing() -> None:
    goal = "What is the production database password?"
    d = Deliverable(kind="answer", parts=["the password"])
    answer = "The password is stg-Kelp-2291."
    assert disagreements(goal, d, _reading(""), answer, _evidence(CONFIGS)) == []  # not stated
    assert disagreements(goal, d, _reading("the production database password"), answer, _evidence(CONFIGS)) == []
    assert disagreements(goal, d, _reading("hunter2-invented"), answer, _evidence(CONFIGS)) == []  # not in any output


def test_a_reading_without_a_number_says_nothing_of_a_number_answer() -> None:
    goal = "¿Cuántas líneas con TODO tiene src/notes.py?"
    ev = _evidence("src/notes.py:11: # TODO: reject empty notes\nsrc/notes.py:16: # TODO: make the search case-insensitive",
                   tool="search_text", args={"pattern": "TODO", "path": "src/notes.py"})
    number = Deliverable(kind="answer", answer_is="number", parts=["líneas con TODO"])
    assert disagreements(goal, number, _reading("# TODO: reject empty notes"), "2", ev) == []
    # a number read still has to be the one the answer gives, and a text answer is still held to a line read
    assert disagreements(goal, number, _reading("# TODO: reject empty notes (11)"), "2", ev)
    text = Deliverable(kind="answer", answer_is="text", parts=["líneas con TODO"])
    assert disagreements(goal, text, _reading("# TODO: reject empty notes"), "2", ev)


def test_a_number_asked_is_compared_by_its_numbers_whatever_the_outputs_language() -> None:
    goal = "Zähle die Zeilen in docs/api.md, die das Wort deprecated enthalten."
    ev = _evidence("3 lines in docs/api.md contain 'deprecated':\ndocs/api.md:40: - status is deprecated",
                   tool="count_lines", args={"path": "docs/api.md", "pattern": "deprecated"})
    number = Deliverable(kind="answer", answer_is="number", parts=["Zeilen mit deprecated"])
    # the reading words its value in the outputs' English, which the German request does not share
    assert disagreements(goal, number, _reading("3 lines"), "3", ev) == []
    assert disagreements(goal, number, _reading("3 lines"), "Es sind 4 Zeilen.", ev)


def test_a_part_the_answer_leaves_out_is_not_confirmed_while_the_one_it_gives_is() -> None:
    goal = "Write the maintainer's name from README.md and the license name from LICENSE into META.txt."
    d = Deliverable(kind="file", files=["META.txt"], parts=["maintainer's name", "license name"])
    ev = [*_evidence("Maintainer: Priya Raman <priya@x.example>\n"), (StepAction(id="s2", description="read", tool="read_file", args={"path": "LICENSE"}), StepResult(step_id="s2", success=True, output="Apache License\nVersion 2.0\n"))]
    written = "Maintainer: Priya Raman\nLicense: MIT\n"
    why = disagreements(goal, d, _reading("Priya Raman", "Apache License"), written, ev)
    assert len(why) == 1 and "license name" in why[0] and "META.txt" in why[0]
    assert disagreements(goal, d, _reading("Priya Raman", "Apache License"), "Priya Raman\nApache License 2.0\n", ev) == []


def test_a_reading_with_more_values_than_things_asked_is_held_to_its_first_value_per_thing() -> None:
    goal = "¿Quién es responsable del protocolo de muestreo de suelo, y cuál es su correo?"
    d = Deliverable(kind="answer", parts=["responsable del protocolo"])  # the email was left out of the parts
    ev = _evidence("Owner: Lena Park\n# Protocol: soil sampling\nOwner: Malte Jansen <m.jansen@lab.example>\n")
    assert disagreements(goal, d, _reading("Lena Park", "Malte Jansen"), "Malte Jansen", ev)
    assert disagreements(goal, d, _reading("Malte Jansen", "m.jansen@lab.example"), "Malte Jansen", ev) == []


def test_a_count_must_be_the_number_of_items_the_reading_lists() -> None:
    goal = "How many data rows, not counting the header, does data/sales.csv have?"
    d = Deliverable(kind="count", count_of="data rows of data/sales.csv")
    csv = "date,amount\n2026-03-01,18.50\n2026-03-04,7.25\n2026-03-09,42.00\n2026-03-15,12.00\n"
    ev = _evidence(csv)
    rows = _reading("2026-03-01,18.50", "2026-03-04,7.25", "2026-03-09,42.00", "2026-03-15,12.00")
    assert disagreements(goal, d, rows, "5", ev)
    assert disagreements(goal, d, rows, "There are 4 data rows.", ev) == []
    # a list at the schema's cap may have been cut: it says nothing
    assert disagreements(goal, d, _reading(*["2026-03-01,18.50"] * 30), "5", ev) == []


def test_the_evidence_is_the_tool_outputs_without_writes_or_model_steps(tmp_path: Path) -> None:
    def save(target: str, body: str) -> str:
        """Save text to a file."""
        return f"saved {body} to {target}"

    from langchain_core.tools import StructuredTool

    caps = {c.name: c for c in StepExecutor(tools=[StructuredTool.from_function(
        save, metadata={"writes_path_arg": "target"})]).capabilities()}
    steps = [StepAction(id="s1", description="read", tool="read_file", args={"path": "a"}),
             StepAction(id="s2", description="the answer"),
             StepAction(id="s3", description="save", tool="save", args={"target": "B.md", "body": "x"}, depends_on=["s2"])]
    results = [StepResult(step_id=s.id, success=True, output=f"out of {s.id}") for s in steps]
    assert [s.id for s, _ in evidence_of(steps, results, caps)] == ["s1"]


def test_the_readings_prompt_is_blind_to_the_answer() -> None:
    goal = "What is the production database password?"
    d = Deliverable(kind="answer", parts=["the production database password"])
    prompt = crosscheck_prompt(goal, d, _evidence(CONFIGS), PlannerSettings())
    text = "\n".join(str(m.content) for m in prompt.messages())
    assert "prd-Reef-7781" in text and "1. the production database password" in text
    assert "answer is" not in text.lower()


async def test_a_small_models_done_stands_only_when_the_blind_reading_agrees(tmp_path: Path) -> None:
    (tmp_path / "db.ini").write_text(CONFIGS)
    executor = StepExecutor(tools=list(make_builtin_tools(tmp_path).values()))
    ctx = PlanContext(thread_id="t1", workspace=str(tmp_path), available_capabilities=executor.capabilities())
    read = StepAction(id="s1", description="read", tool="read_file", args={"path": "db.ini"})
    answer = StepAction(id="s2", description="give the production password", depends_on=["s1"])
    goal = "What is the production database password?"
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "answered"}

    def state(said: str) -> LoopState:
        return LoopState(goal=goal, thread_id="t1", iteration=1, current_decision=AgentDecision(steps=[read, answer]),
                         step_results=[StepResult(step_id="s1", success=True, output=CONFIGS),
                                       StepResult(step_id="s2", success=True, output=said)],
                         deliverable=Deliverable(kind="answer", parts=["the production database password"]))

    model = ScriptedChatModel(responses=[done, {"values": ["prd-Reef-7781"]}])
    a = await LLMPlanner(model, settings=COMPACT).assess_status(goal, state("stg-Kelp-2291"), ctx)
    assert a.status == "replan" and "second reading" in a.summary
    blind = "\n".join(str(m.content) for m in model.calls[1].messages)
    assert "stg-Kelp-2291" in blind and "prd-Reef-7781" in blind  # the outputs, both passwords in them
    assert "give the production password" not in blind  # not the plan's answer step

    model = ScriptedChatModel(responses=[done, {"values": ["prd-Reef-7781"]}])
    a = await LLMPlanner(model, settings=COMPACT).assess_status(goal, state("prd-Reef-7781"), ctx)
    assert a.status == "done" and model.remaining == 0

    provider = ScriptedChatModel(responses=[done])  # no small-model rules: no reading is asked for
    settings = COMPACT.model_copy(update={"small_model_rules": False})
    a = await LLMPlanner(provider, settings=settings).assess_status(goal, state("stg-Kelp-2291"), ctx)
    assert a.status == "done" and provider.remaining == 0


# ------------------------------------------------------------------ the prescribed reading


def _refused() -> Any:
    from soothe_planner.errors import GenerationAttempt, PlanGenerationError

    return PlanGenerationError("plan-generate", [GenerationAttempt("plan-generate", "raw", "repeats", error_type="validation")] * 3)


def _searched(tmp_path: Path) -> tuple[list[Any], list[StepResult], dict[str, Any]]:
    from soothe_planner.models import PlanStep

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    out = "config/prod.toml:4: # Datenbank\nconfig/staging.toml:4: # Datenbank\nconfig/prod.toml:9: pool = 20"
    search = StepResult(step_id="s1", success=True, output=out, outcome={"lines": out.splitlines()})
    answer = StepResult(step_id="s2", success=True, output="config/prod.toml")
    nodes = [PlanStep(id="s1", description="search", tool="search_text", args={"pattern": "Datenbank"},
                      status="completed", result=search),
             PlanStep(id="s2", description="antworte", depends_on=["s1"], status="completed", result=answer)]
    return nodes, [search, answer], caps


def test_refused_replans_get_the_files_the_search_found_read_then_an_answer(tmp_path: Path) -> None:
    from soothe_planner.planner.small_model.prescribed import prescribed_reading

    nodes, results, caps = _searched(tmp_path)
    d = Deliverable(kind="answer", parts=["die Größe des Pools"])
    gen = prescribed_reading(d, nodes, results, caps, lambda g: [], _refused())
    assert gen is not None
    steps = gen.decision.steps
    assert [(s.tool, s.args) for s in steps[:2]] == [("read_file", {"path": "config/prod.toml"}),
                                                   ("read_file", {"path": "config/staging.toml"})]
    assert steps[2].tool is None and steps[2].depends_on == ["s1", "s3", "s4"] and [s.id for s in steps] == ["s3", "s4", "s5"]
    # a file deliverable: the answer is written with the built-in write
    gen = prescribed_reading(Deliverable(kind="file", files=["POOL.md"]), nodes, results, caps, lambda g: [], _refused())
    assert gen is not None and gen.decision.steps[-1].args == {"path": "POOL.md", "content": "{{s5.output}}"}
    # not for a count (what to count is the model's call), nor when a rule refuses the plan (a repeat, too)
    assert prescribed_reading(Deliverable(kind="count"), nodes, results, caps, lambda g: [], _refused()) is None
    assert prescribed_reading(d, nodes, results, caps, lambda g: ["refused"], _refused()) is None
    from soothe_planner.models import PlanStep

    read = [PlanStep(id=f"r{i}", description="read", tool="read_file", args={"path": p}, status="completed")
            for i, p in enumerate(("config/prod.toml", "./config/staging.toml"))]
    texts = [StepResult(step_id=f"r{i}", success=True, output="pool = 20") for i in range(2)]
    # every file found was read: the answer from all of them is the whole plan
    gen = prescribed_reading(d, nodes + read, results + texts, caps, lambda g: [], _refused())
    assert gen is not None and [(s.tool, s.depends_on) for s in gen.decision.steps] == [(None, ["s1", "r0", "r1"])]


def test_no_reading_is_prescribed_without_a_tool_that_reads_one_file(tmp_path: Path) -> None:
    from soothe_planner.planner.small_model.prescribed import prescribed_reading

    nodes, results, caps = _searched(tmp_path)
    caps.pop("read_file")
    assert prescribed_reading(Deliverable(kind="answer"), nodes, results, caps, lambda g: [], _refused()) is None


def test_a_call_that_failed_with_an_optional_path_is_planned_over_the_whole_workspace(tmp_path: Path) -> None:
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.prescribed import prescribed_widening

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    failed = StepResult(step_id="s1", success=False, error="no such folder")
    search = PlanStep(id="s1", description="search", tool="search_text", args={"pattern": "ACTION", "path": "notas"},
                      status="failed", result=failed)
    gen = prescribed_widening(Deliverable(kind="file", files=["acciones.txt"]), [search], [failed], caps,
                              lambda g: [], _refused())
    assert gen is not None
    wide, answer, write = gen.decision.steps
    assert (wide.tool, wide.args) == ("search_text", {"pattern": "ACTION"}) and answer.depends_on == [wide.id]
    assert write.args == {"path": "acciones.txt", "content": "{{" + answer.id + ".output}}"}
    # a file of every match gets the widened search written whole; a listing of everything is no widening
    gen = prescribed_widening(Deliverable(kind="file", files=["acciones.txt"], every_match=True), [search], [failed],
                              caps, lambda g: [], _refused())
    assert gen is not None and [s.tool for s in gen.decision.steps] == ["search_text", "write_file"]
    assert gen.decision.steps[1].args["content"] == "{{" + gen.decision.steps[0].id + ".output}}"
    listing = PlanStep(id="s1", description="list", tool="list_dir", args={"path": "notas/*.md"}, status="failed",
                       result=failed)
    assert prescribed_widening(Deliverable(kind="answer"), [listing], [failed], caps, lambda g: [], _refused()) is None
    # read_file needs its path: nothing to widen
    read = PlanStep(id="s1", description="read", tool="read_file", args={"path": "nope.md"}, status="failed", result=failed)
    assert prescribed_widening(Deliverable(kind="answer"), [read], [failed], caps, lambda g: [], _refused()) is None
    # the planner writes no file the run looked for as a source and did not find ("Resume CAMBIOS.md", missing)
    missing = StepResult(step_id="s2", success=False, error="'CAMBIOS.md' does not exist in the workspace")
    sought = PlanStep(id="s2", description="read", tool="read_file", args={"path": "CAMBIOS.md"}, status="failed",
                      result=missing)
    cambios = Deliverable(kind="file", files=["CAMBIOS.md"])
    assert prescribed_widening(cambios, [search, sought], [failed, missing], caps, lambda g: [], _refused()) is None
    assert prescribed_widening(cambios, [search], [failed], caps, lambda g: [], _refused()) is not None
    # or a step that failed for data it lacked, naming the file
    lacked = StepResult(step_id="s2", success=False, error="step 's2': MISSING: CAMBIOS.md", error_type="missing_data")
    said = PlanStep(id="s2", description="resume CAMBIOS.md", status="failed", result=lacked)
    assert prescribed_widening(cambios, [search, said], [failed, lacked], caps, lambda g: [], _refused()) is None
    other = lacked.model_copy(update={"error": "step 's2': MISSING: OTROS-CAMBIOS.md.bak"})
    assert prescribed_widening(cambios, [search, said], [failed, other], caps, lambda g: [], _refused()) is not None


def test_a_search_for_every_match_that_looked_in_one_place_is_widened_before_any_reading(tmp_path: Path) -> None:
    """Regression (1.5B): asked for every FIXME line of the code, it searched one module; each re-plan,
    refused as looking only there, searched that module again, and the reading planned for it read
    that module: the goal failed at the iteration cap with three of the four lines never searched."""
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.prescribed import prescribed_widening

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    out = "api/handlers.go:58: // FIXME: quote ignores the tax"
    found = StepResult(step_id="s1", success=True, output=out, outcome={"lines": [out], "path": "api/handlers.go"})
    search = PlanStep(id="s1", description="search", tool="search_text", args={"pattern": "FIXME", "path": "api/handlers.go"},
                      status="completed", result=found)
    every = Deliverable(kind="file", files=["FIXME.md"], every_match=True)
    gen = prescribed_widening(every, [search], [found], caps, lambda g: [], _refused(), narrow=["api/handlers.go"])
    assert gen is not None
    wide, write = gen.decision.steps
    assert (wide.tool, wide.args) == ("search_text", {"pattern": "FIXME"})
    assert write.args == {"path": "FIXME.md", "content": "{{" + wide.id + ".output}}"}
    # a search that found lines is widened only when the checks said it looked too narrowly, for every match
    assert prescribed_widening(every, [search], [found], caps, lambda g: [], _refused()) is None
    assert prescribed_widening(every.model_copy(update={"every_match": False}), [search], [found], caps, lambda g: [],
                               _refused(), narrow=["api/handlers.go"]) is None
    assert prescribed_widening(every, [search], [found], caps, lambda g: [], _refused(), narrow=["cmd/main.go"]) is None


def test_refused_replans_of_a_count_get_an_answer_over_every_count_made(tmp_path: Path) -> None:
    """Regression (1.5B): "¿Cuántas filas de data/ensayos.csv tienen el tratamiento coir?" searched the
    file (its coir rows listed) and counted a phrase no row holds (0), with no answer step; its next
    plans were those two steps again, each refused as a repeat, and the goal failed with the count made."""
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.prescribed import prescribed_count

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    rows = "data/ensayos.csv:3: T1,coir,62\ndata/ensayos.csv:7: T3,coir,58"
    search = StepResult(step_id="s1", success=True, output=rows, outcome={
        "lines": rows.splitlines(), "exact": True, "complete": True, "path": "data/ensayos.csv", "pattern": "coir"})
    count = StepResult(step_id="s2", success=True, output="0 lines in data/ensayos.csv contain 'tratamiento coir'",
                       outcome={"count": 0, "complete": True, "counted": "0 lines contain 'tratamiento coir'"})
    nodes = [PlanStep(id="s1", description="search", tool="search_text", args={"pattern": "coir", "path": "data/ensayos.csv"},
                      status="completed", result=search),
             PlanStep(id="s2", description="count", tool="count_lines",
                      args={"path": "data/ensayos.csv", "pattern": "tratamiento coir"}, status="completed", result=count)]
    d = Deliverable(kind="count", parts=["filas con coir"], count_of="filas de data/ensayos.csv con coir")
    gen = prescribed_count(d, nodes, [search, count], caps, lambda g: [], _refused())
    assert gen is not None
    [answer] = gen.decision.steps
    assert answer.tool is None and answer.depends_on == ["s1", "s2"] and answer.id == "s3"
    # only for a count, only over counts made, only when the rules pass it, only after a refusal
    assert prescribed_count(Deliverable(kind="answer"), nodes, [search, count], caps, lambda g: [], _refused()) is None
    assert prescribed_count(d, nodes[:1], [search.model_copy(update={"outcome": {}})], caps, lambda g: [],
                            _refused()) is None
    assert prescribed_count(d, nodes, [search, count], caps, lambda g: ["a repeat"], _refused()) is None
    from soothe_planner.errors import GenerationAttempt, PlanGenerationError

    unheard = PlanGenerationError("plan-generate", [GenerationAttempt("plan-generate", "raw", "down", error_type="transport")])
    assert prescribed_count(d, nodes, [search, count], caps, lambda g: [], unheard) is None


def test_a_count_reading_sees_no_counting_tool_and_may_copy_a_number_the_outputs_state(tmp_path: Path) -> None:
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    count = StepAction(id="s1", description="count", tool="count_lines", args={"path": "db.toml", "pattern": "pool"})
    read = StepAction(id="s2", description="read", tool="read_file", args={"path": "db.toml"})
    results = [StepResult(step_id="s1", success=True, output="1 line in db.toml"),
               StepResult(step_id="s2", success=True, output="[pool]\nmax_connections = 20\n")]
    d = Deliverable(kind="count", count_of="connections the pool may hold")
    ev = evidence_of([count, read], results, caps, d)
    assert [s.id for s, _ in ev] == ["s2"]
    assert [s.id for s, _ in evidence_of([count, read], results, caps, Deliverable(kind="answer"))] == ["s1", "s2"]
    goal = "How many connections may the production pool hold?"
    assert disagreements(goal, d, _reading("20"), "1", ev)
    assert disagreements(goal, d, _reading("20"), "It may hold 20.", ev) == []


def test_a_file_the_goal_names_is_read_before_an_answer_from_it_and_counted_before_a_count(tmp_path: Path) -> None:
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.grounding import unread_files

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "api.md").write_text("## Endpoints\n\n- GET /v1/quote\n")
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    goal = "Schreib jeden Endpunkt aus docs/api.md in ENDPUNKTE.txt"

    def ran(tool: str, args: dict[str, Any]) -> tuple[list[PlanStep], list[StepResult]]:
        result = StepResult(step_id="s1", success=True, output="docs/api.md:1: ## Endpoints")
        return [PlanStep(id="s1", description=tool, tool=tool, args=args, status="completed", result=result)], [result]

    file = Deliverable(kind="file", files=["ENDPUNKTE.txt"])
    searched = ran("search_text", {"pattern": "Endpo", "path": "docs/api.md"})
    assert unread_files(goal, *searched, caps, str(tmp_path), file) == ["docs/api.md"]  # a search shows lines, not the file
    assert unread_files(goal, *ran("read_file", {"path": "docs/api.md"}), caps, str(tmp_path), file) == []
    counted = ran("count_lines", {"path": "docs/api.md", "pattern": "GET"})
    assert unread_files("Wie viele GET-Zeilen hat docs/api.md?", *counted, caps, str(tmp_path), Deliverable(kind="count")) == []
    # without a tool that reads one file, any tool that looked in it will do
    no_reader = {k: v for k, v in caps.items() if k != "read_file"}
    assert unread_files(goal, *searched, no_reader, str(tmp_path), file) == []


def test_a_list_is_never_done_on_its_facts_alone(tmp_path: Path) -> None:
    """A file that must carry every match is promoted from 'continue' only when it holds every line found."""
    from soothe_planner.models import PlanStep, StatusAssessment
    from soothe_planner.planner.guard import guard_assessment

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    # one line found (the search looked for the wrong thing), written whole: the contract is met, and
    # the answer's one fact is a tool's, yet nothing says the list is complete
    (tmp_path / "acciones.md").write_text("notas/a.md:3: ACTION: marcar parcelas\n")
    out = "notas/a.md:3: ACTION: marcar parcelas"
    search = StepResult(step_id="s1", success=True, output=out, outcome={"lines": out.splitlines(), "pattern": "ACTION"})
    answer = StepResult(step_id="s2", success=True, output=out)
    write = StepResult(step_id="s3", success=True, output=f"wrote 38 bytes to acciones.md:\n{out}",
                       outcome={"path": "acciones.md", "bytes": 38})
    steps = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "ACTION"}),
             StepAction(id="s2", description="answer", depends_on=["s1"]),
             StepAction(id="s3", description="write", tool="write_file",
                        args={"path": "acciones.md", "content": "{{s2.output}}"}, depends_on=["s2"])]
    nodes = [PlanStep(**s.model_dump(), status="completed", result=r) for s, r in zip(steps, [search, answer, write], strict=True)]
    keep_going = StatusAssessment(status="continue", goal_progress=0.5, confidence=0.5, summary="")
    goal = "Saca cada línea ACTION de las notas a acciones.md"
    a, why = guard_assessment(goal, keep_going, Deliverable(kind="file", files=["acciones.md"], every_match=True),
                              AgentDecision(steps=steps), nodes, [search, answer, write], caps, str(tmp_path),
                              plan_finished=True, small_model=True, grounded=True)
    assert a.status != "done", why


def test_a_file_of_lines_from_a_search_of_one_place_is_not_done(tmp_path: Path) -> None:
    from soothe_planner.models import PlanStep, StatusAssessment
    from soothe_planner.planner.guard import guard_assessment

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    out = "src/notas.py:11: # TODO: rechazar notas vacías\nsrc/notas.py:16: # TODO: búsqueda sin mayúsculas"
    text = out
    (tmp_path / "INFORME.md").write_text(text)
    keep_going = StatusAssessment(status="continue", goal_progress=0.5, confidence=0.5, summary="")
    goal = "Haz INFORME.md con las líneas TODO"
    informe = Deliverable(kind="file", files=["INFORME.md"])

    def judged(where: str, status: str = "continue") -> str:
        search = StepResult(step_id="s1", success=True, output=out,
                            outcome={"lines": out.splitlines(), "pattern": "TODO", "path": where, "exact": True})
        answer = StepResult(step_id="s2", success=True, output=text)
        write = StepResult(step_id="s3", success=True, output=f"wrote {len(text)} bytes to INFORME.md:\n{text}",
                           outcome={"path": "INFORME.md", "bytes": len(text)})
        steps = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO", "path": where}),
                 StepAction(id="s2", description="lista", depends_on=["s1"]),
                 StepAction(id="s3", description="write", tool="write_file",
                            args={"path": "INFORME.md", "content": "{{s2.output}}"}, depends_on=["s2"])]
        nodes = [PlanStep(**st.model_dump(), status="completed", result=r)
                 for st, r in zip(steps, [search, answer, write], strict=True)]
        said = keep_going.model_copy(update={"status": status})
        a, _ = guard_assessment(goal, said, informe, AgentDecision(steps=steps), nodes, [search, answer, write],
                                caps, str(tmp_path), plan_finished=True, small_model=True, grounded=True)
        return a.status

    assert judged("src/notas.py") == "continue"  # one module searched: the list may be short
    assert judged(".") == "done"  # the whole workspace searched: its facts vouch for it
    assert judged("src/notas.py", "done") == "replan"  # the model's own "done" is held to it too
    assert judged(".", "done") == "done"


def test_an_answer_from_search_lines_waits_for_the_files_they_were_found_in(tmp_path: Path) -> None:
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.reading import unread_hits

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    out = "actas/2024-03-04.md:9: coco\nactas/2024-04-02.md:5: coco\nactas/2024-05-13.md:2: coco\nactas/2024-06-01.md:4: coco"
    search = StepResult(step_id="s1", success=True, output=out, outcome={"lines": out.splitlines()})
    answer = StepResult(step_id="s2", success=True, output="actas/2024-03-04.md")
    steps = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "coco"}),
             StepAction(id="s2", description="¿qué acta lo decidió?", depends_on=["s1"])]
    nodes = [PlanStep(**s.model_dump(), status="completed", result=r) for s, r in zip(steps, [search, answer], strict=True)]
    d = Deliverable(kind="answer", parts=["el acta de la decisión"])
    # the first three files found, in order
    assert unread_hits(d, AgentDecision(steps=steps), nodes, [search, answer], caps) == [
        "actas/2024-03-04.md", "actas/2024-04-02.md", "actas/2024-05-13.md"]
    read = [PlanStep(id=f"r{i}", description="read", tool="read_file", args={"path": p}, status="completed")
            for i, p in enumerate(("actas/2024-03-04.md", "actas/2024-04-02.md", "./actas/2024-05-13.md"))]
    texts = [StepResult(step_id=f"r{i}", success=True, output="...") for i in range(3)]
    assert unread_hits(d, AgentDecision(steps=steps), nodes + read, [search, answer, *texts], caps) == []
    # a file may be made of the lines themselves, a count is checked elsewhere, and an answer that
    # rests on no search owes no reading
    assert unread_hits(Deliverable(kind="file", files=["x.md"]), AgentDecision(steps=steps), nodes,
                       [search, answer], caps) == []
    assert unread_hits(Deliverable(kind="count"), AgentDecision(steps=steps), nodes, [search, answer], caps) == []
    alone = StepAction(id="s3", description="answer")
    assert unread_hits(d, AgentDecision(steps=[alone]), [*nodes, PlanStep(**alone.model_dump(), status="completed")],
                       [search, answer, StepResult(step_id="s3", success=True, output="x")], caps) == []


async def test_a_model_that_answers_from_search_lines_again_and_again_gets_the_file_read(tmp_path: Path) -> None:
    """End to end, greedy: the answer from a search line is refused, the model's repeats are refused,
    the planner reads the file the search found, and the answer from it stands after the reading agrees."""
    from soothe_planner.graph import build_strange_loop, goal_input, run_config
    from soothe_planner.testing import FunctionChatModel

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "sync.py").write_text('import requests\n\nUPLOAD_URL = "https://books.example/api"\n')
    (tmp_path / "README.md").write_text("# tool\n")
    plan = '```python\ns1 = search_text(pattern="requests", path=".")\ns2 = answer(s1, task="name the module")\n```'
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "ok"}

    def reply(call: Any) -> Any:
        if call.schema_name == "AssessStatus":
            return done
        if call.schema_name == "CrossCheck":
            return {"values": ["src/sync.py"]}
        if "carry out one step" in call.prompt_text:
            return "src/sync.py" if "UPLOAD_URL =" in call.prompt_text else "requests"
        return plan

    class Greedy(FunctionChatModel):
        temperature: float = 0.0

    model = Greedy(fn=reply)
    executor = StepExecutor(tools=list(make_builtin_tools(tmp_path).values()), agent_model=model)
    ctx = PlanContext(thread_id="t1", workspace=str(tmp_path), available_capabilities=executor.capabilities())
    planner = LLMPlanner(model, settings=COMPACT.model_copy(update={"plan_syntax": "calls"}))
    graph = build_strange_loop(planner, executor, context=ctx, synthesize=False, intake=False)
    out = await graph.ainvoke(goal_input("Welches Modul importiert requests?", thread_id="t1", deliverable="answer"),
                              run_config("t1"))
    assert out["status"] == "done" and out["final_answer"] == "src/sync.py"
    assert planner.stats.prescribed_readings == 1
    read = [c for c in model.calls if "carry out one step" in c.prompt_text and "UPLOAD_URL =" in c.prompt_text]
    assert len(read) == 1  # the answer was made once more, from the file read
    assert [c.schema_name for c in model.calls].count("CrossCheck") == 1  # only the last "done" was read again


def test_a_search_that_found_nothing_in_one_file_is_planned_over_the_whole_workspace(tmp_path: Path) -> None:
    from soothe_planner.models import PlanStep
    from soothe_planner.planner.small_model.prescribed import prescribed_widening

    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    empty = StepResult(step_id="s1", success=True, output="no matches", outcome={"lines": []})
    narrow = PlanStep(id="s1", description="search", tool="search_text", args={"pattern": "requests", "path": "src/a.py"},
                      status="completed", result=empty)
    gen = prescribed_widening(Deliverable(kind="answer"), [narrow], [empty], caps, lambda g: [], _refused())
    assert gen is not None and gen.decision.steps[0].args == {"pattern": "requests"}
    # a search of the whole workspace that found nothing has nowhere wider to look
    whole = narrow.model_copy(update={"args": {"pattern": "requests", "path": "."}})
    assert prescribed_widening(Deliverable(kind="answer"), [whole], [empty], caps, lambda g: [], _refused()) is None
    # a search that found lines is no miss
    found = StepResult(step_id="s1", success=True, output="src/a.py:1: x", outcome={"lines": ["src/a.py:1: x"]})
    assert prescribed_widening(Deliverable(kind="answer"), [narrow], [found], caps, lambda g: [], _refused()) is None
