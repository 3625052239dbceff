"""The ``soothe-planner`` command: parse arguments, load the config, call the library, render.

Commands: ``init`` (write an editable config), ``run`` (the StrangeLoop, live), ``plan`` (plan
only), ``validate`` (a config file), ``resume`` (a paused or killed run), ``show`` (a past run, read
from the checkpointer alone: no model is started). Without ``--config`` a command reads
``./soothe.yaml`` (what ``init`` writes), else the config shipped in the package
(``config/defaults.py``). The CLI holds no logic of its own; ``terminal.py`` draws, the library
decides. ``options.py`` holds what a command was asked and keeps hidden values out of what it
prints, ``running.py`` takes a run or a resume from the command to the report, and this module
holds the commands, the boundary and the parsing.

Exit codes: 0 the goal is done (or the command succeeded), 1 the goal failed, 2 a usage or
configuration error (a missing optional extra among them: the message names the extra to install), 3 the run is paused waiting for plan approval (resume it with ``--approve``
or ``--reject``), 130 interrupted. Errors are one line on stderr; ``--debug`` adds the traceback.
One boundary (``_boundary``) turns ``PlannerError`` into that line and that code. Whatever a
command prints — errors, reports, ``--json`` — passes through the loaded config's
``redact_text``, so a value that came from ``${VAR}`` (a script path, a checkpoint path) is shown
as ``(hidden)``.

The arguments are parsed by click. ``--json`` and ``--debug`` are declared once
(``_output_flags``) and accepted before the command and after it; a command reads both places.
``main`` runs click without its standalone mode, so nothing here catches ``SystemExit``: click
hands back ``--help``/``--version`` as exit code 0 and a usage mistake as a ``UsageError``
(exit 2), and each command returns its code through ``ctx.exit``. The command body runs inside
the boundary, so an interrupt is reported as one line, never through click's own handling.
``click.testing.CliRunner`` drives ``cli`` in tests.

What was weighed: argparse needed a second parser for the flags after the command (with
``SUPPRESS`` so a command's default could not undo a flag given before it), and ``main`` caught
``SystemExit`` to return argparse's codes. typer would add its own layer over click for five
commands that need none of its type-hint parsing. click's import adds to the start-up time of
every command, ``--help`` included; it was measured before this change was kept (the rule: no
more than 50 ms).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from soothe_planner import __version__
from soothe_planner.cli.options import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PAUSED,
    EXIT_USAGE,
    EXTRA_OF,
    Options,
    Usage,
    checked_goal,
    console_for,
    hidden,
    hidden_values,
    read_config,
    redactors,
    thread_id_of,
)
from soothe_planner.cli.running import plan_context, run_or_resume
from soothe_planner.errors import ConfigError, PlannerError

__all__ = ["EXIT_DONE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_PAUSED", "EXIT_USAGE", "Options", "cli", "main"]

# --------------------------------------------------------------------------- commands


def cmd_run(args: Options) -> int:
    return asyncio.run(run_or_resume(args, resume=False))


def cmd_resume(args: Options) -> int:
    return asyncio.run(run_or_resume(args, resume=True))


def cmd_init(args: Options) -> int:
    from soothe_planner.config import write_config

    path = write_config(args.directory, force=args.force)
    if args.json:
        print(json.dumps({"written": str(path)}))
    else:
        console_for(args).print(
            f"wrote {path}: edit it (models.default, execution.workspace, ...); commands run in its folder "
            f"read it without --config, e.g.  soothe-planner run \"List the files\""
        )
    return EXIT_DONE


def cmd_validate(args: Options) -> int:
    from soothe_planner.config import load_config

    config = load_config(args.path)
    redactors[:] = [config.redact_text]
    shown = config.redacted_dump()  # values that came from the environment are never printed
    if args.json:
        print(json.dumps({"valid": True, "path": args.path, "config": shown}, indent=2))
    else:
        console_for(args).print(
            f"{args.path}: valid (model {shown['models']['default']}, checkpoint {config.checkpoint.backend}, "
            f"{len(config.execution.tools)} tool(s), {len(config.execution.subagents)} subagent(s))"
        )
    return EXIT_DONE


async def _plan(args: Options) -> int:
    from soothe_planner.cli.terminal import plan_json, plan_mermaid, plan_table
    from soothe_planner.config import resolve_run
    from soothe_planner.graph import offered_context

    config = read_config(args.config)
    resolved = resolve_run(config)
    context = offered_context(resolved.executor, plan_context(config), plan_mode=True)
    plan = await resolved.planner.create_plan(checked_goal(args.goal), context)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(plan_json(plan))
    elif fmt == "mermaid":
        print(plan_mermaid(plan))
    else:
        console_for(args).print(plan_table(plan))
    return EXIT_DONE


def cmd_plan(args: Options) -> int:
    return asyncio.run(_plan(args))


async def _show(args: Options) -> int:
    from soothe_planner.cli.terminal import report_dict
    from soothe_planner.config import resolve_checkpointer

    config = read_config(args.config)
    thread_id = thread_id_of(args)  # required by the parser
    async with resolve_checkpointer(config) as saver:
        found = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    if found is None:
        raise Usage(f"no run with thread id {thread_id!r} in the {config.checkpoint.backend} checkpointer")
    values = hidden_values(dict(found.checkpoint.get("channel_values") or {}))
    if args.json or args.format == "json":
        print(json.dumps(report_dict(values, thread_id=thread_id), indent=2, default=str))
    elif args.format == "mermaid":
        from soothe_planner.dag import PlanManager

        print(PlanManager.from_dict(values["plan_manager"]).to_mermaid() if values.get("plan_manager") else "")
    else:
        from soothe_planner.cli.terminal import render_report

        calls, budget = values.get("llm_calls") or 0, config.concurrency.max_total_llm_calls
        render_report(console_for(args), values, thread_id=thread_id,
                      llm_calls_text=f"{calls}/{budget}" if budget else str(calls))
    return EXIT_DONE if values.get("status") == "done" else EXIT_FAILED


def cmd_show(args: Options) -> int:
    return asyncio.run(_show(args))


# --------------------------------------------------------------------------- the boundary


def _error(message: str) -> None:
    line = " ".join(hidden(str(message)).split())
    print(f"soothe-planner: error: {line}", file=sys.stderr)


def _on_sigterm(signum: int, frame: Any) -> None:
    # Unwind like Ctrl-C, so context managers stop the local model server and close checkpointers.
    raise KeyboardInterrupt


def _boundary(command: Callable[[Options], int], args: Options) -> int:
    """Run one command; every failure becomes one line on stderr and its exit code."""
    # Progress is drawn by the renderer; the library's log lines would break "one line on stderr".
    logger = logging.getLogger("soothe_planner")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    if args.debug:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    else:
        logger.handlers, logger.propagate = [logging.NullHandler()], False
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return command(args)
    except (ConfigError, Usage) as exc:
        if args.debug:
            traceback.print_exc()
        _error(str(exc))
        return EXIT_USAGE
    except PlannerError as exc:
        if args.debug:
            traceback.print_exc()
        _error(str(exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as exc:  # an optional extra that is not installed
        if args.debug:
            traceback.print_exc()
        module = (exc.name or "").split(".")[0]
        extra = EXTRA_OF.get(module)
        way_out = f"pip install 'soothe-planner[{extra}]'" if extra else f"install the package that provides {module!r}"
        where = f"the '{extra}' extra's " if extra else "the "
        _error(f"this command needs {where}Python module {module!r}, which is not installed: {way_out}")
        return EXIT_USAGE
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        _error(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return EXIT_FAILED
    finally:
        redactors.clear()
        logger.handlers, logger.propagate, logger.level = saved[0], saved[1], saved[2]
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if "soothe_planner.local.embedded" in sys.modules:
            sys.modules["soothe_planner.local.embedded"].shutdown_shared_server()


# --------------------------------------------------------------------------- parsing

F = TypeVar("F", bound=Callable[..., Any])
_FORMATS = click.Choice(["table", "json", "mermaid"])


def _output_flags(f: F) -> F:
    """``--json`` and ``--debug``, for the top level and for every command (one definition for both)."""
    f = click.option("--debug", is_flag=True, help="show tracebacks on errors")(f)
    return click.option("--json", "json_", is_flag=True, help="print one JSON document on stdout, for scripts")(f)


def _dispatch(command: Callable[[Options], int], params: dict[str, Any]) -> None:
    """Run ``command`` in the boundary with the flags given before or after it; exit with its code."""
    ctx = click.get_current_context()
    top = ctx.find_root().params
    json_, debug = params.pop("json_"), params.pop("debug")
    if params.get("config") is None and "config" in params:
        params["config"] = ""  # not given: find_config decides
    args = Options(json=json_ or top["json_"], debug=debug or top["debug"], **params)
    ctx.exit(_boundary(command, args))


class _InOrder(click.Group):
    """Lists the commands in the order they are declared (the order of a run's life), not sorted."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(
    cls=_InOrder,
    name="soothe-planner",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="exit codes: 0 done, 1 goal failed, 2 usage or config error, 3 paused for approval, 130 interrupted",
)
@click.version_option(__version__, "--version", prog_name="soothe-planner", message="%(prog)s %(version)s")
@_output_flags
def cli(json_: bool, debug: bool) -> None:
    """Plan and run goals with an LLM planner over a LangGraph StrangeLoop."""


