"""Row-locking statements extracted from PL/pgSQL and SQL function bodies (no server).

Each test reads a small body with a hand-built catalog and checks the plannable text, the
placeholder types and what each placeholder stands for, or the reason a statement cannot be
planned. The real-server tests (tests/collect/test_functions_collect.py) plan what comes out here.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from qadvisor.sql import dequeue
from qadvisor.sql.catalog import Catalog, NamedType, Relation
from qadvisor.sql.function_claims import (
    DYNAMIC_SQL,
    Argument,
    FunctionClaim,
    FunctionSource,
    extract,
    names_to_look_up,
    read,
)
from qadvisor.sql.plpgsql import BodyError, read_body
from qadvisor.sql.recorded_statements import called_functions, match_nested

JOBS = Relation(
    1,
    "public",
    "jobs",
    "r",
    type_sql="jobs",
    columns=(
        ("id", "bigint"),
        ("queue", "text"),
        ("status", "job_status"),
        ("priority", "integer"),
        ("run_at", "timestamp with time zone"),
        ("worker", "bigint"),
        ("Mixed", "text"),
    ),
)
APP_JOBS = Relation(
    2, "app", "jobs", "r", type_sql="app.jobs", columns=(("id", "bigint"), ("state", "text"))
)
TENANTS = Relation(
    3,
    "public",
    "tenants",
    "r",
    type_sql="tenants",
    columns=(("tenant_id", "integer"), ("turn", "bigint")),
)
CATALOG = Catalog(
    relations=(JOBS, APP_JOBS, TENANTS),
    types=(NamedType("public", "job_status", "job_status"),),
)


def fn(
    body: str,
    args: Sequence[tuple[str | None, str] | tuple[str | None, str, str]] = (),
    *,
    language: str = "plpgsql",
    returns: str = "void",
    config: tuple[str, ...] = (),
    schema: str = "public",
    name: str = "f",
) -> FunctionSource:
    arguments = tuple(Argument(*a) for a in args)
    return FunctionSource(schema, name, language, arguments, returns, body, config)


def claims_of(source: FunctionSource, catalog: Catalog = CATALOG) -> list[FunctionClaim]:
    return extract(read(source), catalog)


def only(source: FunctionSource, catalog: Catalog = CATALOG) -> FunctionClaim:
    found = claims_of(source, catalog)
    assert len(found) == 1, found
    return found[0]


def flat(text: str) -> str:
    return " ".join(text.split())


def planned(claim: FunctionClaim) -> dequeue.DequeueStatement:
    """The claim is one plannable, row-locking statement as qadvisor's own analysis sees it."""
    assert claim.skip is None, claim.skip
    parsed = dequeue.analyse(claim.text)
    assert parsed is not None
    assert len(claim.param_types) == len(claim.params) == len(parsed.parameters)
    assert parsed.parameters == tuple(range(1, len(claim.params) + 1))
    return parsed


# --- the statement forms ------------------------------------------------------------------

FETCH = """
DECLARE
    found jobs;
BEGIN
    WITH candidate AS (
        SELECT j.* FROM jobs AS j
         WHERE j.status = 'todo'
           AND (target_queues IS NULL OR j.queue = ANY(target_queues))
           AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.queue = j.queue AND o.status = 'doing')
         ORDER BY j.priority DESC, j.id
         LIMIT 1
         FOR UPDATE OF j SKIP LOCKED
    )
    UPDATE jobs SET status = 'doing', worker = p_worker
      FROM candidate
     WHERE jobs.id = candidate.id
    RETURNING jobs.* INTO found;
    RETURN found;
END;
"""


def test_a_cte_claim_gets_typed_placeholders_for_its_parameters() -> None:
    source = fn(FETCH, [("target_queues", "character varying[]"), ("p_worker", "bigint")])
    claim = only(source, CATALOG)
    parsed = planned(claim)
    assert parsed.table == "jobs" and parsed.lock.wait_policy == "skip locked"
    assert parsed.lock_level == "cte"
    assert claim.params == ("target_queues", "p_worker")
    assert claim.param_types == ("character varying[]", "bigint")
    assert "($1 IS NULL OR j.queue = ANY($1))" in claim.text
    assert "worker = $2" in claim.text
    # The INTO target is gone, the SET target and the qualified columns stay.
    assert "INTO" not in claim.text.upper().split()
    assert flat(claim.text).endswith("RETURNING jobs.*")
    assert claim.function == "public.f"
    assert claim.signature == "public.f(character varying[], bigint)"
    assert claim.line == 5 and claim.context == "SQL statement"


