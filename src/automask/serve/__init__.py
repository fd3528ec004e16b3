"""``automask serve``: an OpenAI-compatible HTTP server with structured outputs.

The layers, in the order a request crosses them:

* :mod:`~automask.serve.protocol`: the request bodies (OpenAI's and vLLM's
  fields) as validated data, and the error type every layer raises;
* :mod:`~automask.serve.constraints`: what the request constrains
  (``response_format``, ``structured_outputs``, ``tools``) as a canonical
  spec, compiled once per spec into a bounded cache;
* :mod:`~automask.serve.chat`: prompts from messages (tools included) and
  answers from output text (content, reasoning, tool calls);
* :mod:`~automask.serve.scheduler`: continuous batching: every running
  sequence advances one step per batched forward pass, each with its own
  matcher, and new requests join between steps;
* :mod:`~automask.serve.app`: the Starlette application (routes, limits,
  streaming, metrics); :mod:`~automask.serve.command`: the CLI.

Needs the ``serve`` extra.
"""
