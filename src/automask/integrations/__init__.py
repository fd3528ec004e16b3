"""Adapters for other libraries' decoding loops, imported on demand (they need those libraries).

* :mod:`automask.integrations.transformers`: ``LogitsProcessor`` for
  ``model.generate`` in Hugging Face transformers (needs torch and transformers).
* :mod:`automask.integrations.llamacpp`: ``LogitsProcessor`` for ``llama_cpp.Llama``
  completions (llama-cpp-python), with the vocabulary read from the loaded model.
* :mod:`automask.integrations.vllm`: a vLLM logits processor (entry point
  ``vllm.logits_processors``: ``automask``) and a ``StructuredOutputBackend`` for upstream
  (docs/vllm.md).
* :mod:`automask.integrations.sglang`: an SGLang grammar backend
  (``--grammar-backend automask``; entry point ``sglang.srt.plugins``; docs/sglang.md).
"""