def test_select_into_strict_after_the_lock_and_update_returning_into() -> None:
    body = """
DECLARE
    v_status job_status;
    v_id jobs.id%TYPE;
BEGIN
    SELECT status FROM jobs WHERE id = job_id AND status IN ('doing', 'failed')
      FOR UPDATE INTO STRICT v_status;
    UPDATE jobs SET status = 'todo' WHERE id = job_id RETURNING id INTO v_id;
    SELECT id INTO v_id FROM jobs WHERE id = v_id FOR NO KEY UPDATE;
END;
"""
    first, second = claims_of(fn(body, [("job_id", "bigint")]))
    assert flat(first.text) == (
        "SELECT status FROM jobs WHERE id = $1 AND status IN ('doing', 'failed') FOR UPDATE"
    )
    assert first.params == ("job_id",) and first.param_types == ("bigint",)
    assert planned(first).lock.wait_policy is None  # a key lock: no SKIP LOCKED
    # The UPDATE takes no FOR ... lock of its own: not a row-locking statement here.
    assert flat(second.text) == "SELECT id FROM jobs WHERE id = $1 FOR NO KEY UPDATE"
    assert second.params == ("v_id",) and second.param_types == ("bigint",)  # jobs.id%TYPE
    assert planned(second).lock.strength == "no key update"


def test_update_whose_sub_select_claims() -> None:
    body = """BEGIN
  UPDATE jobs SET status = 'doing', worker = w
   WHERE id = (SELECT id FROM jobs WHERE status = 'todo' AND queue = q
                ORDER BY run_at LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING id INTO claimed;
END"""
    claim = only(fn(body, [("q", "text"), ("w", "bigint"), ("claimed", "bigint", "o")]))
    parsed = planned(claim)
    assert parsed.kind == "update" and parsed.lock_level == "subquery"
    assert claim.params == ("w", "q")  # in order of first appearance
    assert claim.param_types == ("bigint", "text")


def test_for_loop_query_and_the_record_fields_used_in_its_body() -> None:
    body = """
DECLARE
    r record;
BEGIN
    FOR r IN SELECT id, queue, run_at AS due FROM jobs WHERE status = 'todo'
               ORDER BY id LIMIT batch FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM 1 FROM jobs WHERE queue = r.queue AND run_at < r.due AND id <> r.id FOR SHARE;
    END LOOP;
END;
"""
    loop, inner = claims_of(fn(body, [("batch", "integer")]))
    assert loop.context == "FOR loop" and loop.line == 5
    assert flat(loop.text).startswith("SELECT id, queue, run_at AS due FROM jobs")
    assert loop.params == ("batch",) and loop.param_types == ("integer",)
    assert planned(loop).limit_is_parameter
    assert inner.context == "PERFORM"
    assert flat(inner.text) == (
        "SELECT 1 FROM jobs WHERE queue = $1 AND run_at < $2 AND id <> $3 FOR SHARE"
    )
    assert inner.params == ("r.queue", "r.due", "r.id")
    assert inner.param_types == ("text", "timestamp with time zone", "bigint")
    assert planned(inner).lock.strength == "share"


def test_rowtype_record_fields_take_the_table_column_types() -> None:
    body = """
DECLARE
    job jobs%ROWTYPE;
    other app.jobs%ROWTYPE;
BEGIN
    SELECT * INTO job FROM jobs WHERE status = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED;
    SELECT * INTO other FROM app.jobs WHERE state = job.queue AND id > other.id
       FOR UPDATE SKIP LOCKED;
END;
"""
    first, second = claims_of(fn(body))
    assert planned(first).limit == 1 and first.params == ()
    assert second.params == ("job.queue", "other.id")
    assert second.param_types == ("text", "bigint")


