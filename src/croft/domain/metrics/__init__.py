"""/metrics: the series names, the series of a poll, and the text exposition."""
