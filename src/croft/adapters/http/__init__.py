"""The collector's HTTP server and its /metrics export."""
