"""``python -m bench local``: what it replays, how it times and summarises, its order, lock and report.

No model runs here. The requests come from the package's own loop on a recording transport; the
servers are a fake OpenAI-compatible streaming server on 127.0.0.1 that each test starts and
stops; times come from a scripted clock or from samples written in the test, never from the
wall clock being fast.
"""

from __future__ import annotations

import fcntl
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench.local import FLUSH, Config, Sample, held, measure, resolve_model, run, summarise, verdict
from bench.local_calls import CALL_KINDS, Call, capture_calls, kind_of, reply
from bench.local_servers import Streamed, stream
from soothe_planner.local.tuning import ServerTuning

MODEL = "local:1.5b"


# --------------------------------------------------------------------------- a fake streaming server


class _Handler(BaseHTTPRequestHandler):
    server: _FakeHTTP

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.bodies.append(body)
        if self.server.status != 200:
            self.send_response(self.server.status)
            self.end_headers()
            self.wfile.write(b"broken")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunks: list[dict[str, Any]] = [{"choices": [{"delta": {"role": "assistant"}}]}]
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            chunks.append({"choices": [{"delta": {"tool_calls": [{"function": {"name": name, "arguments": ""}}]}}]})
            chunks += [{"choices": [{"delta": {"tool_calls": [{"function": {"name": name, "arguments": p}}]}}]}
                       for p in ('{"a"', ": 1}")]
        else:
            chunks += [{"choices": [{"delta": {"content": p}}]} for p in ("one ", "two ", "three")]
        if self.server.timings:
            chunks.append({"choices": [], "timings": self.server.timings})
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


