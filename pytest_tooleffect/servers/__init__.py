"""Servers and test doubles: the scripted model server, recorded decisions served as a model, the local model."""

__all__: list[str] = []
