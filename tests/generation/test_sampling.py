"""Constrained sampling: the order of operations, the diagnostics, and the degenerate rows.

Fast and model-free: logits are small hand-made or seeded-random arrays.
Torch tests skip when torch is absent.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from automask import NoLegalContinuation
from automask.bitmask import allocate_bitmask
from automask.sampling import (
    Sampler,
    SamplingParams,
    StepStats,
    legal_log_probs,
    legal_mask,
    step_stats,
)


def make_mask(rows: list[list[int]], vocab: int) -> np.ndarray:
    """An int32 bitmask (len(rows), ceil(vocab/32)) allowing exactly the listed ids per row."""
    words = np.zeros((len(rows), (vocab + 31) // 32), dtype=np.uint32)
    for r, ids in enumerate(rows):
        for t in ids:
            words[r, t >> 5] |= np.uint32(1 << (t & 31))
    return words.view(np.int32)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    keep = expected > 0
    assert counts[~keep].sum() == 0, "a zero-probability token was drawn"
    return float((((counts - expected) ** 2)[keep] / expected[keep]).sum())


def draw_counts(params: SamplingParams, row: np.ndarray, mask: np.ndarray | None, n: int,
                seed: int = 0) -> np.ndarray:
    """Counts of ``n`` draws, as one batched step of ``n`` identical rows.

    The seed is fixed, so the chi-square checks are deterministic; over seeds
    the statistic follows chi2(df) (mean ~df), and the thresholds sit near the
    0.9999 quantile while wrong distributions score in the thousands.
    """
    logits = np.tile(row, (n, 1))
    tokens, _ = Sampler(params, seed=seed).step(logits, mask)
    return np.bincount(tokens, minlength=row.size)


RNG_LOGITS = np.random.default_rng(7).normal(scale=2.0, size=(3, 100))


# ---------------------------------------------------------------- parameters


@pytest.mark.parametrize("kwargs", [
    {"temperature": -0.1}, {"temperature": math.inf}, {"temperature": math.nan},
    {"top_k": -1}, {"top_k": 1.5}, {"top_k": True},
    {"top_p": 0.0}, {"top_p": 1.01}, {"top_p": math.nan},
    {"repetition_penalty": 0.0}, {"repetition_penalty": -1.0}, {"repetition_penalty": math.inf},
    {"greedy": 1},
])
def test_params_validated(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SamplingParams(**kwargs)


def test_params_greedy_forms():
    assert SamplingParams(temperature=0).is_greedy
    assert SamplingParams(temperature=0.8, greedy=True).is_greedy
    assert not SamplingParams().is_greedy
    assert SamplingParams(top_k=np.int64(3)).top_k == 3


# ---------------------------------------------------------------- identity


@pytest.mark.parametrize("params", [
    SamplingParams(),
    SamplingParams(temperature=0.7, top_k=20, top_p=0.9, repetition_penalty=1.3),
    SamplingParams(temperature=0),
])
def test_all_ones_mask_is_identity(params):
    free, constrained = Sampler(params, seed=5), Sampler(params, seed=5)
    mask = allocate_bitmask(3, 100)
    prev = [[1, 2, 3], [], [50, 50]]
    for _ in range(20):
        a, sa = free.step(RNG_LOGITS, None, prev)
        b, sb = constrained.step(RNG_LOGITS, mask, prev)
        assert a == b
        assert sa == sb
        for s in sb:
            assert (s.legal_count, s.legal_mass, s.rejection_mass, s.kl) == (100, 1.0, 0.0, 0.0)


def test_same_seed_same_tokens_different_seed_differs():
    logits = np.tile(RNG_LOGITS[0], (64, 1))
    runs = [Sampler(seed=s).step(logits)[0] for s in (1, 1, 2)]
    assert runs[0] == runs[1] != runs[2]


# ---------------------------------------------------------------- filters never empty the legal set


@pytest.mark.parametrize("params", [
    SamplingParams(top_k=1),
    SamplingParams(top_p=1e-9),
    SamplingParams(top_k=1, top_p=1e-9, temperature=3.0),
    SamplingParams(top_k=5, temperature=100.0),
])
def test_filters_act_on_the_legal_distribution(params):
    row = np.arange(10, dtype=np.float64)          # global argmax 9 is illegal
    mask = make_mask([[0, 2, 4]], 10)
    tokens = [Sampler(params, seed=s).step(row, mask)[0][0] for s in range(50)]
    assert set(tokens) <= {0, 2, 4}
    if params.top_k == 1 or params.top_p < 1e-6:
        assert set(tokens) == {4}                  # the legal argmax, always there


def test_top_k_larger_than_legal_set_keeps_all_legal():
    row = np.zeros(8)
    counts = draw_counts(SamplingParams(top_k=50), row, make_mask([[1, 6]], 8), 2000)
    assert counts.nonzero()[0].tolist() == [1, 6]


# ---------------------------------------------------------------- greedy


def test_greedy_picks_legal_argmax():
    row = np.array([0.5, 3.0, 2.0, 9.0, 2.0, -1.0])
    mask = make_mask([[0, 2, 4, 5]], 6)
    for params in (SamplingParams(temperature=0), SamplingParams(greedy=True, temperature=2.0)):
        tokens, stats = Sampler(params, seed=0).step(row, mask)
        assert tokens == [2]                       # 2 and 4 tie: lowest id
        assert stats[0].raw_argmax == 3 and not stats[0].raw_argmax_legal


def test_tiny_temperature_behaves_like_greedy():
    row = np.array([1000.0, 999.0, 998.0, 1001.0])
    mask = make_mask([[0, 1, 2]], 4)
    for seed in range(20):
        assert Sampler(SamplingParams(temperature=1e-300), seed=seed).step(row, mask)[0] == [0]


# ---------------------------------------------------------------- repetition penalty


def test_repetition_penalty_positive_logit_divided():
    row = np.array([2.0, 1.5, 0.0])
    greedy = SamplingParams(temperature=0, repetition_penalty=2.0)
    assert Sampler(greedy).step(row)[0] == [0]
    assert Sampler(greedy).step(row, previous=[0])[0] == [1]          # 2 / 2 = 1 < 1.5
    assert Sampler(greedy).step(row, previous=[[0, 0, 0]])[0] == [1]  # once per distinct id
    mild = SamplingParams(temperature=0, repetition_penalty=1.2)
    assert Sampler(mild).step(row, previous=[0])[0] == [0]            # 2 / 1.2 > 1.5


def test_repetition_penalty_negative_logit_multiplied():
    row = np.array([-1.0, -0.8, -5.0])
    params = SamplingParams(temperature=0, repetition_penalty=1.5)
    assert Sampler(params).step(row)[0] == [1]
    assert Sampler(params).step(row, previous=[1])[0] == [0]          # -0.8 * 1.5 = -1.2 < -1


def test_repetition_penalty_per_row_and_sampled_distribution():
    logits = np.array([[2.0, 1.5, 0.0], [2.0, 1.5, 0.0]])
    params = SamplingParams(temperature=0, repetition_penalty=2.0)
    assert Sampler(params).step(logits, previous=[[0], []])[0] == [1, 0]
    # The sampled distribution is the softmax of the penalised logits (T = 0.5).
    row = np.array([2.0, -1.0, 0.5, 1.0])
    params = SamplingParams(temperature=0.5, repetition_penalty=1.7)
    prev = [[0, 1]]
    n = 8000
    tokens, _ = Sampler(params, seed=3).step(np.tile(row, (n, 1)), None, prev * n)
    penalised = np.array([2.0 / 1.7, -1.0 * 1.7, 0.5, 1.0])
    counts = np.bincount(tokens, minlength=4)
    assert chi_square(counts, softmax(penalised / 0.5)) < 20
    assert chi_square(counts, softmax(row / 0.5)) > 200


def test_previous_ids_out_of_range_rejected():
    with pytest.raises(ValueError, match="previous"):
        Sampler().step(np.zeros(4), previous=[4])
    with pytest.raises(ValueError, match="rows"):
        Sampler().step(np.zeros((2, 4)), previous=[[1]])


# ---------------------------------------------------------------- diagnostics


def test_diagnostics_match_hand_computation():
    row = np.array([1.0, 2.0, 3.0, 0.0])
    mask = make_mask([[0, 2]], 4)
    z = (math.e ** 1 + math.e ** 3) / (1 + math.e + math.e ** 2 + math.e ** 3)
    # Temperature, penalty and filters change the sampling, never the diagnostics.
    for params in (SamplingParams(), SamplingParams(temperature=0.3, top_k=1,
                                                    repetition_penalty=3.0)):
        tokens, (s,) = Sampler(params, seed=0).step(row, mask, previous=[2])
        assert tokens[0] in (0, 2)
        assert s.token == tokens[0]
        assert s.raw_argmax == 2 and s.raw_argmax_legal
        assert s.legal_count == 2 and not s.forced
        assert s.legal_mass == pytest.approx(z, rel=1e-12)
        assert s.rejection_mass == pytest.approx(1 - z, rel=1e-12)
        assert s.kl == pytest.approx(-math.log(z), rel=1e-12)
        assert s.token_logprob == pytest.approx(math.log(softmax(row)[s.token]), rel=1e-12)
    (s,) = step_stats(row, make_mask([[0, 1]], 4), [1], forced=False)
    assert s.raw_argmax == 2 and not s.raw_argmax_legal


def test_kl_finite_when_legal_mass_underflows():
    row = np.array([0.0, 2000.0])
    (s,) = step_stats(row, make_mask([[0]], 2), [0])
    assert s.legal_mass == 0.0 and s.rejection_mass == 1.0
    assert s.kl == pytest.approx(2000.0)


def test_forced_step():
    row = np.array([0.3, -1.2, 4.0, 2.2, 0.0])
    tokens, (s,) = Sampler(seed=9).step(row, make_mask([[3]], 5))
    assert tokens == [3] and s.token == 3
    assert s.legal_count == 1 and s.forced
    p3 = softmax(row)[3]
    assert s.kl == pytest.approx(-math.log(p3), rel=1e-12)
    assert s.token_logprob == pytest.approx(math.log(p3), rel=1e-12)
    assert s.legal_mass == pytest.approx(p3, rel=1e-12)


def test_forced_flag_from_caller():
    row = np.zeros((2, 5))
    _, stats = Sampler(seed=0).step(row, None, forced=[True, False])
    assert [s.forced for s in stats] == [True, False]
    (s,) = step_stats(row[0], None, [4])                  # fast-forwarded: forced by default
    assert s.forced and s.legal_count == 5 and s.kl == 0.0
    with pytest.raises(ValueError, match="not legal"):
        step_stats(row[0], make_mask([[1]], 5), [4])


def test_stats_are_plain_data():
    _, (s,) = Sampler(seed=0).step(RNG_LOGITS[0], make_mask([[1, 2, 3]], 100))
    d = s.as_dict()
    assert isinstance(s, StepStats)
    assert list(d) == ["token", "raw_argmax", "raw_argmax_legal", "legal_count", "legal_mass",
                       "rejection_mass", "kl", "token_logprob", "forced"]
    assert all(type(v) in (int, float, bool) for v in d.values())
    assert json.loads(json.dumps(d)) == d


# ---------------------------------------------------------------- degenerate rows


def test_empty_mask_raises_without_consuming_randomness():
    logits = np.zeros((2, 40))
    mask = make_mask([[1], []], 40)
    sampler = Sampler(seed=11)
    with pytest.raises(NoLegalContinuation, match="row 1"):
        sampler.step(logits, mask)
    assert sampler.step(logits)[0] == Sampler(seed=11).step(logits)[0]
    with pytest.raises(NoLegalContinuation):
        legal_log_probs(logits, mask)
    with pytest.raises(NoLegalContinuation):
        Sampler(SamplingParams(temperature=0)).step(logits[0], make_mask([[]], 40))


def test_neg_inf_logits_on_some_legal_tokens():
    row = np.array([-np.inf, 1.0, -np.inf, 0.0, 5.0])
    mask = make_mask([[0, 1, 2, 3]], 5)
    counts = draw_counts(SamplingParams(temperature=2.0, top_k=3), row, mask, 4000)
    assert counts[[0, 2, 4]].sum() == 0 and counts[1] > counts[3] > 0
    lp = legal_log_probs(row, mask, 2.0)
    assert not np.isnan(lp).any()
    assert np.exp(lp).sum() == pytest.approx(1.0)
    assert lp[0] == lp[2] == lp[4] == -np.inf


def test_all_legal_logits_neg_inf_is_uniform_over_legal():
    row = np.array([-np.inf, 3.0, -np.inf, -np.inf, -np.inf, 2.0])
    mask = make_mask([[0, 2, 3]], 6)
    tokens, (s,) = Sampler(SamplingParams(temperature=0)).step(row, mask)
    assert tokens == [0]                                 # greedy: lowest legal id
    assert s.legal_mass == 0.0 and s.rejection_mass == 1.0 and s.kl == math.inf
    assert not any(isinstance(v, float) and math.isnan(v) for v in s.as_dict().values())
    counts = draw_counts(SamplingParams(), row, mask, 6000)
    assert chi_square(counts, np.array([1, 0, 1, 1, 0, 0]) / 3) < 20
    counts = draw_counts(SamplingParams(top_p=0.5), row, mask, 6000)  # ties: lowest ids first
    assert chi_square(counts, np.array([1, 0, 1, 0, 0, 0]) / 2) < 20
    assert np.allclose(legal_log_probs(row, mask)[[0, 2, 3]], -math.log(3))


def test_all_logits_neg_inf_is_uniform_model():
    row = np.full(8, -np.inf)
    tokens, (s,) = Sampler(seed=2).step(row, make_mask([[1, 5]], 8))
    assert tokens[0] in (1, 5)
    assert s.legal_mass == pytest.approx(2 / 8)
    assert s.token_logprob == pytest.approx(-math.log(8))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_pos_inf_logits_rejected(bad):
    row = np.zeros(5)
    row[2] = bad
    with pytest.raises(ValueError, match="NaN"):
        Sampler().step(row)
    with pytest.raises(ValueError, match="NaN"):
        legal_log_probs(row)


# ---------------------------------------------------------------- batches, shapes, widths


def test_batched_rows_are_independent():
    logits = RNG_LOGITS.copy()
    mask = make_mask([list(range(0, 100, 3)), list(range(50)), [7, 8, 9]], 100)
    greedy = Sampler(SamplingParams(temperature=0))
    batch, _ = greedy.step(logits, mask)
    single = [greedy.step(logits[b], mask[b])[0][0] for b in range(3)]
    assert batch == single
    params = SamplingParams(temperature=1.3, top_p=0.95)
    base = [Sampler(params, seed=s).step(logits, mask)[0] for s in range(30)]
    logits[0] = logits[0][::-1]                          # change row 0 only
    changed = [Sampler(params, seed=s).step(logits, mask)[0] for s in range(30)]
    assert [t[1:] for t in base] == [t[1:] for t in changed]
    assert [t[0] for t in base] != [t[0] for t in changed]


def test_one_mask_row_broadcasts_and_row_count_checked():
    logits = np.zeros((4, 40))
    tokens, _ = Sampler(seed=0).step(logits, make_mask([[3, 33]], 40)[0])
    assert set(tokens) <= {3, 33}
    with pytest.raises(ValueError, match="rows"):
        Sampler().step(logits, make_mask([[1], [2]], 40))


def test_logits_wider_than_bitmask():
    vocab, width = 40, 70                                # mask has 2 words: ids >= 64 illegal
    row = np.zeros(width)
    row[65] = 50.0                                       # a padding column the model likes
    row[41] = 10.0                                       # past the vocabulary but in a mask word
    mask = allocate_bitmask(1, vocab)                    # every bit of both words set
    tokens, (s,) = Sampler(SamplingParams(temperature=0)).step(row, mask)
    assert tokens == [41]
    assert s.legal_count == 64 and s.raw_argmax == 65 and not s.raw_argmax_legal
    lse_all = np.log(np.exp(row - 50).sum()) + 50
    assert s.kl == pytest.approx(lse_all - (np.log(np.exp(row[:64] - 10).sum()) + 10))
    assert legal_mask(mask, width).shape == (1, width)
    assert not legal_mask(mask, width)[0, 64:].any()
    lp = legal_log_probs(row, mask)
    assert lp.shape == (width,) and np.isneginf(lp[64:]).all()
    narrow = make_mask([list(range(vocab))], vocab)      # exactly the vocabulary
    counts = draw_counts(SamplingParams(), row, narrow, 500)
    assert counts[vocab:].sum() == 0


def test_one_dimensional_inputs():
    row = RNG_LOGITS[0]
    tokens, stats = Sampler(seed=4).step(row, make_mask([[5, 6]], 100)[0], previous=[5])
    assert len(tokens) == len(stats) == 1 and tokens[0] in (5, 6)
    assert Sampler(seed=4).step(row, previous=[])[0] == Sampler(seed=4).step(row)[0]
    assert legal_log_probs(row).shape == (100,)


# ---------------------------------------------------------------- distributions


@pytest.mark.parametrize("params", [
    SamplingParams(),
    SamplingParams(temperature=0.6),
    SamplingParams(temperature=1.7),
])
def test_samples_follow_renormalised_legal_softmax(params):
    row = RNG_LOGITS[1, :12] / 2
    legal = [0, 2, 3, 5, 8, 11]
    mask = make_mask([legal], 12)
    counts = draw_counts(params, row, mask, 20000)
    expected = np.exp(legal_log_probs(row, mask, params.temperature))
    assert expected.sum() == pytest.approx(1.0)
    assert chi_square(counts, expected) < 25             # df = 5; the 0.9999 quantile is ~25.7
    if params.temperature != 1.0:                         # a wrong answer must be rejected
        raw = softmax(row) * np.isin(np.arange(12), legal)
        assert chi_square(counts, raw / raw.sum()) > 100


def test_top_k_and_top_p_distribution():
    row = np.log(np.array([0.05, 0.30, 0.10, 0.25, 0.20, 0.10]))
    mask = make_mask([[0, 2, 3, 4, 5]], 6)               # legal mass 0.70
    # top-k = 2 keeps ids 3 and 4 (0.25, 0.20), renormalised.
    counts = draw_counts(SamplingParams(top_k=2), row, mask, 8000)
    assert chi_square(counts, np.array([0, 0, 0, 0.25, 0.20, 0]) / 0.45) < 20
    # top-p = 0.5 on legal (3: .357, 4: .286, 2/5: .143, 0: .071): 3 then 4 reach 0.5.
    counts = draw_counts(SamplingParams(top_p=0.5), row, mask, 8000)
    assert chi_square(counts, np.array([0, 0, 0, 0.25, 0.20, 0]) / 0.45) < 20
    # top-p after top-k is measured on the top-k renormalised distribution: 0.25/0.45 > 0.5.
    counts = draw_counts(SamplingParams(top_k=2, top_p=0.5), row, mask, 2000)
    assert counts.nonzero()[0].tolist() == [3]


def test_legal_log_probs_tiny_temperature_and_batch():
    logits = np.array([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]])
    lp = legal_log_probs(logits, make_mask([[0, 1, 2], [1, 2]], 3), 1e-300)
    assert not np.isnan(lp).any()
    assert lp[0, 0] == 0.0 and (lp[0, 1:] < -1e299).all()
    assert np.allclose(lp[1], [-np.inf, -math.log(2), -math.log(2)])
    with pytest.raises(ValueError, match="temperature"):
        legal_log_probs(logits, None, 0.0)


# ---------------------------------------------------------------- torch


def _torch_devices():
    torch = pytest.importorskip("torch")
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("params", [
    SamplingParams(temperature=0),
    SamplingParams(temperature=0.8, top_k=10, top_p=0.9, repetition_penalty=1.2),
])
def test_torch_and_numpy_agree(params):
    torch = pytest.importorskip("torch")
    logits32 = RNG_LOGITS.astype(np.float32)
    mask = make_mask([list(range(0, 100, 2)), list(range(60, 100)), [4, 44, 94]], 100)
    prev = [[0, 2], [61], []]
    for device in _torch_devices():
        a, b = Sampler(params, seed=21), Sampler(params, seed=21)
        for _ in range(10):
            tokens_np, stats_np = a.step(logits32, mask, prev)
            tokens_t, stats_t = b.step(torch.tensor(logits32, device=device),
                                       torch.tensor(mask, device=device), prev)
            assert tokens_np == tokens_t
            assert stats_np == stats_t


def test_torch_half_precision_and_tensor_previous():
    torch = pytest.importorskip("torch")
    logits = torch.tensor(RNG_LOGITS, dtype=torch.bfloat16)
    prev = torch.tensor([[1, 2], [3, 4], [5, 6]])
    tokens, _ = Sampler(seed=1).step(logits, None, prev)
    expected, _ = Sampler(seed=1).step(logits.float().numpy(), None, prev.tolist())
    assert tokens == expected


def test_torch_legal_log_probs_matches_numpy():
    torch = pytest.importorskip("torch")
    row = RNG_LOGITS.copy()
    row[1, :] = -np.inf                                  # all legal -inf: uniform over legal
    row[0, 3] = -np.inf
    mask = make_mask([[1, 3, 5, 7], [2, 9], list(range(100))], 100)
    want = legal_log_probs(row, mask, 0.7)
    for device in _torch_devices():
        got = legal_log_probs(torch.tensor(row, device=device), mask, 0.7)
        assert got.device.type == device and got.dtype == torch.float64
        assert np.allclose(got.cpu().numpy(), want)
        got32 = legal_log_probs(torch.tensor(row[0], dtype=torch.float32, device=device),
                                torch.tensor(mask[0]), 0.7)
        assert got32.dtype == torch.float32 and got32.shape == (100,)
        assert np.allclose(got32.cpu().numpy(), want[0], atol=1e-5)
    with pytest.raises(NoLegalContinuation):
        legal_log_probs(torch.zeros(2, 40), make_mask([[1], []], 40))
    with pytest.raises(ValueError, match="NaN"):
        legal_log_probs(torch.tensor([0.0, float("nan")]))
