"""Short reprs for operation results: ``<IcebergExpiryResult dry run: would expire 3 of 5 snapshots; ...>``.

A result is a dataclass holding its plan, every file it decided on and every warning, so the repr a
dataclass generates runs to kilobytes in a notebook, a log line or a test failure. :func:`short_repr`
replaces it with one line built from the result's own ``summary()`` (what the CLI prints and the operators
log): the class name, ``dry run:`` for a dry run, and the summary without its leading ``<table>: ``
(the table is in ``to_json()``), cut to :data:`MAX_SUMMARY` characters.

It is a class decorator, not a mixin, because ``@dataclass`` writes its own ``__repr__`` into the class;
the decorator goes above ``@dataclass`` so that it runs after it (one line per result class).

Example:
    >>> @short_repr
    ... @dataclass
    ... class Result:
    ...     table: str
    ...     dry_run: bool
    ...     def summary(self) -> str:
    ...         return f"{self.table}: would expire 3 snapshots"
    >>> Result("/wh/t", True)
    <Result dry run: would expire 3 snapshots>
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T", bound=type)

#: The longest summary kept in a repr (the whole repr stays well under 300 characters).
MAX_SUMMARY = 200


def result_repr(result: Any) -> str:
    """The one-line repr of ``result``: anything with ``summary()``, and ``table`` and ``dry_run`` attributes
    or a ``to_json()`` document saying them (``table``, ``dryRun``).

    Args:
        result: an operation's result.

    Returns:
        ``<ClassName [dry run: ]summary>``.
    """
    line = str(result.summary())
    table, dry_run = getattr(result, "table", None), getattr(result, "dry_run", None)
    if not isinstance(table, str) or not isinstance(dry_run, bool):
        document = result.to_json() if hasattr(result, "to_json") else {}
        table, dry_run = document.get("table"), bool(document.get("dryRun"))
    if isinstance(table, str) and table and line.startswith(f"{table}: "):
        line = line[len(table) + 2 :]
    if dry_run and not line.startswith("dry run"):
        line = f"dry run: {line}"
    if len(line) > MAX_SUMMARY:
        line = line[: MAX_SUMMARY - 1] + "…"
    return f"<{type(result).__name__} {line}>"


def short_repr(cls: T) -> T:
    """Class decorator: ``repr()`` of the class's instances is :func:`result_repr` (put it above ``@dataclass``).

    Args:
        cls: a result class with ``summary()``.

    Returns:
        The same class.
    """
    setattr(cls, "__repr__", result_repr)  # noqa: B010 (a method assignment mypy would refuse)
    return cls