def test_return_query_and_sql_language_bodies() -> None:
    body = """BEGIN
  RETURN QUERY
    SELECT * FROM jobs WHERE status = 'todo' AND queue = $1 ORDER BY id LIMIT n
       FOR UPDATE SKIP LOCKED;
END"""
    claim = only(fn(body, [(None, "text"), ("n", "integer")], returns="SETOF jobs"))
    assert claim.context == "RETURN QUERY"
    assert claim.params == ("$1", "n") and claim.param_types == ("text", "integer")
    planned(claim)

    sql_body = """
    UPDATE jobs SET status = 'doing'
     WHERE id IN (SELECT id FROM jobs WHERE status = 'todo' AND queue = f.queue_name
                   ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id;
    """
    sql_claim = only(fn(sql_body, [("queue_name", "text"), ("n", "integer")], language="sql"))
    assert sql_claim.language == "sql" and sql_claim.line == 2
    assert sql_claim.params == ("queue_name", "n")
    planned(sql_claim)


def test_sql_standard_body_as_pg_get_function_sqlbody_prints_it() -> None:
    body = (
        "BEGIN ATOMIC\n UPDATE jobs SET status = 'doing'::job_status\n"
        "   WHERE (jobs.id IN ( SELECT jobs_1.id\n            FROM jobs jobs_1\n"
        "           WHERE ((jobs_1.status = 'todo'::job_status) AND (jobs_1.priority >= f.n))\n"
        "          LIMIT 1\n          FOR UPDATE OF jobs_1 SKIP LOCKED))\n"
        "   RETURNING jobs.id;\nEND"
    )
    claim = only(fn(body, [("n", "integer")], language="sql"))
    assert claim.params == ("n",) and "jobs_1.priority >= $1" in claim.text
    planned(claim)
    # RETURN expression: the other SQL-standard form.
    body = "RETURN (SELECT id FROM jobs WHERE queue = f.q LIMIT 1 FOR UPDATE SKIP LOCKED)"
    claim = only(fn(body, [("q", "text")], language="sql"))
    assert claim.context == "RETURN" and claim.text.startswith("SELECT (SELECT id FROM jobs")
    assert claim.params == ("q",)
    planned(claim)


def test_assignments_conditions_and_cursors_are_claims_too() -> None:
    body = """
DECLARE
    v bigint;
    c CURSOR FOR SELECT id FROM jobs WHERE status = 'todo' FOR UPDATE SKIP LOCKED;
    d refcursor;
BEGIN
    v := (SELECT id FROM jobs WHERE status = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED);
    v := id FROM jobs WHERE status = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF EXISTS (SELECT 1 FROM jobs WHERE id = v FOR UPDATE) THEN
        OPEN d FOR SELECT * FROM jobs WHERE id = v FOR UPDATE SKIP LOCKED;
    ELSIF v IS NULL THEN
        NULL;
    ELSE
        RAISE NOTICE 'no job';
    END IF;
END;
"""
    found = claims_of(fn(body))
    assert [c.context for c in found] == [
        "cursor",
        "assignment",
        "assignment",
        "IF condition",
        "OPEN ... FOR",
    ]
    assert flat(found[1].text).startswith("SELECT (SELECT id FROM jobs")
    assert found[1].as_run.startswith("v := (SELECT")
    assert flat(found[2].text).startswith("SELECT id FROM jobs WHERE")
    assert flat(found[3].text) == "SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE)"
    assert found[3].as_run == "EXISTS (SELECT 1 FROM jobs WHERE id = v FOR UPDATE)"
    for claim in found:
        planned(claim)


