"""The kube-scheduler extender HTTP service (FastAPI)."""
