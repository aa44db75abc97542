"""One module per resource, each with its ``router``."""
