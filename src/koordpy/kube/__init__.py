"""The Kubernetes API adapter: the only module that talks to the API server."""
