"""Plans written as Python calls: how they are read, the grammar that holds a local model to them,
and the planner's calls path (prompt, grammar in the request, re-ask in the same syntax)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI
from planner_support import COMPACT, state, tool_context
from pydantic import SecretStr

from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import PlanGenerationError, PlanParseError
from soothe_planner.models import Capability, LoopState, PlanContext
from soothe_planner.parsing import read_plan_calls
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.plan_syntax import (
    GRAMMAR_KEY,
    PLAN_SYNTAX_KEY,
    grammar_tools,
    plan_grammar,
    resolve_plan_syntax,
    takes_grammar,
)
from soothe_planner.testing import ScriptedChatModel

WRITE = {"properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}
SEARCH = {"properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}
SCHEMAS = {"write_file": WRITE, "search_text": SEARCH}
TOOLS = {"search_text", "write_file", "read_file", "answer"}
README_PLAN = (
    's1 = search_text(pattern="TODO", path=".")\n'
    's2 = answer(s1, task="give the TODO lines by file")\n'
    's3 = write_file(path="TODO_REPORT.md", content=s2)\n'
)


def _read(text: str, **kw: Any) -> tuple[dict[str, Any], list[str]]:
    return read_plan_calls(text, tool_schemas=SCHEMAS, known_tools=TOOLS, **kw)


# --------------------------------------------------------------------------- the reader


def test_a_plan_of_calls_reads_into_the_compact_json_shape() -> None:
    data, warnings = _read(README_PLAN)
    assert warnings == []
    assert data == {"plan_action": "new", "steps": [
        {"id": "s1", "tool": "search_text", "args": {"pattern": "TODO", "path": "."}, "depends_on": []},
        {"id": "s2", "tool": "answer", "args": {"task": "give the TODO lines by file"}, "depends_on": ["s1"]},
        {"id": "s3", "tool": "write_file", "args": {"path": "TODO_REPORT.md", "content": "{{s2.output}}"},
         "depends_on": ["s2"]},
    ]}


def test_references_inside_f_strings_lists_and_attributes_become_dependencies() -> None:
    text = ('s1 = read_file(path="a.txt")\ns2 = read_file(path="b.txt")\n'
            's3 = write_file(path="out.md", content=f"# A\\n{s1}\\n# B\\n{s2.output}")\n'
            's4 = answer([s1, s2], task="compare them")\n')
    steps = _read(text)[0]["steps"]
    assert steps[2]["args"]["content"] == "# A\n{{s1.output}}\n# B\n{{s2.output}}"
    assert steps[2]["depends_on"] == ["s1", "s2"]
    assert steps[3] == {"id": "s4", "tool": "answer", "args": {"task": "compare them"}, "depends_on": ["s1", "s2"]}


def test_a_comment_ending_a_step_line_is_its_description_and_a_hash_in_a_string_is_text() -> None:
    text = (
        's1 = search_text(pattern="#include", path=".")  # find the include lines\n'
        's2 = answer(s1, task="count them")\n'
        's3 = write_file(path="OUT.md",\n               content=s2)  # save the count\n'
        's4 = search_text(pattern="a # b", path=".")\n'
    )
    steps = read_plan_calls(text)[0]["steps"]
    assert steps[0]["args"]["pattern"] == "#include" and steps[0]["description"] == "find the include lines"
    assert steps[2]["description"] == "save the count"  # a call over two lines, its comment at the end
    assert "description" not in steps[1] and "description" not in steps[3]  # no comment: derived later


def test_an_optional_non_text_argument_given_as_empty_text_is_read_as_not_given() -> None:
    from soothe_planner.parsing import read_decision

    schema = {"properties": {"keywords": {"type": "string"}, "year": {"type": "integer"}, "limit": {"type": "integer"},
                             "author": {"type": "string"}}, "required": ["keywords", "limit"]}
    data = {"steps": [{"id": "s1", "tool": "find_papers",
                       "args": {"keywords": "cancer", "year": "", "limit": "", "author": ""}, "depends_on": []}]}
    parsed = read_decision(data, tool_schemas={"find_papers": schema})
    assert parsed.decision is not None
    # the optional integer left out; a required one and a text one kept as written, for the validator
    assert parsed.decision.steps[0].args == {"keywords": "cancer", "limit": "", "author": ""}
    assert any("optional argument 'year' given as \"\" read as not given" in w for w in parsed.warnings)


def test_a_positional_literal_fills_the_tools_parameters_in_order() -> None:
    steps = _read('s1 = search_text("TODO", ".")\ns2 = write_file("out.md", s1.output)\n')[0]["steps"]
    assert steps[0]["args"] == {"pattern": "TODO", "path": "."}
    # a step name given positionally is a dependency, not a value
    assert steps[1] == {"id": "s2", "tool": "write_file", "args": {"path": "out.md"}, "depends_on": ["s1"]}


def test_fences_comments_and_prose_around_the_plan_are_skipped_with_a_warning_for_prose() -> None:
    text = "Here is the plan:\n```python\n# find them\n" + README_PLAN + "```\nThat is all.\n"
    data, warnings = _read(text)
    assert [s["id"] for s in data["steps"]] == ["s1", "s2", "s3"]
    assert len(warnings) == 2 and "line 1" in warnings[0] and "Here is the plan" in warnings[0]


def test_a_bare_call_gets_the_next_free_name_and_earlier_plans_steps_can_be_named() -> None:
    steps = _read('write_file(path="o.md", content=s1)\n', existing_ids={"s1"})[0]["steps"]
    assert steps == [{"id": "s2", "tool": "write_file", "args": {"path": "o.md", "content": "{{s1.output}}"},
                      "depends_on": ["s1"]}]


@pytest.mark.parametrize(("text", "needle"), [
    ('s1 = write_file(path="o.md", content=s7)\n', "'s7' is not a step defined on an earlier line"),
    ('s1 = delete_everything(path=".")\n', "'delete_everything' is not one of the tools"),
    ('s1 = read_file(path=open("x").read())\n', "is not a literal"),
    ("s1 = 42\n", "must call a tool by its name"),
    ('s1, s2 = read_file(path="a")\n', "one step name"),
    ('s1 = read_file(path="a"\n', "not a Python call"),
    ('s1 = read_file(**{"path": "a"})\n', "name each argument"),
    ('s1 = answer(task=f"x{len(s0)}")\n', "f-string may hold step names only"),
    ("nothing to see here\n", "no step was written"),
])
def test_what_is_not_a_plan_of_calls_is_refused_naming_the_line_and_the_rule(text: str, needle: str) -> None:
    with pytest.raises(PlanParseError) as err:
        _read(text)
    assert needle in str(err.value)


def test_the_reader_evaluates_literals_only() -> None:
    with pytest.raises(PlanParseError, match="not a literal"):
        _read('s1 = read_file(path=__import__("os").getcwd())\n')


# --------------------------------------------------------------------------- the grammar


def test_the_grammar_names_each_tools_parameters_and_bounds_the_lines() -> None:
    caps = [Capability(name="search_text", kind="tool", args_schema=SEARCH),
            Capability(name="write_file", kind="tool", args_schema=WRITE)]
    grammar = plan_grammar(grammar_tools(caps, "answer"), 4, existing_ids={"s1", "intro"})
    assert grammar.startswith('root ::= "```python\\n" step{1,4} "```"\n')
    assert 't-search-text-0-kw ::= ("pattern" | "path") "=" value' in grammar
    assert 't-answer-2-kw ::= ("task") "=" value' in grammar
    assert '| "intro"' in grammar and '"s1"' not in grammar  # sN names are already in the sid rule


def test_the_grammar_lets_a_line_end_with_a_bounded_comment() -> None:
    grammar = plan_grammar([("search_text", ["pattern", "path"]), ("answer", ["task"])], 3)
    assert 'step ::= sid " = " call note? "\\n"' in grammar
    assert 'note ::= "  # " [^\\n]{1,120}' in grammar


def test_the_grammar_compiles_in_the_embedded_server_library() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    caps = [Capability(name="search_text", kind="tool", args_schema=SEARCH),
            Capability(name="write_file", kind="tool", args_schema=WRITE),
            Capability(name="list_dir", kind="tool", args_schema={"properties": {}}),
            Capability(name="bash", kind="tool")]  # no schema declared: any keyword
    grammar = plan_grammar(grammar_tools(caps, "answer"), 8)
    assert llama_cpp.LlamaGrammar.from_string(grammar, verbose=False) is not None


def test_a_tool_that_declares_no_schema_may_take_any_keyword_and_one_with_none_takes_none() -> None:
    caps = [Capability(name="bash", kind="tool"), Capability(name="list_dir", kind="tool", args_schema={"properties": {}})]
    grammar = plan_grammar(grammar_tools(caps, "answer"), 4)
    assert 't-bash-0-kw ::= ident "=" value' in grammar and "ident ::= [a-zA-Z_]" in grammar
    assert 't-list-dir-1 ::= "list_dir(" deps? ")"' in grammar
    assert "ident ::=" not in plan_grammar(grammar_tools(caps[1:], "answer"), 4)


# --------------------------------------------------------------------------- the setting


def test_auto_is_calls_only_for_a_model_that_declares_it_under_the_compact_profile() -> None:
    declared = ScriptedChatModel([], metadata={PLAN_SYNTAX_KEY: "calls"})
    assert resolve_plan_syntax("auto", declared, "compact") == "calls"
    assert resolve_plan_syntax("auto", declared, "full") == "json"
    assert resolve_plan_syntax("auto", ScriptedChatModel([]), "compact") == "json"
    assert resolve_plan_syntax("json", declared, "compact") == "json"
    with pytest.raises(ValueError, match="'yaml'"):
        resolve_plan_syntax("yaml", declared, "compact")


def test_the_embedded_model_declares_plans_in_calls_and_the_keys_it_uses_are_the_planners() -> None:
    from soothe_planner.local import embedded
    from soothe_planner.planner.prompts.profiles import PROFILE_METADATA_KEY, resolve_profile

    assert (embedded.PLAN_SYNTAX_KEY, embedded.GRAMMAR_KEY) == (PLAN_SYNTAX_KEY, GRAMMAR_KEY)
    client = embedded.local_chat_model(base_url="http://127.0.0.1:9", model="1.5b")  # no server is started
    assert client.metadata is not None and client.metadata[PROFILE_METADATA_KEY] == "compact"
    profile = resolve_profile("auto", client)
    assert resolve_plan_syntax("auto", client, profile) == "calls" and takes_grammar(client)
    assert resolve_plan_syntax("json", client, profile) == "json"  # the config can still ask for JSON


def test_calls_under_the_full_profile_is_a_clear_error() -> None:
    settings = COMPACT.model_copy(update={"prompt_profile": "full", "plan_syntax": "calls"})
    with pytest.raises(ValueError, match="needs the compact prompt profile"):
        LLMPlanner(ScriptedChatModel([]), settings=settings)


# --------------------------------------------------------------------------- the planner's calls path


def _calls_planner(*replies: Any) -> tuple[LLMPlanner, ScriptedChatModel]:
    model = ScriptedChatModel(responses=list(replies), metadata={PLAN_SYNTAX_KEY: "calls"})
    return LLMPlanner(model, settings=COMPACT), model


async def test_the_loop_plans_in_calls_and_reads_them_as_typed_steps(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    planner, model = _calls_planner(README_PLAN)
    gen = await planner.generate_from_assessment("write the TODO lines to TODO_REPORT.md", LoopState(
        goal="g", thread_id="t1"), ctx, _continue())
    assert gen.decision is not None
    assert [(s.id, s.tool, s.depends_on) for s in gen.decision.steps] == [
        ("s1", "search_text", []), ("s2", None, ["s1"]), ("s3", "write_file", ["s2"])]
    call = model.calls[0]
    assert call.schema_name in (None, "")  # a text call: no schema bound
    assert call.messages[0].content.startswith("You write a plan as Python")
    assert planner.stats.text_ok == 1 and planner.stats.structured_ok == 0


async def test_a_lines_comment_labels_its_step_unless_it_copies_the_tools_own_description(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    search = next(c for c in ctx.available_capabilities if c.name == "search_text")
    plan = (f's1 = search_text(pattern="TODO", path=".")  # {search.description}\n'
            's2 = answer(s1, task="give the TODO lines by file")\n'
            's3 = write_file(path="TODO_REPORT.md", content=s2)  # save the TODO lines\n')
    planner, model = _calls_planner(plan)
    gen = await planner.generate_from_assessment("write the TODO lines to TODO_REPORT.md", LoopState(
        goal="g", thread_id="t1"), ctx, _continue())
    assert gen.decision is not None and len(model.calls) == 1  # no re-ask for a copied label
    s1, _, s3 = gen.decision.steps
    assert s1.description == 'search_text {"pattern": "TODO", "path": "."}' and s3.description == "save the TODO lines"


async def test_a_plan_that_breaks_a_rule_is_re_asked_in_calls_with_the_error(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    planner, model = _calls_planner('s1 = write_file(path="R.md", content=s9)\n', README_PLAN)
    gen = await planner.generate_from_assessment("write the TODO lines to TODO_REPORT.md", LoopState(
        goal="g", thread_id="t1"), ctx, _continue())
    assert gen.decision is not None and len(gen.decision.steps) == 3
    reask = model.calls[1].messages[-1].content
    assert "'s9' is not a step defined on an earlier line" in reask
    assert "one step per line" in reask and "JSON" not in reask
    assert planner.stats.reask_ok == 1


async def test_every_attempt_failing_is_a_generation_error_carrying_them(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    planner, _ = _calls_planner("no plan", "still none", "nothing")
    with pytest.raises(PlanGenerationError) as err:
        await planner.generate_from_assessment("g", LoopState(goal="g", thread_id="t1"), ctx, _continue())
    assert len(err.value.attempts) == 3 and all("no step was written" in a.error for a in err.value.attempts)


@pytest.mark.parametrize("extra", [Capability(name="researcher", kind="subagent", description="reads the web"),
                                   Capability(name="web-search", kind="tool", description="searches the web")])
async def test_a_capability_with_no_call_form_keeps_the_plan_in_json(tmp_path: Path, extra: Capability) -> None:
    ctx, _ = tool_context(tmp_path)
    ctx = ctx.model_copy(update={"available_capabilities": [*ctx.available_capabilities, extra]})
    plan_json = {"steps": [{"id": "s1", "tool": "search_text", "args": {"pattern": "TODO"}, "depends_on": []},
                           {"id": "s2", "tool": "answer", "args": {"task": "list them"}, "depends_on": ["s1"]}]}
    planner, model = _calls_planner(plan_json)
    gen = await planner.generate_from_assessment("list the TODO lines", LoopState(goal="g", thread_id="t1"), ctx,
                                                 _continue())
    assert gen.decision is not None and model.calls[0].schema_name == "GeneratePlan"


async def test_a_server_that_takes_a_grammar_gets_the_plans_grammar_in_the_request(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        message = {"role": "assistant", "content": README_PLAN}
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), model="m", max_retries=0,
                       max_tokens=512, extra_body={"max_tokens": 512},
                       metadata={"soothe_prompt_profile": "compact", PLAN_SYNTAX_KEY: "calls", GRAMMAR_KEY: "gbnf"},
                       http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    ctx, _ = tool_context(tmp_path)
    planner = LLMPlanner(model, settings=COMPACT.model_copy(update={"prompt_profile": "auto"}))
    gen = await planner.generate_from_assessment(
        "write the TODO lines to TODO_REPORT.md",
        state(0).model_copy(update={"deliverable": Deliverable(kind="file", files=["TODO_REPORT.md"])}), ctx, _continue())
    assert gen.decision is not None and len(gen.decision.steps) == 3
    body = seen[0]
    assert "tools" not in body and body["max_tokens"] == 512
    # the deliverable names a file nothing has written: the plan's last line must call write_file
    assert body["grammar"].startswith('root ::= "```python\\n" step{0,7} last "```"\nlast ::= sid " = " t-write-file-')
    assert '"write_file("' in body["grammar"]


def _continue() -> Any:
    from soothe_planner.models import StatusAssessment

    return StatusAssessment(status="continue", goal_progress=0.0, confidence=0.5, summary="")


def test_ctx_builtins_have_schemas_for_positional_arguments(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    assert isinstance(ctx, PlanContext)
    schemas = {c.name: c.args_schema for c in ctx.available_capabilities}
    assert next(iter(schemas["search_text"]["properties"])) == "pattern"


def test_a_plan_grammar_can_require_its_last_line_to_call_one_tool() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    tools = [("search_text", ["pattern", "path"]), ("write_file", ["path", "content"]), ("answer", ["task"])]
    free, owed = plan_grammar(tools, 4), plan_grammar(tools, 4, ends_with="write_file")
    assert free.startswith('root ::= "```python\\n" step{1,4} "```"') and "last ::=" not in free
    assert owed.startswith('root ::= "```python\\n" step{0,3} last "```"\nlast ::= sid " = " t-write-file-1 note? "\\n"')
    assert llama_cpp.LlamaGrammar.from_string(owed, verbose=False) is not None
    with pytest.raises(ValueError, match="'read_file' is not among the tools"):
        plan_grammar(tools, 4, ends_with="read_file")


def test_the_write_is_owed_only_while_the_deliverable_names_a_file_nothing_finished_has_written(tmp_path: Path) -> None:
    from soothe_planner.dag import PlanManager
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.models import AgentDecision, StepAction, StepResult
    from soothe_planner.planner.small_model.plan_rules import write_owed

    ctx, _ = tool_context(tmp_path)
    caps = {c.name: c for c in ctx.available_capabilities}
    report = Deliverable(kind="file", files=["TODO_REPORT.md"])
    assert write_owed(report, [], caps) == "write_file"
    assert write_owed(Deliverable(kind="answer"), [], caps) is None
    assert write_owed(None, [], caps) is None  # nothing declared: nothing owed
    assert write_owed(report, [], {n: c for n, c in caps.items() if n != "write_file"}) is None
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="write", tool="write_file",
                                              args={"path": "TODO_REPORT.md", "content": "x"})]), 0)
    assert write_owed(report, pm.nodes, caps) == "write_file"  # planned, not yet written
    pm.mark_started("s1")
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="wrote 1 bytes",
                                        outcome={"path": "TODO_REPORT.md", "bytes": 1, "blank": False})])
    assert write_owed(report, pm.nodes, caps) is None
    # a blank write made the file but not what was asked: the write is still owed
    blank = PlanManager("g")
    blank.ingest(AgentDecision(steps=[StepAction(id="s1", description="write", tool="write_file",
                                                 args={"path": "TODO_REPORT.md", "content": " "})]), 0)
    blank.mark_started("s1")
    blank.record_step_outcomes([StepResult(step_id="s1", success=True, output="wrote 1 bytes",
                                           outcome={"path": "TODO_REPORT.md", "bytes": 1, "blank": True})])
    assert write_owed(report, blank.nodes, caps) == "write_file"
