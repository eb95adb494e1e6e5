"""Fleets: takes the settings of a run over many databases (every database of one server with
--all-databases, or the lines of a --dsn-file) and gives one FleetReport: each database
collected and judged through the engine as a run of its own would be, with its own connection,
timeouts and failure, a bounded number at once, all within the run's bound.

A database that could not be judged is a member of the report with the reason, never the end
of the run; which databases a server has, and what a DSN file names, is qadvisor.collect's.
"""
