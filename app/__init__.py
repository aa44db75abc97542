"""labelserve: a REST service for multi-label learning, label distribution learning and
multi-label feature selection."""

__version__ = "0.2.0"
