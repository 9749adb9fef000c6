"""Small helpers every stage may use: JSON Lines reading, redaction of secrets, text as an output shows it,
bounded texts, output files, processes, optional dependencies (the package's extras).
"""

__all__: list[str] = []
