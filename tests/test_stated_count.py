"""A count a line states is held to an answer's checks, not to a counting tool's (``support.stated_count``)."""

from __future__ import annotations

from pathlib import Path

from soothe_planner.deliverable import Deliverable
from soothe_planner.execution import StepExecutor
from soothe_planner.models import AgentDecision, StatusAssessment, StepAction, StepResult
from soothe_planner.planner.guard import assessed_deliverable, guard_assessment
from soothe_planner.planner.small_model.support import stated_count
from soothe_planner.tools import make_builtin_tools

SERVER = "config/server.toml:3: port = 8443"
LENA = "TODO.txt:4: - Lena: order 3 trays of coir\nTODO.txt:9: - ask Lena about the P4 logger"


def _search(step_id: str, pattern: str, output: str) -> tuple[StepAction, StepResult]:
    return (StepAction(id=step_id, description="search", tool="search_text", args={"pattern": pattern}),
            StepResult(step_id=step_id, success=True, output=output))


def _answer(step_id: str, text: str, after: str) -> tuple[StepAction, StepResult]:
    return (StepAction(id=step_id, description="answer", tool=None, depends_on=[after]),
            StepResult(step_id=step_id, success=True, output=text))


def _run(*steps: tuple[StepAction, StepResult]) -> tuple[list[StepAction], list[StepResult], AgentDecision]:
    nodes = [s for s, _ in steps]
    return nodes, [r for _, r in steps], AgentDecision(type="execute_steps", steps=nodes, execution_mode="dependency")


def _count(count_of: str, parts: list[str]) -> Deliverable:
    return Deliverable(kind="count", count_of=count_of, parts=parts, declared_by="model")


def test_a_setting_read_for_a_misdeclared_count_is_held_to_an_answers_checks() -> None:
    goal = "Which port does config/server.toml configure for the server?"
    nodes, results, _ = _run(_search("s1", "port", SERVER), _answer("s2", "8443", "s1"))
    read = stated_count(goal, _count("config/server.toml", ["port number"]), "8443", nodes, results, None, None)
    assert read is not None
    assert (read.kind, read.answer_is, read.parts, read.declared_by) == ("answer", "number", ["port number"], "model")


def test_the_same_in_german_and_with_the_count_of_as_its_only_part() -> None:
    goal = "Welchen Port setzt config/server.toml für den Server?"
    nodes, results, _ = _run(_search("s1", "port", SERVER), _answer("s2", "Port 8443", "s1"))
    read = stated_count(goal, _count("Port in config/server.toml", []), "Port 8443", nodes, results, None, None)
    assert read is not None and read.parts == ["Port in config/server.toml"]


def test_a_number_on_a_line_about_something_else_keeps_the_count() -> None:
    goal = "Which port does config/server.toml configure for the server?"
    nodes, results, _ = _run(_search("s1", "workers", "config/server.toml:5: workers = 4"), _answer("s2", "4", "s1"))
    assert stated_count(goal, _count("ports", ["port"]), "4", nodes, results, None, None) is None


def test_a_number_no_line_states_a_counted_run_and_an_answer_without_numbers_keep_the_count(tmp_path: Path) -> None:
    goal = "How many lines in TODO.txt mention Lena?"
    deliverable = _count("lines in TODO.txt that mention Lena", ["number of lines"])
    nodes, results, _ = _run(_search("s1", "Lena", LENA), _answer("s2", "2", "s1"))
    assert stated_count(goal, deliverable, "2", nodes, results, None, None) is None  # counted by the model: no line says 2
    assert stated_count(goal, deliverable, "Lena is named twice", nodes, results, None, None) is None
    counted = (StepAction(id="s3", description="count", tool="count_lines", args={"path": "TODO.txt", "pattern": "Lena"}),
               StepResult(step_id="s3", success=True, output="2 lines in TODO.txt contain 'Lena'",
                          outcome={"counted": "lines of TODO.txt holding 'Lena'", "count": 2}))
    nodes, results, _ = _run(_search("s1", "port", SERVER), counted, _answer("s2", "8443", "s1"))
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    assert stated_count("Which port?", _count("config/server.toml", []), "8443", nodes, results, caps, None) is None


