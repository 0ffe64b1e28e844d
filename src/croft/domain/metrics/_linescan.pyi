# The native scanner of /metrics bodies (_linescan.c): where a wanted sample's line may start.

def starts(
    text: str, names: tuple[str, ...], needles: tuple[tuple[str, ...] | None, ...], /
) -> list[int] | None: ...
