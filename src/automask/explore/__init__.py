"""``automask explore``: the Mask Explorer, a local web page that shows structured decoding
step by step on a real model.

Why a page: the mechanism (raw logits, the mask, the renormalized
distribution, the mass the mask removed, the steps the grammar forces) is easy
to state and hard to see in a trace. The page is a thin view of a JSON API
(:mod:`automask.explore.app`) over one :class:`~automask.explore.session.Explorer`,
which holds the step/rollback state machine and knows nothing of HTTP, so
tests and scripts can drive either. See ``docs/explorer.md``.
"""