def test_a_goals_own_number_says_nothing_and_an_answer_is_never_retyped() -> None:
    goal = "Which port does server 2 listen on?"
    nodes, results, _ = _run(_search("s1", "server", "config/a.toml:1: server 2 port"), _answer("s2", "2", "s1"))
    assert stated_count(goal, _count("ports", []), "2", nodes, results, None, None) is None
    answer = Deliverable(kind="answer", answer_is="number")
    nodes, results, _ = _run(_search("s1", "port", SERVER), _answer("s2", "8443", "s1"))
    assert stated_count("Which port?", answer, "8443", nodes, results, None, None) is None


def test_the_guard_lets_a_read_setting_stand_and_still_checks_the_answers_parts() -> None:
    goal = "Which port does config/server.toml configure for the server?"
    count = _count("config/server.toml", ["port number"])
    nodes, results, decision = _run(_search("s1", "port", SERVER), _answer("s2", "8443", "s1"))
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="port found")
    kept, why = guard_assessment(goal, done, count, decision, nodes, results, None, None,
                                 plan_finished=True, small_model=True, grounded=True)
    assert kept.status == "replan" and "no counting tool counted anything" in why  # the declared count, as it was
    held = assessed_deliverable(goal, count, decision, nodes, results, None, None, small_model=True)
    assert held is not None and held.kind == "answer"
    kept, why = guard_assessment(goal, done, held, decision, nodes, results, None, None,
                                 plan_finished=True, small_model=True, grounded=True)
    assert (kept.status, why) == ("done", "")
    # without the small-model rules the declared count stands as declared
    assert assessed_deliverable(goal, count, decision, nodes, results, None, None, small_model=False) is count
    # two things asked, one answered: an answer's checks refuse what the count contract never looked at
    two = _count("ports", ["staging port", "port the Dockerfile exposes"])
    goal2 = "What port does the staging config listen on, and which port does the Dockerfile expose?"
    nodes, results, decision = _run(_search("s1", "port", "config/staging.toml:2: port = 8181"),
                                    _answer("s2", "8181", "s1"))
    held = assessed_deliverable(goal2, two, decision, nodes, results, None, None, small_model=True)
    assert held is not None and held.kind == "answer"
    kept, why = guard_assessment(goal2, done, held, decision, nodes, results, None, None,
                                 plan_finished=True, small_model=True, grounded=True)
    assert kept.status == "replan", why


def test_a_request_in_another_language_than_the_files_is_read_through_what_the_run_searched_for() -> None:
    goal = "¿Qué puerto configura config/server.toml para el servidor?"
    search = (StepAction(id="s1", description="busca", tool="search_text", args={"pattern": "port"}),
              StepResult(step_id="s1", success=True, output=SERVER, outcome={"pattern": "port", "lines": [SERVER]}))
    nodes, results, _ = _run(search, _answer("s2", "8443", "s1"))
    count = _count("config/server.toml", ["puerto"])
    english = {"config", "server", "toml", "port", "the", "workers", "host"}  # the files' words
    assert stated_count(goal, count, "8443", nodes, results, None, None) is None  # "port" is no word of the request
    read = stated_count(goal, count, "8443", nodes, results, None, None, english)
    assert read is not None and (read.kind, read.answer_is) == ("answer", "number")
    # a request in the files' own language is not bridged: its words say what a line must be about
    nodes, results, _ = _run(search, _answer("s2", "8443", "s1"))
    assert stated_count("Which setting does config/server.toml give the workers?", _count("workers", []), "8443",
                        nodes, results, None, None, english | {"which", "setting", "does", "give"}) is None
