"""Shared test configuration. Tier-specific fixtures live in each tier's own conftest.py."""
