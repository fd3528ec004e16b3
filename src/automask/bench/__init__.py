"""Benchmarks behind ``automask bench ...``: same tokens, same loop, every engine.

Modules: :mod:`~automask.bench.grammar_bench` (one grammar over many
instances, and compile / first-mask timings), :mod:`~automask.bench.peers`
(adapters for automask and peer engines such as llguidance),
:mod:`~automask.bench.stats` (summaries and memory accounting) and
:mod:`~automask.bench.progress` (progress lines every bench reports through).
Nothing here is imported by the core library.
"""
