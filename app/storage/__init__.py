"""Persistence: the database (engine, ORM, migrations, transient errors, spare space) and the file store (datasets, artifacts, the registry token)."""
