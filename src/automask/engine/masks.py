"""Token masks for configurations, with the caches that make them cheap.

mask(config) = OR over its threads of inside(lexer state)       (cached per lexer state)
             | tokens that cross a lexeme boundary and survive   (decided by the parser)
             | EOS, when the configuration accepts.

Crossing tokens are grouped by the prefix ``p`` after which a lexeme may
end; the configuration after ``p`` is one memoized :meth:`Runtime.advance`,
and the group's suffixes are decided by the same computation, recursively,
on the (much smaller) child token set. Whole masks are cached per
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


class MaskComputer:
    """Computes and caches packed uint32 token masks for configurations."""

    def __init__(self, runtime: Runtime, root: RootTokens, eos_ids: tuple[int, ...],
                 mask_cache_size: int = 4096, scan_cache_size: int = 50_000):
        self.runtime = runtime
        self.root = root
        self.nwords = (root.size + 31) // 32
        self.eos_words = pack_bool(_bool_of(eos_ids, root.size))
        self._root_scans: BoundedCache = BoundedCache(max(256, mask_cache_size // 4))
        self._scans: BoundedCache = BoundedCache(scan_cache_size)
        self._masks: BoundedCache = BoundedCache(mask_cache_size)
        self._sub: BoundedCache = BoundedCache(scan_cache_size)
        self._lock = threading.RLock()

    def root_scan(self, ls: int) -> tuple[np.ndarray, list[tuple[bytes, TokenSet]]]:
        found = self._root_scans.get(ls)
        if found is None:
            with self._lock:
                found = self._root_scans.get(ls)
                if found is None:
                    inside, crossing = scan(self.root, self.runtime.lexer, ls)
                    found = self._root_scans.put(ls, (self.root.pack_rows(inside), crossing))
        return found

    def sub_scan(self, tokens: TokenSet, ls: int) -> tuple[np.ndarray, list]:
        key = (tokens.uid, ls)
        found = self._scans.get(key)
        if found is None:
            with self._lock:
                found = self._scans.put(key, scan(tokens, self.runtime.lexer, ls))
        return found

    def mask(self, config: Config) -> np.ndarray:
        """The packed mask (uint32 words, read-only) of ``config``."""
        found = self._masks.get(config.uid)
        if found is not None and found[0] is config:
            return found[1]
        words = np.zeros(self.nwords, dtype=np.uint32)
        crossing_rows: list[np.ndarray] = []
        seen: set[int] = set()
        for _, ls in config.threads:
            packed, crossing = self.root_scan(ls)
            words |= packed
            self._crossing(config, crossing, seen, crossing_rows, None)
        if crossing_rows:
            rows = np.unique(np.concatenate(crossing_rows))
            ids = self.root.ids_for_rows(rows)
            np.bitwise_or.at(words, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
        if config.accepting:
            words |= self.eos_words
        words.setflags(write=False)
        self._masks.put(config.uid, (config, words))
        return words

    def _crossing(self, config: Config, crossing, seen: set[int], out_rows: list,
                  out_bool: np.ndarray | None) -> None:
        """Resolve crossing groups of ``config``: root rows into ``out_rows`` or local bools."""
        runtime = self.runtime
        dead = runtime.dead
        for prefix, child in crossing:
            if child.uid in seen:
                continue
            seen.add(child.uid)
            after = runtime.advance(config, prefix)
            if after is dead:
                continue
            allowed = self.allowed(after, child)
            if out_bool is None:
                if allowed.any():
                    out_rows.append(child.root_rows[allowed])
            else:
                out_bool[child.parent_rows[allowed]] = True

    def allowed(self, config: Config, tokens: TokenSet) -> np.ndarray:
        """Which rows of a child token set ``config`` accepts (bool array)."""
        key = (config.uid, tokens.uid)
        found = self._sub.get(key)
        if found is not None and found[0] is config:
            return found[1]
        result = np.zeros(tokens.n, dtype=bool)
        seen: set[int] = set()
        for _, ls in config.threads:
            inside, crossing = self.sub_scan(tokens, ls)
            result |= inside
            self._crossing(config, crossing, seen, [], result)
        self._sub.put(key, (config, result))
        return result


def _bool_of(ids, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    for i in ids:
        if 0 <= i < size:
            out[i] = True
    return out
