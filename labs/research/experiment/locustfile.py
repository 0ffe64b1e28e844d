"""Locust users for `run.py web --users N`: each requests the app's paths in turn, back to back."""

from __future__ import annotations

import itertools
import os
from typing import Any

import gevent
from locust import HttpUser, events, stats, task

PATHS = [p for p in os.environ.get("CROFT_LOCUST_PATHS", "/").split(",") if p]


class AppUser(HttpUser):
    def on_start(self) -> None:
        self._paths = itertools.cycle(PATHS)

    @task
    def request(self) -> None:
        path = next(self._paths)
        self.client.get(path, name=path.split("?")[0])


def _last_csv_snapshot(environment: Any, **_: Any) -> None:
    """Locust rewrites its CSV files once a second while it runs and never again at the end, so they
    would miss up to the last second of requests. The users have stopped when `quitting` fires; one
    more interval lets the writer put the final counts in (before Locust closes the files)."""
    options = environment.parsed_options
    if options is not None and options.csv_prefix:
        gevent.sleep(stats.CSV_STATS_INTERVAL_SEC + 0.3)


def _fresh_loop_clock(**_: Any) -> None:
    """Locust arms --run-time with gevent.spawn_later, which counts from the event loop's cached
    time. That time was read when the hub was made, early in Locust's imports, and the loop has not
    run since, so the run ended that much early: 0.2-0.9 s into a 2 s run at load 7. `init` fires
    just before the timer is armed."""
    gevent.get_hub().loop.update_now()


events.init.add_listener(_fresh_loop_clock)  # type: ignore[no-untyped-call]
events.quitting.add_listener(_last_csv_snapshot)  # type: ignore[no-untyped-call]
