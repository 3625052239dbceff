"""Does a plan awaiting approval round-trip through Agent Chat UI in a real browser?

Run by hand (never in CI: it installs a web app from the npm registry and drives a browser):

    .venv/bin/pip install playwright        # the Python package only; it uses the system Chromium
    apt-get install chromium                # Debian's build
    .venv/bin/python examples/agent_chat_ui/roundtrip.py

What it does, each step logged to ``last-run/roundtrip.log`` with a screenshot beside it:

1. Scaffolds Agent Chat UI's Vite template from the ``create-agent-chat-app`` package (its
   templates ship inside it: ``npm pack``, no git clone) into ``--app-dir`` and ``npm install``s it,
   unless that folder already has its ``node_modules``.
2. Starts ``langgraph dev`` on this repository's ``langgraph.json`` with a config whose model is
   scripted (two plans, then an answer) and whose approval gate is on, and the app's dev server;
   both on 127.0.0.1.
3. Drives headless Chromium (Playwright, pointed at the system binary): sends a goal, sees the
   plan as a human-in-the-loop request, *responds* with feedback, sees the revised plan, *accepts*
   it, and sees the answer.

Exit status 0 when every step was seen. Nothing here is imported by the package or its tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TEMPLATE_PACKAGE = "create-agent-chat-app@0.1.6"
GOAL = "What is in the workspace?"
FEEDBACK = "Read the notes before answering."
ANSWER = "The workspace holds notes and a config folder."
FIRST = {"plan_action": "new", "execution_mode": "sequential", "next_action": "answer",
         "steps": [{"id": "guess", "description": "Answer from memory"}]}
REVISED = {"plan_action": "new", "execution_mode": "sequential", "next_action": "answer",
           "steps": [{"id": "look", "description": "Say what the workspace holds, after reading the notes"}]}
SCRIPT = {
    "replies": {"GeneratePlan": [FIRST, REVISED],
                "AssessStatus": [{"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "answered"}],
                "text": [ANSWER]},
    "latency_s": 0.2,
}


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.t0 = time.monotonic()
        path.write_text("")

    def __call__(self, message: str) -> None:
        line = f"[{time.monotonic() - self.t0:6.1f}s] {message}"
        print(line, flush=True)
        with self.path.open("a") as out:
            out.write(line + "\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 180) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{what} did not answer {url} in {timeout_s} s")


@contextmanager
def _process(args: list[str], *, cwd: Path, env: dict[str, str], log_file: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log_file.open("wb") as out:
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield proc
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(timeout=15)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


def scaffold(app: Path, log: Log) -> None:
    if (app / "node_modules").is_dir():
        log("app: reusing the app scaffolded and installed by an earlier run")
        return
    with tempfile.TemporaryDirectory() as tmp:
        log(f"app: npm pack {TEMPLATE_PACKAGE}")
        name = subprocess.run(["npm", "pack", TEMPLATE_PACKAGE], cwd=tmp, check=True, capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
        with tarfile.open(Path(tmp) / name) as tar:
            tar.extractall(tmp, filter="data")
        shutil.copytree(Path(tmp) / "package" / "templates" / "vite", app)
    log("app: npm install (a few minutes)")
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=app, check=True)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--app-dir", type=Path, default=Path(tempfile.gettempdir()) / "soothe-agent-chat-ui")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--out", type=Path, default=HERE / "last-run")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in [*args.out.glob("*.png"), *args.out.glob("*.log")]:
        old.unlink()
    log = Log(args.out / "roundtrip.log")
    scaffold(args.app_dir, log)

    work = Path(tempfile.mkdtemp(prefix="soothe-ui-"))
    (work / "script.json").write_text(json.dumps(SCRIPT))
    config = {
        "models": {"default": "scripted:script.json"},
        "planner": {"max_iterations": 3, "transport_backoff_s": 0, "retries": 1},
        "concurrency": {"global_max_llm_calls": 1},
        "execution": {"workspace": str(ROOT / "examples" / "workspace"), "tools": ["builtin:list_dir"]},
        "checkpoint": {"backend": "memory"},
        "run": {"synthesize": False, "intake": False, "approval": True},
    }
    (work / "soothe.yaml").write_text(json.dumps(config))
    graphs = {name: f"{(ROOT / spec.rpartition(':')[0]).resolve()}:{spec.rpartition(':')[2]}"
              for name, spec in json.loads((ROOT / "langgraph.json").read_text())["graphs"].items()}
    (work / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    api_port, ui_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGFUSE_"))}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGGRAPH_NO_VERSION_CHECK="true", LANGSMITH_TRACING="false",
               PYTHONPATH=str(ROOT), SOOTHE_CONFIG=str(work / "soothe.yaml"))
    cli = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or "langgraph"
    api = f"http://127.0.0.1:{api_port}"
    with _process([cli, "dev", "--host", "127.0.0.1", "--port", str(api_port), "--no-browser", "--no-reload",
                   "--config", str(work / "langgraph.json")], cwd=work, env=env,
                  log_file=work / "langgraph-dev.log") as server, \
         _process(["npx", "vite", "--host", "127.0.0.1", "--port", str(ui_port), "--strictPort"],
                  cwd=args.app_dir, env=dict(os.environ), log_file=work / "vite.log") as ui:
        _wait_http(f"{api}/ok", server, "langgraph dev")
        log(f"server: langgraph dev answers at {api}")
        _wait_http(f"http://127.0.0.1:{ui_port}/", ui, "the app's dev server")
        log(f"app: Agent Chat UI serves at http://127.0.0.1:{ui_port}")
        return drive(f"http://127.0.0.1:{ui_port}/?apiUrl={api}&assistantId=strange_loop", args, log)


def fields(page: object, text: str) -> None:
    """Wait until a field of the request (a textarea: the UI shows each arg as one) holds ``text``."""
    page.wait_for_function(  # type: ignore[attr-defined]
        "t => [...document.querySelectorAll('textarea')].some(a => a.value.includes(t))", arg=text, timeout=60_000
    )


def drive(url: str, args: argparse.Namespace, log: Log) -> int:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.on("console", lambda m: m.type == "error" and log(f"browser console error: {m.text[:300]}"))
        shot = 0

        def snap(name: str) -> None:
            nonlocal shot
            shot += 1
            path = args.out / f"{shot:02d}-{name}.png"
            page.screenshot(path=str(path), full_page=True)
            log(f"screenshot {path.name}")

        try:
            page.goto(url)
            box = page.get_by_placeholder("Type your message...")
            expect(box).to_be_visible(timeout=60_000)
            box.fill(GOAL)
            snap("goal-typed")
            page.get_by_role("button", name="Send").click()
            log(f"sent the goal: {GOAL!r}")

            # The human-in-the-loop view: its title is the action, its fields the plan's args.
            shown = page.get_by_text("run_plan", exact=True).first
            expect(shown).to_be_visible(timeout=60_000)
            expect(page.get_by_role("button", name="Accept")).to_be_visible()
            fields(page, "Answer from memory")
            log("the first plan awaits approval, shown as a human-in-the-loop request (run_plan: Edit/Accept, "
                "Respond, Ignore), its steps and sha256 as the action's args")
            shown.scroll_into_view_if_needed()
            snap("plan-awaiting-approval")
            respond = page.get_by_placeholder("Your response here...")
            respond.fill(FEEDBACK)
            respond.scroll_into_view_if_needed()
            snap("responding")
            page.get_by_role("button", name="Send Response").click()
            log(f"responded: {FEEDBACK!r}")

            fields(page, "after reading the notes")
            log("the revised plan awaits approval")
            page.get_by_text("Edit/Accept").first.scroll_into_view_if_needed()
            snap("revised-plan")
            page.get_by_role("button", name="Accept").first.click()
            log("accepted the revised plan")

            expect(page.get_by_text(ANSWER).first).to_be_visible(timeout=60_000)
            log(f"the answer is shown: {ANSWER!r}")
            snap("answer")
            return 0
        except Exception as exc:
            log(f"FAILED: {type(exc).__name__}: {str(exc)[:500]}")
            snap("failure")
            return 1
        finally:
            browser.close()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
