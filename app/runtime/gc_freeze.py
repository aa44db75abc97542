"""The cyclic garbage collector's settings for the API process.

A full (generation 2) collection walks every tracked object the process holds: after start-up
the several hundred thousand objects of FastAPI, pydantic, NumPy, SciPy and scikit-learn that
live as long as the process. Requests that allocate many containers (a JSON body of many rows)
bring full collections every few seconds, each holding the event loop while it runs
(docs/reliability.md, the wide scenario of ``benchmarks/faults.py``). ``gc.freeze`` (Python's
documented remedy for long-lived servers) moves everything alive at the end of start-up to a
permanent generation that collections skip; what is made later (models loaded, requests) is
collected as before, and nothing is leaked.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect, then freeze what survives; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