class _FakeHTTP(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[dict[str, Any]] = []
        self.timings: dict[str, int] | None = None
        self.status = 200

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def fake_http() -> Iterator[_FakeHTTP]:
    srv = _FakeHTTP()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def _lock_is_free(path: str) -> bool:
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


class FakeServer:
    """A ``Server`` over the fake HTTP server: records what it was asked and whether the lock was held."""

    def __init__(self, http: _FakeHTTP, lock: str | None = None) -> None:
        self.http, self.lock = http, lock
        self.running = False
        self.lock_free_while_running: bool | None = None

    def __enter__(self) -> FakeServer:
        self.running = True
        if self.lock:
            self.lock_free_while_running = _lock_is_free(self.lock)
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = False

    def stream(self, body: dict[str, Any]) -> Streamed:
        assert self.running, "a request was sent while the server was not running"
        return stream(self.http.base_url, body)


class FakeCounter:
    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return len(json.dumps(body["messages"])) // 4

    def count(self, text: str) -> int:
        return len(text.split())


def _calls(n: int, kinds: tuple[str, ...] = CALL_KINDS) -> list[list[Call]]:
    """``n`` variants of small bodies, each body naming its kind and variant."""
    return [[Call(k, {"messages": [{"role": "user", "content": f"{k} {v}"}]}) for k in kinds] for v in range(n)]


# --------------------------------------------------------------------------- what is replayed


def test_one_run_of_the_loop_sends_each_kind_of_call_once_in_order_on_the_named_model() -> None:
    calls = capture_calls(0, model=MODEL)
    assert [c.kind for c in calls] == list(CALL_KINDS)
    assert {c.body["model"] for c in calls} == {resolve_model(MODEL)[1].alias}
    structured = {c.kind: c.body["tool_choice"]["function"]["name"] for c in calls if c.body.get("tools")}
    assert structured == {"intake": "RouteIntake", "assess": "AssessStatus", "crosscheck": "CrossCheck"}
    # the embedded model declares plans in calls: the plan is a text call held by a grammar
    plan = calls[CALL_KINDS.index("generate")].body
    assert "tools" not in plan and plan["grammar"].startswith('root ::= "```python')
    # the goal names its report with "in" ("... by file in TODO_SUMMARY.md"), a file the workspace
    # lacks: the plan is held to end with the write
    assert re.search(r'^last ::= sid " = " t-write-file-\d+ ', plan["grammar"], re.M)
    # and with plans in JSON, a structured call
    plan = capture_calls(0, model=MODEL, plan_syntax="json")[CALL_KINDS.index("generate")].body
    assert plan["tool_choice"]["function"]["name"] == "GeneratePlan" and "grammar" not in plan
    # the embedded server ignores max_completion_tokens: the body must carry max_tokens itself
    assert all(isinstance(c.body.get("max_tokens"), int) for c in calls)
    step = calls[CALL_KINDS.index("step")].body
    assert "TODO: document the --dry-run flag" in step["messages"][-1]["content"]  # the real tool's output


def test_each_repeat_is_another_run_sharing_the_prompt_prefix_but_never_the_whole_prompt(tmp_path: Path) -> None:
    first, second = capture_calls(1, model=MODEL), capture_calls(2, model=MODEL)
    for a, b in zip(first, second, strict=True):
        assert a.kind == b.kind
        assert a.body["messages"][0] == b.body["messages"][0], a.kind  # the system prompt
        assert a.body.get("tools") == b.body.get("tools"), a.kind  # the schema
        assert a.body["messages"][-1] != b.body["messages"][-1], a.kind
        # the run's changing context is last: the human turns share a start
        ha, hb = a.body["messages"][-1]["content"], b.body["messages"][-1]["content"]
        shared = next(i for i, (x, y) in enumerate(zip(ha, hb, strict=False)) if x != y)
        assert shared > 0, a.kind
        assert "bench-local-" not in json.dumps(a.body)  # no temporary path of this machine


def test_the_profiles_change_the_planner_calls_only_and_the_compact_one_is_shorter() -> None:
    full = {c.kind: c.body for c in capture_calls(0, model=MODEL, prompt_profile="full")}
    compact = {c.kind: c.body for c in capture_calls(0, model=MODEL, prompt_profile="compact", plan_syntax="json")}
    assert full["step"] == compact["step"]
    for kind in ("intake", "generate", "assess"):
        assert len(json.dumps(compact[kind])) < len(json.dumps(full[kind])), kind
    plan = compact["generate"]["tools"][0]["function"]["parameters"]
    assert "plan_action" not in plan["properties"]
    assert "plan_action" in full["generate"]["tools"][0]["function"]["parameters"]["properties"]


def test_json_schema_requests_are_recorded_with_their_kind() -> None:
    calls = capture_calls(0, model=MODEL, structured_output_method="json_schema", plan_syntax="json")
    assert [c.kind for c in calls] == list(CALL_KINDS)
    assert calls[1].body["response_format"]["type"] == "json_schema"
    assert kind_of(calls[1].body) == "generate"


# --------------------------------------------------------------------------- timing one call


def test_ttft_is_the_first_output_not_the_role_chunk_and_the_text_is_collected(fake_http: _FakeHTTP) -> None:
    ticks = iter(range(100))
    got = stream(fake_http.base_url, {"messages": [{"role": "user", "content": "hi"}]}, clock=lambda: float(next(ticks)))
    # the clock is read at the start, at the first output and at the end: 0, 1, 2
    assert (got.ttft, got.total) == (1.0, 2.0)
    assert got.text == "one two three"
    assert got.prompt_tokens == 0 and got.reused is None  # llama-cpp-python says nothing when streaming
    assert fake_http.bodies[-1]["stream"] is True


def test_a_tool_calls_arguments_are_its_output_and_the_servers_timings_are_read(fake_http: _FakeHTTP) -> None:
    fake_http.timings = {"prompt_n": 40, "cache_n": 960, "predicted_n": 7}
    body = {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "F"}}]}
    got = stream(fake_http.base_url, body)
    assert got.text == '{"a": 1}'
    assert (got.prompt_tokens, got.reused, got.completion_tokens) == (1000, 960, 7)


def test_an_http_error_names_the_status(fake_http: _FakeHTTP) -> None:
    fake_http.status = 500
    with pytest.raises(RuntimeError, match="HTTP 500"):
        stream(fake_http.base_url, {"messages": []})


# --------------------------------------------------------------------------- the arithmetic


