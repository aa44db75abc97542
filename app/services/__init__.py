"""The service layer: every rule of the API, one module per resource.

Services take a database session (and the store, cache or runner they need), return the
response models of ``app.schemas`` and raise the domain errors of ``app.errors``; they know
nothing of HTTP. ``app.api.routes`` calls them; the job code calls them too where it shares a
rule (the artifact garbage collection of ``registry``).
"""
