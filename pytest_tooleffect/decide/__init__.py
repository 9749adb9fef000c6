"""The decision at one item: replayed, asked of a model (child process), or of the team's agent."""

__all__: list[str] = []