def test_summaries_are_medians_and_rates_split_at_the_first_token() -> None:
    samples = [
        Sample(ttft=2.0, total=4.0, completion_tokens=21, cpu_s=3.0, prompt_tokens=1000),
        Sample(ttft=1.0, total=2.0, completion_tokens=11, cpu_s=1.0, prompt_tokens=500),
        Sample(ttft=4.0, total=9.0, completion_tokens=41, cpu_s=9.0, prompt_tokens=1000),
    ]
    r = summarise(samples)
    assert (r["n"], r["prompt_tokens"], r["completion_tokens"]) == (3, 1000, 21)
    assert (r["ttft_s"], r["total_s"], r["cpu_s"]) == (2.0, 4.0, 3.0)
    assert r["prompt_tps"] == 500.0  # 1000/2, 500/1, 1000/4 → median 500
    assert r["gen_tps"] == 10.0  # 20/2, 10/1, 40/5 → median 10
    assert r["total_all_s"] == [4.0, 2.0, 9.0]
    assert "reused_tokens" not in r
    with pytest.raises(ValueError, match="at least one"):
        summarise([])


def test_the_verdict_judges_only_tuned_configurations_against_the_targets() -> None:
    rows = {"generate": {"total_s": 5.5}, "assess": {"total_s": 3.5}}
    lines = verdict([{"config": "before", "threads": 1, "rows": rows}, {"config": "after", "threads": 2, "rows": rows}])
    assert lines == ["after @ 2 thread(s): generate median 5.50 s (target ≤ 6 s) — met",
                     "after @ 2 thread(s): assess median 3.50 s (target ≤ 3 s) — missed"]
    judged = {"generate": {"total_s": 5.5, "n": 3, "usable": 2}, "step": {"total_s": 3.0, "n": 3, "usable": 3}}
    assert verdict([{"config": "llama-server", "threads": 2, "rows": judged}]) == [
        "llama-server @ 2 thread(s): generate median 5.50 s (target ≤ 6 s) (2 of 3 replies usable) — missed",
        "llama-server @ 2 thread(s): step median 3.00 s (target ≤ 4 s) (3 of 3 replies usable) — met"]


def test_every_measured_reply_is_judged_and_the_rows_count_the_usable_ones(fake_http: _FakeHTTP) -> None:
    config = Config("after", "python", "compact", "function_calling", reuse=True)
    seen: list[tuple[str, str]] = []

    def judge(kind: str, body: dict[str, Any], text: str) -> str:
        seen.append((kind, text))
        return "" if body["messages"][0]["content"].endswith("1") else f"{kind} refused"

    res = measure(config, 1, _calls(3, ("generate", "step")), make_server=lambda c, n: FakeServer(fake_http),
                  counter=FakeCounter(), judge=judge)
    assert seen == [("generate", "one two three"), ("step", "one two three")] * 2  # not the unmeasured first run
    assert res["rows"]["generate"]["usable"] == 1 and res["rows"]["generate"]["problems"] == ["generate refused"]
    unjudged = measure(config, 1, _calls(2, ("step",)), make_server=lambda c, n: FakeServer(fake_http),
                       counter=FakeCounter())
    assert "usable" not in unjudged["rows"]["step"]


# --------------------------------------------------------------------------- order, warm-up, lock


def test_with_reuse_calls_go_in_the_loops_order_and_the_first_run_is_not_measured(fake_http: _FakeHTTP) -> None:
    config = Config("after", "python", "compact", "function_calling", reuse=True)
    res = measure(config, 2, _calls(3), make_server=lambda c, n: FakeServer(fake_http), counter=FakeCounter())
    sent = [b["messages"][0]["content"] for b in fake_http.bodies]
    assert sent == [f"{k} {v}" for v in range(3) for k in CALL_KINDS]
    assert list(res["rows"]) == list(CALL_KINDS)
    assert {r["n"] for r in res["rows"].values()} == {2}
    assert res["threads"] == 2 and res["config"] == "after"


def test_without_reuse_every_call_follows_a_flush_and_only_chosen_kinds_run(fake_http: _FakeHTTP) -> None:
    config = Config("before", "python", "full", "function_calling", reuse=False, tuning={"stock": True})
    res = measure(config, 1, _calls(2), make_server=lambda c, n: FakeServer(fake_http), counter=FakeCounter(),
                  kinds=("assess", "step"))
    flush = FLUSH["messages"]
    assert [b["messages"] == flush for b in fake_http.bodies] == [True, False] * 4
    assert [b["messages"][0]["content"] for b in fake_http.bodies[1::2]] == ["step 0", "assess 0", "step 1", "assess 1"]
    assert list(res["rows"]) == ["assess", "step"]


