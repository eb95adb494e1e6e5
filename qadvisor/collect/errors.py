"""Why collection stopped: only the server itself or bad input end a run."""

from __future__ import annotations

from qadvisor.errors import InputError, NotJudgedError


class CollectError(NotJudgedError):
    """A fact every check needs could not be read; the message is safe to print."""


class TableNotFound(InputError):
    """A table named by the user does not resolve to a table of this database."""
