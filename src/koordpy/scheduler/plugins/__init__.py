"""Scheduling plugins, one folder each (formula and config in the folder's README)."""
