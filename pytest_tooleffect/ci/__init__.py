"""CI: baselines, gates, comparisons between runs."""
