"""The cyclic garbage collector's settings for the API process.

A full (generation 2) collection walks every tracked object the process holds: after start-up
that is the imported modules of FastAPI, pydantic, NumPy, SciPy and scikit-learn, several
hundred thousand objects that live as long as the process. A request that allocates many
containers (2,000 rows of a JSON body are 2,000 lists) brings a full collection every few
seconds, and each held the event loop for 50-176 ms: ``/health`` had a p99 of 194 ms while
four connections sent such bodies (``benchmarks/faults.py``, scenario ``wide``), though each of
those requests was refused by the answer bound in microseconds of real work.

``gc.freeze`` (Python's documented remedy for long-lived servers) moves everything alive at the
end of start-up to a permanent generation that collections skip; what is made later (models
loaded, requests) is collected as before. Nothing is leaked: frozen objects are only those
alive at the call, after a full collection.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect, then freeze what survives; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