def test_dynamic_sql_is_refused_with_its_reason() -> None:
    body = """
BEGIN
    EXECUTE format('SELECT id FROM %I WHERE status = $1 LIMIT 1 FOR UPDATE SKIP LOCKED', tbl)
       INTO job_id USING 'todo';
    RETURN QUERY EXECUTE 'SELECT * FROM jobs ' || 'FOR UPDATE SKIP LOCKED';
    EXECUTE 'VACUUM jobs';
END
"""
    found = claims_of(fn(body, [("tbl", "text"), ("job_id", "bigint", "o")]))
    assert [c.skip for c in found] == [DYNAMIC_SQL, DYNAMIC_SQL]
    assert [c.context for c in found] == ["EXECUTE", "RETURN QUERY EXECUTE"]
    assert found[0].line == 3


def test_lock_strengths_and_a_loop_variable_named_key() -> None:
    body = """
DECLARE
    key record;
BEGIN
    FOR key IN SELECT id FROM jobs LOOP
        PERFORM 1 FROM tenants WHERE tenant_id = 1 FOR KEY SHARE;
    END LOOP;
    PERFORM 1 FROM jobs for no key update nowait;
END
"""
    first, second = claims_of(fn(body))
    assert planned(first).lock.strength == "key share"
    assert planned(second).lock.wait_policy == "nowait"


def test_insert_that_claims_is_returned_with_the_reason_it_is_not_planned() -> None:
    body = """BEGIN
  INSERT INTO jobs (queue) SELECT queue FROM jobs WHERE status = 'todo' FOR UPDATE SKIP LOCKED;
END"""
    claim = only(fn(body))
    assert claim.skip is not None and "INSERT" in claim.skip


# --- names: columns, variables, quoting, scopes -------------------------------------------


def test_quoted_names_case_and_comments_with_semicolons() -> None:
    body = """
-- a comment; with a semicolon
Declare
    "Queue Name" text := 'x;y';   /* a block comment; with one too */
    marker text := $q$ FOR UPDATE; $q$;
Begin
    select id from jobs where queue = "Queue Name" and "Mixed" = marker -- trailing; note
       ORDER BY id limit 1 for update skip locked;
End;
"""
    claim = only(fn(body))
    assert claim.params == ("Queue Name", "marker")
    assert claim.param_types == ("text", "text")
    assert 'queue = $1 and "Mixed" = $2' in claim.text
    planned(claim)


def test_nested_blocks_labels_and_shadowing() -> None:
    body = """
<<top_blk>>
DECLARE
    limit_to integer := 10;
    q text := 'a';
BEGIN
    <<inner>>
    DECLARE
        q integer := 2;
    BEGIN
        PERFORM 1 FROM jobs WHERE priority = q AND queue = top_blk.q AND id > f.start_id
          LIMIT limit_to FOR UPDATE SKIP LOCKED;
    END inner;
    PERFORM 1 FROM jobs WHERE queue = q FOR UPDATE SKIP LOCKED;
END top_blk;
"""
    inner, outer = claims_of(fn(body, [("start_id", "bigint")]))
    assert inner.params == ("q", "top_blk.q", "start_id", "limit_to")
    assert inner.param_types == ("integer", "text", "bigint", "integer")
    assert outer.params == ("q",) and outer.param_types == ("text",)
    planned(inner)
    planned(outer)


def test_positional_references_aliases_defaults_and_a_name_that_shadows_nothing() -> None:
    body = """
DECLARE
    wanted ALIAS FOR $1;
    spare integer;
BEGIN
    PERFORM 1 FROM jobs WHERE queue = wanted AND priority >= $2 AND queue <> $1
      FOR UPDATE SKIP LOCKED;
END
"""
    # min_priority has a DEFAULT in the parameter list: still a parameter.
    claim = only(fn(body, [("queue_name", "text"), ("min_priority", "integer")]))
    assert claim.params == ("queue_name", "min_priority")
    assert claim.param_types == ("text", "integer")
    assert "queue = $1 AND priority >= $2 AND queue <> $1" in claim.text


def test_out_parameters_are_variables_in_plpgsql_only() -> None:
    body = "BEGIN SELECT id INTO claimed FROM jobs WHERE id > claimed FOR UPDATE SKIP LOCKED; END"
    claim = only(fn(body, [("claimed", "bigint", "o")]))
    assert claim.params == ("claimed",) and claim.param_types == ("bigint",)
    assert claim.signature == "public.f()"


