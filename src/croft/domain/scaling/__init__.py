"""croft scale: the replica decision, the record format, and the Kubernetes objects it reads."""
