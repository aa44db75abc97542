"""Where a prediction runs: bodies up to ``INLINE_BYTES`` whose answer is at most ``INLINE_CELLS``
(rows x labels) on the event loop, anything larger in the app's one thread for them. Shared by
the fast path and the V2 routes (neither imports the other).

Bytes alone do not bound the work (a small body may ask for a huge ranking: docs/scale.md). The
body's size decides where it is decoded; the answer's cells (known once it is decoded and its
model found) where it is computed.
"""

from __future__ import annotations

import anyio
from starlette.datastructures import State

#: bodies up to this size (a few milliseconds of work: docs/scale.md) are answered on the event
#: loop, larger ones in a thread of their own
INLINE_BYTES = 128 * 1024
#: answers of at most this many rows x labels (a few milliseconds to build) are computed on the event loop
INLINE_CELLS = 20_000


def large_body_limiter(state: State) -> anyio.CapacityLimiter:
    """The app's one thread for predictions of large bodies (made on first use, in the event loop).

    Handing each large prediction to the shared thread pool let up to 40 threads fight for the
    GIL: 100-row bodies at 16 connections then served half the rate of answering them on the
    event loop, with a p99 of 147 ms instead of 10 ms. One thread keeps the loop responsive
    (the GIL switches every 5 ms) without the fight.
    """
    limiter: anyio.CapacityLimiter | None = getattr(state, "large_predictions", None)
    if limiter is None:
        limiter = state.large_predictions = anyio.CapacityLimiter(1)
    return limiter
