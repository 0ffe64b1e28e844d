"""How the collector is found: its pods' label and selector, and the port of its endpoints (kept
out of `croft.domain.deploy.manifests`, so that `croft collect` starts without building those)."""

from __future__ import annotations

METRICS_PORT = 9464
APP_LABEL = "croft-collector"
SELECTOR = {"app.kubernetes.io/name": APP_LABEL}
COLLECTOR_SELECTOR = ",".join(f"{key}={value}" for key, value in SELECTOR.items())
"""The label selector of the collector pods (croft scale and croft collect find them by it)."""
