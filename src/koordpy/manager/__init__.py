"""The manager deployable: a kopf operator that keeps one NodeMetric per node, writes PodGroup status,
carries out PodMigrationJobs and places Reservations.

``policy`` decides (pure); ``api`` is the manager's only API caller (kopf's client); ``operator`` wires
kopf events to decisions.
"""
