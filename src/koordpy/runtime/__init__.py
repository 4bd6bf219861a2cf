"""Adapters shared by the deployables: the system clock, logging, metrics."""
