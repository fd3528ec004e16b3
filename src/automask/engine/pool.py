"""Matchers in worker processes, so that one batch's masks are filled on several cores.

A mask is mostly Python work under the GIL, so threads take turns at it;
llguidance and xgrammar fill a batch on a thread pool in native code. A
:class:`MatcherPool` spreads its sequences over worker processes instead.
Every worker compiles every sequence's grammar itself (a grammar's regex
nodes are interned per process, so a compiled grammar does not cross a pipe:
the pool sends the recipe, a picklable function and its arguments), and
writes mask rows into a bitmask all of them map. A batch step is one message
each way per worker, sent to all before any reply is read, so the workers run
at the same time.

Each sequence has an owner, the worker that commits its tokens as they come
and fills its row; the other workers keep a copy that queues the tokens. A
step's cost is uneven (a cold mask takes milliseconds, a cached one
microseconds), so a worker done with its own rows takes the rows another has
not started, from the back of that worker's part (under one lock): its copy
takes the queued tokens, then fills the row. Each part puts its youngest
sequences last, whose copies lag least and whose masks are the cold ones; a
copy more than :data:`MAX_LAG` tokens behind is left to its owner. A step lasts about half the work
on two cores, instead of the slower owner's share.

What the pool costs: each worker holds its own compiler (the vocabulary's
token index, its own caches) and a copy of every sequence, and starts by
importing automask and building that index (about a second), once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from itertools import count
from typing import Any

import numpy as np

from automask.bitmask import row_index
from automask.engine.batch import batch_rows
from automask.engine.compiled import Compiler, Limits
from automask.engine.matcher import Matcher
from automask.gc_pause import freeze_startup
from automask.grammar.ir import Grammar
from automask.vocab import Vocabulary

# A worker's request: (operation, argument); its reply: ("ok", value) or ("error", exc).
Message = tuple[str, Any]


class PoolClosed(RuntimeError):
    """The pool was closed, or one of its worker processes ended."""


class MatcherPool:
    """Sequences under grammars, each owned by one of ``workers`` processes.

    ``add`` compiles a grammar in every worker, computes its first mask in the
    least loaded one, its owner (so a grammar's errors and its cold first mask
    belong to ``add``, as in an engine that compiles a request before it joins
    the batch), and returns a handle. ``accept`` advances many handles by one
    token each and ``fill`` writes their masks into rows of a bitmask, each in
    one round over the workers (a fill's rows shared out as the module
    docstring says). ``max_batch`` bounds the handles in one ``fill``.

    ``warm_up``: the JSON layout (``"flexible"``, ...) to warm each worker's
    compiler for at start (see :func:`automask.warm_up`), or ``None``.
    ``start_method``: multiprocessing's, ``"spawn"`` by default (safe beside
    threads; as with any spawned process, a script that makes a pool needs
    its ``if __name__ == "__main__":`` guard).

    Calls are serialised by a lock: the pool may be shared by threads, and
    each call waits for its round to end.
    """

    def __init__(self, vocab: Vocabulary, *, workers: int = 2, max_batch: int = 256,
                 warm_up: str | int | None = None, limits: Limits | None = None,
                 start_method: str = "spawn"):
        if workers < 1 or max_batch < 1:
            raise ValueError(f"a pool needs workers >= 1 and max_batch >= 1, not {workers} "
                             f"and {max_batch}")
        self.vocab_size = vocab.size
        self.max_batch = max_batch
        self._limits = limits
        self._lock = threading.Lock()
        self._handles = count()
        self._owner: dict[int, int] = {}  # handle -> worker
        self._age: dict[int, int] = {}  # handle -> tokens sent since add
        self._load = [0] * workers  # live handles per worker
        shape = (max_batch, (vocab.size + 31) // 32)
        # Rows the workers write and this process copies out: a file in memory where
        # there is one (/dev/shm), unlinked once every worker has mapped it.
        fd, path = tempfile.mkstemp(prefix="automask-pool-", suffix=".bitmask",
                                    dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        try:
            os.ftruncate(fd, shape[0] * shape[1] * 4)
            os.close(fd)
            # a plain ndarray over the mapping (the memmap is kept alive as its base)
            self._rows = np.memmap(path, dtype=np.int32, mode="r+", shape=shape).view(np.ndarray)
            # the tokens and ids alone: a tokenizer's encoder need not be picklable
            portable = Vocabulary(vocab.tokens, special_ids=vocab.special_ids,
                                  eos_token_ids=vocab.eos_token_ids, size=vocab.size,
                                  name=vocab.name)
            ctx: Any = mp.get_context(start_method)
            # per worker, the [next, last] positions of its part of a fill's rows: each
            # worker takes its own from the front, then others' from the back
            # (raw: the workers take them under one lock; this process sets them while
            # no fill runs)
            self._bounds, self._claims = ctx.RawArray("i", 2 * workers), ctx.Lock()
            for i in range(workers):
                ours, theirs = ctx.Pipe()
                proc = ctx.Process(target=_work, args=(theirs, portable, path, shape, warm_up,
                                                       self._bounds, self._claims, i),
                                   name=f"automask-pool-{i}", daemon=True)
                proc.start()
                theirs.close()
                self._conns.append(ours)
                self._procs.append(proc)
            self._round({i: ("ready", None) for i in range(workers)})
        except BaseException:
            _stop(self._conns, self._procs)
            raise
        finally:
            os.unlink(path)
        self._finalizer = weakref.finalize(self, _stop, self._conns, self._procs)

    @property
    def workers(self) -> int:
        return len(self._procs)

    def __len__(self) -> int:
        return len(self._owner)

    def add(self, build: Callable[..., Grammar], /, *args: Any, **kwargs: Any) -> int:
        """A new sequence under ``build(*args, **kwargs)`` (a Grammar constructor such as
        ``Grammar.from_json_schema`` with its arguments, all picklable); its handle.

        Raises what compiling it or its first mask raises (``GrammarError``,
        ``LimitExceeded``, ...), with nothing added."""
        try:
            pickle.dumps((build, args, kwargs))
        except Exception as e:  # a lambda, a local function, an open file...
            raise TypeError(f"a pool's grammar recipe crosses to a worker process, so it "
                            f"must be picklable: {e}") from e
        with self._lock:
            worker = self._load.index(min(self._load))
            handle = next(self._handles)
            # every worker compiles it (any may fill its row); the owner makes the first mask
            try:
                self._round({w: ("add", (handle, w == worker, build, args, kwargs,
                                         self._limits)) for w in range(self.workers)})
            except Exception:
                self._round({w: ("remove", [handle]) for w in range(self.workers)})
                raise
            self._owner[handle] = worker
            self._age[handle] = 0
            self._load[worker] += 1
            return handle

    def remove(self, handles: Sequence[int]) -> None:
        """Forget these sequences (unknown handles are ignored)."""
        with self._lock:
            gone: dict[int, list[int]] = {}
            for h in handles:
                worker = self._owner.pop(h, None)
                self._age.pop(h, None)
                if worker is not None:
                    gone.setdefault(worker, []).append(h)
                    self._load[worker] -= 1
            everyone = [h for hs in gone.values() for h in hs]
            if everyone:
                self._round({w: ("remove", everyone) for w in range(self.workers)})

    def accept(self, steps: Sequence[tuple[int, int]]) -> list[bool]:
        """Advance each ``(handle, token_id)``: whether the token was accepted (a refused
        token leaves its sequence as it was). Every step runs; an error one of them
        raised is raised after the others have advanced."""
        for _, token in steps:
            row_index(token, self.vocab_size)  # refused here, before any sequence moves
        with self._lock:
            parts = self._split([h for h, _ in steps])
            for h, _ in steps:
                self._age[h] += 1
            # each worker applies its own sequences' steps and queues the others' (a
            # copy catches up when it fills that row)
            replies = self._round({w: ("accept", ([steps[i] for i in parts.get(w, ())],
                                                  [steps[i] for v, idx in parts.items()
                                                   if v != w for i in idx]))
                                   for w in range(self.workers)})
            out = [False] * len(steps)
            for w, idx in parts.items():
                for i, ok in zip(idx, replies[w], strict=True):
                    out[i] = ok
            return out

    def fill(self, bitmask: Any, handles: Sequence[int | None],
             rows: Sequence[int] | None = None) -> None:
        """Row ``rows[i]`` of ``bitmask`` from sequence ``handles[i]`` (rows ``0..n-1`` by
        default; ``None`` handles leave their rows as they are), like
        :func:`automask.fill_bitmasks`. Raises after every other row is written if
        one of them raises (``NoLegalContinuation``)."""
        words, targets = batch_rows(bitmask, len(handles), rows, "handles")
        if len(handles) > self.max_batch:
            raise ValueError(f"{len(handles)} rows are more than this pool's max_batch "
                             f"({self.max_batch})")
        # Rows of allocate_bitmask's array are written where they are; any other bitmask
        # gets the rows the workers wrote at each handle's position in the call.
        shared = self._rows
        direct = (words is shared or words.base is shared) and words.strides == shared.strides \
            and words.ctypes.data == shared.ctypes.data and words.shape[1] == shared.shape[1]
        if not direct and np.may_share_memory(words, self._rows):
            raise ValueError("a view of a pool's bitmask is filled as allocate_bitmask "
                             "returned it")
        pairs = [(r if direct else i, h, row_index(r, words.shape[0]))
                 for i, (h, r) in enumerate(zip(handles, targets, strict=True)) if h is not None]
        with self._lock:
            parts = self._split([h for _, h, _ in pairs])
            # the rows in one list, each worker's part in one run (bounds say where), its
            # youngest sequences last: the ones others take first, whose copies lag least
            # and whose masks are the cold ones
            order: list[tuple[int, int]] = []
            bounds, age = self._bounds, self._age
            for w in range(self.workers):
                idx = sorted(parts.get(w, []), key=lambda i: -age[pairs[i][1]])
                bounds[2 * w], bounds[2 * w + 1] = len(order), len(order) + len(idx) - 1
                order += [(pairs[i][1], pairs[i][0]) for i in idx]
            if order:
                message = ("fill", order)
                self._round({w: message for w in range(self.workers)})
            if pairs and not direct:
                self._copy_out(words, pairs)

    def allocate_bitmask(self, batch: int) -> np.ndarray:
        """A bitmask of ``batch`` rows that the workers fill in place (no copy): an
        int32 ``(batch, ceil(V/32))`` view of the memory they write, valid while the pool
        is open."""
        if not 1 <= batch <= self.max_batch:
            raise ValueError(f"a pool's bitmask has 1 to max_batch ({self.max_batch}) rows, "
                             f"not {batch}")
        return self._rows[:batch]

    def _copy_out(self, words: np.ndarray, pairs: list[tuple[int, int, int]]) -> None:
        """The rows the workers wrote (at each handle's position) into ``words``."""
        nwords = min(words.shape[1], self._rows.shape[1])
        n = len(pairs)
        first = pairs[0][2]
        if pairs[-1][0] == n - 1 and all(r == first + k for k, (_, _, r) in enumerate(pairs)):
            np.copyto(words[first:first + n, :nwords], self._rows[:n, :nwords])
            words[first:first + n, nwords:] = 0
            return
        at = np.fromiter((i for i, _, _ in pairs), dtype=np.intp, count=n)
        to = np.fromiter((r for _, _, r in pairs), dtype=np.intp, count=n)
        words[to, :nwords] = self._rows[at, :nwords]
        words[to, nwords:] = 0

    def close(self) -> None:
        """Stop the workers (their sequences are gone); later calls raise :class:`PoolClosed`."""
        self._finalizer()

    def __enter__(self) -> MatcherPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _split(self, handles: Sequence[int]) -> dict[int, list[int]]:
        """Positions in ``handles`` by the worker that owns each (KeyError: not this
        pool's)."""
        parts: dict[int, list[int]] = {}
        for i, h in enumerate(handles):
            worker = self._owner.get(h)
            if worker is None:
                raise KeyError(f"no sequence {h!r} in this pool")
            parts.setdefault(worker, []).append(i)
        return parts

    def _round(self, messages: dict[int, Message]) -> dict[int, Any]:
        """Send each worker its message, then read every reply; raise the first error."""
        if not self._finalizer_alive():
            raise PoolClosed("this MatcherPool is closed")
        try:
            pickled: dict[int, bytes] = {}  # a message sent to every worker is pickled once
            for w, msg in messages.items():
                data = pickled.get(id(msg))
                if data is None:
                    data = pickled[id(msg)] = pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
                self._conns[w].send_bytes(data)
            replies = {w: self._conns[w].recv() for w in messages}
        except (EOFError, OSError) as e:
            self.close()
            raise PoolClosed(f"a MatcherPool worker ended ({e or type(e).__name__}); the "
                             "pool is closed") from e
        for status, value in replies.values():
            if status == "error":
                raise value
        return {w: value for w, (_, value) in replies.items()}

    def _finalizer_alive(self) -> bool:
        finalizer = getattr(self, "_finalizer", None)
        return finalizer is None or finalizer.alive


def _stop(conns: list[Any], procs: list[Any]) -> None:
    for conn in conns:
        try:
            conn.send(("close", None))
        except OSError:
            pass
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
    for conn in conns:
        conn.close()


def _work(conn: Any, vocab: Vocabulary, path: str, shape: tuple[int, int],
          warm_up: str | int | None, bounds: Any, claims: Any, me: int) -> None:
    """A worker's loop: one reply to every message, until "close" or the pipe ends."""
    worker = _Worker(vocab, path, shape, warm_up, bounds, claims, me)
    while True:
        try:
            op, arg = conn.recv()
        except (EOFError, OSError):
            return
        except Exception as e:  # a message that does not unpickle here: the call's error
            conn.send(("error", _portable(e)))
            continue
        if op == "close":
            return
        try:
            conn.send(("ok", getattr(worker, op)(arg)))
        except Exception as e:  # reaches the caller, typed, as the call's error
            conn.send(("error", _portable(e)))


#: the most tokens a copy may have queued for its row to be taken from its owner: a
#: stolen row's copy takes them first, ~30 us each, where the owner's is up to date
MAX_LAG = 16


class _Worker:
    """A worker's state: a copy of every sequence (its own ones up to date, the others
    with the tokens they have still to take), the rows it writes."""

    def __init__(self, vocab: Vocabulary, path: str, shape: tuple[int, int],
                 warm_up: str | int | None, bounds: Any, claims: Any, me: int):
        self.compiler = Compiler(vocab)
        if warm_up is not None:
            from automask.engine.warm_up import warm_up as warm

            warm(self.compiler, whitespace=warm_up)
        self.rows = np.memmap(path, dtype=np.int32, mode="r+", shape=shape)
        # what it built so far is kept for its life: out of every later full collection
        # (one in the middle of a fill had taken 15-17 ms; 7-8 ms with this)
        freeze_startup()
        self.matchers: dict[int, Matcher] = {}
        self.behind: dict[int, list[int]] = {}  # handle -> tokens its copy has not taken
        self.bounds, self.claims, self.me = bounds, claims, me
        self.workers = len(bounds) // 2

    def ready(self, arg: None) -> None:
        return None

    def add(self, arg: tuple) -> None:
        handle, owner, build, args, kwargs, limits = arg
        grammar = build(*args, **kwargs)
        if not isinstance(grammar, Grammar):
            raise TypeError(f"a pool's grammar recipe returns a Grammar, not "
                            f"{type(grammar).__name__}")
        matcher = Matcher(self.compiler.compile(grammar, limits=limits))
        if owner:
            matcher.mask_words()  # the first mask, made here: it belongs to compiling
        self.matchers[handle] = matcher
        self.behind[handle] = []

    def remove(self, arg: list[int]) -> None:
        for h in arg:
            self.matchers.pop(h, None)
            self.behind.pop(h, None)

    def accept(self, arg: tuple[list[tuple[int, int]], list[tuple[int, int]]]) -> list[bool]:
        mine, others = arg
        for h, token in others:
            self.behind[h].append(token)
        out, error = [], None
        for h, token in mine:
            try:
                out.append(self._current(h).accept_token(token))
            except Exception as e:
                out.append(False)
                error = error or e
        if error is not None:
            raise error
        return out

    def fill(self, order: list[tuple[int, int]]) -> None:
        """Fill rows of ``order`` until none is left to take: this worker's part first,
        from its front, then the others' from their back (work sharing, under a lock)."""
        error = None
        while (i := self._take(order)) is not None:
            h, at = order[i]
            try:
                self._current(h).write_row(self.rows[at])
            except Exception as e:
                error = error or e
        if error is not None:
            raise error

    def _take(self, order: list[tuple[int, int]]) -> int | None:
        """The next position of ``order`` this worker fills: its own part's front, else
        the back of the part with most left, unless this worker's copy of that row's
        sequence is more than :data:`MAX_LAG` tokens behind (replaying them would cost
        more than the owner's doing it: that part's owner goes on with it)."""
        b, me = self.bounds, self.me
        with self.claims:
            if b[2 * me] <= b[2 * me + 1]:
                b[2 * me] += 1
                return int(b[2 * me]) - 1
            best, most = -1, -1
            for w in range(self.workers):
                left = b[2 * w + 1] - b[2 * w]
                if left > most and len(self.behind[order[b[2 * w + 1]][0]]) <= MAX_LAG:
                    best, most = w, left
            if best < 0:
                return None
            b[2 * best + 1] -= 1
            return int(b[2 * best + 1]) + 1

    def _current(self, handle: int) -> Matcher:
        """The sequence's copy, after the tokens it has still to take (a refused one is
        refused here too: the copies are the same automaton)."""
        matcher, behind = self.matchers[handle], self.behind[handle]
        if behind:
            for token in behind:
                matcher.accept_token(token)
            behind.clear()
        return matcher


def _portable(e: Exception) -> Exception:
    """``e`` if it survives pickling as itself, else a RuntimeError that says what it was."""
    try:
        back = pickle.loads(pickle.dumps(e))
        if type(back) is type(e):
            return e
    except Exception:
        pass
    return RuntimeError(f"{type(e).__name__}: {e}")