_CONFIG_HELP = "the YAML config file (default: ./soothe.yaml, else the packaged default)"


@cli.command("init", short_help="write an editable config (DIR/soothe.yaml)")
@click.argument("directory", default=".", metavar="[DIR]")
@click.option("--force", is_flag=True, help="replace an existing soothe.yaml")
@_output_flags
def _init_command(**params: Any) -> None:
    """Write the packaged default config as DIR/soothe.yaml (DIR: the current folder) for you to edit."""
    _dispatch(cmd_init, params)


@cli.command("run", short_help="run a goal through the StrangeLoop, with live progress")
@click.option("--config", help=_CONFIG_HELP)
@click.option("--thread", help="thread id (default: a new one, printed at start)")
@click.option("--deliver", metavar="WHAT",
              help="what the goal must hand back: answer, count, count:WHAT or file:PATH[,PATH] (default: the model "
                   "declares it)")
@click.argument("goal")
@_output_flags
def _run_command(**params: Any) -> None:
    """Run GOAL (in words) through the StrangeLoop, with live progress."""
    _dispatch(cmd_run, params)


@cli.command("plan", short_help="plan a goal without running it")
@click.option("--config", help=_CONFIG_HELP)
@click.option("--format", type=_FORMATS, default="table", show_default=True,
              help="how to print the plan: a table, JSON or a Mermaid diagram")
