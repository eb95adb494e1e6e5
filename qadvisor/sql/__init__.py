"""SQL and PL/pgSQL text: takes statement and function-body text, gives parsed dataclasses, and
prints the SQL that fixes propose. The only stage that imports sqlglot (a protected contract).

- ``dequeue``: one statement parsed and judged for its shape, its rewrites;
- ``scope``: names as PostgreSQL folds them, and what a statement's names reach, level by level;
- ``catalog``: the relations and types names may mean, and search_path settings as schemas;
- ``plpgsql``: PL/pgSQL bodies read into their SQL statements;
- ``function_claims``: the claims inside functions and what their variables hold;
- ``recorded_statements``: pg_stat_statements' nested statements matched to those claims;
- ``printing``: identifiers, literals and predicates written as SQL for fixes.
"""
