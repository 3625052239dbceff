"""Would today's checks let a recorded run's end stand as ``done``? Replayed without a model.

``python -m bench.guard_replay DIR [DIR ...] [--list N] [--write NAME]`` reads the run ends that
``python -m bench goals --keep-state DIR`` wrote (one file per goal per run: the plan manager, the
decision in flight, the capabilities, the text of each file the deliverable names) and, for each,
asks the checks before ``done`` (``planner.guard``: ``assessed_deliverable`` then
``guard_assessment``, as the planner calls them, with the run's own small-model and grounding
switches) two questions:

- had the model said ``done`` here, would the checks let it stand?
- had it said ``continue`` over a finished plan, would the checks read it as ``done``?

Each answer is set against what the end *is*: the goal's checks from its ``suite.yaml``, applied to
the answer a ``done`` would hand back (the run's final answer if it ended done, else what its last
plan's final steps returned) and to the files as the run left them — ``right`` if they pass,
``wrong`` if a ``done`` here would be a false success. Workspace violations are not replayed
(only the named files are kept; the run's own verdict has them). A check that refuses a right end costs a
goal; one that lets a wrong end stand leaves only the model's own judgement (and the second
reading, an LLM call this replay does not make) between the run and a false success.

So a new check is weighed on every recorded end before a model run of hours: it should move
``wrong / stands`` to ``refused`` and leave ``right / stands`` alone. It replays the end of each run
only: a check that changes what happens earlier in a run (a re-plan it asks for) shows only in a
model run. ``--write NAME`` keeps the table and every row in ``bench/results/NAME.json`` with the
provenance of the checks replayed (the commit), so RESULTS may quote it. Goals whose expected outcome is ``failed`` are listed apart: a ``done`` on them is right
only when the answer says the workspace cannot tell.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Replayed", "main", "replay", "replay_one"]


@dataclass(frozen=True)
class Replayed:
    """One run end, replayed: what it is, what the checks make of a ``done`` and of a ``continue``."""

    name: str  # the kept file's name
    goal_id: str
    recorded: str  # the run's recorded outcome (success, false_success, failure)
    truth: str  # right | wrong: the goal's checks on the answer a done would hand back
    done_stands: bool
    why_refused: str
    continue_promoted: bool


def _workspace(kept: dict[str, Any], into: Path) -> Path:
    """The suite's workspace, with each deliverable file as the run left it (``None``: absent)."""
    ws = into / "workspace"
    shutil.copytree(kept["workspace"], ws, symlinks=True)
    root = ws.resolve()
    for name, text in (kept.get("files") or {}).items():
        target = (ws / name).resolve()
        if not target.is_relative_to(root):
            raise ValueError(f"kept file {name!r} is outside the workspace: a kept state must name files inside it")
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return ws


def replay_one(kept: dict[str, Any], name: str = "") -> Replayed:
    """Replay the checks before ``done`` over one kept run end (see the module docstring)."""
    from bench.goals_suite import evaluate, judge, load_suite
    from soothe_planner.dag import PlanManager
    from soothe_planner.models import AgentDecision, Capability, StatusAssessment
    from soothe_planner.planner.contract import answer_text
    from soothe_planner.planner.generation import by_name
    from soothe_planner.planner.guard import assessed_deliverable, guard_assessment
    from soothe_planner.planner.run_steps import RunSteps
    from soothe_planner.planner.small_model.grounding import checked_steps

    suite = load_suite(kept["suite_root"])
    goal = next((g for g in suite.goals if g.id == kept["goal_id"]), None)
    if goal is None:
        raise ValueError(f"{name or 'a kept state'}: goal {kept['goal_id']!r} is not in suite {suite.name!r} any more")
    pm = PlanManager.from_dict(kept["plan_manager"]) if kept.get("plan_manager") else None
    decision = AgentDecision.model_validate(kept["decision"]) if kept.get("decision") else None
    if pm is not None:
        run = RunSteps(decision=decision, steps=pm.nodes, results=pm.step_results(), manager=pm)
    else:
        run = RunSteps(decision=decision, steps=decision.steps if decision else [], results=[])
    nodes, results = checked_steps(run)  # what the checks read, as the planner hands it to them
    caps = by_name([Capability.model_validate(c) for c in kept.get("capabilities") or []])
    finished = pm is not None and not pm.has_unfinished()
    small, grounded = bool(kept.get("small_model")), bool(kept.get("grounded"))
    with tempfile.TemporaryDirectory(prefix="guard-replay-") as tmp:
        ws = _workspace(kept, Path(tmp))
        answer = kept.get("answer") if kept.get("status") == "done" else answer_text(decision, results)
        truth = judge("done", None, evaluate(goal, answer or "", ws), [], expect=goal.expect).outcome
        declared = pm.deliverable if pm is not None else None
        deliverable = assessed_deliverable(goal.text, declared, decision, nodes, results, caps, str(ws),
                                           small_model=small)
        verdicts = {}
        for status in ("done", "continue"):
            said = StatusAssessment(status=status, goal_progress=1.0 if status == "done" else 0.5, confidence=1.0,
                                    summary="replayed")
            verdicts[status] = guard_assessment(goal.text, said, deliverable, decision, nodes, results, caps, str(ws),
                                                plan_finished=finished, small_model=small, grounded=grounded)
    done, why = verdicts["done"]
    return Replayed(name=name, goal_id=goal.id, recorded=kept.get("outcome", "?"),
                    truth="right" if truth == "success" else "wrong", done_stands=done.status == "done",
                    why_refused=why, continue_promoted=verdicts["continue"][0].status == "done")


