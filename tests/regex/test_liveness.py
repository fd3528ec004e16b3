"""``is_live`` on intersections and complements, against an exhaustive search.

The search marks what it proves dead as it goes (a node whose every derivative
is dead), and later searches stop at those marks; a node whose derivatives lead
back to one still being searched (a cycle) must stay undecided until that one
is. The reference explores every state reachable by every byte, with no marks.
The nodes are walked byte by byte, as a lexer does, so each search runs over the
marks the earlier ones left.
"""

from __future__ import annotations

import random

from automask.regex import nodes as rx
from automask.regex.parser import parse_regex

POOL = ["(a|b)*", "a*b*c*", ".*aa.*", "(ab|ba)*", "[abc]{2,6}", "(a|bc)*b?", ".*c", "a.*",
        "(aab|b)*", "((a|b)(a|b))*", "((a|b)(a|b)(a|b))*", "(a|b|c){0,3}", "c*(ab)+",
        ".*b.*b.*", "(a|b)*c(a|b)*",
        # a cycle searched before the way out: (ab)* is met, by "a", ahead of "c"
        "(ab)*c", "(ab|ac)*c", "(abb)*c"]


def reference_live(node: rx.Node) -> bool:
    """Whether some string matches ``node``: every reachable state, every byte."""
    seen = {node.uid}
    todo = [node]
    while todo:
        n = todo.pop()
        if n.nullable:
            return True
        for b in range(256):
            d = rx._raw_derive(n, b)
            if d is not rx.EMPTY and d.uid not in seen:
                seen.add(d.uid)
                todo.append(d)
    return False


def random_node(r: random.Random) -> rx.Node:
    parts = [parse_regex(p) for p in r.sample(POOL, r.randint(2, 3))]
    parts = [rx.complement(p) if r.random() < 0.5 else p for p in parts]
    if r.random() < 0.3:
        return rx.complement(rx.intersect(*parts))
    return rx.intersect(*parts)


def test_is_live_agrees_with_an_exhaustive_search_along_every_path():
    decided = {True: 0, False: 0}
    for seed in range(60):
        r = random.Random(seed)
        start = random_node(r)
        frontier = [start]
        for _ in range(4):  # every string over a, b, c up to four bytes
            nxt = []
            for n in frontier:
                for b in b"abc":
                    d = rx._raw_derive(n, b)
                    if d is rx.EMPTY:
                        continue
                    live = rx.is_live(d)
                    assert live == reference_live(d), (seed, d.uid)
                    decided[live] += 1
                    nxt.append(d)
            frontier = nxt
    assert decided[True] > 1000 and decided[False] > 50, decided


def contains(word: bytes) -> rx.Node:
    text = rx.star(rx.any_char())
    return rx.concat(text, rx.literal(word), text)


def test_a_oneof_branch_of_words_is_witnessed_by_its_own_word():
    # "contains w and none of the others" (a oneOf of unanchored patterns) matches w, and
    # two branches overlap on both words side by side: no search of the words' product.
    words = [b"NEW", b"ON_APPROVAL", b"ON_SIGNING", b"EXECUTED", b"REJECTED"]
    for w in words:
        branch = rx.intersect(contains(w), *[rx.complement(contains(v)) for v in words
                                             if v != w])
        assert rx._witness(branch) == w and rx.is_live(branch)
    both = rx.intersect(contains(b"NEW"), contains(b"EXECUTED"))
    assert rx._witness(both) == b"NEWEXECUTED"
    # one word inside another: nothing contains the outer word and not the inner one
    assert rx.intersect(contains(b"ON_SIGNING"), rx.complement(contains(b"SIGN"))) is rx.EMPTY


def test_every_witness_is_a_string_the_intersection_matches():
    found = 0
    for seed in range(200):
        r = random.Random(seed)
        parts = [parse_regex(p) for p in r.sample(POOL, r.randint(2, 3))]
        parts = [rx.complement(p) if r.random() < 0.3 else p for p in parts]
        node = rx._make(("and",) + tuple(sorted({p.uid for p in parts})), rx.K_AND,
                        all(p.nullable for p in parts),
                        items=tuple(sorted(set(parts), key=lambda p: p.uid)))
        text = rx._witness(node)
        if text is not None:
            found += 1
            assert rx.matches(node, text), (seed, text)
            assert reference_live(node)
    assert found > 50, found
