"""Whether two regex nodes match the same strings (tests only)."""

from __future__ import annotations

from automask.regex import nodes as rx


def same_language(a: rx.Node, b: rx.Node) -> bool:
    """Whether ``a`` and ``b`` match the same byte strings: every pair of derivatives
    reached by the same bytes agrees on acceptance (a search over the pairs, one byte
    class at a time; exact, and finite since each node has finitely many derivatives)."""
    seen, todo = {(a.uid, b.uid)}, [(a, b)]
    while todo:
        x, y = todo.pop()
        if x.nullable != y.nullable:
            return False
        for lo, _ in rx.class_runs(rx.class_starts(x) | rx.class_starts(y)):
            dx, dy = rx.derive(x, lo), rx.derive(y, lo)
            if (dx is rx.EMPTY) != (dy is rx.EMPTY):
                return False
            if dx is not rx.EMPTY and (dx.uid, dy.uid) not in seen:
                seen.add((dx.uid, dy.uid))
                todo.append((dx, dy))
    return True
