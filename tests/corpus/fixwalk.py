"""Every fix of a report, walked against the snapshot it was judged on: what a printed fix
must never do, whatever the check.

- A rewrite writes no literal that the application's own statement does not contain: the
  values qadvisor planned with (``custom_values``) and those it read from an index predicate
  are its guesses, and pg_stat_statements shows the application's literals as ``$n``.
- A DROP INDEX (a step, or a note that spells one) removes no index that a recorded
  statement's plan reads: another statement on the table (``stakeholders``), or a claim whose
  plan uses it today, unless the same fix builds an index whose step names that claim (its
  WHERE and ORDER BY match the new one: the claim moves to it).

Pure: report and snapshot as the JSON ``qadvisor check`` and ``qadvisor snapshot`` print.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

_PLACEHOLDER = re.compile(r"<value of \$(\d+)>")
_NAME = r'(?:"[^"]+"|[\w$]+)'
_DROP = re.compile(
    rf"DROP INDEX\s+(?:CONCURRENTLY\s+)?(?:IF EXISTS\s+)?({_NAME}(?:\.{_NAME})?)", re.IGNORECASE
)


def literals(sql: str) -> set[str] | None:
    """The literals of ``sql`` (``s:pending``, ``n:1``); None when it does not parse. The
    rewrite's ``<value of $n>`` places are read as the parameter they stand for."""
    text = _PLACEHOLDER.sub(r"$\1", sql)
    try:
        trees = sqlglot.parse(text, read="postgres")
    except SqlglotError:
        return None
    found: set[str] = set()
    for tree in trees:
        if tree is None:
            continue
        for node in tree.find_all(exp.Literal):
            if isinstance(node.parent, exp.Parameter | exp.Placeholder):
                continue  # the n of $n
            if node.is_string:
                found.add(f"s:{node.this}")
            else:
                found.add(f"n:{float(node.this):g}" if _number(node.this) else f"n:{node.this}")
    return found


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def foreign_literals(report: dict[str, Any], snapshot: dict[str, Any]) -> list[str]:
    """Each rewrite's literals that neither its statement's text (the step's ``before``) nor
    the snapshot's record of that statement contains."""
    recorded: dict[str, list[dict[str, Any]]] = {}
    for st in snapshot.get("statements", []):
        recorded.setdefault(" ".join(st["text"].split()), []).append(st)
    problems = []
    for finding, step in _steps(report):
        if step["kind"] != "rewrite":
            continue
        where = f"{finding['code']} {_target(finding)}"
        before = step.get("before")
        if before is None:
            problems.append(f"{where}: a rewrite of a statement qadvisor did not see")
            continue
        mine = literals(step["sql"])
        theirs = literals(before)
        if mine is None or theirs is None:
            problems.append(f"{where}: {'rewrite' if mine is None else 'statement'} unparsed")
            continue
        for st in recorded.get(" ".join(before.split()), []):
            theirs |= literals(st["text"]) or set()
        extra = sorted(mine - theirs)
        if extra:
            problems.append(f"{where}: the rewrite writes {extra}, absent from {before[:200]!r}")
    return problems


def used_indexes_dropped(report: dict[str, Any], snapshot: dict[str, Any]) -> list[str]:
    """Each DROP INDEX of a fix (step or note) whose index a recorded statement's plan reads."""
    problems = []
    for finding in report["findings"]:
        fix = finding.get("fix") or {}
        steps = fix.get("steps") or []
        texts = [s["sql"] for s in steps] + [fix.get("notes") or ""]
        created = " ".join(s.get("note") or "" for s in steps if "CREATE INDEX" in s["sql"])
        schema, table = finding["target"]["schema"], finding["target"]["table"]
        for text in texts:
            for name in _dropped(text):
                where = f"{finding['code']} {_target(finding)} drops {name}"
                for s in snapshot.get("stakeholders", []):
                    if s["queue"] == f"{schema}.{table}" and name in s.get("indexes_used", []):
                        problems.append(f"{where}, which {s['text'][:120]!r} reads")
                scans = _idx_scan(snapshot, schema, table, name)
                for st in snapshot.get("statements", []):
                    if st.get("queue") != f"{schema}.{table}":
                        continue
                    if not any(name in _plan_indexes(st.get(p)) for p in _PLANS):
                        continue
                    if _generic_only(st, name) and scans == 0 and st.get("calls"):
                        # The server never scanned it while the claim ran: its generic plan
                        # is not what ran (a literal shown as $n). Dropped for review only.
                        kinds = {s["kind"] for s in steps if name in _dropped(s["sql"])}
                        if kinds - {"review"}:
                            problems.append(
                                f"{where} as a {'/'.join(sorted(kinds))}, which claim "
                                f"{source_label(st)}'s generic plan reads"
                            )
                        continue
                    # The claim's plan reads it today: fine only when the fix builds the
                    # index it moves to, and that step names it.
                    if not _named(st, created):
                        problems.append(f"{where}, which claim {source_label(st)}'s plan reads")
    return problems


_PLANS = ("custom_plan", "generic_plan")


def _generic_only(st: dict[str, Any], name: str) -> bool:
    return name in _plan_indexes(st.get("generic_plan")) and name not in _plan_indexes(
        st.get("custom_plan")
    )


def _idx_scan(snapshot: dict[str, Any], schema: str, table: str, name: str) -> int | None:
    """The index's scans as the server counted them (None: unknown, or a standby's)."""
    if (snapshot.get("server") or {}).get("is_standby"):
        return None
    for t in snapshot.get("tables", []):
        if t["schema"] == schema and t["name"] == table:
            for i in t["indexes"]:
                if i["name"] == name:
                    return i.get("idx_scan")
    return None


def _dropped(text: str) -> list[str]:
    return [m.group(1).split(".")[-1].strip('"') for m in _DROP.finditer(text)]


def _plan_indexes(plan: dict[str, Any] | None) -> set[str]:
    if not plan:
        return set()
    found = {plan["index"]} if plan.get("index") else set()
    for child in plan.get("children") or ():
        found |= _plan_indexes(child)
    return found


def _named(st: dict[str, Any], note: str) -> bool:
    return bool(note) and source_label(st) in note


def source_label(st: dict[str, Any]) -> str:
    """What statement_label starts with: ``pg_stat_statements <fingerprint>``, the source."""
    if st["source"] == "pg_stat_statements":
        return f"pg_stat_statements {st.get('fingerprint') or st.get('queryid')}"
    return str(st["source"])


def _steps(report: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for finding in report["findings"]:
        for step in (finding.get("fix") or {}).get("steps") or ():
            yield finding, step


def _target(finding: dict[str, Any]) -> str:
    t = finding["target"]
    return f"{t['schema']}.{t.get('name') or t['table']}"


def verdicts(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Code, target and severity of each finding, in the report's order."""
    return [(f["code"], _target(f), f["severity"]) for f in report["findings"]]