def test_a_qualified_column_stays_a_column_even_when_a_variable_has_its_name() -> None:
    body = """
DECLARE
    queue text := 'a';
BEGIN
    PERFORM 1 FROM jobs j WHERE j.queue = f.queue_name FOR UPDATE SKIP LOCKED;
END
"""
    claim = only(fn(body, [("queue_name", "text")]))
    assert "j.queue = $1" in claim.text and claim.params == ("queue_name",)


def test_a_name_that_is_both_variable_and_column_follows_variable_conflict() -> None:
    body = """BEGIN
  RETURN QUERY SELECT id FROM jobs WHERE status = 'todo' AND id > 0
                ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED;
END"""
    returns_table = [("id", "bigint", "t")]  # RETURNS TABLE (id bigint): id is a variable
    claim = only(fn(body, returns_table, returns="SETOF record"))
    assert claim.skip is not None
    assert '"id" is both a variable of the function and a column of jobs' in claim.skip
    assert "variable_conflict = error" in claim.skip

    column = only(fn("#variable_conflict use_column\n" + body, returns_table))
    assert column.skip is None and column.params == ()

    variable = only(fn(body, returns_table, config=("plpgsql.variable_conflict=use_variable",)))
    assert variable.params == ("id",) and "WHERE status = 'todo' AND $1 > 0" in variable.text

    # An SQL function: the column wins (PostgreSQL's rule for SQL function arguments).
    sql = "SELECT id FROM jobs WHERE id > id LIMIT 1 FOR UPDATE SKIP LOCKED"
    sql_claim = only(fn(sql, [("id", "bigint")], language="sql"))
    assert sql_claim.skip is None and sql_claim.params == ()


def test_a_sub_select_sees_outer_columns_but_not_the_other_way_round() -> None:
    body = """BEGIN
  PERFORM 1 FROM tenants t
   WHERE turn > 0
     AND EXISTS (SELECT 1 FROM jobs j WHERE j.queue = 'a' AND turn = t.turn
                   FOR UPDATE SKIP LOCKED);
  PERFORM 1 FROM jobs WHERE queue = 'a' AND tenant_id = 3 FOR UPDATE SKIP LOCKED;
END"""
    # turn is a column of tenants (the outer level): a column in both places. tenant_id is a
    # column of tenants only, which the second statement does not read: the variable.
    first, second = claims_of(fn(body, [("turn", "bigint"), ("tenant_id", "integer")]))
    assert first.skip is not None and "column of t" in first.skip
    assert second.params == ("tenant_id",)


def test_order_by_an_output_name_is_that_column_not_the_variable() -> None:
    body = """
DECLARE
    due timestamptz := now();
BEGIN
    PERFORM id, run_at AS due FROM jobs WHERE run_at < due ORDER BY due FOR UPDATE SKIP LOCKED;
END
"""
    claim = only(fn(body))
    assert "WHERE run_at < $1 ORDER BY due FOR UPDATE" in claim.text
    assert claim.params == ("due",) and claim.param_types == ("timestamptz",)


def test_type_references_resolve_where_the_variable_is_declared() -> None:
    body = """
DECLARE
    base integer;
    copy base%TYPE;
BEGIN
    DECLARE
        base text;
    BEGIN
        PERFORM 1 FROM jobs WHERE priority = copy AND queue = base FOR UPDATE SKIP LOCKED;
    END;
END
"""
    claim = only(fn(body))
    assert claim.params == ("copy", "base") and claim.param_types == ("integer", "text")


def test_records_without_a_known_shape_are_refused_with_the_reason() -> None:
    body = """
DECLARE
    r record;
    s record;
BEGIN
    PERFORM 1 FROM jobs WHERE id = r.id FOR UPDATE SKIP LOCKED;
    EXECUTE 'SELECT 1 AS id' INTO s;
    SELECT count(*) AS n INTO s FROM jobs;
    PERFORM 1 FROM jobs WHERE priority = s.n FOR UPDATE SKIP LOCKED;
    PERFORM 1 FROM jobs WHERE id = s.missing FOR UPDATE SKIP LOCKED;
END
"""
    first, second, third = claims_of(fn(body))
    assert first.skip is not None and "fields of record r are not known" in first.skip
    assert second.skip is None and second.param_types == ("unknown",)  # count(*): not typed
    assert third.skip is not None and "s has no field missing" in third.skip


