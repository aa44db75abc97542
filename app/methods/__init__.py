"""Learning methods: one module per method, each exposing ``SPEC`` (see ``base``)."""
