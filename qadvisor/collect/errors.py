"""Why collection stopped: only the server itself or bad input end a run."""

from __future__ import annotations

from qadvisor.errors import InputError


class CollectError(InputError):
    """A fact every check needs could not be read; the message is safe to print."""


class TableNotFound(CollectError):
    """A table named by the user does not resolve to a table of this database."""
