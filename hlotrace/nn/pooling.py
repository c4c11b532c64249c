"""MaxPool2d, AvgPool2d."""

__all__: list[str] = []
