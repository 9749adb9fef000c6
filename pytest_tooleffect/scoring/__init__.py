"""Scoring: a decision against its label (the oracle), into one typed Record."""

__all__: list[str] = []
