"""Generated documentation: takes the installed checks, the facts table and the snapshot's
dataclasses, gives the check pages, the privileges page and the snapshot's JSON Schema.
"""
