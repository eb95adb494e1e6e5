"""Fix builders: takes table facts and parsed statements, gives the typed steps of a fix
(migrations with their locks, rewrites, reviews) as SQL text. Pure.
"""
