"""Cluster state behind the read interface `rules.cluster.ClusterView`: static manifests or the live API."""
