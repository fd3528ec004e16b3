"""``BoundedCache`` under threads: the scans every grammar of a compiler shares live in
one, and grammars are compiled and masked from several threads (SGLang compiles in a
thread pool; a server's handlers; ``fill_bitmasks``). Each thread's puts evict the
oldest entries while the others insert and read; nothing may raise (an eviction
iterating the dict while another thread grew it raised ``RuntimeError``, a second
eviction of the same key ``KeyError``), and the bound and the cost count hold."""

from __future__ import annotations

import random

from support.threads import run_in_threads

from automask.engine.masks import BoundedCache


def test_threads_share_one_bounded_cache() -> None:
    cache = BoundedCache(4_000)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for i in range(20_000):
            key = (seed, i % 500)
            if rng.random() < 0.3:
                cache.recent(key)
            else:
                cache.put(key, i, rng.randrange(1, 60))
            cache.get((rng.randrange(4), rng.randrange(500)))

    errors = run_in_threads(work, 4, switch_every=1e-6)  # switch as often as possible
    assert not errors, errors[:3]
    assert cache.used <= cache.budget
    assert cache.used == sum(cache._costs[k] for k in cache)
    assert set(cache._costs) == set(cache)
