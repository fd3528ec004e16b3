"""Byte-level regular expressions as interned nodes, with Brzozowski derivatives.

Every lexeme of a grammar is one of these nodes. Nodes are hash-consed: two
structurally equal expressions are the same object, so a node *is* a DFA
state, and a lazy DFA needs no subset construction and no minimization pass.
Smart constructors simplify as they build (``∅·r = ∅``, ``ε·r = r``, flat
sorted alternations, byte sets merged), which keeps the derivative automata
small; with these rules a node's language is empty exactly when the node is
``EMPTY``, so every other state is live (can still reach acceptance).

Intersection and complement (for JSON Schema: a pattern *and* a length, a
``not``) are supported too. With them, a node may match nothing without
being ``EMPTY``; such nodes are detected (a bounded search for an accepting
derivative, cached) and collapsed to ``EMPTY`` by the constructors and by
:func:`derive`, so the invariant "not EMPTY means live" still holds.

Derivatives are computed per *byte class* (bytes that lead to the same
derivative), so materializing a DFA row costs one derivative per class, not
256. See Owens, Reppy, Turon, "Regular-expression derivatives reexamined".

Every memo lives on its node, and a node stays while a grammar, a lexer
state, a bounded cache or a parent node holds it, or while it is among the
most recently made (:data:`RECENT_NODES`): the intern tables' own references
do not count, and sweeps free, with its memos, each node only they hold, so
a process that compiles a new schema per request keeps a bounded set of
nodes. Uids are never reused: a node made again after its key's node
was freed is a new node, and no uid-keyed cache entry of the freed one can
be met by it.
"""

from __future__ import annotations

import bisect
import collections
import functools
import gc
import itertools
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from automask.budget import check_time
from automask.errors import LimitExceeded
from automask.gc_pause import on_resume, untrack

FULL_BITS = (1 << 256) - 1

# Node kinds.
(K_EMPTY, K_EPS, K_BYTES, K_CONCAT, K_ALT, K_REPEAT, K_NONEMPTY, K_AND, K_NOT, K_ENC,
 K_EXCEPT) = range(11)

#: how many derivatives a liveness check may explore before giving up
MAX_LIVENESS_STATES = 20_000


class Undecided(LimitExceeded):
    """A liveness search stopped at :data:`MAX_LIVENESS_STATES` without an answer.

    Its own type, apart from the compile's time limit (also a ``LimitExceeded``): a
    caller that can go on without the answer (reading "may meet" for "unknown") catches
    this one only, so a spent time budget always ends the compile.
    """


class Node:
    """An interned regular expression over bytes. Build with the functions below."""

    __slots__ = ("kind", "a", "b", "items", "words", "lo", "hi", "bits", "nullable", "uid", "plain",
                 "counted", "key", "_cuts", "_derivs", "_raw_derivs",
                 # memos of the functions below, kept on the node so that they go with it
                 "_live", "_first", "_cont", "_fin", "_forced", "_meas", "_alpha",
                 "_alpha_text", "_req", "_clamps", "_incl")

    # The slots' types (set by _make, never by __init__). ``a`` and ``b`` are NO_PART where
    # the kind has no such part, so that every part reads as a node.
    kind: int
    a: Node
    b: Node
    items: tuple[Node, ...]
    words: tuple[bytes, ...]  # K_EXCEPT: the strings left out, sorted (else empty)
    lo: int
    hi: int | None
    bits: int
    nullable: bool
    uid: int
    plain: bool
    counted: int  # the bytes a count inside spans (see _make): clamp changes nothing within
    key: tuple  # its key in the intern table
    _cuts: int | None
    _derivs: dict[int, int]  # byte -> the derivative's uid
    _raw_derivs: dict[int, int] | None  # byte -> the raw derivative's uid (_raw_derive)
    _live: bool | None
    _first: int | None
    _cont: bool | None
    _fin: Any  # _UNKNOWN until worked out, then a tuple of strings or None
    _forced: bytes | None
    _meas: tuple[int | None, int | None] | None
    _alpha: int | None
    _alpha_text: int | None
    _req: int | None
    _clamps: dict[int, int] | None  # limit -> the clamped node's uid
    _incl: dict[int, bool] | None  # uid of a node -> whether it includes this one (as known)

    def __repr__(self) -> str:
        return "<Node NO_PART>" if self is NO_PART else f"<Node {to_pattern(self)}>"


#: ``a`` or ``b`` of a node whose kind has no such part: a node, so that parts are typed
#: as nodes, with no slot set, so that reading it as a real part fails at once
NO_PART = Node()


# Interning: the table maps a node's key to the node, and a node lives as long as
# something outside the tables holds it (a grammar, a lexer state, a cache, a parent
# node) or it is recent (below); a sweep then frees it with everything memoized on it. A
# server compiling a new schema per request keeps only the nodes its live grammars and
# bounded caches reach. Nodes refer only to older nodes (their parts), and memos that
# name other nodes (derivatives, clamps) hold uids, looked up in _by_uid, so a sweep
# from the newest node down frees a whole unheld structure in one pass, and no cycle
# is left for the collector: it is kept from walking them (each node and its members'
# tuple are untracked, and so are the tables, after an insert or when a collector
# pause ends; keys and memos, of ints, the collector untracks by itself).
# The tables hold nodes strongly, not through weak references, so that `Node` can be a
# native class of the compiled engine (mypyc's native objects do not clear weak
# references when freed).
# Uids come from a counter and are never reused, so a uid-keyed cache entry of a freed
# node is never met by another node: a node made again under the same key is a new
# node, with a new uid and empty memos.
_intern: dict[tuple, Node] = {}  # key -> the node
_by_uid: dict[int, Node] = {}  # uid -> the node, in the order made (uids grow)


_tables_tracked = True  # an insert may have tracked the tables again


def _untrack_tables() -> None:
    """Untrack the node tables if an insert has tracked them again since the last time:
    after each insert with the collector on, else once when the pause ends (most pauses,
    a cached mask's, make no node)."""
    global _tables_tracked
    if _tables_tracked:
        _tables_tracked = False
        untrack(_intern)
        untrack(_by_uid)


_untrack_tables()
on_resume(_untrack_tables)
_lock = threading.Lock()
_made = 0  # the nodes made so far: the next node's uid
#: How many of the most recently made nodes are kept whatever else holds them. Work
#: moves between related nodes that nothing else holds for long (a liveness search's
#: derivatives, met again by the next derivative's search; what a compile builds and
#: its first masks derive), and these keep their memos for it. The set a process keeps
#: is then what its live grammars and bounded caches reach plus these.
RECENT_NODES = 1 << 15
_window = RECENT_NODES
_uid_tables: list[dict] = []  # other modules' tables keyed by node uid (see uid_keyed)

# Sweeps. Most nodes are garbage soon after they leave the window (what one compile or
# one mask made), so each band of YOUNG_BAND nodes that leaves it is swept on its own,
# as it leaves; what is kept then is old, and a whole sweep, of every node, runs when the
# tables have grown to 1.25 times the nodes the last one kept (and hold twice the window):
# garbage of old nodes (a grammar dropped, a cache entry evicted) stays below a quarter of
# what is held. A sweep looks at SWEEP_STEP nodes per node made, so no step pays for a
# whole one: freeing 350k nodes at once took 0.35 s.
YOUNG_BAND = 1 << 12
SWEEP_STEP = 4
_young: collections.deque[int] = collections.deque()  # uids made, not swept since
untrack(_young)
_sweep_floor = 2 * RECENT_NODES
_sweep_at = _sweep_floor


def keep_recent(count: int) -> None:
    """Keep the ``count`` most recently made nodes (see :data:`RECENT_NODES`), and sweep
    every node from twice that many nodes on."""
    global _window, _sweep_floor, _sweep_at
    with _lock:
        _window = max(count, 0)
        _sweep_floor = max(2 * _window, 1024)
        _sweep_at = _next_sweep_at(len(_by_uid))


