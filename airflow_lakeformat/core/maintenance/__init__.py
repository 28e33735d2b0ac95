"""Maintenance operations on the core: each plans a value first, then executes against the current table."""
