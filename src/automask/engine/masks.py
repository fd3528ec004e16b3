"""Token masks for configurations, with the caches that make them cheap.

mask(config) = OR over its threads of inside(lexer state)       (cached per lexer state)
             | tokens that cross a lexeme boundary and survive   (decided by the parser)
             | EOS, when the configuration accepts.

Crossing tokens are grouped by the lexer state in which a lexeme may first
end inside them; the configuration after that point is one memoized parser
step (:meth:`Runtime.after_thread`), and the group's suffixes are decided by
the same computation, recursively, on the (much smaller) child token set.
Threads are treated one at a time: the mask is a union over paths, and a
path starts in exactly one thread. Whole masks are cached per
configuration, so revisited configurations cost a dictionary lookup.
All caches are bounded (oldest entries dropped first).
"""

from __future__ import annotations

import threading

import numpy as np

from automask.engine.state import Config, Runtime
from automask.engine.tokens import RootTokens, TokenSet, pack_bool, scan


class BoundedCache(dict):
    """A dict that forgets its oldest entries past ``limit`` (a cheap, bounded cache)."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def put(self, key, value):
        if len(self) >= self.limit:
            for old in list(self.keys())[: max(1, self.limit // 4)]:
                self.pop(old, None)
        self[key] = value
        return value


class Mask:
    """A cached mask, kept small: shared dense parts ORed with a sparse tail.

    ``dense`` are the per-lexer-state inside masks (shared between all the
    configurations that use that lexer state); ``word_idx``/``word_val`` hold
    the crossing tokens and EOS as (word, bits) pairs. Writing one into a
    bitmask row is a copy, an OR per extra thread, and one fancy-indexed OR.
    """

    __slots__ = ("config", "dense", "word_idx", "word_val", "empty")

    def __init__(self, config: Config, dense: list[np.ndarray], ids: np.ndarray):
        self.config = config
        self.dense = dense
        words = ids >> 5
        order = np.argsort(words, kind="stable")
        words, bits = words[order], np.left_shift(np.uint32(1), (ids[order] & 31)
                                                  .astype(np.uint32))
        starts = np.flatnonzero(np.r_[True, words[1:] != words[:-1]]) if len(words) else words
        self.word_idx = words[starts] if len(words) else words.astype(np.int64)
        self.word_val = np.bitwise_or.reduceat(bits, starts) if len(words) else bits
        self.empty = not dense and not len(ids)

    def write(self, out: np.ndarray) -> None:
        """Write the mask into ``out`` (uint32 words)."""
        if not self.dense:
            out[:] = 0
        else:
            np.copyto(out, self.dense[0])
            for extra in self.dense[1:]:
                np.bitwise_or(out, extra, out=out)
        if len(self.word_idx):
            out[self.word_idx] |= self.word_val


class MaskComputer:
    """Computes and caches token masks for configurations."""

    def __init__(self, runtime: Runtime, root: RootTokens, eos_ids: tuple[int, ...],
                 mask_cache_size: int = 20_000, scan_cache_size: int = 50_000,
                 dense_cache_size: int = 1024):
        self.runtime = runtime
        self.root = root
        self.nwords = (root.size + 31) // 32
        self.eos_ids = np.array(sorted(i for i in set(eos_ids) if 0 <= i < root.size),
                                dtype=np.int64)
        self.eos_words = pack_bool(_bool_of(eos_ids, root.size))
        self.eos_words.setflags(write=False)
        self._root_scans: BoundedCache = BoundedCache(dense_cache_size)
        self._scans: BoundedCache = BoundedCache(scan_cache_size)
        self._masks: BoundedCache = BoundedCache(mask_cache_size)
        self._sub: BoundedCache = BoundedCache(scan_cache_size)
        self._lock = threading.RLock()

    def root_scan(self, ls: int) -> tuple[np.ndarray | None, list[tuple[int, TokenSet]]]:
        """The packed inside mask (None when empty) and crossing groups of lexer state ``ls``."""
        found = self._root_scans.get(ls)
        if found is None:
            with self._lock:
                found = self._root_scans.get(ls)
                if found is None:
                    inside, crossing = scan(self.root, self.runtime.lexer, ls)
                    packed = self.root.pack_rows(inside) if inside.any() else None
                    if packed is not None:
                        packed.setflags(write=False)
                    found = self._root_scans.put(ls, (packed, crossing))
        return found

    def sub_scan(self, tokens: TokenSet, ls: int) -> tuple[np.ndarray, list]:
        key = (tokens.uid, ls)
        found = self._scans.get(key)
        if found is None:
            with self._lock:
                found = self._scans.put(key, scan(tokens, self.runtime.lexer, ls))
        return found

    def mask(self, config: Config) -> Mask:
        """The mask of ``config`` (cached)."""
        found = self._masks.get(config.uid)
        if found is not None and found.config is config:
            return found
        dense: list[np.ndarray] = []
        crossing_rows: list[np.ndarray] = []
        for origin, ls in config.threads:
            packed, crossing = self.root_scan(ls)
            if packed is not None and not any(packed is d for d in dense):
                dense.append(packed)
            for state, child in crossing:
                allowed = self._decide(origin, state, child)
                if allowed is not None:
                    crossing_rows.append(child.root_rows[allowed])
        ids = (self.root.ids_for_rows(np.unique(np.concatenate(crossing_rows)))
               if crossing_rows else np.zeros(0, dtype=np.int64))
        if config.accepting and len(self.eos_ids):
            ids = np.concatenate([ids, self.eos_ids])
        return self._masks.put(config.uid, Mask(config, dense, ids))

    def _decide(self, origin, state: int, child: TokenSet) -> np.ndarray | None:
        """Which suffixes of a crossing group survive, after the lexeme end in ``state``."""
        after = self.runtime.after_thread(origin, state)
        if after is self.runtime.dead:
            return None
        allowed = self.allowed(after, child)
        return allowed if allowed.any() else None

    def allowed(self, config: Config, tokens: TokenSet) -> np.ndarray:
        """Which rows of a child token set ``config`` accepts (bool array)."""
        key = (config.uid, tokens.uid)
        found = self._sub.get(key)
        if found is not None and found[0] is config:
            return found[1]
        result = np.zeros(tokens.n, dtype=bool)
        for origin, ls in config.threads:
            inside, crossing = self.sub_scan(tokens, ls)
            result |= inside
            for state, child in crossing:
                allowed = self._decide(origin, state, child)
                if allowed is not None:
                    result[child.parent_rows[allowed]] = True
        self._sub.put(key, (config, result))
        return result


def _bool_of(ids, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    for i in ids:
        if 0 <= i < size:
            out[i] = True
    return out
