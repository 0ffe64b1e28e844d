"""Reading the JSON objects of the Kubernetes API, shared by the rooms that read them (deploy's
cluster views, scaling's Deployment and pod views)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dig(obj: Any, *keys: str) -> Any:
    """`obj[k1][k2]...`, or None where a level is missing or is not an object."""
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj
