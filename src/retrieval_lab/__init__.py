"""Retrieval Lab: reproducible measurement and fine-tuning of text retrievers."""

__version__ = "0.1.0"
