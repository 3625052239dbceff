"""An answer's facts must come from lines about the request (``small_model/support.py``), in any language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soothe_planner.deliverable import Deliverable
from soothe_planner.execution import StepExecutor
from soothe_planner.models import (
    AgentDecision,
    Capability,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner.guard import guard_assessment
from soothe_planner.planner.small_model.support import (
    common_words,
    other_sibling,
    unsupported_facts,
    unsupported_parts,
)
from soothe_planner.tools import make_builtin_tools

CONTACTS = ("# Team contacts, 2024\n\n| Name | Role | Email |\n|------|------|-------|\n"
            "| Ingrid Solberg | PI | i.solberg@lab.example |\n| Malte Jansen | Postdoc | m.jansen@lab.example |\n")
REVIEW = ("# Review, 2024-05-07\n\nThe Zone B permit was refused by the county.\n"
          "County contact: Harriet Oduya (coastal permits office).\n")
ANSWER = Deliverable(kind="answer", answer_is="name")


def _read(step_id: str, path: str, text: str) -> tuple[StepAction, StepResult]:
    return (StepAction(id=step_id, description="read", tool="read_file", args={"path": path}),
            StepResult(step_id=step_id, success=True, output=text))


def _check(goal: str, delivered: str, *read: tuple[StepAction, StepResult], deliverable: Deliverable = ANSWER,
           workspace: str | None = None, caps: dict[str, Capability] | None = None) -> tuple[list[str], list[str]]:
    return unsupported_facts(goal, deliverable, delivered, [s for s, _ in read], [r for _, r in read], caps,
                             common_words(workspace))


def test_a_name_read_from_a_table_about_something_else_is_not_supported() -> None:
    goal = "who's our contact at the county about the Zone B permit?"
    facts, lines = _check(goal, "Ingrid Solberg", _read("s1", "people/contacts.md", CONTACTS))
    assert facts == ["Ingrid Solberg"] and "Ingrid Solberg" in lines[0]
    # the line that names the county's contact supports the right answer
    assert _check(goal, "Harriet Oduya", _read("s1", "people/contacts.md", CONTACTS),
                  _read("s2", "meetings/review.md", REVIEW)) == ([], [])


def test_the_same_holds_for_a_german_and_a_spanish_request() -> None:
    notas = "# Reunión\n\nContacto del condado para el permiso de la zona B: Harriet Oduya.\n"
    protokoll = "# Protokoll\n\nAnsprechpartnerin beim Landkreis für die Genehmigung in Zone B: Harriet Oduya.\n"
    es = "¿Quién es nuestro contacto en el condado para el permiso de la zona B?"
    de = "Wer ist beim Landkreis unsere Ansprechpartnerin für die Genehmigung in Zone B?"
    assert _check(es, "Ingrid Solberg", _read("s1", "personas/contactos.md", CONTACTS))[0] == ["Ingrid Solberg"]
    assert _check(es, "Harriet Oduya", _read("s1", "notas/reunion.md", notas)) == ([], [])
    assert _check(de, "Ingrid Solberg", _read("s1", "personen/kontakte.md", CONTACTS))[0] == ["Ingrid Solberg"]
    assert _check(de, "Harriet Oduya", _read("s1", "notizen/protokoll.md", protokoll)) == ([], [])


def test_a_number_taken_from_an_unrelated_line_is_not_supported_and_a_setting_is() -> None:
    goal = "What's the maximum number of database connections in production? Just the number."
    code = "func export(b Booking) []string {\n\treturn []string{strconv.FormatInt(b.ID, 10), b.Name}\n}\n"
    assert _check(goal, "10", _read("s1", "internal/store/postgres.go", code))[0] == ["10"]
    toml = "[database]\nhost = \"db.internal\"\nmax_connections = 20\n"
    assert _check(goal, "20", _read("s1", "config/production.toml", toml)) == ([], [])


def test_a_table_row_takes_its_header_and_a_line_its_files_name() -> None:
    # the row holds no word of the request; its table's header does ("Email")
    assert _check("What's Malte's email?", "m.jansen@lab.example", _read("s1", "people/contacts.md", CONTACTS)) == ([], [])
    # a comma-separated file's first line is the header of its rows
    csv = "plot,logger_serial\nP1,ML-20911\nP4,ML-20914\n"
    assert _check("Which logger serial is on P4?", "ML-20914", _read("s1", "inventory/loggers.csv", csv)) == ([], [])
    # "Owner: ..." shares no word with "who owns ...", the protocol's file name does
    protocol = "# Protocol\n\nOwner: Malte Jansen\n"
    goal = "Who owns the soil sampling protocol?"
    assert _check(goal, "Malte Jansen", _read("s1", "protocols/soil-sampling.md", protocol)) == ([], [])
    assert _check(goal, "Malte Jansen", _read("s1", "protocols/seed-sowing.md", protocol))[0] == ["Malte Jansen"]


def test_a_path_answered_is_about_what_its_file_says() -> None:
    goal = "Which Go file computes the weekend surcharge?"
    code = "package booking\n\n// Friday and Saturday nights cost more (the weekend surcharge).\nfunc Quote() {}\n"
    assert _check(goal, "internal/booking/pricing.go", _read("s1", "internal/booking/pricing.go", code)) == ([], [])
    search = (StepAction(id="s1", description="search", tool="search_text", args={"pattern": "surcharge"}),
              StepResult(step_id="s1", success=True,
                         output="internal/booking/pricing.go:3: // the weekend surcharge\ncmd/main.go:9: // quote"))
    assert _check(goal, "internal/booking/pricing.go", search) == ([], [])
    assert _check(goal, "cmd/main.go", search)[0] == ["cmd/main.go"]


def test_a_file_written_from_a_listing_that_says_nothing_of_the_request_is_not_supported(tmp_path: Path) -> None:
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    listing = "CHANGELOG.md\nDockerfile\nMakefile\ndocs/operations.md\nscripts/deploy.sh\n"
    ls_all = (StepAction(id="s1", description="list", tool="list_dir", args={"recursive": True}),
              StepResult(step_id="s1", success=True, output=listing))
    checklist = Deliverable(kind="file", files=["notes/release-checklist.md"])
    goal = "Turn the release steps from the ops runbook into a checklist at notes/release-checklist.md"
    facts, _ = _check(goal, "- CHANGELOG.md\n- Dockerfile\n- docs/operations.md\n", ls_all, deliverable=checklist,
                      caps=caps)
    assert "CHANGELOG.md" in facts
    # a listing of the folder the goal names is what an index of it is made of
    docs = (StepAction(id="s1", description="list", tool="list_dir", args={"path": "docs"}),
            StepResult(step_id="s1", success=True, output="docs/api.md\ndocs/faq.md\n"))
    index = Deliverable(kind="file", files=["DOCS_INDEX.md"])
    goal = "Write the names of all Markdown files in the docs folder to DOCS_INDEX.md"
    assert _check(goal, "docs/api.md\ndocs/faq.md\n", docs, deliverable=index, caps=caps) == ([], [])


def test_words_most_of_the_workspace_holds_support_nothing(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"note{i}.md").write_text(f"harbor note {i}: the service runs on port {8000 + i}\n")
    common = common_words(str(tmp_path))
    assert common is not None and {"harbor", "the"} <= common and "8003" not in common
    goal = "Which port does the harbor gateway use?"
    line = "harbor build 4410 done\n"  # shares only "harbor", which every file holds
    assert _check(goal, "4410", _read("s1", "build.log", line), workspace=str(tmp_path))[0] == ["4410"]
    # a word the run's tools were given is the subject it chose, however many files hold it
    search = (StepAction(id="s1", description="search", tool="search_text", args={"pattern": "harbor"}),
              StepResult(step_id="s1", success=True, output="build.log:1: harbor build 4410 done"))
    assert _check(goal, "4410", search, workspace=str(tmp_path)) == ([], [])
    # with too few files to tell, long words count and short ones do not
    assert common_words(str(tmp_path / "nowhere")) is None
    assert _check(goal, "4410", _read("s1", "build.log", line)) == ([], [])
    assert _check("Which run was the P4 run?", "4410", _read("s1", "b.log", "P4 run 4410")) == ([], [])  # a name
    assert _check("Which run was it?", "4410", _read("s1", "b.log", "the run 4410"))[0] == ["4410"]  # "run" is short


def test_a_count_or_an_answer_with_no_fact_found_is_left_to_the_other_checks() -> None:
    goal = "How many contacts are there?"
    assert _check(goal, "2", _read("s1", "people/contacts.md", CONTACTS),
                  deliverable=Deliverable(kind="count", count_of="contacts")) == ([], [])
    # a fact no output holds is ``grounding``'s to refuse, not this check's
    assert _check("who's our contact at the county?", "Jane Roe", _read("s1", "people/contacts.md", CONTACTS)) == ([], [])


def test_a_small_models_done_over_an_unrelated_line_becomes_replan(tmp_path: Path) -> None:
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    (tmp_path / "people").mkdir()
    (tmp_path / "people" / "contacts.md").write_text(CONTACTS)
    goal = "who's our contact at the county about the Zone B permit?"
    read = StepResult(step_id="s1", success=True, output=CONTACTS)
    answer = StepResult(step_id="s2", success=True, output="Ingrid Solberg")
    steps = [StepAction(id="s1", description="read", tool="read_file", args={"path": "people/contacts.md"}),
             StepAction(id="s2", description="answer", depends_on=["s1"])]
    nodes = [PlanStep(**s.model_dump(), status="completed", result=r) for s, r in zip(steps, [read, answer], strict=True)]
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    kwargs: dict[str, Any] = {"plan_finished": True, "small_model": True, "grounded": True}
    a, why = guard_assessment(goal, done, ANSWER, AgentDecision(steps=steps), nodes, [read, answer], caps,
                              str(tmp_path), **kwargs)
    assert a.status == "replan" and "Ingrid Solberg" in why and "share no word with the request" in why
    # a provider model (no small-model rules) is not held to it
    a, _ = guard_assessment(goal, done, ANSWER, AgentDecision(steps=steps), nodes, [read, answer], caps,
                            str(tmp_path), **{**kwargs, "small_model": False})
    assert a.status == "done"


# ------------------------------------------------------------------ the file beside the one the goal names

STAGING = "[database]\nhost = \"db.staging.internal\"\npassword = \"stg-Kelp-2291\"  # staging only\n"
PRODUCTION = "[database]\n# the password is read from the environment variable HARBOR_DB_PASSWORD\n"


def _siblings(tmp_path: Path) -> str:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "staging.toml").write_text(STAGING)
    (tmp_path / "config" / "production.toml").write_text(PRODUCTION)
    (tmp_path / "README.md").write_text("# harbor\n")
    return str(tmp_path)


def _sibling(goal: str, delivered: str, workspace: str, *read: tuple[StepAction, StepResult]) -> Any:
    return other_sibling(goal, Deliverable(kind="answer"), delivered, [s for s, _ in read], [r for _, r in read],
                         None, workspace, common_words(workspace))


def test_a_fact_from_the_file_beside_the_one_the_goal_names_answers_another_question(tmp_path: Path) -> None:
    ws = _siblings(tmp_path)
    staging = _read("s1", "config/staging.toml", STAGING)
    found = _sibling("I need the production database password. What is it?", "stg-Kelp-2291", ws, staging)
    assert found == (["2291"], "config/staging.toml", "config/production.toml")  # the fact's checkable part
    # the same in German and Spanish: the folder's names are compared, not the request's language
    assert _sibling("Ich brauche das Datenbankpasswort für production.", "stg-Kelp-2291", ws, staging) is not None
    assert _sibling("¿Cuál es la contraseña de la base de datos de production?", "stg-Kelp-2291", ws, staging) \
        is not None


def test_the_named_file_or_a_request_naming_both_or_neither_is_left_alone(tmp_path: Path) -> None:
    ws = _siblings(tmp_path)
    staging = _read("s1", "config/staging.toml", STAGING)
    production = _read("s2", "config/production.toml", PRODUCTION)
    assert _sibling("What is the staging database password?", "stg-Kelp-2291", ws, staging) is None
    assert _sibling("Compare the staging and production passwords", "stg-Kelp-2291", ws, staging) is None
    assert _sibling("What is the database password?", "stg-Kelp-2291", ws, staging) is None
    assert _sibling("Where is the production password kept?", "HARBOR_DB_PASSWORD", ws, production) is None
    # a search line's label names its file as a read does
    line = (StepAction(id="s3", description="search", tool="search_text", args={"pattern": "password"}),
            StepResult(step_id="s3", success=True, output='config/staging.toml:3: password = "stg-Kelp-2291"'))
    assert _sibling("the production password?", "stg-Kelp-2291", ws, line) is not None


def test_the_guard_refuses_a_done_whose_facts_come_from_the_file_beside_the_named_one(tmp_path: Path) -> None:
    ws = _siblings(tmp_path)
    caps = {c.name: c for c in StepExecutor(tools=list(make_builtin_tools(tmp_path).values())).capabilities()}
    goal = "I need the production database password. What is it?"
    steps = [StepAction(id="s1", description="read", tool="read_file", args={"path": "config/staging.toml"}),
             StepAction(id="s2", description="give the production password", depends_on=["s1"])]
    results = [StepResult(step_id="s1", success=True, output=STAGING),
               StepResult(step_id="s2", success=True, output="stg-Kelp-2291")]
    nodes = [PlanStep(**s.model_dump(), status="completed", result=r) for s, r in zip(steps, results, strict=True)]
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    kwargs: dict[str, Any] = {"plan_finished": True, "small_model": True, "grounded": True}
    a, why = guard_assessment(goal, done, Deliverable(kind="answer"), AgentDecision(steps=steps), nodes, results,
                              caps, ws, **kwargs)
    assert a.status == "replan" and "config/production.toml" in why and "'2291'" in why
    a, _ = guard_assessment("What is the staging database password?", done, Deliverable(kind="answer"),
                            AgentDecision(steps=steps), nodes, results, caps, ws, **kwargs)
    assert a.status == "done"


# ------------------------------------------------------------------ each part of the request stands on its own line

LOGGING = "level: info\nrotate:\n  max_size_mb: 100\n  max_backups: 7\n"
BACKUP = 'UPLOAD_BUCKET="s3://tidewater-backups/prod"  # dumps are uploaded here\nRETENTION_DAYS=14\n'


def _parts(goal: str, parts: list[str], delivered: str, *read: tuple[StepAction, StepResult]) -> list[str]:
    return unsupported_parts(goal, Deliverable(kind="answer", parts=parts), delivered, [s for s, _ in read],
                             [r for _, r in read], None, None)


def test_a_part_whose_fact_came_from_a_line_about_another_part_is_unsupported() -> None:
    goal = "Where do the database backups get uploaded, and how many days are they kept?"
    parts = ["where the database backups get uploaded", "how many days they are kept"]
    logging_yaml = _read("s1", "config/logging.yaml", LOGGING)
    script = _read("s2", "scripts/backup_db.sh", BACKUP)
    # the 7 sits on a line about backups, not about days: the second part stands on nothing
    assert _parts(goal, parts, "s3://tidewater-backups/prod, kept 7 days", logging_yaml, script) == [parts[1]]
    # the retention's line holds "days": each part has its line
    assert _parts(goal, parts, "s3://tidewater-backups/prod, kept 14 days", logging_yaml, script) == []


def test_parts_are_judged_in_the_requests_language_and_a_part_about_form_is_not() -> None:
    goal = "Wohin werden die Sicherungen der Datenbank hochgeladen, und wie viele Tage werden sie aufbewahrt?"
    parts = ["wohin die Sicherungen hochgeladen werden", "wie viele Tage sie aufbewahrt werden"]
    protokoll = _read("s1", "konfig/protokoll.yaml", "stufe: info\nrotation:\n  max_sicherungen: 7\n")
    skript = _read("s2", "skripte/sicherung.sh",
                   'ZIEL="s3://gezeiten-sicherungen/prod"  # die Sicherungen, hierhin hochgeladen\n'
                   "AUFBEWAHRUNG_TAGE=14\n")
    assert _parts(goal, parts, "s3://gezeiten-sicherungen/prod, 7 Tage", protokoll, skript) == [parts[1]]
    assert _parts(goal, parts, "s3://gezeiten-sicherungen/prod, 14 Tage", protokoll, skript) == []
    # a German part over English files shares no word with any line: it is not judged (no refusal)
    assert _parts(goal, parts, "s3://tidewater-backups/prod, 7 Tage", _read("s1", "config/logging.yaml", LOGGING),
                  _read("s2", "scripts/backup_db.sh", BACKUP)) == []
    # "as a markdown table" is held by no output line: a part about the delivery's form is not judged
    rates = _read("s1", "config/berth_classes.json", '{"name": "dinghy", "max_length_m": 5, "nightly_rate": 38}')
    assert _parts("Copy the berth classes into RATES.md as a markdown table", ["berth classes", "as a markdown table"],
                  "| name | rate |\n| dinghy | 38 |", rates) == []
    # one part: unsupported_facts' rule (one fact enough) is the whole check
    assert _parts(goal, ["how many days they are kept"], "7", _read("s1", "config/logging.yaml", LOGGING)) == []


def test_a_request_in_another_language_than_the_files_is_bridged_by_what_the_run_searched_for(tmp_path: Path) -> None:
    from soothe_planner.planner.small_model.support import workspace_words

    for i in range(6):
        (tmp_path / f"doc{i}.md").write_text(f"The harbor service computes the nightly rate of berth class {i}.\n")
    (tmp_path / "pricing.go").write_text("// Friday and Saturday nights cost more (the weekend surcharge).\n")
    (tmp_path / "booking.go").write_text("// The tourist tax is added per guest and night.\n")
    vocabulary = workspace_words(str(tmp_path))
    assert vocabulary is not None and {"weekend", "surcharge", "nightly"} <= vocabulary
    assert workspace_words(str(tmp_path / "nowhere")) is None

    def searched(pattern: str, line: str) -> tuple[StepAction, StepResult]:
        return (StepAction(id="s1", description="search", tool="search_text", args={"pattern": pattern}),
                StepResult(step_id="s1", success=True, output=line,
                           outcome={"pattern": pattern, "lines": [line], "exact": True}))

    def check(goal: str, delivered: str, *read: tuple[StepAction, StepResult]) -> tuple[list[str], list[str]]:
        return unsupported_facts(goal, ANSWER, delivered, [s for s, _ in read], [r for _, r in read], None,
                                 common_words(str(tmp_path)), vocabulary)

    weekend = searched("weekend", "pricing.go:1: // Friday and Saturday nights cost more (the weekend surcharge).")
    de = "Welche Go-Datei berechnet den Wochenendzuschlag?"
    assert check(de, "pricing.go", weekend) == ([], [])
    assert _check(de, "pricing.go", weekend, workspace=str(tmp_path))[0] == ["pricing.go"]  # no bridge without it
    # the bridge is what was searched for, not whatever was read
    assert check(de, "booking.go", weekend, _read("s2", "booking.go", "// The tourist tax is added per guest."))[0]
    # a request in the files' language is held to its own words, whatever the run searched for
    tourist = searched("tourist", "booking.go:1: // The tourist tax is added per guest and night.")
    assert check("Which Go file computes the weekend surcharge?", "booking.go", tourist)[0] == ["booking.go"]
