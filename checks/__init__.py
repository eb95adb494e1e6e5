"""The built-in check pack."""
