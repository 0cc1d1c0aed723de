"""Thin entry points: parse arguments, load a params section, call library code, write outputs."""
