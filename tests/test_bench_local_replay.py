"""``python -m bench local --record`` and ``--replay``: real runs recorded, replayed cold then warm, judged by what they needed.

No model runs here. The recording runs two tiny suites (``local_replay_support.py``) through the
real graph on a scripted model that answers at the HTTP level; the replay's servers are fakes
that answer each request with a chosen text, timed by a scripted clock or not at all.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from local_replay_support import Scripted, write_suites

from bench.goals_suite import SuiteError
from bench.local import run
from bench.local_expect import NOT_DONE, judge
from bench.local_record import choose, load_recording, record
from bench.local_replay import p90, phases, replay, summarise_replay, verdict
from bench.local_servers import Streamed

MODEL = "local:1.5b"
GOALS = ("alpha/port-file", "alpha/owner", "alpha/owner-again", "beta/lead", "beta/backup")
WRONG = {"port-file": 1, "owner": 0, "owner-again": 9, "lead": 1, "backup": 0}
"""Bad step replies before good ones: port-file and lead are re-planned once, owner-again never recovers."""


class Logged:
    """The scripted model, keeping every (request, reply) pair it served, in order."""

    def __init__(self, model: Scripted) -> None:
        self.model = model
        self.served: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.model(body)
        self.served.append((body, reply))
        return reply


class FakeCounter:
    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return len(json.dumps(body["messages"])) // 4

    def count(self, text: str) -> int:
        return len(text.split())


class Replier:
    """A ``Server`` answering each request with ``answer(body)``; keeps what it was sent and how it was built."""

    def __init__(self, answer: Callable[[dict[str, Any]], str], log: list[Any], config: Any) -> None:
        self.answer, self.log, self.config = answer, log, config

    def __enter__(self) -> Replier:
        self.log.append(("start", self.config.name, dict(self.config.tuning)))
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.append(("stop", self.config.name))

    def stream(self, body: dict[str, Any]) -> Streamed:
        flush = body["messages"][0]["content"] == "Reply with one word."
        self.log.append(("flush" if flush else "call", self.config.name))
        return Streamed(ttft=0.5, total=1.0, text="ok" if flush else self.answer(body), cpu_s=0.1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Logged, int, str]:
    root = write_suites(tmp_path_factory.mktemp("suites"))
    path = tmp_path_factory.mktemp("data") / "recording.json"
    model = Logged(Scripted(WRONG))
    code = run(["--record", "--model", MODEL, "--goals", ",".join(f"{root}/{g}" for g in GOALS),
                "--recording", str(path)], answer=model)
    return load_recording(path), model, code, path.read_text()


def _goal(recording: dict[str, Any], gid: str) -> dict[str, Any]:
    return next(g for g in recording["goals"] if g["id"] == gid)


# --------------------------------------------------------------------------- recording


def test_the_recording_keeps_every_request_with_the_models_own_reply_in_order(
    recorded: tuple[dict[str, Any], Logged, int, str],
) -> None:
    recording, model, code, text = recorded
    assert code == 0
    calls = [c for g in recording["goals"] for c in g["calls"]]
    assert len(calls) == len(model.served)
    for call, (body, reply) in zip(calls, model.served, strict=True):
        assert call["body"] == body  # the request the loop sent, as sent
        message = reply["choices"][0]["message"]
        assert call["reply"]["message"] == message
        assert call["reply"]["text"] == (message["content"] or message["tool_calls"][0]["function"]["arguments"])
    assert [g["calls"][i]["index"] for g in recording["goals"] for i in range(len(g["calls"]))] == \
        [i for g in recording["goals"] for i in range(len(g["calls"]))]
    # the loop's real sequence: declared, planned, stepped, assessed; re-planned after a bad step
    assert [c["kind"] for c in _goal(recording, "owner")["calls"]] == [
        "deliverable", "generate", "step", "assess", "crosscheck"]
    kinds = [c["kind"] for c in _goal(recording, "port-file")["calls"]]
    assert kinds[:4] == ["deliverable", "generate", "step", "assess"] and kinds.count("generate") == 2
    plan = _goal(recording, "owner")["calls"][1]["body"]
    assert plan["grammar"].startswith('root ::= "```python') and "tools" not in plan  # schema and grammar kept
    assert [g["suite"] for g in recording["goals"]] == ["alpha"] * 3 + ["beta"] * 2
    assert [g["outcome"] for g in recording["goals"]] == ["success", "success", "failure", "success", "success"]
    assert "/goal-" not in text and str(Path(tempfile.gettempdir()) / "pytest-") not in text  # no machine paths


def test_the_recording_carries_its_provenance(recorded: tuple[dict[str, Any], Logged, int, str]) -> None:
    recording = recorded[0]
    prov = recording["provenance"]
    assert {"commit", "model_digest", "date", "config_digest"} <= set(prov)
    assert prov["date"].endswith("Z") and prov["model_digest"] is None  # scripted: no model file was loaded
    assert recording["model"] == MODEL and recording["scripted"] is True
    assert recording["planner"]["prompt_profile"]


def test_each_assessment_expects_the_status_the_run_needed(recorded: tuple[dict[str, Any], Logged, int, str]) -> None:
    recording = recorded[0]

    def statuses(gid: str) -> list[list[str]]:
        return [c["expect"]["status"] for c in _goal(recording, gid)["calls"] if c["kind"] == "assess"]

    assert statuses("owner") == [["done"]]
    assert statuses("port-file") == [NOT_DONE, ["done"]]  # re-planned once, then done
    assert statuses("owner-again") and all(s == NOT_DONE for s in statuses("owner-again"))  # never done
    step = next(c for c in _goal(recording, "lead")["calls"] if c["kind"] == "step")
    assert step["expect"]["items"] == ["Dariusz Mensah"]  # the goal's needed item, which the step was given


def test_a_recording_needs_five_goals_of_two_suites_and_a_case_that_is_not_done(tmp_path: Path) -> None:
    root = write_suites(tmp_path / "suites")
    with pytest.raises(SuiteError, match="at least 5 goals of at least 2 suites"):
        choose([f"{root}/alpha/port-file", f"{root}/alpha/owner", f"{root}/alpha/owner-again",
                f"{root}/beta/lead"])
    with pytest.raises(SuiteError, match="not SUITE/GOAL"):
        choose(["port-file"])
    # every goal done at once: no assessment whose right answer is continue or replan, so the command says so
    code = run(["--record", "--model", MODEL, "--goals", ",".join(f"{root}/{g}" for g in GOALS),
                "--recording", str(tmp_path / "r.json")], answer=Scripted(dict.fromkeys(WRONG, 0)))
    assert code == 1


# --------------------------------------------------------------------------- judging replayed replies


def _own_reply(recording: dict[str, Any]) -> Callable[[dict[str, Any]], str]:
    texts = {json.dumps(c["body"], sort_keys=True): c["reply"]["text"] for g in recording["goals"] for c in g["calls"]}
    return lambda body: texts[json.dumps(body, sort_keys=True)]


def _replay_with(recording: dict[str, Any], answer: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
    log: list[Any] = []
    return replay(phases(recording["planner"])[1], 1, recording, counter=FakeCounter(),
                  make_server=lambda c, n: Replier(answer, log, c))


def test_the_models_own_replies_are_judged_as_the_run_took_them(recorded: tuple[dict[str, Any], Logged, int, str]) -> None:
    recording = recorded[0]
    rows = _replay_with(recording, _own_reply(recording))["rows"]
    assert rows["assess"]["usable"] == rows["assess"]["n"]  # each status the run needed is the one it got
    assert rows["generate"]["usable"] == rows["generate"]["n"]  # the planner's own check, as it stood, took them
    assert rows["crosscheck"]["usable"] == rows["crosscheck"]["n"]
    # the bad step replies that made the loop re-plan are unusable: they lack the item they were given
    bad = sum(c["reply"]["text"] == "I do not know." for g in recording["goals"] for c in g["calls"])
    assert bad and rows["step"]["usable"] == rows["step"]["n"] - bad
    assert "items it was given missing" in rows["step"]["problems"][0]


def test_a_model_that_always_says_done_fails_the_continue_and_replan_cases(
    recorded: tuple[dict[str, Any], Logged, int, str],
) -> None:
    recording = recorded[0]
    own = _own_reply(recording)

    def always_done(body: dict[str, Any]) -> str:
        if body.get("tools") and body["tools"][0]["function"]["name"] == "AssessStatus":
            return '{"status": "done"}'
        return own(body)

    assessments = [c for g in recording["goals"] for c in g["calls"] if c["kind"] == "assess"]
    not_done = sum(c["expect"]["status"] == NOT_DONE for c in assessments)
    assert not_done >= 4
    rows = _replay_with(recording, always_done)["rows"]
    assert rows["assess"]["usable"] == len(assessments) - not_done
    assert "status 'done' where the run needed 'continue' or 'replan'" in rows["assess"]["problems"][0]
    for call in assessments:  # and the other way round: 'replan' where the run was done fails too
        assert (judge(call, '{"status": "replan"}') == "") == (call["expect"]["status"] == NOT_DONE)
    assert judge(assessments[0], "no idea").startswith("not a AssessStatus")


def test_a_step_must_keep_every_item_and_an_answer_say_nothing_forbidden() -> None:
    step = {"kind": "step", "expect": {"items": ["8443", "Priya Raman"], "forbidden": []}, "body": {}}
    assert judge(step, "port 8443, owner priya raman") == ""
    assert judge(step, "port 8443") == "1 of 2 items it was given missing, e.g. 'Priya Raman'"
    assert judge(step, " ") == "an empty reply"
    synthesis = {"kind": "synthesis", "expect": {"items": ["20"], "forbidden": ["512"]}, "body": {}}
    assert judge(synthesis, "20 in production, 512 in tests") == "says what the goal forbids: '512'"
    assert judge({"kind": "step", "expect": {"items": []}, "body": {}}, "anything") == ""


# --------------------------------------------------------------------------- the arithmetic and the report


def test_p90_is_the_nearest_rank() -> None:
    assert p90([5.0]) == 5.0
    assert p90([float(x) for x in range(10, 0, -1)]) == 9.0  # ⌈9⌉-th of 1..10, whatever the order
    assert p90([float(x) for x in range(1, 21)]) == 18.0
    assert p90([1.0, 2.0, 3.0, 100.0]) == 100.0  # ⌈3.6⌉ = 4th: a slow call in four is the p90
    with pytest.raises(ValueError, match="at least one"):
        p90([])
    from bench.local import Sample

    rows = summarise_replay([Sample(ttft=t / 10, total=float(t), completion_tokens=3, cpu_s=0.1, prompt_tokens=100,
                                    problem="" if t != 7 else "bad") for t in range(1, 11)])
    assert (rows["total_s"], rows["total_p90_s"], rows["ttft_s"], rows["ttft_p90_s"]) == (5.5, 9.0, 0.55, 0.9)
    assert (rows["n"], rows["usable"], rows["problems"]) == (10, 9, ["bad"])


def test_the_verdict_is_met_only_within_the_target_with_every_reply_usable() -> None:
    row = {"n": 4, "usable": 4, "total_s": 2.5, "total_p90_s": 3.5}
    lines = verdict([{"config": "warm", "threads": 1, "rows": {"assess": row}},
                     {"config": "cold", "threads": 1, "rows": {"assess": {**row, "usable": 3}}}])
    assert lines == ["cold @ 1 thread(s): assess median 2.50 s, p90 3.50 s (target ≤ 3 s), 3 of 4 replies usable — missed",
                     "warm @ 1 thread(s): assess median 2.50 s, p90 3.50 s (target ≤ 3 s), 4 of 4 replies usable — met"]


def test_the_replay_reports_the_cold_server_first_then_the_warm_one(
    recorded: tuple[dict[str, Any], Logged, int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    recording = recorded[0]
    path = tmp_path / "recording.json"
    path.write_text(recorded[3])
    log: list[Any] = []
    code = run(["--replay", "--recording", str(path), "--threads", "1", "--results-dir", str(tmp_path)],
               make_server=lambda c, n: Replier(_own_reply(recording), log, c), counter=FakeCounter())
    assert code == 0
    out = capsys.readouterr().out
    table = out[out.rindex("| server |"):]
    assert table.index("| cold |") < table.index("| warm |")
    verdicts = [line for line in out.splitlines() if "(target ≤" in line]
    assert verdicts and verdicts[0].startswith("cold") and verdicts[-1].startswith("warm")
    assert [v.split(" @")[0] for v in verdicts] == sorted(v.split(" @")[0] for v in verdicts)  # cold, …, warm
    data = json.loads((tmp_path / "local_replay.json").read_text())
    assert [r["config"] for r in data["results"]] == ["cold", "warm"]
    assert data["expected_statuses"]["continue or replan"] >= 4 and data["recorded"]["scripted"] is True
    assert {"ttft_p90_s", "total_p90_s", "usable"} <= set(data["results"][0]["rows"]["assess"])
    # cold: a fresh server for every goal, its prompt cache off, a flush before every call; warm: one server
    n_goals, n_calls = len(recording["goals"]), sum(len(g["calls"]) for g in recording["goals"])
    cold = [e for e in log if e[1] == "cold"]
    assert sum(e[0] == "start" for e in cold) == n_goals
    assert all(e[2] == {"prompt_cache_mib": 0, "prompt_states_mib": 0} for e in cold if e[0] == "start")
    sent = [e[0] for e in cold if e[0] in ("flush", "call")]
    assert sent == ["flush", "call"] * n_calls
    warm = [e for e in log if e[1] == "warm"]
    assert [e[0] for e in warm].count("start") == 1 and [e[0] for e in warm].count("call") == n_calls
    assert log.index(("start", "cold", {"prompt_cache_mib": 0, "prompt_states_mib": 0})) < \
        next(i for i, e in enumerate(log) if e[1] == "warm")


# --------------------------------------------------------------------------- the path a real model takes


class _Completions(BaseHTTPRequestHandler):
    """An OpenAI-compatible server (not a model): each chat request answered by the scripted model, as JSON."""

    model: Callable[[dict[str, Any]], dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps(type(self).model(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_without_a_scripted_model_each_request_goes_to_the_server_and_its_reply_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from soothe_planner.local import LOCAL_URL_ENV

    model = Logged(Scripted(WRONG))
    handler = type("Handler", (_Completions,), {"model": staticmethod(model)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        # a server already running, as SOOTHE_LOCAL_LLM_URL names one: the pool starts none
        monkeypatch.setenv(LOCAL_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}/v1")
        root = write_suites(tmp_path / "suites")
        recording = record(choose([f"{root}/{g}" for g in GOALS]), MODEL)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    calls = [c for g in recording["goals"] for c in g["calls"]]
    assert recording["scripted"] is False and len(calls) == len(model.served) > 20
    assert [c["body"] for c in calls] == [body for body, _ in model.served]
    assert [c["reply"]["message"] for c in calls] == [r["choices"][0]["message"] for _, r in model.served]
    assert [g["outcome"] for g in recording["goals"]] == ["success", "success", "failure", "success", "success"]


def test_a_replay_without_a_recording_says_to_record_one(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="record one first"):
        run(["--replay", "--recording", str(tmp_path / "none.json")],
            make_server=lambda c, n: pytest.fail("no server may start"), counter=FakeCounter())
    with pytest.raises(SystemExit, match="record first, then replay"):
        run(["--record", "--replay"], make_server=lambda c, n: pytest.fail("no server may start"), counter=FakeCounter())
