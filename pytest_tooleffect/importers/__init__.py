"""Importers: public data sets (BFCL, tau-bench airline) into case families."""

__all__: list[str] = []
