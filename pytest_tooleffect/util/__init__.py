"""Small helpers every stage may use: JSON Lines reading, redaction of secrets, text as an output shows it,
output files, processes.
"""

__all__: list[str] = []
