"""Evaluation: model selection (``auto``), comparison, blending, reports and train/test splits."""
