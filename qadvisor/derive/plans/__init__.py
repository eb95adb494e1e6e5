"""Query plans, as the checks read them (all pure; the collector runs the EXPLAINs):

- ``explain_json``: EXPLAIN (FORMAT JSON) output -> a PlanNode tree (``parse_explain``);
- ``reading``: which nodes of a tree read a table, through which indexes, what they sort, and
  the plan as one-liners for evidence (``scans``, ``indexes_used``, ``sorts_over``...);
- ``cache_mode``: the plan_cache_mode the application's sessions start with.

Statements and their queues are in ``qadvisor.derive.statement_queues``, predicates in
``qadvisor.derive.predicates``; checks reach all of them through ``qadvisor.api``.
"""