def _next_sweep_at(kept: int) -> int:
    """How many interned nodes start the next sweep of every node, ``kept`` being held."""
    return max(_sweep_floor, kept + kept // 4)


def uid_keyed(table: dict) -> dict:
    """Register ``table``, a dict keyed by node uid: an entry goes when its node is freed
    (an entry must be made while the node is held, as a memo of it is)."""
    _uid_tables.append(table)
    return table


def table_sizes() -> dict[str, int]:
    """The sizes of the module-level tables: interned nodes, nodes kept as recent,
    entries of the registered uid-keyed tables."""
    return {"nodes": len(_intern), "recent": min(_window, _made),
            "uid_keyed": sum(len(t) for t in _uid_tables), "codes": len(_codes),
            "class_runs": len(_runs_cache)}


def sweep() -> int:
    """Free every node that only the intern tables hold (but the recent ones), with its
    memos and its entries in the uid-keyed tables, and return how many. (Sweeps run by
    themselves as nodes are made; this one runs whole, now.)"""
    with _lock:
        _start_sweep(every=True)
        return _sweep_some(len(_pending))


_PROBE_KEY = ("probe",)  # (no constructor makes a key of one string)
#: the nodes of the sweep under way not looked at yet, oldest first; a node's parts are
#: older than it, so once it is freed its parts are looked at with its references gone,
#: and a whole unheld structure goes in one sweep
_pending: list[Node] = []
_every = False  # whether the sweep under way is of every node
#: the probe's reference counts (see _start_sweep), in the tables and out of them: a
#: node with no more is held by nothing else
_held = _unheld = -1
_kept = 0  # the nodes the sweep under way has looked at and kept


def _start_sweep(*, every: bool) -> None:
    """Begin a sweep of every node, or of the young nodes that have left the window;
    oldest first, then a probe, a node only the tables hold. The probe is looked at
    first, by the same code as every node, so that the sweep reads reference counts
    against counts measured, not assumed (compiled code may hold one reference more or
    fewer than the interpreter in the same place)."""
    global _pending, _every, _held, _unheld, _kept
    young = _young
    recent = _made - _window
    band = []  # the young uids that have left the window: this sweep looks at them
    while young and young[0] < recent:
        band.append(young.popleft())
    if every:
        pending = list(_by_uid.values())
    else:  # (a uid not found: freed by a sweep of every node)
        pending = [node for uid in band if (node := _by_uid.get(uid)) is not None]
    probe = Node()
    probe.key = _PROBE_KEY
    probe.uid = -1
    _intern[_PROBE_KEY] = probe
    _by_uid[-1] = probe
    pending.append(probe)
    untrack(pending)
    _pending = pending
    _every = every
    _held = _unheld = -1
    _kept = 0


def _sweep_some(count: int) -> int:
    """Look at the next ``count`` nodes of the sweep under way (the caller holds
    ``_lock``); returns how many were freed. A node that looks unheld is taken out of
    both tables and looked at again, and put back if another thread took it meanwhile
    (from a table, which readers do without the lock): out of the tables, no thread can
    take it."""
    global _held, _unheld, _kept, _sweep_at
    pending = _pending
    recent = _made - _window
    freed = 0
    while count > 0 and pending:
        count -= 1
        node = pending.pop()
        refs = sys.getrefcount(node)
        if _held < 0:
            _held = refs
        elif refs > _held or node.uid >= recent:
            _kept += 1
            continue
        key, uid = node.key, node.uid
        del _intern[key]
        del _by_uid[uid]
        refs = sys.getrefcount(node)
        if _unheld < 0:
            _unheld = refs  # (the probe, now gone)
        elif refs > _unheld:
            _intern[key] = node
            _by_uid[uid] = node
            _kept += 1
        else:
            for table in _uid_tables:
                table.pop(uid, None)
            freed += 1
    if not pending and _every:
        _sweep_at = _next_sweep_at(_kept)
    return freed


def node_count() -> int:
    """How many nodes are interned now (held, or unheld since the last sweep)."""
    return len(_intern)


#: Node.counted of an intersection: clamp always looks inside (see _clamp_and)
_ALWAYS_CLAMPED = 1 << 62


def _make(key: tuple, kind: int, nullable: bool, *, a: Node = NO_PART,
          b: Node = NO_PART, items: tuple[Node, ...] = (), words: tuple[bytes, ...] = (),
          lo: int = 0, hi: int | None = None, bits: int = 0) -> Node:
    """The node under ``key``: the interned one, else a new one of these parts (most
    calls find it, so that lookup comes first, with no call)."""
    found = _intern.get(key)
    if found is not None:
        return found
    with _lock:
        node = _intern.get(key)
        if node is not None:
            return node
        check_time()
        node = Node()
        node.kind = kind
        node.a = a
        node.b = b
        node.items = items
        node.words = words
        node.lo = lo
        node.hi = hi
        node.bits = bits
        node.nullable = nullable
        # What clamp may change: a repeat count or an intersection somewhere inside (it
        # keeps a star or a plus, and whatever holds neither). As the most bytes a count
        # spans (the count times its body's shortest string, where clamp reckons so), so
        # clamp(node, limit) is node itself when that is within the limit: a key's
        # whitespace gap, x{0,24}, stays as it is under any vocabulary whose longest
        # token has 24 bytes or more.
        if items:
            plain = kind != K_AND and kind != K_NOT and all(c.plain for c in items)
            span = max(c.counted for c in items)
        elif a is not NO_PART:
            plain = kind != K_AND and kind != K_NOT and a.plain and (b is NO_PART or b.plain)
            span = a.counted if b is NO_PART or a.counted >= b.counted else b.counted
        else:
            plain, span = True, 0
        node.plain = plain
        if kind == K_AND:
            span = _ALWAYS_CLAMPED
        elif kind == K_REPEAT and (hi is not None or lo >= 2):
            shortest = _minlen(a) if a.plain and not a.nullable else None
            span = max(span, max(lo, hi or 0) * (shortest or 1))
        node.counted = span
        global _made
        node.uid = uid = _made
        _made = uid + 1
        node._cuts = node._live = node._first = node._cont = node._forced = None
        node._meas = node._alpha = node._alpha_text = node._req = None
        node._clamps = node._incl = None
        node._fin = _UNKNOWN
        node._derivs = {}
        node._raw_derivs = None  # made on first use: only liveness searches read it
        node.key = key
        untrack(node)
        if items:
            untrack(items)  # (its key, a tuple of ints, the collector untracks by itself)
        _intern[key] = node
        _by_uid[uid] = node
        global _tables_tracked
        _tables_tracked = True
        _young.append(uid)
        if _pending:
            _sweep_some(SWEEP_STEP)
        elif len(_by_uid) >= _sweep_at:
            _start_sweep(every=True)
        elif len(_young) >= _window + YOUNG_BAND:
            _start_sweep(every=False)
        if gc.isenabled():  # (else when the pause ends)
            _untrack_tables()
        return node


def parts_of(node: Node) -> list[Node]:
    """The node's parts: ``a`` and ``b`` where its kind has them, then ``items``."""
    return [c for c in (node.a, node.b, *node.items) if c is not NO_PART]


def _alive(uid: int) -> Node | None:
    """The node of ``uid`` until it is freed (memos naming other nodes hold their uids)."""
    return _by_uid.get(uid)


_UNKNOWN = object()
EMPTY = _make(("empty",), K_EMPTY, False)
EPS = _make(("eps",), K_EPS, True)


def byte_set(bits: int) -> Node:
    """The set of bytes whose bits are set in ``bits`` (bit i = byte i)."""
    bits &= FULL_BITS
    if bits == 0:
        return EMPTY
    return _make(("bytes", bits), K_BYTES, False, bits=bits)


def byte_range(lo: int, hi: int) -> Node:
    """Bytes ``lo..hi`` inclusive."""
    return byte_set(((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1))


ANY_BYTE = byte_set(FULL_BITS)


#: the node of each single byte, held for good (literals are made of them)
_SINGLE_BYTES = tuple(byte_set(1 << c) for c in range(256))


def literal(data: bytes, after: Node | None = None) -> Node:
    """The exact byte string ``data`` (then ``after``): ``concat`` of its bytes, made
    from the table of single-byte nodes (keys and enum values are made again by every
    conjunction that holds them)."""
    node = EPS if after is None else after
    if node is EMPTY:
        return EMPTY
    for c in reversed(data):
        part = _SINGLE_BYTES[c]
        node = part if node is EPS else _make(("cat", part.uid, node.uid), K_CONCAT, False,
                                              a=part, b=node)
    return node


#: The well-formed UTF-8 byte sequences of one code point, as byte ranges per
#: position (Unicode, Table 3-7): no overlong forms, no surrogates, none above
#: U+10FFFF. :func:`automask.regex.utf8.ranges_to_node` derives the same rows.
_UTF8_CHAR = (
    ((0x00, 0x7F),),
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)


@functools.cache
def any_char() -> Node:
    """Any single code point (as valid UTF-8); built once (nodes are interned anyway).

    It lives here, not in :mod:`automask.regex.utf8`, because intersections
    recognize text made of whole characters by it (:func:`_drop_subsumed`).
    """
    return alt_of(concat(*(byte_range(lo, hi) for lo, hi in row)) for row in _UTF8_CHAR)


@functools.cache
def any_text() -> Node:
    """Any valid UTF-8 text: ``any_char()*`` (built once)."""
    return star(any_char())


def known_text(node: Node) -> Node:
    """``node``, recorded as matching valid UTF-8 text only, as every node the pattern
    parser makes does (patterns speak of code points). Inclusion in any text then
    needs no search: a length bound over any characters is dropped from a pattern
    at once (:func:`_clamp_and`), where the pair search over a pattern of wide
    Unicode classes ran to its bound (60 ms for a letters class) and gave up."""
    if node.plain and node is not EMPTY:
        _remember_inclusion(node, any_text(), True)
    return node


def concat(*parts: Node) -> Node:
    """Concatenation, right-nested and simplified."""
    result = EPS
    for part in reversed(parts):
        result = _concat2(part, result)
    return result


def _concat2(a: Node, b: Node) -> Node:
    if a is EMPTY or b is EMPTY:
        return EMPTY
    if a is EPS:
        return b
    if b is EPS:
        return a
    if a.kind != K_CONCAT:
        return _make(("cat", a.uid, b.uid), K_CONCAT, a.nullable and b.nullable, a=a, b=b)
    # keep concatenations right-nested: a's spine (a1 (a2 (… an))) is put in front of b
    # one part at a time from the right, in a loop (a spine may be thousands long)
    spine = []
    while a.kind == K_CONCAT:
        spine.append(a.a)
        a = a.b
    spine.append(a)
    for part in reversed(spine):
        b = _make(("cat", part.uid, b.uid), K_CONCAT, part.nullable and b.nullable,
                  a=part, b=b)
    return b


def alt(*parts: Node) -> Node:
    """Alternation: flattened, deduplicated, byte sets merged, sorted by uid."""
    return alt_of(parts)


def alt_of(parts: Iterable[Node]) -> Node:
    bits = 0
    members: dict[int, Node] = {}
    for part in parts:
        stack = [part]
        while stack:
            p = stack.pop()
            if p.kind == K_ALT:
                stack.extend(p.items)
            elif p.kind == K_BYTES:
                bits |= p.bits
            elif p is not EMPTY:
                members[p.uid] = p
    if bits:
        bs = byte_set(bits)
        members[bs.uid] = bs
    if not members:
        return EMPTY
    if len(members) == 1:
        return next(iter(members.values()))
    uids = sorted(members)
    key = ("alt", *uids)
    found = _intern.get(key)  # most alternations are met again: no nullability to work out
    if found is not None:
        return found
    items = tuple(members[k] for k in uids)
    return _make(key, K_ALT, any(m.nullable for m in items), items=items)


def repeat(a: Node, lo: int, hi: int | None) -> Node:
    """``a{lo,hi}``; ``hi=None`` means unbounded."""
    if hi is not None and hi < lo:
        raise ValueError(f"repeat bounds {lo}>{hi}")
    if a.nullable:
        lo = 0  # empty iterations can make up the minimum
    if hi == 0 or a is EPS:
        return EPS
    if a is EMPTY:
        return EPS if lo == 0 else EMPTY
    if lo == 1 and hi == 1:
        return a
    return _make(("rep", a.uid, lo, hi), K_REPEAT, lo == 0, a=a, lo=lo, hi=hi)


def star(a: Node) -> Node:
    return repeat(a, 0, None)


def plus(a: Node) -> Node:
    return repeat(a, 1, None)


def optional(a: Node) -> Node:
    return alt(a, EPS)


def nonempty(a: Node) -> Node:
    """The language of ``a`` without the empty string."""
    if not a.nullable:
        return a
    if a is EPS:
        return EMPTY
    return _make(("ne", a.uid), K_NONEMPTY, False, a=a)


def except_words(base: Node, words: Iterable[bytes]) -> Node:
    """The strings of the plain node ``base`` but the finitely many ``words``.

    Derived lazily: by a byte no word starts with, the derivative is ``base``'s own
    (no word can be met any more); by another, it is the same construction on
    ``base``'s derivative and the words' rests. So "any key but the declared
    names" costs a node per position a walk reaches, not, as a trie of the names
    built up front did, a node per position of every name (a quarter of the
    compile of a small schema). Still a plain node, and never one that matches
    nothing (that is ``EMPTY``), so its liveness is its own.
    """
    if not base.plain:
        raise ValueError("except_words takes a plain node (no intersection or complement)")
    return _except(base, tuple(sorted(set(words))))


def _except(base: Node, words: tuple[bytes, ...]) -> Node:
    """:func:`except_words` of words already sorted and distinct."""
    if not words or base is EMPTY:
        return base
    if not _leaves_some(base, words):
        return EMPTY
    untrack(words)  # bytes: in no cycle
    return _make(("except", base.uid, words), K_EXCEPT,
                 base.nullable and words[0] != b"", a=base, words=words)


def _leaves_some(base: Node, words: tuple[bytes, ...]) -> bool:
    """Whether the plain node ``base`` matches some string outside ``words`` (sorted).

    A depth-first search no deeper than the longest word: past it, or off every
    word, a live derivative of ``base`` has a string (plain nodes are live)."""
    if base.nullable and words[0] != b"":  # (sorted: an empty word comes first)
        return True
    for lo, _ in class_runs(class_starts(base) | _word_cuts(words)):
        d = derive(base, lo)
        if d is not EMPTY:
            rests = _rests(words, lo)
            if not rests or _leaves_some(d, rests):
                return True
    return False


def _rests(words: tuple[bytes, ...], byte: int) -> tuple[bytes, ...]:
    """The rests of the (sorted) words that start with ``byte``, sorted: a contiguous run."""
    start = bisect.bisect_left(words, bytes((byte,)))
    stop = len(words) if byte == 255 else bisect.bisect_left(words, bytes((byte + 1,)), start)
    return tuple(w[1:] for w in words[start:stop])


def _word_cuts(words: tuple[bytes, ...]) -> int:
    """Class starts that give each word's first byte a class of its own."""
    cuts = 1
    for w in words:
        if w:
            cuts |= 3 << w[0]
    return cuts & FULL_BITS


def intersect(*parts: Node) -> Node:
    """Strings matched by every part."""
    members: dict[int, Node] = {}
    bits = FULL_BITS
    has_bytes = False
    for part in parts:
        stack = [part]
        while stack:
            p = stack.pop()
            if p is EMPTY:
                return EMPTY
            if p.kind == K_AND:
                stack.extend(p.items)
            elif p.kind == K_BYTES:
                bits &= p.bits
                has_bytes = True
            elif p.kind != K_NOT or p.a is not EMPTY:  # "anything" constrains nothing
                members[p.uid] = p
    if has_bytes:
        if not bits:
            return EMPTY
        bs = byte_set(bits)
        members[bs.uid] = bs
    if not members:
        return complement(EMPTY)
    if len(members) > 1:
        if _refuted(members.values()):
            return EMPTY
        _drop_absorbed(members)
        _drop_subsumed(members)
    if len(members) == 1:
        return next(iter(members.values()))
    items = tuple(members[k] for k in sorted(members))
    if any(m is EPS for m in items):
        return EPS if all(m.nullable for m in items) else EMPTY
    node = _make(("and",) + tuple(sorted(members)), K_AND, all(m.nullable for m in items),
                 items=items)
    return node if is_live(node) else EMPTY


def _drop_absorbed(members: dict[int, Node]) -> None:
    """Drop alternations that offer another member as one of their choices:
    ``A & (A | B)`` is ``A``. A pattern's derivatives reach this once its
    requirement is met (``text & (text | rest of "contains github")``), and
    it leaves the plain string body, whose scans every schema shares.
    """
    for uid, m in list(members.items()):
        if m.kind == K_ALT and any(i.uid in members for i in m.items):
            del members[uid]


def _drop_subsumed(members: dict[int, Node]) -> None:
    """Drop ``X*`` members that another member is inside of (``X{m,n}``, or text over
    bytes ``X*`` takes anyway): the intersection then stays plain where it can.

    Schemas intersect "any text" with a length bound or a format all the time;
    without this every derivative of those strings would be an intersection,
    checked for liveness by search.
    """
    for uid, u in list(members.items()):
        if _plain_star(u) and any(other is not u and _inside_star(other, u.a)
                                  for other in members.values()):
            del members[uid]


def _plain_star(node: Node) -> bool:
    return node.kind == K_REPEAT and node.lo == 0 and node.hi is None and node.a.plain


def _inside_star(node: Node, x: Node) -> bool:
    """Whether every string of ``node`` is in ``x*`` (a cheap test; False: not known)."""
    if node.kind == K_REPEAT and node.a is x:
        return True
    if x.kind == K_BYTES and _alphabet(node) & ~x.bits == 0:
        return True
    # text over whole characters: nothing above ASCII outside them
    return x is any_char() and _alphabet(node, x) >> 0x80 == 0


def _refuted(members: Iterable[Node]) -> bool:
    """Whether a member ``~B`` excludes all of another member: ``B`` is ``X*`` or offers
    it, and the other lies inside ``X*``. A pattern's complement reaches this once its
    text has occurred (``~(T admin T)`` after ``admin`` is ``~(T | …)``, T any text):
    without the rule, the liveness search of a ``oneOf`` of unanchored patterns went
    through every state below that point before finding it dead (58k derivatives)."""
    members = list(members)
    for m in members:
        if m.kind != K_NOT:
            continue
        inner = m.a
        for u in inner.items if inner.kind == K_ALT else (inner,):
            if _plain_star(u) and any(other.kind != K_NOT and _inside_star(other, u.a)
                                      for other in members):
                return True
    return False


def _alphabet(node: Node, whole: Node | None = None) -> int:
    """The bytes ``node``'s strings can contain (an over-approximation).

    With ``whole`` (the any-character node), its occurrences count as no byte:
    a result within ASCII then says ``node`` is built of whole characters, so
    it matches valid text only. Memoized on every node below ``node`` too (parts
    first, iteratively: concatenation chains can be long), so the derivatives of
    an intersection, which share most of its parts, each cost their new parts: a
    liveness check of a multipleOf automaton walked the whole graph per derivative."""
    slot = "_alpha" if whole is None else "_alpha_text"  # (memoized on the node)
    found: int | None = getattr(node, slot)
    if found is not None:
        return found
    stack = [node]
    while stack:
        n = stack[-1]
        if getattr(n, slot) is not None:
            stack.pop()
            continue
        kind = n.kind
        if n is whole:
            bits = 0
        elif kind == K_BYTES:
            bits = n.bits
        elif kind == K_NOT or kind == K_ENC:
            bits = FULL_BITS
        else:
            parts = parts_of(n)
            pending = [c for c in parts if getattr(c, slot) is None]
            if pending:
                stack += pending
                continue
            bits = 0
            for c in parts:
                bits |= getattr(c, slot)
        setattr(n, slot, bits)
        stack.pop()
    result: int = getattr(node, slot)
    return result


def _required(node: Node) -> int:
    """The bytes every string of ``node`` contains (an under-approximation: a single
    byte where one is forced, e.g. the ``T`` of a date-time pattern)."""
    found = node._req
    if found is not None:
        return found
    bits = 0
    n = node
    while n.kind == K_CONCAT:  # along the (right-nested) spine, not recursively
        bits |= _required(n.a)
        n = n.b
    k = n.kind
    if k == K_BYTES:
        bits |= n.bits if n.bits.bit_count() == 1 else 0
    elif k == K_ALT:
        common = FULL_BITS
        for m in n.items:
            common &= _required(m)
        bits |= common
    elif k == K_AND:
        for m in n.items:
            bits |= _required(m)
    elif (k == K_REPEAT and n.lo > 0) or k == K_NONEMPTY:
        bits |= _required(n.a)
    elif k == K_EMPTY:
        bits = FULL_BITS  # no string at all: vacuously
    node._req = bits
    return bits


def _disjoint(items: tuple[Node, ...]) -> bool:
    """Whether some member needs a byte another member's strings never contain: then
    no string matches both. A cheap proof of emptiness; a search of the product of a
    date-time and a pattern that needs a ``T`` it cannot have runs to thousands of
    states before finding none."""
    needs = [_required(m) for m in items]
    if not any(needs):
        return False
    return any(need & ~_alphabet(other) for need in needs if need for other in items)


def complement(a: Node) -> Node:
    """Every byte string that ``a`` does not match (invalid UTF-8 included)."""
    if a.kind == K_NOT:
        return a.a
    node = _make(("not", a.uid), K_NOT, not a.nullable, a=a)
    return node if is_live(node) else EMPTY


def is_live(node: Node) -> bool:
    """Whether ``node`` matches at least one string (exact; bounded search)."""
    if node.plain:
        return node is not EMPTY
    known = node._live
    if known is not None:
        return known
    found = True if node.nullable else _live_by_parts(node)
    if found is None and node.kind == K_AND:
        if _disjoint(node.items):
            found = False
        elif _witness(node) is not None:
            found = True
    if found is not None:
        node._live = found
        return found
    # Depth first, one derivative at a time (ASCII classes first: text ends
    # sooner through them), so a live node usually costs a path, not a tree.
    # A node left with every derivative dead is dead, known at once: a later
    # search (the next byte's derivative, most often) stops there rather than
    # exploring it again. One whose derivatives reach a node still open on the
    # stack (a cycle) is decided only with that node: ``undecided`` carries
    # that up. (A byte-wise product of number automata: 114k states searched
    # for 990 lexer transitions, most of them the same dead states again.)
    seen = {node.uid: node}
    stack = [(node, iter(_search_order(node)))]
    undecided = [False]  # per stack entry: a derivative was open, not known dead
    found = False
    while stack:
        n, runs = stack[-1]
        lo = next(runs, None)
        if lo is None:
            stack.pop()
            if undecided.pop():
                if undecided:
                    undecided[-1] = True
            else:
                n._live = False
            continue
        d = _raw_derive(n, lo)
        if d is EMPTY:
            continue
        known = d._live
        if known is False:
            continue
        if d.uid in seen:
            undecided[-1] = True
            continue
        if d.nullable or d.plain or known:
            found = True
            break
        if len(seen) >= MAX_LIVENESS_STATES:
            raise Undecided(
                f"cannot decide whether an intersection/complement matches anything within "
                f"{MAX_LIVENESS_STATES} states")
        seen[d.uid] = d
        stack.append((d, iter(_search_order(d))))
        undecided.append(False)
        if not len(seen) & 63:
            check_time()
    if found:  # every node on the path down to the live one is live as well
        for n, _ in stack:
            n._live = True
    else:
        for n in seen.values():
            n._live = False
    return found


def _witness(node: Node) -> bytes | None:
    """A shortest string of one of the intersection's plain members, or all of them one
    after the other, that ``node`` matches: a cheap proof that it is live (None: none
    of these).

    "Contains ``w`` and none of the other words", a ``oneOf`` branch of unanchored
    patterns, matches ``w`` itself, and "contains ``v`` and ``w``" (do two branches
    overlap?) matches ``vw``: found in as many derivatives as the text has bytes,
    where the search of :func:`is_live` went through the product of every word's
    automaton first (Github_hard o12278, seven words: 7,705 derivatives in reading
    the schema).
    """
    texts = [_shortest_string(m) for m in node.items if m.plain]
    if len(texts) > 1 and None not in texts:
        texts.append(b"".join(texts))  # type: ignore[arg-type]  # (no None: checked)
    tried: set[bytes] = set()
    for text in texts:
        if text is None or text in tried:
            continue
        tried.add(text)
        n = node
        for byte in text:
            n = _raw_derive(n, byte)
            if n is EMPTY:
                break
        else:
            if n.nullable:
                return text
    return None


#: the longest string :func:`_shortest_string` spells out
MAX_WITNESS = 256


def _shortest_string(node: Node) -> bytes | None:
    """A shortest string of the plain ``node``, read off its structure (None: longer than
    :data:`MAX_WITNESS`, or a part not read this way: an encoding, excepted words)."""
    length = _minlen(node)
    if length is None or length > MAX_WITNESS:
        return None
    out = bytearray()
    todo = [node]
    while todo:
        n = todo.pop()
        k = n.kind
        if k == K_EPS:
            continue
        if k == K_BYTES:
            out.append((n.bits & -n.bits).bit_length() - 1)  # (its lowest byte)
        elif k == K_CONCAT:
            todo += (n.b, n.a)
        elif k == K_ALT:
            todo.append(min(n.items, key=lambda m: _minlen(m)))  # type: ignore[arg-type, return-value]  # (measured: no None under a measured node)
        elif k == K_REPEAT:
            if not n.a.nullable:  # (then each of the lo iterations takes a byte or more:
                todo += [n.a] * n.lo  # lo is within MAX_WITNESS)
        else:
            return None
    return bytes(out)


def _search_order(node: Node) -> list[int]:
    """The first byte of each derivative class, ASCII classes first."""
    firsts = [lo for lo, _ in class_runs(class_starts(node))]
    return [b for b in firsts if b < 0x80] + [b for b in firsts if b >= 0x80]


def _live_by_parts(node: Node) -> bool | None:
    """Liveness from the parts, where the kind allows (None: search the automaton).

    A concatenation is live when both parts are, an alternation when one is,
    and an encoding under a code that spells every byte when its inner text
    is (mid-word: when some byte still reachable has a live derivative).
    Deciding these structurally keeps the bounded search for intersections
    and complements, on the smaller inner nodes.
    """
    k = node.kind
    if k == K_CONCAT:
        while node.kind == K_CONCAT and not node.plain:  # along the spine, not recursively
            if not is_live(node.a):
                return False
            node = node.b
        return is_live(node)
    if k == K_ALT:
        return any(is_live(m) for m in node.items)
    if k == K_REPEAT:
        return node.lo == 0 or is_live(node.a)
    if k == K_ENC:
        code = _codes[node.lo]
        if code.total:
            if node.hi == 0:
                return is_live(node.a)
            return any(derive(node.a, s) is not EMPTY
                       for s in code.below[node.hi])  # type: ignore[index]  # (K_ENC: an int)
    return None


def _raw_derive(node: Node, byte: int) -> Node:
    """Derivative without the liveness collapse (used by the liveness search itself).

    Memoized on the node like :func:`derive`: the searches from a node's successive
    derivatives run through the same product states again (a number under several
    ``multipleOf`` and ``not``: 865k raw derivatives for 5,859 searches, rebuilt each
    time without the memo)."""
    if node.plain:
        return derive(node, byte)
    memo = node._raw_derivs
    if memo is not None and (uid := memo.get(byte)) is not None:
        found = _alive(uid)  # (None: freed since, and made again below)
        if found is not None:
            return found
    d = _raw_derivative(node, byte)
    if memo is None:
        node._raw_derivs = memo = {}
    memo[byte] = d.uid
    return d


def _raw_derivative(node: Node, byte: int) -> Node:
    k = node.kind
    if k == K_AND:
        parts = [_raw_derive(m, byte) for m in node.items]
        if any(p is EMPTY for p in parts) or _refuted(parts):
            return EMPTY
        members = {p.uid: p for p in parts}
        if len(members) == 1:
            return parts[0]
        items = tuple(members[k2] for k2 in sorted(members))
        return _make(("and",) + tuple(sorted(members)), K_AND,
                     all(m.nullable for m in items), items=items)
    if k == K_NOT:
        inner = _raw_derive(node.a, byte)
        if inner.kind == K_NOT:
            return inner.a
        return _make(("not", inner.uid), K_NOT, not inner.nullable, a=inner)
    if k == K_ALT and not node.plain:
        return alt_of(_raw_derive(m, byte) for m in node.items)
    if k == K_CONCAT and not node.plain:
        d = _concat2(_raw_derive(node.a, byte), node.b)
        if node.a.nullable:
            d = alt(d, _raw_derive(node.b, byte))
        return d
    if k == K_ENC and not node.plain:
        return _derive_encoded(node, byte, _raw_derive)
    if k in (K_REPEAT, K_NONEMPTY) and not node.plain:
        inner = _raw_derive(node.a, byte)
        if k == K_NONEMPTY:
            return inner
        hi = None if node.hi is None else node.hi - 1
        return _concat2(inner, repeat(node.a, max(node.lo - 1, 0), hi))
    return derive(node, byte)


def derive(node: Node, byte: int) -> Node:
    """The derivative of ``node`` by one byte (memoized on the node)."""
    uid = node._derivs.get(byte)
    if uid is not None:
        found = _by_uid.get(uid)
        if found is not None:
            return found  # (else the derivative was freed since: it is made again)
    k = node.kind
    if k == K_BYTES:
        d = EPS if (node.bits >> byte) & 1 else EMPTY
    elif k == K_CONCAT:
        d = _concat2(derive(node.a, byte), node.b)
        if node.a.nullable:
            d = alt(d, derive(node.b, byte))
    elif k == K_ALT:
        d = alt_of(derive(m, byte) for m in node.items)
    elif k == K_REPEAT:
        hi = None if node.hi is None else node.hi - 1
        d = _concat2(derive(node.a, byte), repeat(node.a, max(node.lo - 1, 0), hi))
    elif k == K_NONEMPTY:
        d = derive(node.a, byte)
    elif k == K_AND:
        d = intersect(*(derive(m, byte) for m in node.items))
    elif k == K_NOT:
        d = complement(derive(node.a, byte))
    elif k == K_ENC:
        d = _derive_encoded(node, byte)
    elif k == K_EXCEPT:
        d = _except(derive(node.a, byte), _rests(node.words, byte))
    else:  # EMPTY, EPS
        d = EMPTY
    if not d.plain and not is_live(d):
        d = EMPTY
    node._derivs[byte] = d.uid
    if node._incl is not None and d is not EMPTY:
        _carry_inclusions(node, byte, d)
    return d


def live_derivatives(tags: Sequence[int], nodes: Sequence[Node], byte: int
                     ) -> tuple[list[int], list[Node]]:
    """The derivatives by ``byte`` of ``nodes`` that are not empty, each with its tag
    (the members of a union, a lexer state of many keys, at once). A member that is a
    byte set then a plain rest, a key's next letter, is read off without a call: it is
    what :func:`derive` gives (the rest or nothing; a plain node needs no liveness
    check), and such members are most of a many-key state's."""
    kept_tags: list[int] = []
    kept: list[Node] = []
    for tag, node in zip(tags, nodes, strict=True):
        if node.kind == K_CONCAT:
            a, rest = node.a, node.b
            if a.kind == K_BYTES and rest.plain:
                if a.bits >> byte & 1:
                    kept_tags.append(tag)
                    kept.append(rest)
                continue
        d = derive(node, byte)
        if d is not EMPTY:
            kept_tags.append(tag)
            kept.append(d)
    return kept_tags, kept


def _carry_inclusions(node: Node, byte: int, d: Node) -> None:
    """What includes ``node`` includes its derivative ``d`` by ``byte`` once derived by
    ``byte`` too (a derivative keeps inclusion). So a pattern known to be text
    (:func:`known_text`) is still known to be at the next character boundary, and a
    length bound drops there without a search either."""
    # (the caller checked that there is a memo; False entries record failed searches)
    for uid in [uid for uid, inside in node._incl.items() if inside]:  # type: ignore[union-attr]
        big = _alive(uid)
        if big is not None:
            d_big = derive(big, byte)
            if d_big is not EMPTY:
                _remember_inclusion(d, d_big, True)


def class_starts(node: Node) -> int:
    """Bitmask of the first byte of each derivative class of ``node``.

    Bytes in one run between set bits share one derivative.
    """
    c = node._cuts
    if c is not None:
        return c
    k = node.kind
    if k == K_BYTES:
        c = ((node.bits ^ (node.bits << 1)) & FULL_BITS) | 1
    elif k == K_CONCAT:
        c = class_starts(node.a)
        if node.a.nullable:
            c |= class_starts(node.b)
    elif k == K_ALT:
        c = 1
        for m in node.items:
            c |= class_starts(m)
    elif k == K_AND:
        c = 1
        for m in node.items:
            c |= class_starts(m)
    elif k in (K_REPEAT, K_NONEMPTY, K_NOT):
        c = class_starts(node.a)
    elif k == K_ENC:
        code = _codes[node.lo]
        c = ((class_starts(node.a) | code.root_cuts) if node.hi == 0
             else code.cuts[node.hi])  # type: ignore[index]  # (K_ENC: hi is an int)
    elif k == K_EXCEPT:
        c = class_starts(node.a) | _word_cuts(node.words)
    else:
        c = 1
    node._cuts = c
    return c


def class_runs(starts: int) -> list[tuple[int, int]]:
    """Turn a class-start bitmask into ``(first, last)`` byte runs covering 0..255."""
    runs = _runs_cache.get(starts)
    if runs is None:
        firsts = [i for i in range(256) if (starts >> i) & 1]
        runs = [(f, (firsts[j + 1] - 1) if j + 1 < len(firsts) else 255)
                for j, f in enumerate(firsts)]
        if len(_runs_cache) < 100_000:
            _runs_cache[starts] = runs
    return runs


_runs_cache: dict[int, list[tuple[int, int]]] = {}


def clamp(node: Node, limit: int) -> Node:
    """A node that agrees with ``node`` on every string of at most ``limit`` bytes.

    Agreement covers membership and liveness after any such prefix, so a scan
    of tokens no longer than ``limit`` gives the same result from either. Repeat
    counts past the limit cannot be told apart within it (each iteration takes
    a byte, or is empty and then counts for nothing): ``hi > limit`` becomes
    unbounded and ``lo > limit`` becomes ``limit + 1`` (with ``limit // m``
    for ``limit`` when every iteration takes ``m`` bytes or more: a word count). An intersection's
    liveness depends on whole languages, so it is clamped only in the one case
    :func:`_clamp_and` proves. This lets ``x{0,1000}`` and ``x{0,999}`` share
    one token scan, and an email address under ``maxLength`` scan as a plain
    email address.
    """
    if node.counted <= limit:  # every count fits: nothing changes (see _make)
        return node
    found = _clamped(node, limit)
    if found is not None:
        return found
    k = node.kind
    if k == K_CONCAT:  # along the right spine without recursion: literals are long chains
        spine, chain = [], []
        n = node
        while n.kind == K_CONCAT and _clamped(n, limit) is None:
            spine.append(n.a)
            chain.append(n)
            n = n.b
        out = clamp(n, limit)
        for part, whole in zip(reversed(spine), reversed(chain), strict=True):
            out = _concat2(clamp(part, limit), out)
            _keep_clamped(whole, limit, out)  # a literal's derivatives are its suffixes: met next
    elif k == K_ALT:
        out = alt_of(clamp(m, limit) for m in node.items)
    elif k == K_REPEAT:
        most = _iterations_within(node.a, limit)
        hi = None if node.hi is None or node.hi > most else node.hi
        out = repeat(clamp(node.a, limit), min(node.lo, most + 1), hi)
    elif k == K_NONEMPTY:
        out = nonempty(clamp(node.a, limit))
    elif k == K_ENC:  # an encoded byte takes one or more bytes
        inner = clamp(node.a, limit)
        out = (node if inner is node.a
               else encoded(inner, _codes[node.lo], node.hi))  # type: ignore[arg-type]
    elif k == K_AND:
        out = _clamp_and(node, limit)
    elif k == K_EXCEPT:  # agrees on strings up to the limit where the base does
        out = _except(clamp(node.a, limit), node.words)
    else:  # bytes, empty, eps, and complements kept whole
        out = node
    _keep_clamped(node, limit, out)
    return out


def _clamped(node: Node, limit: int) -> Node | None:
    """``clamp(node, limit)`` if it is memoized (on ``node``) and still alive."""
    memo = node._clamps
    uid = None if memo is None else memo.get(limit)
    return None if uid is None else _alive(uid)


def _keep_clamped(node: Node, limit: int, out: Node) -> None:
    if node._clamps is None:
        node._clamps = {}
    node._clamps[limit] = out.uid


def _iterations_within(body: Node, limit: int) -> int:
    """A count of ``body`` iterations that no string of ``limit`` bytes can exceed usefully.

    An iteration takes at least ``m`` bytes (``m`` the shortest body string),
    so at most ``limit // m`` whole ones fit: a bound above that never binds,
    and one more is always left to finish an iteration begun. With a
    nullable body (or ``m`` not worked out) it is the plain ``limit``: an
    empty iteration counts for nothing.
    """
    m = _minlen(body) if body.plain and not body.nullable else None
    return limit // m if m else limit


def _clamp_and(node: Node, limit: int) -> Node:
    """``text ∩ .{lo,hi}`` (a length bound on a plain language) as ``clamp(text)``.

    Exact when ``text`` holds only whole iterations of the bound (checked:
    then the bound's own character class adds nothing), ``lo <= 1 <=
    minlen(text)`` or ``lo == 0`` (the minimum adds nothing), and
    ``hi >= limit + R``, where ``R`` bounds the shortest completion from any
    prefix of ``text``: within ``limit`` bytes, every live prefix has a
    completion short enough to meet the maximum.
    """
    for text in node.items:  # the text; every other member must be a bound that cannot bind
        bounds = [m for m in node.items if m is not text]
        if all(m.kind == K_REPEAT and not m.a.nullable for m in bounds) and \
                _bounds_cannot_bind(text, bounds, limit):
            return clamp(text, limit)
    return node


def _bounds_cannot_bind(text: Node, bounds: list[Node], limit: int) -> bool:
    if not text.plain:
        return False
    shortest, reach = _minlen(text), _completion_bound(text)
    if shortest is None or reach is None:
        return False
    for m in bounds:
        if not (m.lo == 0 or (m.lo == 1 and shortest >= 1)):
            return False
        if m.hi is not None and m.hi < limit + reach:
            return False
        if not m.a.plain or not _included(text, repeat(m.a, 0, None)):
            return False  # the bound's own alphabet (whole UTF-8 characters) would bind
    return True


MAX_INCLUSION_PAIRS = 4000


def _included(small: Node, big: Node) -> bool:
    """Whether every string of ``small`` is one of ``big`` (plain nodes; False when unsure).

    A search over pairs of derivatives, one byte class at a time, bounded
    by :data:`MAX_INCLUSION_PAIRS`; a success is remembered for every pair
    met, so the derivatives of ``small`` met later (the next positions of a
    text under a length bound) answer at once. A failure (or a search that
    gave up) is remembered for the pair asked: it is not searched again.
    """
    memo = small._incl
    known = None if memo is None else memo.get(big.uid)
    if known is not None:
        return known
    seen = _inclusion_pairs(small, big)
    if seen is None:
        _remember_inclusion(small, big, False)
        return False
    for s, b in seen.values():  # (memoized on the smaller side: the pair goes with it)
        _remember_inclusion(s, b, True)
    return True


def _inclusion_pairs(small: Node, big: Node) -> dict[tuple[int, int], tuple[Node, Node]] | None:
    """The pairs of derivatives that show ``small`` inside ``big``, or None (not inside,
    or more than :data:`MAX_INCLUSION_PAIRS` pairs to look at)."""
    seen = {(small.uid, big.uid): (small, big)}
    todo = [(small, big)]
    while todo:
        s, b = todo.pop()
        if s.nullable and not b.nullable:
            return None
        for lo, _ in class_runs(class_starts(s) | class_starts(b)):
            ds = derive(s, lo)
            if ds is EMPTY:
                continue
            db = derive(b, lo)
            if db is EMPTY:
                return None
            pair = (ds.uid, db.uid)
            if pair not in seen and not _includes(ds, db):
                if len(seen) >= MAX_INCLUSION_PAIRS:
                    return None
                seen[pair] = (ds, db)
                todo.append((ds, db))
    return seen


def _remember_inclusion(small: Node, big: Node, inside: bool) -> None:
    if small._incl is None:
        small._incl = {}
    small._incl[big.uid] = inside


def _includes(small: Node, big: Node) -> bool:
    """Whether ``small`` is known to be inside ``big`` (see :func:`_included`)."""
    found = small._incl
    return found is not None and found.get(big.uid) is True


def _minlen(node: Node) -> int | None:
    """The length of the shortest string of a plain node (None: not worked out)."""
    return _measure(node)[0]


def _completion_bound(node: Node) -> int | None:
    """A bound on the shortest completion after any live prefix (None: not worked out)."""
    return _measure(node)[1]


def _measure(node: Node) -> tuple[int | None, int | None]:
    found = node._meas
    if found is not None:
        return found
    k = node.kind
    out: tuple[int | None, int | None]
    if k == K_EPS:
        out = (0, 0)
    elif k == K_BYTES:
        out = (1, 1)
    elif k == K_CONCAT:  # along the right spine without recursion
        spine = []
        n = node
        while n.kind == K_CONCAT and n._meas is None:
            spine.append(n)
            n = n.b
        out = _measure(n)
        for c in reversed(spine):
            (ma, ra), (mb, rb) = _measure(c.a), out
            out = ((None, None) if None in (ma, ra, mb, rb)
                   else (ma + mb, max(ra + mb, rb)))  # type: ignore[operator, type-var]
            c._meas = out
    elif k == K_ALT:
        parts = [_measure(m) for m in node.items]
        out = ((None, None) if any(None in p for p in parts)
               else (min(p[0] for p in parts),  # type: ignore[type-var]  # (no None here)
                     max(p[1] for p in parts)))  # type: ignore[type-var]
    elif k == K_REPEAT:
        ma, ra = _measure(node.a)
        out = ((None, None) if None in (ma, ra)
               else (node.lo * ma,  # type: ignore[operator]  # (no None here)
                     max(node.lo * ma, ra + max(node.lo - 1, 0) * ma)))  # type: ignore[operator]
    else:  # empty, nonempty, intersections, complements, encodings
        out = (None, None)
    node._meas = out
    return out


def matches(node: Node, data: bytes) -> bool:
    """Whether ``node`` matches all of ``data`` (a reference check, not a hot path)."""
    for byte in data:
        node = derive(node, byte)
        if node is EMPTY:
            return False
    return node.nullable


def can_continue(node: Node) -> bool:
    """Whether some non-empty string extends a match of ``node`` (memoized per node)."""
    found = node._cont
    if found is None:
        found = _extends(node) if node.plain else None
        if found is None:
            found = any(derive(node, lo) is not EMPTY
                        for lo, _ in class_runs(class_starts(node)))
        node._cont = found
    return found


def _extends(node: Node) -> bool | None:
    """:func:`can_continue` of a plain node read off its structure (None: not decided).

    A plain node that is not ``EMPTY`` is live, so each part of a concatenation
    has a string, and the whole has a non-empty one when some part does;
    this spares computing every derivative of a lexer state just reached.
    """
    k = node.kind
    if k in (K_EMPTY, K_EPS):
        return False
    if k == K_BYTES:
        return True
    if k == K_CONCAT:
        while node.kind == K_CONCAT:  # along the spine: literals are long chains
            if can_continue(node.a):
                return True
            node = node.b
        return can_continue(node)
    if k == K_ALT:
        return any(can_continue(m) for m in node.items)
    if k in (K_REPEAT, K_NONEMPTY):
        return can_continue(node.a)
    if k == K_ENC:
        if node.hi != 0:
            return True  # inside a spelling: not nullable, and live
        if _codes[node.lo].total:
            return can_continue(node.a)  # every spelling is a non-empty word
    return None


FINITE_CAP = 256  # finite_strings reads languages of at most this many strings


def finite_strings(node: Node, limit: int = 64) -> tuple[bytes, ...] | None:
    """The strings ``node`` matches, sorted, when read off its structure they are at
    most ``limit`` (up to FINITE_CAP: an enum value, a key, a keyword), else None.

    Bytes, concatenations, alternations and encodings of such strings (each
    character spelled one way, but for one); a node built otherwise that still
    matches few strings is simply not recognized. Memoized per node.
    """
    found = node._fin
    if found is _UNKNOWN:
        strings = _finite_set(node, FINITE_CAP)
        found = node._fin = None if strings is None else tuple(sorted(strings))
    return found if found is None or len(found) <= limit else None


def _finite_set(node: Node, limit: int) -> set[bytes] | None:
    k = node.kind
    if k == K_EPS:
        return {b""}
    if k == K_BYTES:
        if node.bits.bit_count() > limit:
            return None
        return {bytes((b,)) for b in range(node.bits.bit_length()) if node.bits >> b & 1}
    if k == K_CONCAT:
        head = finite_strings(node.a, limit)
        tail = finite_strings(node.b, limit) if head is not None else None
        # (head is None only where tail is)
        if tail is None or len(head) * len(tail) > limit:  # type: ignore[arg-type]
            return None
        return {x + y for x in head for y in tail}  # type: ignore[union-attr]
    if k == K_ALT:
        out: set[bytes] = set()
        for member in node.items:
            more = finite_strings(member, limit)
            if more is None:
                return None
            out.update(more)
            if len(out) > limit:
                return None
        return out
    if k == K_ENC and node.hi == 0:  # not inside a spelling
        texts = finite_strings(node.a, limit)
        if texts is None:
            return None
        words = _codes[node.lo].words
        out = set()
        for text in texts:
            spellings = [words.get(c, ()) for c in text]
            if sum(len(w) != 1 for w in spellings) > 1 or not all(spellings):
                return None  # a few spellings for one character at most (or no spelling)
            out.update(b"".join(parts) for parts in itertools.product(*spellings))
            if len(out) > limit:
                return None
        return out
    return None




def forced_prefix(node: Node) -> bytes:
    """The bytes every match of ``node`` starts with, read off its structure (as
    :func:`finite_strings`; b"" where not recognized): a key's ``name"`` before its
    colon and whitespace, which a token scan follows along one path of the trie."""
    found = node._forced
    if found is None:
        parts, chain = [], []
        cur = node
        while cur.kind == K_CONCAT:  # iteratively: a long literal is a long chain
            head = finite_strings(cur.a, 1)
            if not head:
                parts.append(forced_prefix(cur.a))
                break
            parts.append(head[0])
            chain.append(cur)
            cur = cur.b
        else:
            whole = finite_strings(cur, 1)
            if whole:
                parts.append(whole[0])
        found = node._forced = b"".join(parts)
        if len(chain) <= FORCED_CHAIN_MEMO:  # a key's derivatives are its suffixes: met next
            for i in range(1, len(chain)):
                chain[i]._forced = b"".join(parts[i:])
    return found

FORCED_CHAIN_MEMO = 256  # chains up to this long keep every suffix's answer (quadratic bytes)


def first_bytes(node: Node) -> int:
    """Bitmask of the bytes that can start a non-empty match (memoized: every grammar
    asks it of the lexemes that may follow each of its own).

    Read off the structure of a plain node's byte sets, concatenations,
    alternations and repeats: each part matches something (invariant 1,
    docs/masks.md), so a concatenation's first bytes are its head's, and its
    tail's too when the head may be empty. The rest (intersections,
    complements, spellings, excepted words) take one derivative per byte class.
    The structural read makes no node: a new key's lexeme cost a derivative
    node per byte class here, and every new grammar asks this of each lexeme
    that may follow one of its own.
    """
    bits = node._first
    if bits is None:
        k = node.kind
        if not node.plain:
            bits = _first_by_derivatives(node)
        elif k == K_BYTES:
            bits = node.bits
        elif k == K_CONCAT:
            bits, part = 0, node
            while part.kind == K_CONCAT:  # (a key's chain nests to the right: no recursion)
                bits |= first_bytes(part.a)
                if not part.a.nullable:
                    break
                part = part.b
            else:
                bits |= first_bytes(part)
        elif k == K_ALT:
            bits = 0
            for member in node.items:
                bits |= first_bytes(member)
        elif k == K_REPEAT or k == K_NONEMPTY:
            bits = first_bytes(node.a)
        else:
            bits = _first_by_derivatives(node)
        node._first = bits
    return bits


def _first_by_derivatives(node: Node) -> int:
    """:func:`first_bytes` by one derivative per byte class (any node)."""
    bits = 0
    for lo, hi in class_runs(class_starts(node)):
        if derive(node, lo) is not EMPTY:
            bits |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
    return bits


def _bytes_pattern(bits: int) -> str:
    if bits == FULL_BITS:
        return "\\C"
    runs = [(lo, hi) for lo, hi in class_runs(((bits ^ (bits << 1)) & FULL_BITS) | 1)
            if (bits >> lo) & 1]
    if len(runs) == 1 and runs[0][0] == runs[0][1]:
        return _byte_repr(runs[0][0])
    inner = "".join(_byte_repr(lo) if lo == hi else f"{_byte_repr(lo)}-{_byte_repr(hi)}"
                    for lo, hi in runs)
    return f"[{inner}]"


def _bytes_text(data: bytes) -> str:
    return "".join(_byte_repr(b) for b in data) if data else "ε"


def _byte_repr(b: int) -> str:
    ch = chr(b)
    if 0x20 < b < 0x7F and ch not in "\\[]()|*+?{}.^$-":
        return ch
    return f"\\x{b:02x}"


def to_pattern(node: Node, limit: int | None = None) -> str:
    """A readable regex-like rendering, for error messages and debugging; cut after
    ``limit`` characters (with "…") when one is given. A node is a DAG, and its rendering
    a tree: exponentially longer where parts are shared, so an error message gives a
    limit and the rendering stops there, without building the rest."""
    if limit is None:
        return "".join(_pattern_pieces(node))
    pieces: list[str] = []
    length = 0
    for piece in _pattern_pieces(node):
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            return "".join(pieces)[:limit] + "…"
    return "".join(pieces)


def _pattern_pieces(node: Node) -> Iterator[str]:
    """The rendering of :func:`to_pattern`, piece by piece, left to right."""
    k = node.kind
    if k == K_EMPTY:
        yield "∅"
    elif k == K_EPS:
        yield "ε"
    elif k == K_BYTES:
        yield _bytes_pattern(node.bits)
    elif k == K_CONCAT:
        while True:
            part = node.a if node.kind == K_CONCAT else node
            if part.kind == K_ALT:
                yield "("
                yield from _pattern_pieces(part)
                yield ")"
            else:
                yield from _pattern_pieces(part)
            if node.kind != K_CONCAT:
                break
            node = node.b
    elif k == K_EXCEPT:
        yield "except("
        yield from _pattern_pieces(node.a)
        yield "; " + "|".join(_bytes_text(w) for w in node.words) + ")"
    elif k in (K_ALT, K_AND):
        for i, m in enumerate(node.items):
            if i:
                yield "|" if k == K_ALT else "&"
            if k == K_AND:
                yield "("
            yield from _pattern_pieces(m)
            if k == K_AND:
                yield ")"
    else:
        wrap = node.a.kind in (K_CONCAT, K_ALT)
        name = {K_NONEMPTY: "nonempty", K_NOT: "not"}.get(k)
        if k == K_ENC:
            name = _codes[node.lo].name
        if name is not None:
            yield name + "("
        if wrap:
            yield "("
        yield from _pattern_pieces(node.a)
        if wrap:
            yield ")"
        if name is not None:
            yield ")"
        else:
            yield f"{{{node.lo},{'' if node.hi is None else node.hi}}}"


# --------------------------------------------------------------------------- encodings


class Code:
    """A prefix code spelling each source byte as one or more byte strings.

    ``encoded(inner, code)`` matches the spellings of the strings ``inner``
    matches; JSON string escapes are such a code (``"`` is spelled ``\\"`` or
    ``\\u0022``, a letter as itself). The code is kept as a trie, and an
    encoded node walks it lazily, so constraints stay plain regexes over the
    decoded text and the encoding is applied exactly, escapes included.
    """

    def __init__(self, spellings: dict[int, list[bytes]], name: str = "encoded"):
        self.name = name
        self.words = {source: tuple(words) for source, words in spellings.items()}
        # trie node 0 is the root; children[n][byte] -> node; done[n] = sources spelled by n
        self.children: list[dict[int, int]] = [{}]
        self.done: list[tuple[int, ...]] = [()]
        for source, words in spellings.items():
            for word in words:
                n = 0
                for b in word:
                    nxt = self.children[n].get(b)
                    if nxt is None:
                        nxt = len(self.children)
                        self.children.append({})
                        self.done.append(())
                        self.children[n][b] = nxt
                    n = nxt
                self.done[n] = tuple(sorted(set(self.done[n]) | {source}))
        # below[n]: every source spelled by a word through n
        self.below: list[frozenset[int]] = [frozenset()] * len(self.children)
        for n in reversed(range(len(self.children))):
            acc = set(self.done[n])
            for c in self.children[n].values():
                acc |= self.below[c]
            self.below[n] = frozenset(acc)
        #: every byte has a spelling, so an encoding matches something iff its inner node does
        self.total = len(self.below[0]) == 256
        # Bytes spelled as themselves and nothing else behave like the inner node's classes.
        identity = 0
        for b, c in self.children[0].items():
            if self.done[c] == (b,) and not self.children[c]:
                identity |= 1 << b
        self.identity = identity
        #: the bytes whose one spelling is themselves (a text of only these spells as itself)
        self.plain = bytes(b for b, w in self.words.items() if w == (bytes((b,)),))
        self.root_cuts = ((identity ^ (identity << 1)) & FULL_BITS) | 1
        for b in range(256):
            if not (identity >> b) & 1:
                self.root_cuts |= 1 << b
                if b < 255:
                    self.root_cuts |= 1 << (b + 1)
        self.cuts = [1] * len(self.children)
        for n, kids in enumerate(self.children):
            for b in kids:
                self.cuts[n] |= 1 << b
                if b < 255:
                    self.cuts[n] |= 1 << (b + 1)
        with _lock:
            self.uid = len(_codes)
            _codes.append(self)


_codes: list[Code] = []


def encoded(inner: Node, code: Code, at: int = 0) -> Node:
    """The spellings under ``code`` of the strings ``inner`` matches (``at``: trie node)."""
    if inner is EMPTY:
        return EMPTY
    if at == 0 and inner is EPS:
        return EPS
    return _make(("enc", inner.uid, code.uid, at), K_ENC, at == 0 and inner.nullable,
                 a=inner, lo=code.uid, hi=at)


def _derive_encoded(node: Node, byte: int,
                    step: Callable[[Node, int], Node] | None = None) -> Node:
    """``step`` is the inner derivative: :func:`derive`, or the raw one in liveness search."""
    step = step or derive
    code = _codes[node.lo]
    inner = node.a
    nxt = code.children[node.hi].get(byte)  # type: ignore[index]  # (K_ENC: hi is an int)
    if nxt is None:
        return EMPTY
    out = [encoded(step(inner, s), code) for s in code.done[nxt]]
    if code.children[nxt] and any(step(inner, s) is not EMPTY for s in code.below[nxt]):
        out.append(encoded(inner, code, nxt))
    return alt_of(out)
