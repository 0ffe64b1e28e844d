"""/metrics and /healthz as pure functions: the series names and help, the series of a poll, the text
exposition, and whether the collector is healthy."""
