"""Locust users for `run.py web --users N`: each requests the app's paths in turn, back to back."""

from __future__ import annotations

import itertools
import os

from locust import HttpUser, task  # type: ignore[import-not-found]

PATHS = [p for p in os.environ.get("CROFT_LOCUST_PATHS", "/").split(",") if p]


class AppUser(HttpUser):  # type: ignore[misc]
    def on_start(self) -> None:
        self._paths = itertools.cycle(PATHS)

    @task
    def request(self) -> None:
        path = next(self._paths)
        self.client.get(path, name=path.split("?")[0])