def test_unknown_rowtype_and_type_references_say_what_is_missing() -> None:
    body = """
DECLARE
    job missing_table%ROWTYPE;
    v missing_table.id%TYPE;
BEGIN
    PERFORM 1 FROM jobs WHERE id = job.id FOR UPDATE SKIP LOCKED;
    PERFORM 1 FROM jobs WHERE id = v FOR UPDATE SKIP LOCKED;
END
"""
    first, second = claims_of(fn(body))
    assert first.skip is not None and "missing_table" in first.skip
    assert second.skip is not None and "no table missing_table found" in second.skip


def test_names_resolve_through_the_functions_own_search_path() -> None:
    body = """
DECLARE
    job jobs%ROWTYPE;
BEGIN
    PERFORM 1 FROM jobs WHERE state = job.state FOR UPDATE SKIP LOCKED;
END
"""
    # public.jobs has no column state; app.jobs has, and SET search_path = app says which.
    refused = only(fn(body))
    assert refused.skip is not None and "has no field state" in refused.skip
    claim = only(fn(body, config=("search_path=app, public",)))
    assert claim.params == ("job.state",) and claim.param_types == ("text",)
    assert claim.search_path == ("app", "public")  # the planner resolves the text under it
    assert refused.search_path is None
    # Without a search_path of its own, the function's schema comes after public.
    assert only(fn(body, schema="app")).skip is not None


def test_a_quoted_schema_name_with_a_comma_is_one_schema_of_the_search_path() -> None:
    body = """
DECLARE
    job jobs%ROWTYPE;
BEGIN
    PERFORM 1 FROM jobs WHERE state = job.state FOR UPDATE SKIP LOCKED;
END
"""
    odd = Relation(9, "a,b", "jobs", "r", type_sql='"a,b".jobs', columns=(("state", "bigint"),))
    catalog = Catalog(relations=(JOBS, odd))
    # As pg_proc.proconfig holds `SET search_path = "a,b", public`.
    source = fn(body, config=('search_path="a,b", public',))
    assert source.search_path == ("a,b", "public")
    claim = only(source, catalog)
    assert claim.params == ("job.state",) and claim.param_types == ("bigint",)
    # Without it the same name means public.jobs, which has no column state.
    refused = only(fn(body), catalog)
    assert refused.skip is not None and "has no field state" in refused.skip


def test_the_names_the_collector_must_look_up() -> None:
    body = """
DECLARE
    a jobs%ROWTYPE;
    b app_table.col%TYPE;
    c my_enum;
    d text;
    e character varying(20)[];
BEGIN
    PERFORM 1 FROM tenants WHERE tenant_id = 1 FOR UPDATE SKIP LOCKED;
    PERFORM 1 FROM not_locked;
END
"""
    names = names_to_look_up([read(fn(body, [("p", "app.job_row")]))])
    assert names == {"jobs", "app_table", "my_enum", "tenants", "job_row"}


def test_cursor_arguments_are_typed_variables_of_the_cursor_query() -> None:
    body = """
DECLARE
    c CURSOR (wanted text, above jobs.id%TYPE) FOR
        SELECT id FROM jobs WHERE queue = wanted AND id > above FOR UPDATE SKIP LOCKED;
BEGIN
    FOR r IN c('a', 0) LOOP
        PERFORM 1 FROM jobs WHERE id = r.id FOR UPDATE;
    END LOOP;
END
"""
    cursor, loop = claims_of(fn(body))
    assert cursor.context == "cursor" and cursor.line == 4
    assert cursor.params == ("wanted", "above") and cursor.param_types == ("text", "bigint")
    assert loop.params == ("r.id",) and loop.param_types == ("bigint",)  # the cursor's shape


