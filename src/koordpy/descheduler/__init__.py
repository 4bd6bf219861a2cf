"""Descheduler: PodMigrationJob arbitration and lifecycle (pure), run by ``koordpy manager``."""
