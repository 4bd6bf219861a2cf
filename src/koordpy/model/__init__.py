"""Pure data model: Kubernetes quantities, resource vectors and read-only views of API objects.

Nothing here performs I/O or reads the clock; time is always passed in.
"""
