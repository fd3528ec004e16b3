"""Freeing regex nodes: a sweep frees exactly the nodes that only the intern tables hold.

The tables hold nodes strongly (see :mod:`automask.regex.nodes`), so what frees a node
is :func:`rx.sweep` (and the sweeps that run by themselves as nodes are made), which
reads reference counts against a probe's. These run on the compiled engine too, where
the counts differ from the interpreter's.
"""

from __future__ import annotations

import pytest

from automask.regex import nodes as rx


@pytest.fixture
def no_ring():
    rx.keep_recent(0)
    yield
    rx.keep_recent(rx.RECENT_NODES)


def _uids_below(node: rx.Node) -> set[int]:
    seen: dict[int, rx.Node] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if n.uid not in seen:
            seen[n.uid] = n
            stack.extend(rx.parts_of(n))
    return set(seen)


def _structure(tag: bytes) -> rx.Node:
    return rx.concat(rx.literal(b'"sweep-' + tag + b"-"),
                     rx.star(rx.alt(rx.literal(b"ab"), rx.literal(b"cd" + tag))),
                     rx.literal(b'"'))


def test_an_unheld_structure_goes_in_one_sweep_and_a_held_one_stays(no_ring):
    rx.sweep()
    held = _structure(b"held")
    dropped = _structure(b"dropped")
    held_uids = _uids_below(held)
    dropped_only = {u for u in _uids_below(dropped) if u > held.uid}  # made for it alone
    assert len(dropped_only) > 20
    before = rx.node_count()
    del dropped
    freed = rx.sweep()
    assert freed >= len(dropped_only)
    assert rx.node_count() == before - freed
    assert all(rx._alive(uid) is None for uid in dropped_only)  # noqa: SLF001
    assert all(rx._alive(uid) is not None for uid in held_uids)  # noqa: SLF001
    assert _structure(b"held") is held  # still the one interned node of its key
    again = _structure(b"dropped")
    assert not _uids_below(again) & dropped_only  # made anew, with new uids
    assert rx.matches(again, b'"sweep-dropped-abcddropped"')
    rx.sweep()
    assert all(rx._alive(u) is not None for u in _uids_below(again))  # noqa: SLF001


def test_a_derivative_held_only_by_a_memo_is_freed_and_made_again(no_ring):
    loop = rx.star(rx.alt(rx.literal(b"ab"), rx.literal(b"cd-memo")))
    first = rx.derive(loop, ord("a"))  # b(ab|cd-memo)*: a new node, not a part of loop
    uid = first.uid
    assert uid > loop.uid and rx.derive(loop, ord("a")) is first  # memoized while held
    del first
    rx.sweep()
    assert rx._alive(uid) is None  # noqa: SLF001  (the memo held its uid only)
    second = rx.derive(loop, ord("a"))
    assert second.uid > uid and rx.matches(second, b"bcd-memoab")


def test_uid_keyed_entries_go_with_their_node(no_ring):
    table = rx.uid_keyed({})
    try:
        kept, dropped = _structure(b"kept-entry"), _structure(b"dropped-entry")
        table[kept.uid] = "k"
        table[dropped.uid] = "d"
        del dropped
        rx.sweep()
        assert table == {kept.uid: "k"}
    finally:
        rx._uid_tables.remove(table)  # noqa: SLF001


def test_sweeps_run_by_themselves_as_nodes_are_made(no_ring):
    rx.sweep()
    held = rx.node_count()
    for i in range(20_000):  # each made and dropped at once
        rx.literal(b"made-and-dropped-%d" % i)  # a new node per byte: 400k nodes in all
    # swept a band at a time as they are made (the window is 0 here), and a sweep of
    # every node starts at 1.25 times the nodes held (at least 1,024)
    bound = max(1.25 * held, 1024) + 2 * rx.YOUNG_BAND
    assert rx.node_count() <= bound
    assert rx.sweep() <= bound - held