@click.argument("goal")
@_output_flags
def _plan_command(**params: Any) -> None:
    """Plan GOAL without running it."""
    _dispatch(cmd_plan, params)


@cli.command("validate", short_help="check a config file; exit 2 with the reason if invalid")
@click.argument("path")
@_output_flags
def _validate_command(**params: Any) -> None:
    """Check the config file PATH; exit 2 with the reason if it is invalid."""
    _dispatch(cmd_validate, params)


@cli.command("resume", short_help="continue a paused or interrupted run")
@click.option("--config", help=_CONFIG_HELP)
@click.option("--thread", required=True, help="the run's thread id")
@click.option("--approve", is_flag=True, help="approve the plan waiting for approval")
@click.option("--reject", "reject_feedback", metavar="FEEDBACK", help="reject it, with feedback")
@_output_flags
def _resume_command(**params: Any) -> None:
    """Continue a paused or interrupted run."""
    _dispatch(cmd_resume, params)


@cli.command("show", short_help="show the DAG and results of a past run")
@click.option("--config", help=_CONFIG_HELP)
@click.option("--thread", required=True, help="the run's thread id")
@click.option("--format", type=_FORMATS, default="table", show_default=True,
              help="how to print the plan: a table, JSON or a Mermaid diagram")
@_output_flags
def _show_command(**params: Any) -> None:
    """Show the DAG and results of a past run (read from the checkpointer; no model is started)."""
    _dispatch(cmd_show, params)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to ``sys.exit``)."""
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="soothe-planner",
                        standalone_mode=False)
    except click.ClickException as exc:  # a usage mistake found while parsing: click's message, exit 2
        exc.show()
        return exc.exit_code
    except click.Abort:  # interrupted while parsing, before any command ran
        _error("interrupted")
        return EXIT_INTERRUPTED
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
