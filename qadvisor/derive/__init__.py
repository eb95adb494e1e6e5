"""Pure facts: takes catalog rows, statistics and parsed statements, gives what collection and
the checks both reason with (queues and their live sets, claims, estimates, names resolved as
the application resolved them, plans read). No I/O.
"""