def test_tokens_come_from_the_server_when_it_says_them_else_from_the_counter(fake_http: _FakeHTTP) -> None:
    config = Config("after", "python", "compact", "function_calling", reuse=True)
    res = measure(config, 1, _calls(2, ("step",)), make_server=lambda c, n: FakeServer(fake_http), counter=FakeCounter())
    assert res["rows"]["step"]["completion_tokens"] == 3  # "one two three", counted
    fake_http.timings = {"prompt_n": 5, "cache_n": 95, "predicted_n": 9}
    res = measure(config, 1, _calls(2, ("step",)), make_server=lambda c, n: FakeServer(fake_http), counter=FakeCounter())
    assert (res["rows"]["step"]["prompt_tokens"], res["rows"]["step"]["completion_tokens"]) == (100, 9)
    assert res["rows"]["step"]["reused_tokens"] == 95


def test_the_lock_is_held_while_the_server_runs_and_released_after(fake_http: _FakeHTTP, tmp_path: Path) -> None:
    lock = str(tmp_path / "model.lock")
    server = FakeServer(fake_http, lock)
    config = Config("after", "python", "compact", "function_calling", reuse=True)
    measure(config, 1, _calls(2, ("assess",)), make_server=lambda c, n: server, counter=FakeCounter(), lock=lock)
    assert server.lock_free_while_running is False
    assert _lock_is_free(lock)
    with held(lock):
        assert not _lock_is_free(lock)
    assert _lock_is_free(lock)


# --------------------------------------------------------------------------- the command


