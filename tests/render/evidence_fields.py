"""The evidence fields a check's source can put in a finding, read from its syntax tree.

A field is the string key of a dict literal that becomes evidence: assigned to a name (or
attribute) that says evidence, merged into one (``|=``, ``|``, ``**``, ``.update``), set by
subscript (``evidence["k"] = ...``), passed as ``evidence=``, or returned by a function whose
result becomes evidence (one named for it, or one an evidence expression calls). A local
that an evidence expression names (``evidence=facts``) is followed to its assignments in
the same function. Keys of dicts nested inside a field's value are that field's value, not
fields.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

_Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef


def evidence_fields(sources: Iterable[str]) -> tuple[set[str], set[str]]:
    """Every evidence field the modules' sources can emit (one module per source), and the
    functions whose results become evidence but which none of the sources defines (their
    fields are not seen: add the module that defines them)."""
    trees = [ast.parse(source) for source in sources]
    functions: dict[str, list[_Scope]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.setdefault(node.name, []).append(node)
    scopes: list[_Scope] = [*trees, *(f for fs in functions.values() for f in fs)]
    returning = {name for name in functions if "evidence" in name}
    while True:
        fields: set[str] = set()
        called: set[str] = set()
        for scope in scopes:
            returns = not isinstance(scope, ast.Module) and scope.name in returning
            fields |= _scope_fields(scope, returns, called)
        new = (called & functions.keys()) - returning
        if not new:
            return fields, called - functions.keys()
        returning |= new


def _scope_fields(scope: _Scope, returns: bool, called: set[str]) -> set[str]:
    """The fields one function (or a module's top level) puts in evidence; the functions
    whose results it makes evidence are added to ``called``."""
    nodes = list(_own_nodes(scope))
    exprs: dict[int, ast.expr] = {}  # by id: an assignment is met again on each pass
    fields: set[str] = set()
    for node in nodes:
        passed = isinstance(node, ast.keyword) and node.arg == "evidence"
        if passed or (returns and isinstance(node, ast.Return)):
            value = getattr(node, "value", None)
            if isinstance(value, ast.expr):
                exprs[id(value)] = value
    names: set[str] = set()
    while True:
        for node in nodes:
            value, targets = _assignment(node)
            for target in targets:
                if _is_evidence(target, names) and value is not None:
                    exprs[id(value)] = value
                elif isinstance(target, ast.Subscript) and _is_evidence(target.value, names):
                    key = target.slice
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        fields.add(key.value)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and _is_evidence(node.func.value, names)
            ):
                exprs.update((id(a), a) for a in node.args)
                fields |= {k.arg for k in node.keywords if k.arg is not None}
        named = set().union(*(_named(e) for e in exprs.values()))
        if named <= names:
            break
        names |= named
    for expr in exprs.values():
        fields |= _keys(expr, called)
    return fields


def _own_nodes(scope: _Scope) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not those of the functions defined inside it."""
    todo: list[ast.AST] = list(scope.body)
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                todo.append(child)


def _assignment(node: ast.AST) -> tuple[ast.expr | None, list[ast.expr]]:
    if isinstance(node, ast.Assign):
        return node.value, node.targets
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return node.value, [node.target]
    return None, []


def _is_evidence(target: ast.expr, names: set[str]) -> bool:
    if isinstance(target, ast.Name):
        return "evidence" in target.id or target.id in names
    return isinstance(target, ast.Attribute) and "evidence" in target.attr


def _named(expr: ast.expr) -> set[str]:
    """The locals an evidence expression takes its fields from."""
    if isinstance(expr, ast.Name):
        return {expr.id}
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _named(expr.left) | _named(expr.right)
    if isinstance(expr, ast.IfExp):
        return _named(expr.body) | _named(expr.orelse)
    if isinstance(expr, ast.Dict):
        return set().union(
            *(_named(v) for k, v in zip(expr.keys, expr.values, strict=True) if k is None)
        )
    return set()


def _keys(expr: ast.expr, called: set[str]) -> set[str]:
    """The string keys an evidence expression holds at its top level."""
    if isinstance(expr, ast.Dict):
        found: set[str] = set()
        for key, value in zip(expr.keys, expr.values, strict=True):
            if key is None:  # {**other, ...}
                found |= _keys(value, called)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
        return found
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _keys(expr.left, called) | _keys(expr.right, called)
    if isinstance(expr, ast.IfExp):
        return _keys(expr.body, called) | _keys(expr.orelse, called)
    if isinstance(expr, ast.Call):
        func = expr.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name == "dict":
            return {k.arg for k in expr.keywords if k.arg is not None} | set().union(
                *(_keys(a, called) for a in expr.args)
            )
        if isinstance(name, str):
            called.add(name)
    return set()
