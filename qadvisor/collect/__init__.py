"""Collection, the only stage that talks to PostgreSQL: takes a connection (read-only, with
timeouts), gives one Snapshot of catalog facts, statistics, settings, statements and plans, and a
record of each fact it could not read and why.
"""
