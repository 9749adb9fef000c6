"""Data tools apart from the plugin's run path: importers, trace sampling, labelling, authored families."""

__all__: list[str] = []
