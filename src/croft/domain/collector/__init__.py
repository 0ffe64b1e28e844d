"""The collector's core: snapshots of a poll, rates, GPU states, container ids, frameworks, and the rows of
one poll."""