# --- bodies that cannot be read -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("BEGIN PERFORM 1 FROM jobs FOR UPDATE;", "no END"),
        ("SELECT 1", "starts with DECLARE or BEGIN"),
        ("BEGIN IF x THEN NULL; END; END", "expected IF"),
        ("BEGIN SELECT 'unterminated FROM jobs FOR UPDATE; END", "tokens"),
    ],
)
def test_an_unreadable_body_is_one_refused_claim(body: str, message: str) -> None:
    claim = only(fn(body))
    assert claim.skip is not None and message in claim.skip
    assert claim.skip.startswith("the body could not be read") and claim.text == ""
    with pytest.raises(BodyError):
        read_body(body, "plpgsql", [], "f")


def test_an_unexpected_failure_costs_one_statement_not_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from qadvisor.sql import function_claims

    body = """BEGIN
  PERFORM 1 FROM jobs WHERE queue = 'a' FOR UPDATE SKIP LOCKED;
  PERFORM 1 FROM jobs WHERE queue = 'b' FOR UPDATE SKIP LOCKED;
END"""
    real = function_claims._Placeholders.run

    def flaky(self: function_claims._Placeholders) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        if "'a'" in self.site.planned:
            raise IndexError("list index out of range")
        return real(self)

    monkeypatch.setattr(function_claims._Placeholders, "run", flaky)
    first, second = claims_of(fn(body))
    assert first.skip == "qadvisor could not read it (IndexError: list index out of range)"
    assert first.line == 2 and second.skip is None

    def broken(*args: object, **kwargs: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(function_claims, "read_body", broken)
    (claim,) = claims_of(fn(body))
    assert claim.skip is not None and "RecursionError" in claim.skip


def test_control_structures_parse_around_the_claims() -> None:
    body = """
DECLARE
    i integer;
    arr bigint[] := ARRAY[1, 2];
    x bigint;
BEGIN
    CASE WHEN arr IS NULL THEN RETURN; ELSE NULL; END CASE;
    CASE i WHEN 1, 2 THEN NULL; END CASE;
    WHILE i < 3 LOOP i := i + 1; EXIT WHEN i > CASE WHEN i > 2 THEN 1 ELSE 5 END; END LOOP;
    FOR i IN REVERSE 10 .. 1 BY 2 LOOP CONTINUE; END LOOP;
    FOREACH x IN ARRAY arr LOOP
        PERFORM 1 FROM jobs WHERE id = x AND priority = i FOR UPDATE SKIP LOCKED;
    END LOOP;
    <<lbl>> LOOP EXIT lbl; END LOOP lbl;
    GET DIAGNOSTICS i = ROW_COUNT;
    BEGIN
        PERFORM 1 FROM jobs WHERE queue = SQLERRM FOR UPDATE;
    EXCEPTION WHEN unique_violation OR lock_not_available THEN
        PERFORM 1 FROM jobs WHERE queue = SQLERRM FOR UPDATE;
    END;
    RETURN;
END
"""
    first, second, third = claims_of(fn(body))
    assert first.params == ("x", "i") and first.param_types == ("bigint", "integer")
    assert second.skip is None and second.params == ()  # SQLERRM outside a handler: a column
    assert third.params == ("sqlerrm",) and third.param_types == ("text",)


def test_a_statement_with_a_dollar_quoted_string_and_a_label_before_the_block() -> None:
    body = """<<fn_block>>
BEGIN
    PERFORM 1 FROM jobs WHERE queue = $$ a ; 'b' $$ AND id > fn_block.floor FOR UPDATE;
END fn_block"""
    # Labels qualify the block's own names only: fn_block.floor is not a declared variable.
    claim = only(fn(body))
    assert "queue = $$ a ; 'b' $$" in claim.text and claim.params == ()


# --- statements recorded inside functions (pg_stat_statements track = all) ----------------


def test_nested_statement_texts_are_matched_to_their_claim() -> None:
    source = fn(FETCH, [("target_queues", "character varying[]"), ("p_worker", "bigint")])
    (claim,) = claims_of(source)
    recorded = (
        "WITH candidate AS (\n        SELECT j.* FROM jobs AS j\n         WHERE j.status = $3\n"
        "           AND (target_queues IS NULL OR j.queue = ANY(target_queues))\n"
        "           AND NOT EXISTS (SELECT $4 FROM jobs o WHERE o.queue = j.queue AND "
        "o.status = $5)\n         ORDER BY j.priority DESC, j.id\n         LIMIT $6\n"
        "         FOR UPDATE OF j SKIP LOCKED\n    )\n    UPDATE jobs SET status = $7, "
        "worker = p_worker\n      FROM candidate\n     WHERE jobs.id = candidate.id\n"
        "    RETURNING jobs.*"
    )
    assert match_nested(recorded, [claim]) is claim
    assert match_nested(recorded.replace("LIMIT $6", "LIMIT 2"), [claim]) is None
    assert match_nested(recorded.replace("j.id\n", "j.id DESC\n"), [claim]) is None


def test_nested_matching_knows_how_constants_are_recorded() -> None:
    body = """BEGIN
  PERFORM 1 FROM jobs WHERE priority > -1 AND queue IN ('a', 'b', 'c') AND (id = $1 OR true)
    FOR UPDATE;
  x := id FROM jobs WHERE status = 'todo' LIMIT 1 FOR UPDATE SKIP LOCKED;
  IF EXISTS (SELECT 1 FROM jobs WHERE id = x FOR UPDATE) THEN NULL; END IF;
END"""
    perform, assignment, condition = claims_of(fn(body, [("p", "bigint"), ("x", "bigint", "o")]))
    pg15 = (
        "SELECT $2 FROM jobs WHERE priority > $3 AND queue IN ($4, $5, $6) "
        "AND (id = $1 OR $7) FOR UPDATE"
    )
    pg18 = (
        "SELECT $2 FROM jobs WHERE priority > $3 AND queue IN ($4 /*, ... */) "
        "AND (id = $1 OR $5) FOR UPDATE"
    )
    claims = [perform, assignment, condition]
    assert match_nested(pg15, claims) is perform
    assert match_nested(pg18, claims) is perform
    # PostgreSQL 18 numbers the parameters afresh where it squashes a list.
    assert match_nested(pg15.replace("id = $1", "id = $9"), claims) is perform
    assert match_nested(pg15.replace("id = $1", "id = 7"), claims) is None
    assert match_nested(pg15.replace("priority > $3", "priority < $3"), claims) is None
    recorded = "x := id FROM jobs WHERE status = $1 LIMIT $2 FOR UPDATE SKIP LOCKED"
    assert match_nested(recorded, claims) is assignment
    assert match_nested("EXISTS (SELECT $3 FROM jobs WHERE id = x FOR UPDATE)", claims) is condition
    # PostgreSQL 18 records a variable as $n too when the statement has a squashed list.
    squashed = "EXISTS (SELECT $1 FROM jobs WHERE id = $2 AND queue IN ($3 /*, ... */) FOR UPDATE)"
    body_in = body.replace(
        "WHERE id = x FOR UPDATE", "WHERE id = x AND queue IN ('a', 'b') FOR UPDATE"
    )
    in_claims = claims_of(fn(body_in, [("p", "bigint"), ("x", "bigint", "o")]))
    assert match_nested(squashed, in_claims) is in_claims[2]
    assert match_nested("SELECT 1", claims) is None
    assert match_nested("SELECT 'unterminated", claims) is None


def test_function_calls_in_statement_texts() -> None:
    texts = [
        "SELECT id, status FROM procrastinate_fetch_job_v2($1, $2)",
        'SELECT * FROM app."Fetch"($1) JOIN lateral other_fn(x) ON true',
        "INSERT INTO jobs (a, b) SELECT count(*), coalesce(x, $1) FROM t AS u(x)",
        "SELECT 'fake_fn(' || $1",
        "CALL public.enqueue($1)",
        "CREATE FUNCTION app.defined_here(a int) RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "SELECT 'unterminated",
    ]
    assert called_functions(texts) == {
        (None, "procrastinate_fetch_job_v2"),
        ("app", "Fetch"),
        (None, "other_fn"),
        (None, "count"),
        (None, "coalesce"),
        ("public", "enqueue"),
    }
