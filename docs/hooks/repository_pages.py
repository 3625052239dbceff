"""How does the site show what lives elsewhere in the repository without a second copy of it?

The design records (``rfcs/*.md``) and the benchmark results (``bench/RESULTS.md``) have one home
each, beside the code they describe; ``tests/test_rfcs.py`` and ``bench/results_md.py`` keep them
honest there. This mkdocs hook adds them to the site as generated pages read from those files at
build time (``rfcs/`` keeps its name, so the records' links to one another hold; ``RESULTS.md``
becomes ``benchmarks/results.md``), and puts the README's two commands — the ones
``tests/test_readme.py`` pins to CI — where the quickstart's ``<!-- readme-commands -->`` marker
stands. Nothing here is copied into ``docs/``, so nothing here can drift.

The navigation's "Design records" section is filled in here too, from the files: a new record
appears in the site as it appears in ``rfcs/``, and ``mkdocs.yml`` holds no list of them to forget.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
COMMANDS_MARKER = "<!-- readme-commands -->"
RFC_NAV_TITLE = "Design records (RFCs)"


def pages() -> dict[str, Path]:
    """Site path → repository file, for every page this hook adds."""
    out = {f"rfcs/{p.name}": p for p in sorted((ROOT / "rfcs").glob("*.md"))}
    out["benchmarks/results.md"] = ROOT / "bench" / "RESULTS.md"
    return out


def readme_commands() -> list[str]:
    """The README's two commands, read the way ``tests/test_readme.py`` reads them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def on_config(config: Any) -> Any:
    """mkdocs hook: the design records' section of the navigation lists every record, in order."""
    records = ["rfcs/README.md", *(uri for uri in pages() if uri.startswith("rfcs/") and uri != "rfcs/README.md")]
    for item in config.nav or []:
        if isinstance(item, dict) and RFC_NAV_TITLE in item:
            item[RFC_NAV_TITLE] = records
            return config
    raise ValueError(f"mkdocs.yml: the nav has no {RFC_NAV_TITLE!r} section for the design records")


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: the repository's records join the site's files."""
    for uri, path in pages().items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: the quickstart's marker becomes the README's two commands."""
    if COMMANDS_MARKER not in markdown:
        return markdown
    run, test = readme_commands()
    block = (
        "Run a goal on the embedded local model:\n\n```bash\n" + run + "\n```\n\n"
        "Run the whole test suite (what CI runs):\n\n```bash\n" + test + "\n```\n"
    )
    return markdown.replace(COMMANDS_MARKER, block)
