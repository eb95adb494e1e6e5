"""Resolving a statement's names the way the application's session did: pure rules."""

from __future__ import annotations

from qadvisor.derive import names
from qadvisor.derive.names import Catalog, Relation, SearchPath
from qadvisor.model import RoleSetting


def rel(schema: str, name: str, relid: int, kind: str = "r") -> Relation:
    return Relation(relid, schema, name, kind)


CATALOG = Catalog(
    [
        rel("app", "jobs", 1),
        rel("app", "queue_tenants", 2),
        rel("tenant_a", "jobs", 3),
        rel("tenant_b", "jobs", 4),
        rel("public", "jobs", 5),
        rel("worker", "jobs", 6, kind="v"),
    ]
)


def test_user_is_expanded_and_pg_catalog_is_searched_first() -> None:
    path = SearchPath("worker", '"$user", app', "ALTER ROLE worker")
    assert path.schemas() == ["pg_catalog", "worker", "app"]
    explicit = SearchPath("worker", "app, pg_catalog", "ALTER ROLE worker")
    assert explicit.schemas() == ["app", "pg_catalog"]


def test_the_most_specific_setting_wins() -> None:
    rows = [
        RoleSetting(None, "worker", "search_path", "a"),
        RoleSetting("app", None, "search_path", "b"),
        RoleSetting("app", "worker", "search_path", "c"),
        RoleSetting("other", "worker", "search_path", "d"),
        RoleSetting(None, None, "search_path", "e"),
    ]
    assert names.role_search_path("worker", "app", rows, None).setting == "c"
    assert names.role_search_path("worker", "other", rows, None).setting == "d"
    assert names.role_search_path("worker", "third", rows, None).setting == "a"
    got = names.role_search_path("api", "app", rows, None)
    assert (got.setting, got.source) == ("b", "ALTER DATABASE app")
    got = names.role_search_path("api", "third", rows, "x, y")
    assert (got.setting, got.source) == ("e", "ALTER ROLE ALL")
    got = names.role_search_path("api", "third", rows[:4], None)
    assert (got.setting, got.source) == (names.DEFAULT_SEARCH_PATH, "PostgreSQL's default")


def test_the_roles_path_resolves_unqualified_names() -> None:
    path = SearchPath("worker", "app, public", "ALTER ROLE worker")
    (res,), why = names.resolve([(None, "jobs"), (None, "queue_tenants")], [path], CATALOG)
    assert why is None
    assert res.tables[(None, "jobs")].relid == 1
    assert res.tables[(None, "queue_tenants")].relid == 2
    assert res.search_path == '"pg_catalog", "app", "public"'
    assert res.how == "search_path of role worker (ALTER ROLE worker)"


def test_a_view_of_the_same_name_earlier_on_the_path_shadows_the_table() -> None:
    path = SearchPath("worker", '"$user", app', "PostgreSQL's default")
    (res,), _ = names.resolve([(None, "jobs")], [path], CATALOG)
    assert res.tables[(None, "jobs")].kind == "v"


def test_qualified_names_are_never_touched() -> None:
    path = SearchPath("worker", "tenant_a", "ALTER ROLE worker")
    (res,), _ = names.resolve([("app", "jobs")], [path], CATALOG)
    assert res.tables[("app", "jobs")].relid == 1


def test_a_path_that_finds_nothing_falls_back_to_each_queue_schema() -> None:
    path = SearchPath("api", "nowhere", "ALTER ROLE api")
    found, why = names.resolve([(None, "jobs")], [path], CATALOG, ["tenant_a", "tenant_b"])
    assert why is None
    assert [r.tables[(None, "jobs")].relid for r in found] == [3, 4]
    assert [r.how for r in found] == [
        "schema of queue tenant_a.jobs",
        "schema of queue tenant_b.jobs",
    ]


def test_what_cannot_be_resolved_says_what_was_tried() -> None:
    path = SearchPath("api", "nowhere", "ALTER ROLE api")
    found, why = names.resolve([(None, "missing")], [path], CATALOG)
    assert found == []
    assert why == "relation missing not found under the search_path 'nowhere' (ALTER ROLE api)"


def test_several_roles_with_different_paths_give_one_resolution_each() -> None:
    paths = [
        SearchPath("a", "tenant_a", "ALTER ROLE a"),
        SearchPath("b", "tenant_b", "ALTER ROLE b"),
        SearchPath("c", "tenant_a", "ALTER ROLE c"),  # the same table as role a: once
    ]
    found, _ = names.resolve([(None, "jobs")], paths, CATALOG)
    assert [r.tables[(None, "jobs")].relid for r in found] == [3, 4]
