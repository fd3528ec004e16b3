"""automask inside vLLM: a custom logits processor, a structured-output backend, a model helper.

* :class:`AutomaskLogitsProcessor` (:mod:`.processor`, needs vLLM): per-request
  constraints from ``SamplingParams.extra_args`` / ``vllm_xargs``
  (``automask_json_schema``, ``automask_regex``, ``automask_choice``,
  ``automask_gbnf``, ``automask_lark``, ``automask_options``; see :mod:`.args`).
  Registered as the ``vllm.logits_processors`` entry point ``automask``, so
  vLLM loads it by itself once automask is installed.
* :class:`AutomaskBackend` / :class:`AutomaskGrammar` (:mod:`.backend`):
  vLLM's ``StructuredOutputBackend`` / ``StructuredOutputGrammar`` interface,
  for an upstream contribution; importable without vLLM.
* :func:`converted_model_dir` (:mod:`.model`): the default GGUF model as a
  Hugging Face folder vLLM can load (converted once, cached).

See docs/vllm.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AutomaskBackend", "AutomaskGrammar", "AutomaskLogitsProcessor",
           "converted_model_dir", "spec_from_extra_args"]

_WHERE = {
    "AutomaskLogitsProcessor": "processor",
    "AutomaskBackend": "backend",
    "AutomaskGrammar": "backend",
    "converted_model_dir": "model",
    "spec_from_extra_args": "args",
}


def __getattr__(name: str) -> Any:  # lazy: the processor imports vLLM and torch
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
