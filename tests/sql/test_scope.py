"""Names in a parsed statement: folding, FROM items, query levels, WITH queries (pure)."""

from __future__ import annotations

from sqlglot import exp

from qadvisor.sql.dequeue import parse
from qadvisor.sql.scope import (
    cte_columns,
    cte_named,
    folded_name,
    ident,
    level_sources,
    main_statement,
    names_an_output_column,
    set_targets,
    source_key,
    span,
    table_name,
    visible_levels,
)


def tree(sql: str) -> exp.Expr:
    return parse(sql, plannable=False)


def column(node: exp.Expr, written: str) -> exp.Column:
    found = [c for c in node.find_all(exp.Column) if c.sql(dialect="postgres") == written]
    assert len(found) == 1, [c.sql() for c in node.find_all(exp.Column)]
    return found[0]


def seen(node: exp.Expr) -> list[list[str]]:
    """The FROM items of each level a reference at ``node`` sees, innermost first."""
    return [[source_key(s) for s in level_sources(level)] for level in visible_levels(node)]


def test_unquoted_names_fold_to_lower_case_and_quoted_ones_keep_their_spelling() -> None:
    t = tree('SELECT "Mixed", Plain, J.ID FROM Public.JOBS AS J')
    assert [folded_name(c.this) for c in t.find_all(exp.Column)] == ["Mixed", "plain", "id"]
    table = next(t.find_all(exp.Table))
    assert folded_name(table.args["db"]) == "public"
    assert folded_name(table.args["alias"]) == "j"  # the identifier inside a TableAlias
    assert folded_name(exp.Literal.number(1)) is None
    assert ident(table.args["db"]) == "public"
    assert ident(exp.Literal.number(1)) == ""


def test_a_from_item_is_referred_to_by_its_alias_else_by_its_table_name() -> None:
    t = tree('SELECT 1 FROM Public.JOBS AS J, "Tenants", generate_series(1, 3) g, (SELECT 1) "Sub"')
    assert [table_name(x) for x in t.find_all(exp.Table)] == ["jobs", "Tenants", ""]
    assert [source_key(s) for s in level_sources(t)] == ["j", "Tenants", "g", "Sub"]


def test_the_main_statement_is_the_query_inside_its_parentheses() -> None:
    t = tree("((SELECT 1 FROM jobs))")
    assert isinstance(t, exp.Subquery)
    assert isinstance(main_statement(t), exp.Select)
    plain = tree("SELECT 1")
    assert main_statement(plain) is plain


def test_span_covers_a_column_reference_with_its_qualifier() -> None:
    text = 'SELECT 1 FROM jobs j WHERE j."State" = 1'
    start, end = span(column(tree(text), 'j."State"')) or (0, 0)
    assert text[start : end + 1] == 'j."State"'


def test_set_targets_are_the_assigned_columns_of_update_and_on_conflict() -> None:
    update = tree("UPDATE jobs SET status = 'x', tries = tries + 1 WHERE id = 1")
    assert [c.name for c in set_targets(update)] == ["status", "tries"]
    upsert = tree(
        "INSERT INTO jobs (id, n) VALUES (1, 2) ON CONFLICT (id) DO UPDATE SET n = jobs.n + 1"
    )
    assert [c.name for c in set_targets(upsert)] == ["n"]
    assert list(set_targets(tree("SELECT n FROM jobs"))) == []


def test_order_by_a_name_of_the_select_list_names_that_output_column() -> None:
    t = tree("SELECT run_at AS due FROM jobs WHERE due < now() ORDER BY due")
    dues = [c for c in t.find_all(exp.Column) if c.name == "due"]
    in_order = next(c for c in dues if isinstance(c.parent, exp.Ordered))
    in_where = next(c for c in dues if c is not in_order)
    assert names_an_output_column(in_order, "due")
    assert not names_an_output_column(in_where, "due")  # WHERE sees only the FROM items
    assert not names_an_output_column(column(t, "run_at"), "run_at")


def test_a_sub_select_in_an_expression_sees_the_levels_around_it() -> None:
    t = tree(
        "SELECT a FROM outer_t o WHERE EXISTS (SELECT 1 FROM inner_t i WHERE i.x = o.x) "
        "AND o.y IN (SELECT y FROM (SELECT z FROM derived_t) d)"
    )
    assert seen(column(t, "a")) == [["o"]]
    assert seen(column(t, "o.x")) == [["i"], ["o"]]
    assert seen(column(t, "y")) == [["d"], ["o"]]
    # A derived table does not see the level it sits in.
    assert seen(column(t, "z")) == [["derived_t"]]


def test_a_lateral_sub_select_sees_the_from_items_before_it() -> None:
    t = tree("SELECT * FROM jobs j, LATERAL (SELECT k FROM keys WHERE keys.j = j.id) l")
    assert seen(column(t, "j.id")) == [["keys"], ["j", "l"]]


def test_the_from_items_of_update_and_delete_include_the_target_joins_and_using() -> None:
    update = tree("UPDATE jobs SET x = 1 FROM tenants t JOIN owners o ON o.id = t.o WHERE true")
    assert [source_key(s) for s in level_sources(update)] == ["jobs", "t", "o"]
    delete = tree("DELETE FROM jobs j USING tenants t WHERE t.id = j.tenant")
    assert [source_key(s) for s in level_sources(delete)] == ["j", "t"]


def test_with_queries_are_found_from_inside_and_give_their_column_names() -> None:
    t = tree(
        'WITH "C"(a, "B") AS (SELECT 1, 2), d AS (SELECT a FROM "C") '
        "SELECT * FROM d JOIN jobs ON true"
    )
    in_d = next(x for x in t.find_all(exp.Table) if x.name == "C")
    level = in_d.find_ancestor(exp.Select)
    assert level is not None
    found = cte_named(level, "C")
    assert found is not None and cte_columns(found) == ("a", "B")
    assert cte_named(level, "c") is None  # "C" is quoted: c is another name
    d = cte_named(t, "d")
    assert d is not None and cte_columns(d) == ()
    assert cte_named(t, "jobs") is None
    # A WITH query does not see the level of the statement it belongs to.
    assert seen(column(t, "a")) == [["C"]]
