"""The catalog that names resolve against, and search_path settings read as schema names."""

from __future__ import annotations

from qadvisor.sql.catalog import Catalog, NamedType, Relation, split_path


def test_split_path_folds_unquoted_names_and_keeps_quoted_ones() -> None:
    assert split_path('"$user", Public, "My Schema" , app') == [
        "$user",
        "public",
        "My Schema",
        "app",
    ]
    assert split_path("$user") == ["$user"]
    assert split_path("") == []
    assert split_path(" , app,") == ["app"]


def test_a_comma_or_a_doubled_quote_inside_quotes_is_part_of_the_name() -> None:
    assert split_path('"a,b", public') == ["a,b", "public"]
    assert split_path('"say ""hi"", then", x') == ['say "hi", then', "x"]


def test_the_catalog_finds_relations_by_name_public_first() -> None:
    app = Relation(1, "app", "jobs", "r")
    public = Relation(2, "public", "jobs", "v")
    other = Relation(3, "a", "jobs", "p")
    catalog = Catalog([app, public, other], [NamedType("app", "state", "app.state")])
    assert catalog.get("app", "jobs") is app
    assert catalog.get("app", "missing") is None and catalog.get("b", "jobs") is None
    assert catalog.named("jobs") == [public, other, app]
    assert catalog.named("missing") == []
    assert catalog.relations == (app, public, other)
    assert [t.name for t in catalog.types] == ["state"]
    assert [r.is_table for r in (app, public, other)] == [True, False, True]
    assert other.qualified == "a.jobs"
