"""croft deploy: the manifests and docker arguments, and readings of cluster objects."""
