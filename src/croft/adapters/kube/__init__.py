"""Clusters: the Kubernetes port (what croft scale asks of the API server, and the one taxonomy of API
errors), its clients (the scale API through kubectl proxy; the cluster client of deploy and collect),
and the Docker engine of croft deploy docker."""