def test_a_run_prints_the_table_and_writes_every_configuration_to_json(
    fake_http: _FakeHTTP, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(["--model", MODEL, "--repeats", "2", "--threads", "1", "--kinds", "generate,step",
                "--results-dir", str(tmp_path)], make_server=lambda c, n: FakeServer(fake_http), counter=FakeCounter())
    assert code == 0
    out = capsys.readouterr().out
    assert "| config | threads | call | prompt tok |" in out and "wrote" in out
    data = json.loads((tmp_path / "local.json").read_text())
    assert (data["benchmark"], data["model"], data["repeats"], data["threads"]) == ("local", MODEL, 2, [1])
    assert [r["config"] for r in data["results"]] == ["before", "after-cold", "after", "after-json", "after-restart",
                                                     "after-restart-states"]
    for res in data["results"]:
        assert list(res["rows"]) == ["generate", "step"]
        assert all(r["n"] == 2 for r in res["rows"].values())
        # the fake server's replies are timed and judged: neither a plan nor the TODO items
        assert res["rows"]["generate"]["usable"] == 0 and "cannot read it" in res["rows"]["generate"]["problems"][0]
        assert res["rows"]["step"]["usable"] == 0 and "TODO items missing" in res["rows"]["step"]["problems"][0]
        assert res["load_before"] and res["load_after"]
    # before, after-cold (flush before each), after, after-json, the two restarts; 3 variants × 2 kinds each
    assert len(fake_http.bodies) == 12 + 12 + 6 + 6 + 6 + 6
    # before replays the full profile's JSON plan, after-json the compact one; after-cold, after and the
    # restarts the plan in calls the embedded model declares, held by its grammar
    generates = [b for b in fake_http.bodies if b.get("tools") and b["tools"][0]["function"]["name"] == "GeneratePlan"]
    assert ["plan_action" in g["tools"][0]["function"]["parameters"]["properties"] for g in generates] == [True] * 3 + [False] * 3
    calls = [b for b in fake_http.bodies if "grammar" in b]
    assert len(calls) == 12 and all(b["messages"][0]["content"].startswith("You write a plan as Python") for b in calls)


def test_the_sweep_changes_one_setting_at_a_time_on_the_shipped_prompts(fake_http: _FakeHTTP, tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def server(config: Any, n: int) -> FakeServer:
        seen.append((config.name, dict(config.tuning)))
        return FakeServer(fake_http)

    code = run(["--model", MODEL, "--sweep", "--repeats", "1", "--threads", "1", "--only",
                "stock,logits_all off,tuned without cache,n_batch 1024 / n_ubatch 1024,RAM cache (loop order),"
                "RAM cache and 4 guessed tokens (loop order)",
                "--results-dir", str(tmp_path)], make_server=server, counter=FakeCounter())
    assert code == 0
    data = json.loads((tmp_path / "local_sweep.json").read_text())
    # the three kinds with targets, in the loop's order (a reuse configuration sees them interleave)
    assert data["kinds"] == ["generate", "step", "assess"]
    assert [name for name, _ in seen] == ["stock", "logits_all off", "tuned without cache",
                                          "n_batch 1024 / n_ubatch 1024", "RAM cache (loop order)",
                                          "RAM cache and 4 guessed tokens (loop order)"]
    tunings = dict(seen)
    # each row differs from the one it is read against by the one setting it names
    assert tunings["logits_all off"] == {**tunings["stock"], "logits_all": False}
    assert tunings["n_batch 1024 / n_ubatch 1024"] == {**tunings["tuned without cache"], "n_batch": 1024, "n_ubatch": 1024}
    assert tunings["RAM cache (loop order)"] == {"draft_tokens": 0}  # the shipped server guessing nothing
    assert tunings["RAM cache and 4 guessed tokens (loop order)"] == {"draft_tokens": 4}  # the shipped server
    assert ServerTuning().with_(**tunings["RAM cache and 4 guessed tokens (loop order)"]) == ServerTuning()
    # every configuration replays the shipped prompts: the compact profile, plans in calls
    plans = [b for b in fake_http.bodies if "grammar" in b]
    assert plans and all(b["messages"][0]["content"].startswith("You write a plan as Python") for b in plans)
    assert not any(b.get("tools") and b["tools"][0]["function"]["name"] == "GeneratePlan" for b in fake_http.bodies)


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "openai:gpt-4o"], "measures the embedded model"),
    (["--model", "local:7b"], "unknown embedded model"),
    (["--kinds", "plan"], "unknown call kind"),
    (["--only", "fastest"], "unknown configuration"),
])
def test_bad_options_are_refused_with_the_value_and_the_rule(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        run(argv, make_server=lambda c, n: pytest.fail("no server may start"), counter=FakeCounter())


@pytest.mark.parametrize("argv", [["--threads", "0"], ["--threads", "one"], ["--repeats", "0"], ["--repeats", "1,2"]])
def test_counts_must_be_positive_whole_numbers(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run(argv, make_server=lambda c, n: pytest.fail("no server may start"), counter=FakeCounter())
    assert exc.value.code == 2
    assert "positive whole number" in capsys.readouterr().err


def test_the_default_model_is_the_shipped_configs(tmp_path: Path) -> None:
    from soothe_planner.config import find_config

    spec, model = resolve_model(None)
    assert spec == find_config(cwd=tmp_path).models.default  # no soothe.yaml there: the shipped config
    assert model.alias in capture_calls(0, model=spec)[0].body["model"]


# --------------------------------------------------------------------------- judging the replies


def _reply_text(body: dict[str, Any]) -> str:
    message = reply(body)["choices"][0]["message"]
    return str(message["content"] or message["tool_calls"][0]["function"]["arguments"])


def _bodies(variant: int, **kw: Any) -> dict[str, dict[str, Any]]:
    return {c.kind: c.body for c in capture_calls(variant, model=MODEL, **kw)}


def test_the_judge_takes_the_replies_the_loop_took_and_says_why_it_refuses_others() -> None:
    from bench.local_judge import judge

    assert {k: judge(k, b, _reply_text(b)) for k, b in _bodies(1).items()} == dict.fromkeys(CALL_KINDS, "")
    calls = _bodies(1, plan_syntax="calls")
    assert {k: judge(k, b, _reply_text(b)) for k, b in calls.items()} == dict.fromkeys(CALL_KINDS, "")
    plan = calls["generate"]
    empty_search = "```python\ns1 = search_text()\n```"
    assert judge("generate", plan, empty_search).startswith("the planner refuses it:")
    no_report = '```python\ns1 = search_text(pattern="TODO")\ns2 = answer(s1, task="list them")\n```'
    refused = judge("generate", plan, no_report)  # the planner's own contract refuses a plan without the write
    assert refused.startswith("the planner refuses it:") and "no step writes TODO_SUMMARY_2.md" in refused
    # a plan in JSON, where the request asked for calls, is not read
    assert judge("generate", plan, '{"steps": []}').startswith("the planner cannot read it:")
    assert judge("generate", plan, "I would search first.").startswith("the planner cannot read it:")
    assert "status 'continue'" in judge("assess", calls["assess"], '{"status": "continue", "summary": "more"}')
    assert judge("intake", calls["intake"], '{"route": "maybe"}').startswith("not a RouteIntake")
    step = calls["step"]
    assert judge("step", step, "README.md: document the --dry-run flag") == (
        "5 of 6 TODO items missing, e.g. 'check the exit code of run 2'")
    assert judge("synthesis", calls["synthesis"], "  ") == "an empty reply"
    assert judge("crosscheck", calls["crosscheck"], '{"values": ["an invented line"]}').startswith("no TODO item")
    assert judge("crosscheck", calls["crosscheck"], '{"answer": "done"}').startswith("not a CrossCheck")
    # llama-server's requests carry the plan schema as json_schema (with the JSON syntax): judged the same way
    schema_calls = {c.kind: c.body for c in capture_calls(1, model=MODEL, structured_output_method="json_schema",
                                                         plan_syntax="json")}
    assert {k: judge(k, b, _reply_text(b)) for k, b in schema_calls.items()} == dict.fromkeys(CALL_KINDS, "")
    no_pattern = ('{"steps": [{"id": "s1", "tool": "search_text", "args": {}, "depends_on": []}, {"id": "s2", '
                  '"tool": "write_file", "args": {"path": "TODO_SUMMARY_2.md", "content": "{{s1.output}}"}, '
                  '"depends_on": ["s1"]}]}')
    assert "required argument 'pattern' is missing" in judge("generate", schema_calls["generate"], no_pattern)
    with pytest.raises(ValueError, match="unknown call kind 'plan'"):
        judge("plan", plan, "{}")


def test_a_restart_configuration_starts_a_server_for_every_run() -> None:
    started: list[object] = []

    class Fresh:
        def __enter__(self) -> Fresh:
            started.append(self)
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def stream(self, body: dict[str, Any]) -> Streamed:
            return Streamed(ttft=1.0, total=2.0, text="ok", completion_tokens=1, prompt_tokens=10, cpu_s=0.5)

    config = Config("after-restart", "python", "compact", "function_calling", reuse=True, restart=True)
    calls = [[Call("generate", {"messages": []}), Call("assess", {"messages": []})] for _ in range(3)]
    res = measure(config, 2, calls, make_server=lambda c, n: Fresh(), counter=FakeCounter())
    assert len(started) == 3 and len(set(map(id, started))) == 3  # one server per run, the first unmeasured
    assert res["rows"]["generate"]["n"] == 2


def test_a_configuration_keeping_states_gets_a_fresh_folder_and_the_others_keep_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import bench.local as local
    from soothe_planner.local.prompt_states import PROMPT_STATES_ENV

    seen: dict[str, tuple[Any, Any]] = {}

    class Recorder:
        def __init__(self, model: Any, *, threads: int, tuning: dict[str, Any], states_dir: Path | None = None) -> None:
            from bench.local_servers import PythonServer

            real = PythonServer(model, threads=threads, tuning=tuning, states_dir=states_dir)
            seen[str(tuning)] = (states_dir, real.server.tuning.prompt_states_mib)

    monkeypatch.setattr(local, "PythonServer", Recorder)
    monkeypatch.delenv(PROMPT_STATES_ENV, raising=False)

    def measure(config: Config, n: int, variants: Any, *, make_server: Any, **_: Any) -> dict[str, Any]:
        make_server(config, n)
        return {"config": config.name, "threads": n, "rows": {}, "seconds": 0.0, "load_before": "", "load_after": ""}

    monkeypatch.setattr(local, "measure", measure)
    monkeypatch.setattr(local, "capture_calls", lambda *a, **k: ())
    assert run(["--only", "after,after-restart-states", "--threads", "2", "--repeats", "1",
                "--results-dir", str(tmp_path)], counter=FakeCounter()) == 0
    (after_dir, after_mib), (states_dir, states_mib) = seen["{}"], seen["{'prompt_states_mib': 512}"]
    assert after_dir is None and after_mib == 0  # a server of the other configurations keeps nothing on disk
    assert states_dir is not None and states_dir.is_dir() and states_mib == 512
