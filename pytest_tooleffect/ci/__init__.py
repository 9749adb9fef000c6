"""CI: baselines, gates, comparisons between runs."""

__all__: list[str] = []
