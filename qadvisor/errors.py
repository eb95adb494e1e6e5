"""The errors that end a command with one line on stderr and exit code 2.

Each layer raises its own subclass (a config file, a setting, a pack, the connection, the
collection, a snapshot file, the demo); the command line catches this one class. A message is
one line and safe to print: no password, no traceback.
"""

from __future__ import annotations


class InputError(Exception):
    """Bad input, an unreachable server or a pack that does not load: exit code 2."""
