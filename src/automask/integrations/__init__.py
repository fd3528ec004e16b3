"""Adapters for other libraries' decoding loops, imported on demand (they need those libraries).

* :mod:`automask.integrations.transformers`: ``LogitsProcessor`` for
  ``model.generate`` in Hugging Face transformers (needs torch and transformers).
"""
