"""A results file's provenance says what produced it, without inventing what it cannot know."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench import provenance
from bench._common import write_results


def test_written_results_carry_every_provenance_key(tmp_path: Path) -> None:
    config = tmp_path / "bench.yaml"
    config.write_text("models: {default: local}\n")
    path = write_results("demo", {"value": 1}, directory=tmp_path, config_files=[config])
    prov = json.loads(path.read_text())["provenance"]
    assert set(provenance.KEYS) <= set(prov)
    assert prov["commit"] and len(prov["commit"]) == 40 and isinstance(prov["dirty"], bool)
    assert prov["config_digest"] == provenance.config_digest([config])
    assert prov["config_files"] == [f"{tmp_path.name}/bench.yaml"]  # outside the repository: no machine path
    assert prov["model_digest"] is None and prov["threads"] == os.cpu_count()
    assert prov["date"].endswith("Z") and len(prov["load_after"]) in (0, 3)


def test_the_config_digest_follows_the_files_bytes_and_the_settings(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text("x: 1\n")
    first = provenance.config_digest([a])
    a.write_text("x: 2\n")
    assert provenance.config_digest([a]) != first
    assert provenance.config_digest(settings={"quick": True}) != provenance.config_digest(settings={"quick": False})
    assert provenance.config_digest() is None


def test_the_model_digest_is_cached_beside_the_file_while_its_size_and_mtime_hold(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(100))
    real = provenance.sha256_file(model)
    assert provenance.model_digest(model) == real
    cache = model.with_name("m.gguf.bench-sha256.json")
    stored = json.loads(cache.read_text())
    cache.write_text(json.dumps({**stored, "sha256": "cached"}))
    assert provenance.model_digest(model) == "cached"  # not read again
    os.utime(model, ns=(stored["mtime_ns"] + 10**9, stored["mtime_ns"] + 10**9))
    assert provenance.model_digest(model) == real  # a touched file is hashed again
    assert provenance.model_digest(None) is None and provenance.model_digest(tmp_path / "absent") is None


def test_only_the_embedded_model_run_here_has_a_model_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOOTHE_LOCAL_LLM_URL", raising=False)
    assert provenance.embedded_model_file("local:1.5b").name.endswith(".gguf")  # type: ignore[union-attr]
    assert provenance.embedded_model_file("local:1.5b", base_url="http://127.0.0.1:8000/v1") is None
    assert provenance.embedded_model_file("openai:gpt-4o-mini") is None
    assert provenance.embedded_model_file(None) is None
    monkeypatch.setenv("SOOTHE_LOCAL_LLM_URL", "http://127.0.0.1:9/v1")
    assert provenance.embedded_model_file("local") is None


def test_a_backfill_records_only_what_git_and_the_file_know() -> None:
    path = provenance.RESULTS_DIR / "economy.json"
    found = provenance.backfill(path)
    if found is None and provenance.git_state()["commit"] is None:
        pytest.skip("not a git checkout: git knows nothing to backfill")
    assert found is not None and found["backfilled"] is True
    assert len(found["commit_added"]) == 40 and len(found["commit_content"]) == 40
    assert all(found[k] is None for k in ("commit", "dirty", "config_digest", "model_digest", "cpu_model", "cores"))
    assert found["date"] == json.loads(path.read_text())["finished_at"]


def test_the_commit_is_the_one_the_run_started_at_and_a_later_one_is_named_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long run loads its code when it starts; a commit landed before it writes is not what ran."""
    heads = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": next(heads), "dirty": False, "dirty_paths": []})
    monkeypatch.setattr(provenance, "_git_at_start", None)
    provenance.begin()
    prov = provenance.collect()
    assert prov["commit"] == "a" * 40 and prov["commit_at_write"] == "b" * 40
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": "a" * 40, "dirty": False, "dirty_paths": []})
    assert "commit_at_write" not in provenance.collect()
