"""Clusters: the Kubernetes API (scale and deploy/collect) and the Docker engine."""
