"""The descheduler's pure core: PodMigrationJob arbitration (and, from the lifecycle, migration).

Nothing here reads the API or the clock; the manager's adapter and the offline tool pass values in and
execute the verdicts.
"""
