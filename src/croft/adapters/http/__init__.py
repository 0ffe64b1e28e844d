"""The collector's HTTP server, its /metrics export (prometheus_client) and its small pages (/healthz,
/)."""
