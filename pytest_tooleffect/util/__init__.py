"""Small helpers every stage may use: JSON Lines reading, redaction of secrets, bounded texts, output files,
processes.
"""

__all__: list[str] = []
