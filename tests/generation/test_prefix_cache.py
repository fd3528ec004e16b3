"""The prefix cache's bookkeeping, without a model: which slot a prompt takes, and what
the host-memory store keeps (the KV side is tested on llama.cpp in test_runners)."""

from __future__ import annotations

import numpy as np

from automask.generation.prefix_cache import (
    PromptStore,
    SlotTable,
    common_prefix,
    reusable,
)


def test_common_prefix_and_reusable():
    want = np.array([1, 2, 3, 4])
    assert common_prefix([1, 2, 9], want) == 2
    assert common_prefix([1, 2, 3, 4, 5], want) == 4
    assert common_prefix([], want) == 0 and common_prefix([1], want[:0]) == 0
    assert reusable([5, 6, 7]).tolist() == [5, 6] and reusable([5]).tolist() == []


def test_slot_table_picks_the_longest_prefix_then_empty_then_oldest():
    table = SlotTable(3, reuse=True)
    for slot, tokens in ((0, [1, 2, 3, 4]), (1, [1, 2, 8])):
        assert table.choose(np.array(tokens))[0] == slot  # empty slots first, lowest id
        table.assign(slot, [])
        table.advance(slot, tokens)
    assert table.close(0) is False and table.close(1) is False  # caches kept
    assert table.close(1) is False  # closing a free slot does nothing
    assert table.choose(np.array([1, 2, 3])) == (0, 3)
    assert table.choose(np.array([1, 2, 8, 8])) == (1, 3)
    assert table.choose(np.array([7])) == (2, 0)  # nothing shared: the empty slot
    table.assign(2, [])
    table.advance(2, [5])
    table.close(2)
    assert table.choose(np.array([7])) == (0, 0)  # then the slot closed longest ago
    for slot in range(3):
        table.assign(slot, [])
    assert table.choose(np.array([1])) is None  # every slot open


def test_slot_table_without_reuse_empties_on_close():
    table = SlotTable(2, reuse=False)
    table.assign(0, [])
    table.advance(0, [1, 2])
    assert table.lengths == {0: 2}
    assert table.close(0) is True and 0 not in table.held
    assert table.choose(np.array([1, 2])) == (0, 0)


def test_prompt_store_is_bounded_and_keeps_the_longest_states():
    store = PromptStore(100, min_tokens=3)
    assert not store.wants([1, 2]) and store.wants([1, 2, 3])
    store.put([1, 2, 3], bytes(40))
    store.put([1, 2, 3, 4, 5], bytes(40))  # replaces its prefix [1, 2, 3]
    assert len(store) == 1 and store.size == 40
    assert not store.wants([1, 2, 3, 4])  # covered by [1, 2, 3, 4, 5]
    store.put([7, 7, 7], bytes(40))
    entry, length = store.best(np.array([1, 2, 3, 4, 9]))
    assert length == 4 and entry.tokens.tolist() == [1, 2, 3, 4, 5]  # now the newest
    store.put([8, 8, 8], bytes(40))  # 120 > 100: the least recently used goes ([7, 7, 7])
    assert len(store) == 2 and store.size == 80
    assert store.best(np.array([7, 7, 7]))[1] == 0
    assert store.best(np.array([1, 2]))[1] == 2
    store.put([9, 9, 9], bytes(101))  # larger than the whole store: not kept
    assert len(store) == 2
    assert not PromptStore(0).wants(list(range(100)))
    store.clear()
    assert len(store) == 0 and store.size == 0


def test_open_slots_stay_one_run_of_consecutive_ids():
    """llama.cpp runs each run of consecutive sequence ids as its own pass: a new slot
    grows the run at either end, or fills the lowest hole once the run is broken."""
    table = SlotTable(6, reuse=True)
    for slot, tokens in enumerate(([1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 6])):
        table.assign(slot, [])
        table.advance(slot, tokens)
    for slot in range(6):
        table.close(slot)
    table.assign(3, [])  # open: 3
    # slot 5 holds [6, 6] but is not next to the run: of 2 and 4, the one closed first
    assert table.choose(np.array([6, 6])) == (2, 0)
    assert table.choose(np.array([5, 5])) == (4, 2)  # next to the run, and holds [5, 5]
    table.assign(4, [])
    table.assign(5, [])
    table.close(4)  # open: 3, 5 (broken)
    assert table.choose(np.array([2, 2])) == (0, 0)  # the lowest hole, not slot 1


def test_a_moved_sequence_leaves_its_copy_behind_with_reuse_only():
    for reuse in (True, False):
        table = SlotTable(3, reuse=reuse)
        table.assign(2, [])
        table.advance(2, [4, 5])
        table.move(2, 0)
        assert table.lengths == {0: 2} and table.held[0] == [4, 5]
        assert (table.held.get(2) == [4, 5]) is reuse  # an idle cache, or nothing
        table.advance(0, [6])
        assert table.held[0] == [4, 5, 6] and (not reuse or table.held[2] == [4, 5])