def replay(folders: list[Path]) -> list[Replayed]:
    """Every kept run end below ``folders``, replayed, in name order."""
    out = []
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            kept = json.loads(path.read_text(encoding="utf-8"))
            out.append(replay_one(kept, str(path.relative_to(folder))))
    return out


def counts(rows: list[Replayed]) -> dict[str, dict[str, int]]:
    """Per truth (right, wrong): ends, done stands, done refused, continue read as done."""
    out = {}
    for truth in ("right", "wrong"):
        chosen = [r for r in rows if r.truth == truth]
        stands = sum(r.done_stands for r in chosen)
        out[truth] = {"ends": len(chosen), "done_stands": stands, "done_refused": len(chosen) - stands,
                      "continue_promoted": sum(r.continue_promoted for r in chosen)}
    return out


def table(rows: list[Replayed]) -> str:
    """The Markdown table: right and wrong ends, against what the checks make of a done and a continue."""
    lines = ["| end of run | ends | done stands | done refused | continue read as done |", "|---|---|---|---|---|"]
    for truth, c in counts(rows).items():
        lines.append(f"| {truth} | {c['ends']} | {c['done_stands']} | {c['done_refused']} | {c['continue_promoted']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.guard_replay", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", help="folders written by `python -m bench goals --keep-state`")
    p.add_argument("--list", type=int, default=20, metavar="N",
                   help="list up to N right ends refused and N wrong ends let stand (default 20)")
    p.add_argument("--write", metavar="NAME", help="also write bench/results/NAME.json (the table and every row)")
    p.add_argument("--results-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.write is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", args.write):
        p.error(f"--write must be letters, digits, '.', '_' or '-' (up to 64, not starting with a sign), "
                f"got {args.write!r}")
    missing = [f for f in args.folders if not Path(f).is_dir()]
    if missing:
        p.error(f"not a folder: {', '.join(map(repr, missing))} (give the --keep-state folder of a goals run)")
    rows = replay([Path(f) for f in args.folders])
    if not rows:
        print(f"no kept run ends in {', '.join(args.folders)}", file=sys.stderr)
        return 1
    print(f"{len(rows)} run ends replayed\n\n{table(rows)}")
    if args.write:
        from dataclasses import asdict

        from bench._common import write_results

        names = [Path(f).resolve().name for f in args.folders]  # the folders' names, never where they are
        path = write_results(args.write, {"kept": names, "ends": len(rows), "counts": counts(rows),
                                          "rows": [asdict(r) for r in rows]},
                             directory=Path(args.results_dir) if args.results_dir else None,
                             settings={"kept": names})
        print(f"results: {path.name}", file=sys.stderr)
    costs = [r for r in rows if r.truth == "right" and not r.done_stands]
    risks = [r for r in rows if r.truth == "wrong" and (r.done_stands or r.continue_promoted)]
    for title, chosen in (("right ends a done would be refused on", costs),
                          ("wrong ends the checks would let stand", risks)):
        if chosen:
            print(f"\n{title}:")
            for r in chosen[:args.list]:
                how = r.why_refused or ("continue read as done" if r.continue_promoted else "done stands")
                print(f"- {r.name} (recorded {r.recorded}): {how[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
