"""Small helpers every stage may use: JSON Lines reading, redaction of secrets, bounded texts, output files,
processes, optional dependencies (the package's extras).
"""

__all__: list[str] = []
