"""Grammars: the IR (:mod:`~automask.grammar.ir`) and the text front ends.

The IR imports no front end, since they build on it. The ``Grammar``
constructors of the front ends here find them through
:func:`~automask.grammar.ir.register_front_end`; GBNF and Lark are imported
on their first use, to keep ``import automask`` light.
"""

from automask.grammar.ir import Grammar, register_front_end
from automask.grammar.segments import after_reasoning, tagged_segments


def _read_gbnf(text, *, max_seconds) -> Grammar:
    from automask.grammar.gbnf import read_gbnf

    return read_gbnf(text, max_seconds=max_seconds)


def _read_lark(text, start, *, max_seconds) -> Grammar:
    from automask.grammar.lark import read_lark

    return read_lark(text, start, max_seconds=max_seconds)


register_front_end("gbnf", _read_gbnf)
register_front_end("lark", _read_lark)
register_front_end("tags", tagged_segments)
register_front_end("after_reasoning", after_reasoning)
