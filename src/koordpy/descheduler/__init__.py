"""The descheduler's pure core: PodMigrationJob arbitration, migration (the lifecycle), the LowNodeLoad balance
round (:mod:`koordpy.descheduler.lownodeload`) and the threshold contract between the scheduler, the descheduler and
the agent (:mod:`koordpy.descheduler.contract`).

Nothing here reads the API or the clock; the manager's adapter and the offline tools pass values in and
execute the verdicts.
"""
