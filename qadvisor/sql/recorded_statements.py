"""Statement texts as pg_stat_statements records them, read for function claims.

``called_functions(texts)``: the functions the statements call (``SELECT ... FROM
procrastinate_fetch_job_v2($1, $2)`` is, with the default ``track = top``, the only trace of a
claim made inside a function). ``match_nested(text, claims)``: the claim a statement recorded
inside a function (``track = all``, ``toplevel = false``) came from. ``own_parameters(text)``:
which ``$n`` are surely the statement's own parameters, not constants pg_stat_statements hid;
``writes_rows(text)``: whether it writes. Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlglot import Token, TokenType, exp

from qadvisor.sql import dequeue
from qadvisor.sql.function_claims import FunctionClaim
from qadvisor.sql.plpgsql import (
    EXPRESSION_CONTEXTS,
    STRING_TOKENS,
    is_placeholder,
    name_of,
    word,
)


def match_nested(text: str, claims: Sequence[FunctionClaim]) -> FunctionClaim | None:
    """The claim whose body statement pg_stat_statements recorded as ``text``.

    With ``track = all`` a function's statement is recorded as PL/pgSQL runs it (an
    expression without the ``SELECT`` qadvisor plans it with, an assignment with its
    target), its constants turned into ``$n`` (numbered after the function's own
    parameters, so with gaps), and its variables left as names; PostgreSQL 18 also turns the
    variables into ``$n`` in a statement where it squashes a list (``IN ($3 /*, ... */)``).
    So a recorded ``$n`` matches a constant of the claim (a signed number, a string,
    TRUE/FALSE/NULL, or a whole squashed list), and a placeholder of the claim matches a
    recorded ``$n`` or name (``target_queue_names``, ``r.id``); everything else must be the
    same token. Returns the first claim that matches (plan its ``text`` with its
    ``param_types``: its constants are the body's literals), or None.
    """
    try:
        recorded = dequeue.tokenize(text, plpgsql=True)
    except dequeue.StatementError:
        return None
    for claim in claims:
        if not claim.text:
            continue
        try:
            written = dequeue.tokenize(claim.text, plpgsql=True)
        except dequeue.StatementError:
            continue
        mine = recorded
        if claim.context == "assignment":
            mine = _assigned_value(recorded)
        if _same_statement(_as_recorded(written, claim.context), mine):
            return claim
    return None


def _as_recorded(tokens: list[Token], context: str) -> list[Token]:
    """The claim's tokens as PL/pgSQL runs them: an expression or an assignment's value
    without the SELECT qadvisor put in front."""
    if context in EXPRESSION_CONTEXTS and tokens and word(tokens[0]) == "SELECT":
        return tokens[1:]
    return tokens


def _assigned_value(tokens: list[Token]) -> list[Token]:
    """The value of a recorded assignment ``v := value`` / ``r.f = value`` / ``a[1] := v``."""
    for k, token in enumerate(tokens):
        if token.token_type in (TokenType.COLON_EQ, TokenType.EQ):
            return tokens[k + 1 :]
    return tokens


def _name_path_length(tokens: Sequence[Token], j: int) -> int:
    """Tokens of ``a``, ``a.b`` or ``a.b.c`` at ``j`` (not a function call); 0 if none."""
    k = j
    # Any word: a variable or field may be spelled like a keyword sqlglot knows (job.lock).
    while k < len(tokens) and name_of(tokens[k]) is not None:
        k += 1
        if k + 1 < len(tokens) and tokens[k].token_type == TokenType.DOT:
            k += 1
            continue
        break
    if k == j or (k < len(tokens) and tokens[k].token_type == TokenType.L_PAREN):
        return 0
    return k - j


def _same_statement(written: Sequence[Token], recorded: Sequence[Token]) -> bool:
    i = j = 0
    while i < len(written) and j < len(recorded):
        if is_placeholder(written, i):
            # A variable of the function: recorded as its name, or as $n by PostgreSQL 18.
            n = 2 if is_placeholder(recorded, j) else _name_path_length(recorded, j)
            if not n:
                return False
            i += 2
            j += n
        elif is_placeholder(recorded, j):
            n = _constant_length(written, i)
            if not n:
                return False
            i += n
            j += 2
        elif _same_token(written[i], recorded[j]):
            i += 1
            j += 1
            continue
        else:
            return False
        # PostgreSQL 18 records IN (1, 2, 3) and ARRAY[1, x] as one "$n /*, ... */".
        if j < len(recorded) and recorded[j].token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            while i < len(written) and written[i].token_type == TokenType.COMMA:
                n = 2 if is_placeholder(written, i + 1) else _constant_length(written, i + 1)
                if not n:
                    break
                i += 1 + n
    return i == len(written) and j == len(recorded)


def _constant_length(tokens: Sequence[Token], i: int) -> int:
    if i >= len(tokens):
        return 0
    token = tokens[i]
    if token.token_type in STRING_TOKENS or token.token_type == TokenType.NUMBER:
        return 1
    if word(token) in ("TRUE", "FALSE", "NULL"):
        return 1
    if (
        token.token_type == TokenType.DASH
        and i + 1 < len(tokens)
        and tokens[i + 1].token_type == TokenType.NUMBER
    ):
        return 2
    return 0


def _same_token(a: Token, b: Token) -> bool:
    if a.token_type != b.token_type:
        return False
    if a.token_type in STRING_TOKENS or a.token_type == TokenType.IDENTIFIER:
        return bool(a.text == b.text)
    return str(a.text).lower() == str(b.text).lower()


# Words before "name(" that make it something other than a call: INSERT INTO t(...),
# ... AS t(a, b), CREATE TABLE t(...), CREATE FUNCTION f(...).
_NOT_CALLS = frozenset({"INTO", "AS", "TABLE", "FUNCTION", "PROCEDURE"})


def called_functions(texts: Iterable[str]) -> set[tuple[str | None, str]]:
    """(schema or None, name) of every function called in these statements, as PostgreSQL
    folds the names; the catalog decides which of them are functions of this database."""
    found: set[tuple[str | None, str]] = set()
    for text in texts:
        try:
            tokens = dequeue.tokenize(text, plpgsql=True)
        except dequeue.StatementError:
            continue
        for k, token in enumerate(tokens):
            if token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
                continue
            if k + 1 >= len(tokens) or tokens[k + 1].token_type != TokenType.L_PAREN:
                continue
            name = name_of(token)
            if name is None:
                continue
            schema = None
            before = k - 1
            if k >= 2 and tokens[k - 1].token_type == TokenType.DOT:
                schema = name_of(tokens[k - 2])
                before = k - 3
            if before >= 0 and word(tokens[before]) in _NOT_CALLS:
                continue
            found.add((schema, name))
    return found


# Types PostgreSQL writes constants of as ``type 'text'``, which pg_stat_statements records as
# ``type $n``: a form PREPARE refuses (a syntax error), since only a string may follow there.
_TYPED_CONSTANTS = frozenset({"INTERVAL", "DATE", "TIME", "TIMETZ", "TIMESTAMP", "TIMESTAMPTZ"})


def typed_constant_placeholder(text: str) -> str | None:
    """The first ``interval $3`` (a typed constant recorded as a parameter) of a statement
    recorded by pg_stat_statements, or None. Such a text cannot be prepared."""
    tokens = dequeue.tokenize(text, plpgsql=True)
    for i in range(1, len(tokens)):
        if not is_placeholder(tokens, i):
            continue
        before = word(tokens[i - 1])
        # timestamp with time zone $1 (not ts AT TIME ZONE $1, which is an expression)
        zoned = before == "ZONE" and i >= 3 and word(tokens[i - 3]) in ("WITH", "WITHOUT")
        if before in _TYPED_CONSTANTS or zoned:
            start = i - 4 if zoned else i - 1
            return " ".join(t.text for t in tokens[start:i]) + f" ${tokens[i + 1].text}"
    return None


def own_parameters(text: str) -> int:
    """How many of a pg_stat_statements text's ``$n`` are surely the statement's own
    parameters, bound by the application: ``$1`` to ``$k`` for the returned ``k``.

    pg_stat_statements replaces each constant it hides with ``$n``, numbering them from one
    more than the statement's highest parameter, in the order they appear (its
    generate_normalized_query). So above the statement's own parameters, the numbers appear
    once each and in increasing order; the smallest ``k`` whose higher numbers do is a floor
    for the statement's own parameters, every ``$n`` up to it is one of them, and those above
    it may each be a constant the application wrote (pgqueuer's ``status = $5`` after its own
    ``$1`` to ``$4``). 0 when every ``$n`` may be a constant (they appear in order, each once);
    the count of ``$n`` when the text cannot be read."""
    try:
        tokens = dequeue.tokenize(text, plpgsql=True)
    except dequeue.StatementError:
        return 0
    seen = [
        int(tokens[i + 1].text)
        for i in range(len(tokens) - 1)
        if is_placeholder(tokens, i) and str(tokens[i + 1].text).isdigit()
    ]
    highest = max(seen, default=0)
    for k in range(highest + 1):
        above = [n for n in seen if n > k]
        if above == list(range(k + 1, highest + 1)):
            return k
    return highest


def writes_rows(text: str) -> bool:
    """The statement inserts, updates or deletes rows (in a WITH query too); True for text
    that does not parse (it may)."""
    try:
        tree = dequeue.parse(text, plannable=False)
    except dequeue.StatementError:
        return True
    return any(isinstance(n, exp.Insert | exp.Update | exp.Delete) for n in tree.walk())
