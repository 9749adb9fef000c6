"""Collection: case files and families in, validated, one pytest item per case x policy x trial out."""

__all__: list[str] = []
