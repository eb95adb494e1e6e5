"""History: takes the directory --history names and this run's snapshot, gives the earlier
snapshots of the same database read beside it (a History the checks read as data), and saves
this one there, keeping the newest.

Reading and writing the directory is this stage's only work; which earlier snapshot may be
measured against this one, and the rates between them, are pure facts of qadvisor.derive.
"""
