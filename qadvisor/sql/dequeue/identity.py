"""A dequeue statement's identity: the fingerprint of its shape, the same for the same
statement whatever its constants, spacing or case.

Nothing here talks to PostgreSQL or does I/O.
"""

from __future__ import annotations

import hashlib

from sqlglot import TokenType

from qadvisor.sql.dequeue.screening import is_placeholder, tokenize

# Type names that may stand before a string constant as a typed literal (interval '1 hour').
TYPED_LITERALS = {TokenType.INTERVAL, TokenType.DATE, TokenType.TIME, TokenType.TIMESTAMP,
                  TokenType.TIMESTAMPTZ, TokenType.TIMETZ, TokenType.UUID, TokenType.JSON,
                  TokenType.JSONB, TokenType.INET}  # fmt: skip


_CONSTANTS = {TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING, TokenType.BIT_STRING,
              TokenType.HEX_STRING, TokenType.BYTE_STRING}  # fmt: skip


FINGERPRINT_HEX = 10


def fingerprint(sql: str) -> str:
    """A short hash of the statement's shape, the same wherever the statement is seen.

    pg_stat_statements shows constants as ``$n`` and numbers its parameters per entry, an
    application's file shows literals, and PostgreSQL 18 squashes constant lists into
    ``IN ($1 /*, ... */)``; a queryid changes with table OIDs (a restore from a dump, an
    upgrade). So the hash is taken over the tokens with every constant and parameter as
    ``?``, runs of them (IN lists, array items) as one ``?``, comments and spacing dropped,
    keywords upper case and unquoted names folded to lower case as PostgreSQL folds them.
    """
    words: list[str] = []
    tokens = tokenize(sql.strip().rstrip(";"))
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if (
            token.token_type == TokenType.DCOLON
            and words[-1:] == ["?"]
            and i + 1 < len(tokens)
            and tokens[i + 1].token_type in TYPED_LITERALS
        ):
            i += 2  # $4::interval (a typed placeholder rewritten) is $4
            continue
        if (
            i
            and token.token_type in (*_CONSTANTS, TokenType.PARAMETER)
            and tokens[i - 1].token_type in TYPED_LITERALS
            and words[-1:] == [tokens[i - 1].text.upper()]
        ):
            # interval '1 hour' in a file, interval $4 (15 and later) and $4 (14) in
            # pg_stat_statements: one constant.
            words.pop()
        if (
            token.token_type == TokenType.PARAMETER
            and i + 1 < len(tokens)
            and is_placeholder(token, tokens[i + 1])
        ):
            word, i = "?", i + 2
        elif token.token_type in _CONSTANTS:
            word, i = "?", i + 1
        else:
            i += 1
            if token.token_type == TokenType.IDENTIFIER:
                word = '"' + token.text.replace('"', '""') + '"'
            elif token.token_type == TokenType.VAR:
                word = token.text.lower()
            else:
                word = token.text.upper()
        if word == "?" and words[-2:-1] == ["?"] and words[-1] == ",":
            words.pop()  # "?, ?" -> "?": lists of constants have no fixed length
            continue
        if words[-1:] == ["?"] and word == "?":
            continue
        words.append(word)
    digest = hashlib.sha256(" ".join(words).encode()).hexdigest()
    return digest[:FINGERPRINT_HEX]
