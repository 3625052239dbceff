"""The recogniser of tool calls written as text: every listed tolerance, and what stays text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soothe_planner.parsing import read_text_tool_calls
from soothe_planner.parsing.tool_calls import MAX_CALLS

ARGS_AS_STRING = json.dumps({"name": "list_dir", "arguments": json.dumps({"path": "."})})


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "list_dir", "arguments": {"path": "."}}',
        ARGS_AS_STRING,
        '{"name": "list_dir", "parameters": {"path": "."}}',
        '{"name": "list_dir", "args": {"path": "."}, "type": "function", "id": "c1"}',
        '{"type": "function", "function": {"name": "list_dir", "arguments": "{\\"path\\": \\".\\"}"}}',
        '```json\n{"name": "list_dir", "arguments": {"path": "."}}\n```',
        "<tool_call>\n{'name': 'list_dir', 'arguments': {'path': '.',}}\n</tool_call>",  # repaired JSON
        "<think>list it</think><tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}",  # no end tag
    ],
)
def test_every_written_form_of_one_call_is_recognised(text: str) -> None:
    found = read_text_tool_calls(text)
    assert [(c.name, c.args, c.problem) for c in found.calls] == [("list_dir", {"path": "."}, None)]
    assert found.prose == ""


def test_several_calls_and_an_array_of_calls_are_read_in_order_with_the_prose_apart() -> None:
    text = (
        "Let me look.\n<tool_call>\n" + ARGS_AS_STRING + "\n</tool_call>\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.md"}}\n</tool_call>\nThen answer.'
    )
    found = read_text_tool_calls(text)
    assert [c.name for c in found.calls] == ["list_dir", "read_file"]
    assert found.prose == "Let me look. Then answer."
    array = read_text_tool_calls('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": null}]')
    assert [(c.name, c.args) for c in array.calls] == [("a", {}), ("b", {})]


def test_unreadable_or_cut_off_arguments_are_still_a_call_with_the_reason() -> None:
    (call,) = read_text_tool_calls('{"name": "read_file", "arguments": "the readme"}').calls
    assert call.args is None and "no JSON object" in (call.problem or "")
    (cut,) = read_text_tool_calls('{"name": "write_file", "arguments": {"path": "a.md", "content": "# Ti').calls
    assert cut.name == "write_file" and cut.args is None and "cut off" in (cut.problem or "")
    (listed,) = read_text_tool_calls('{"name": "f", "arguments": [1, 2]}').calls
    assert listed.args is None and "JSON array, not an object" in (listed.problem or "")


@pytest.mark.parametrize(
    "text",
    [
        "The server listens on port 8080.",
        '{"name": "Alice", "age": 3}',  # no argument key: data
        '{"name": "Alice"}',
        '{"name": "read_file", "arguments": {}, "extra": 1}',  # a key no call has
        '{"name": "two words", "arguments": {}}',  # not a tool name
        '{"name": "f", "arguments": {}, "args": {}}',  # two argument keys: ambiguous
        '{"type": "web", "function": {"name": "f", "arguments": {}}}',
        '[{"name": "a", "arguments": {}}, 3]',  # an array that is not all calls
        "",
    ],
)
def test_data_and_prose_are_not_calls(text: str) -> None:
    found = read_text_tool_calls(text)
    assert not found and found.calls == ()


def test_a_message_holding_many_calls_is_read_up_to_the_cap() -> None:
    text = "\n".join(json.dumps({"name": f"t{i}", "arguments": {}}) for i in range(MAX_CALLS + 3))
    assert len(read_text_tool_calls(text).calls) == MAX_CALLS


def test_a_call_describes_itself_with_abbreviated_arguments() -> None:
    (call,) = read_text_tool_calls(json.dumps({"name": "w", "arguments": {"content": "x" * 500}})).calls
    assert call.describe().startswith('w({"content": "xxx') and call.describe().endswith("…)")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]",:\'` <>/_nameargumtsol\n\\0123')), max_size=120))
def test_any_text_is_read_without_raising(text: str) -> None:
    found = read_text_tool_calls(text)
    assert all(c.args is None or isinstance(c.args, dict) for c in found.calls)
