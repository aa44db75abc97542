"""Background jobs as a state machine kept in the database.

* ``base``: the status vocabulary (``JobStatus``, ``ACTIVE``, ``TERMINAL``) and the runner interface;
* ``payloads``: what a job carries from the API to its worker (typed models);
* ``transitions``: every change of a job's state, the only code that writes one;
* ``work``: what a job does, in whichever process runs it;
* ``local``, ``celery_backend``: the two backends; ``runner`` picks one;
* ``events``: how a waiter hears that a job ended (in-process events, Redis pub/sub);
* ``queue``: the API side (queue, describe, cancel, await).
"""
