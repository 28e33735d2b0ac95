"""Health policies: the thresholds and the operations allowed, for every table, a namespace or one table.

A policy is a YAML or JSON document (a file, its text, or a mapping already parsed)::

    defaults:                        # every table
      thresholds: {min-small-files: 10}
      operations: [compact_data, compact_manifests, expire_snapshots]   # the operations ALLOWED
    namespaces:
      db:                            # the tables of namespace db (and of db.sub, ...)
        thresholds: {delete-ratio: 0.05}
    tables:
      db.events:                     # one table: namespace.name
        operations: [expire_snapshots]

Every level (``defaults``, each namespace, each table) has the same two optional keys: ``thresholds``, a
mapping of the threshold names of ``core/health/thresholds.py`` (``small-file-ratio``, ``min-small-files``,
``max-sorted-runs``, ``delete-ratio``, ``max-small-manifests``, ``min-expirable-snapshots``,
``min-expirable-partitions``, ``min-orphan-files``) to positive numbers (whole numbers for the counts), and
``operations``, the list of operations allowed (``compact_data``, ``compact_deletes``, ``compact_manifests``,
``expire_snapshots``, ``remove_orphan_files``, ``expire_partitions``); absent means every operation, ``[]``
none.

Inheritance, as Polaris's inheritable policies (catalog, then namespace, then table; the nearest level
wins): the levels that apply to a table are ``defaults``, then each namespace that is the table's namespace
or an outer one (``db`` before ``db.sub``), then the table's own entry. A threshold a level names replaces
the inherited value; an ``operations`` list a level names replaces the inherited list (lists are not merged).

Precedence of a threshold, lowest first: the built-in default, the format's own setting (e.g. Paimon's
``num-sorted-run.compaction-trigger``), the table property ``lakeformat.health.<name>``, then the policy's
``defaults``, namespaces and table. The operations allowed start from the table property
``lakeformat.health.operations`` (comma-separated; absent: all), then the policy's levels in the same order
(issue 28: "from the table's own properties, overridden by a policy file").

The table a policy entry names is ``namespace.name`` (:class:`TableKey`): an Iceberg catalog table's
identifier (``db.events``), a Paimon table path's last two parts (``/wh/db.db/events`` -> ``db.events``,
the ``.db`` suffix of the database directory dropped), an Iceberg Hadoop-layout root's last two parts
(``/wh/db/events`` -> ``db.events``). Table keys of the policy may be written either way (they are read by
the same rule).

A recommendation whose operation is not allowed is removed from the report and listed in the document's
``policy`` section (``core/health/assess.py``)::

    "policy": {"source", "table", "levels": [key paths applied], "thresholds": {what the policy set},
               "operations": [allowed], "suppressed": [{"operation", "reason", "rule"}]}

(``null`` when neither a policy nor the ``lakeformat.health.operations`` property applies).

A policy is checked whole when it is loaded; :class:`~airflow_lakeformat.core.errors.PolicyError` (a
``UsageError``, exit code 2 in the CLI) names the source and the key path as a JSON pointer
(``/tables/db.events/thresholds/min-smal-files``): an unknown key (with the close name suggested), a value
of the wrong type, a threshold that is not a number or not positive (or not whole for a count), an unknown
operation, unparsable YAML/JSON (with the file and line), a missing file.

This module is neutral: it imports no format.

Example:
    >>> policy = HealthPolicy.load({"defaults": {"operations": ["expire_snapshots"]},
    ...                             "tables": {"db.events": {"thresholds": {"min-small-files": 20}}}})
    >>> applied = policy.resolve(TableKey.parse("/wh/db.db/events"), Thresholds())
    >>> applied.thresholds.min_small_files, applied.operations
    (20, ('expire_snapshots',))
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, get_args

from airflow_lakeformat.core.errors import PolicyError, UsageError
from airflow_lakeformat.core.health.model import Operation
from airflow_lakeformat.core.health.thresholds import PROPERTY_PREFIX, Thresholds

#: The operations a policy may allow, in the order recommendations come.
OPERATIONS: tuple[str, ...] = get_args(Operation)
#: Threshold name (as in the policy and the table properties) -> the field of :class:`Thresholds`.
THRESHOLD_FIELDS: dict[str, str] = {f.name.replace("_", "-"): f.name for f in fields(Thresholds)}
#: The table property that lists the operations allowed (comma-separated).
OPERATIONS_PROPERTY = PROPERTY_PREFIX + "operations"
TOP_KEYS = ("defaults", "namespaces", "tables")
LEVEL_KEYS = ("thresholds", "operations")
POLICY_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class TableKey:
    """The name a policy knows a table by: its namespace (``""`` when none) and its name.

    Example:
        >>> TableKey.parse("s3://lake/wh/db.db/events").identifier, TableKey.parse("prod:a.b.t").namespace
        ('db.events', 'a.b')
    """

    namespace: str
    name: str

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}" if self.namespace else self.name

    @classmethod
    def parse(cls, text: str) -> TableKey:
        """The key of a path (its last two parts; a Paimon database directory's ``.db`` suffix dropped) or
        of an identifier (``[catalog:]namespace.name``).

        Args:
            text: a table root (local path or URI), ``db.db/events``, or an identifier.
        """
        if "/" in text:
            parts = [p for p in text.split("/") if p]
            if len(parts) >= 3 and parts[-2] == "metadata" and parts[-1].endswith(".metadata.json"):
                parts = parts[:-2]
            name = parts[-1] if parts else ""
            namespace = parts[-2] if len(parts) >= 2 and not parts[-2].endswith(":") else ""
            return cls(namespace.removesuffix(".db"), name)
        identifier = text.split(":", 1)[1] if ":" in text else text
        namespace, _, name = identifier.rpartition(".")
        return cls(namespace, name)


@dataclass(frozen=True)
class PolicyLevel:
    """One level of a policy: what it sets and where (``path``, a JSON pointer such as ``/namespaces/db``)."""

    path: str
    thresholds: dict[str, int | float] = field(default_factory=dict)
    operations: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AppliedPolicy:
    """A policy resolved for one table: its thresholds and the operations it allows (None: all).

    Attributes:
        source: where the policy came from (a file, ``<text>``, ``<mapping>``, a Variable), or
            ``table property lakeformat.health.operations`` when only the property restricts.
        table: the table's key (None when it could not be named).
        thresholds: the thresholds after every override.
        operations: the operations allowed (None: every one).
        levels: the key paths of the levels that applied, outermost first.
        overrides: the thresholds the policy set (by name), after inheritance.
        rule: where the allowed list came from (a key path or the table property).
    """

    source: str
    table: TableKey | None
    thresholds: Thresholds
    operations: tuple[str, ...] | None
    levels: tuple[str, ...] = ()
    overrides: dict[str, int | float] = field(default_factory=dict)
    rule: str | None = None

    def allows(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations

    def to_json(self, suppressed: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The document's ``policy`` section (``suppressed``: the recommendations removed)."""
        return {
            "source": self.source,
            "table": None if self.table is None else self.table.identifier,
            "levels": list(self.levels),
            "thresholds": dict(self.overrides),
            "operations": [op for op in OPERATIONS if self.allows(op)],
            "suppressed": [dict(s) for s in suppressed],
        }


class HealthPolicy:
    """A checked health policy (see the module docstring for the document and the inheritance).

    Build it with :meth:`load`; the Airflow layer's ``hooks/health_policy.load_policy`` also reads one from
    an Airflow Variable.
    """

    def __init__(
        self,
        source: str,
        defaults: PolicyLevel,
        namespaces: Mapping[str, PolicyLevel],
        tables: Mapping[str, PolicyLevel],
        document: Mapping[str, Any] | None = None,
    ) -> None:
        self.source = source
        self.defaults = defaults
        self.namespaces = dict(namespaces)
        self.tables = dict(tables)
        #: the checked document it was built from, as JSON (what a trigger serializes; ``from_mapping`` rebuilds)
        self.document: dict[str, Any] = dict(document or {})

    @classmethod
    def load(
        cls, source: str | os.PathLike[str] | Mapping[str, Any], *, name: str | None = None
    ) -> HealthPolicy:
        """Read and check a policy.

        Args:
            source: a path to a ``.yaml``/``.yml``/``.json`` file (a ``Path``, or a one-line string naming
                an existing file or ending in one of those suffixes), the YAML/JSON text itself, or a mapping.
            name: what messages and the document call the source (default: the path, ``<text>`` or
                ``<mapping>``).

        Raises:
            PolicyError: the file is missing or unparsable, or a key or value is wrong (the key path named).

        Example:
            >>> HealthPolicy.load("defaults: {operations: [expire_snapshots]}").defaults.operations
            ('expire_snapshots',)
        """
        if isinstance(source, Mapping):
            return cls.from_mapping(source, name or "<mapping>")
        if isinstance(source, os.PathLike):
            return cls._from_file(Path(source), name)
        if not isinstance(source, str):
            raise PolicyError(
                name or "<argument>", f"expected a path, YAML/JSON text or a mapping, got {_kind(source)}"
            )
        text = source
        one_line = "\n" not in text.strip() and not text.lstrip().startswith("{")
        if one_line:
            path = Path(text.strip()).expanduser()
            if path.is_file() or path.suffix.lower() in POLICY_SUFFIXES:
                return cls._from_file(path, name)
        label = name or "<text>"
        data = parse_policy_text(text, label)
        if one_line and not isinstance(data, Mapping):
            raise PolicyError(label, f"{text.strip()!r} is neither a policy file nor a YAML/JSON mapping")
        return cls.from_mapping(data, label)

    @classmethod
    def _from_file(cls, path: Path, name: str | None) -> HealthPolicy:
        label = name or str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PolicyError(label, "no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(label, f"cannot be read ({exc})") from None
        return cls.from_mapping(parse_policy_text(text, label, suffix=path.suffix.lower()), label)

    @classmethod
    def from_mapping(cls, data: Any, source: str) -> HealthPolicy:
        """Check a parsed document and build the policy (``source`` names it in messages)."""
        if data is None:
            raise PolicyError(source, "is empty: expected a mapping of defaults, namespaces, tables")
        _expect_mapping(data, source, "", "a mapping of defaults, namespaces, tables")
        for key in data:
            if key not in TOP_KEYS:
                raise PolicyError(source, f"unknown key{_suggest(key, TOP_KEYS)}", _pointer(key))
        defaults = _level(_or_empty(data.get("defaults")), source, _pointer("defaults"))
        namespaces: dict[str, PolicyLevel] = {}
        for ns, body in _entries(data, "namespaces", source).items():
            path = _pointer("namespaces", ns)
            if not ns.strip(".") or "/" in ns:
                raise PolicyError(source, "name a namespace as 'db' or 'db.sub'", path)
            namespaces[ns.strip(".")] = _level(body, source, path)
        tables: dict[str, PolicyLevel] = {}
        for table, body in _entries(data, "tables", source).items():
            path = _pointer("tables", table)
            key = TableKey.parse(table)
            if not key.namespace or not key.name:
                raise PolicyError(source, "name a table as 'namespace.table' (or its path)", path)
            if key.identifier in tables:
                raise PolicyError(source, f"names the table {key.identifier} a second time", path)
            tables[key.identifier] = _level(body, source, path)
        return cls(source, defaults, namespaces, tables, json.loads(json.dumps(data, default=str)))

    def levels_for(self, table: TableKey | None) -> list[PolicyLevel]:
        """The levels that apply to ``table``, outermost first (only ``defaults`` when it has no key)."""
        levels = [self.defaults]
        if table is None:
            return levels
        parts = table.namespace.split(".") if table.namespace else []
        for i in range(1, len(parts) + 1):
            found = self.namespaces.get(".".join(parts[:i]))
            if found is not None:
                levels.append(found)
        own = self.tables.get(table.identifier)
        return levels + ([own] if own is not None else [])

    def resolve(
        self, table: TableKey | None, thresholds: Thresholds, properties: Mapping[str, str] | None = None
    ) -> AppliedPolicy:
        """The policy for ``table``: ``thresholds`` (the table's own, resolved) overridden level by level.

        Args:
            table: the table's key (:meth:`TableKey.parse`).
            thresholds: the thresholds from the defaults, the format and the table properties.
            properties: the table's properties (for ``lakeformat.health.operations``).
        """
        operations, rule = operations_property(properties or {})
        overrides: dict[str, int | float] = {}
        levels = self.levels_for(table)
        for level in levels:
            overrides.update(level.thresholds)
            if level.operations is not None:
                operations, rule = level.operations, _pointer_join(level.path, "operations")
        changes: dict[str, Any] = {THRESHOLD_FIELDS[k]: v for k, v in overrides.items()}
        return AppliedPolicy(
            source=self.source,
            table=table,
            thresholds=replace(thresholds, **changes),
            operations=operations,
            levels=tuple(level.path for level in levels if level.thresholds or level.operations is not None),
            overrides=overrides,
            rule=rule,
        )

    def __repr__(self) -> str:
        return f"HealthPolicy({self.source!r}, namespaces={sorted(self.namespaces)}, tables={sorted(self.tables)})"


def applied_policy(
    policy: HealthPolicy | None, table: TableKey | None, thresholds: Thresholds, properties: Mapping[str, str]
) -> AppliedPolicy | None:
    """What restricts a table's report: ``policy`` resolved for it, or only the table's
    ``lakeformat.health.operations`` property; None when neither applies.

    Raises:
        UsageError: the property names an unknown operation.
    """
    if policy is not None:
        return policy.resolve(table, thresholds, properties)
    operations, rule = operations_property(properties)
    if operations is None:
        return None
    return AppliedPolicy(rule or OPERATIONS_PROPERTY, table, thresholds, operations, rule=rule)


def operations_property(properties: Mapping[str, str]) -> tuple[tuple[str, ...] | None, str | None]:
    """The operations the table property ``lakeformat.health.operations`` allows (None: absent) and its name.

    Raises:
        UsageError: an unknown operation, naming the property and the close name.
    """
    raw = properties.get(OPERATIONS_PROPERTY)
    if raw is None:
        return None, None
    names = tuple(n.strip() for n in str(raw).split(",") if n.strip())
    for n in names:
        if n not in OPERATIONS:
            raise UsageError(
                f"table property {OPERATIONS_PROPERTY}={raw!r}: unknown operation{_suggest(n, OPERATIONS)}"
            )
    return names, f"table property {OPERATIONS_PROPERTY}"


def parse_policy_text(text: str, source: str, *, suffix: str = "") -> Any:
    """The document in ``text``: JSON for a ``.json`` file, else YAML (JSON is YAML too).

    Raises:
        PolicyError: unparsable (with the line), or YAML while PyYAML is not installed.
    """
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyError(
                source, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        if text.lstrip().startswith("{"):
            return parse_policy_text(text, source, suffix=".json")
        raise PolicyError(source, "YAML needs PyYAML (pip install pyyaml); give the policy as JSON") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PolicyError(source, f"not valid YAML: {problem}{where}") from None


def _entries(data: Mapping[str, Any], key: str, source: str) -> dict[str, Any]:
    """The ``namespaces``/``tables`` mapping (names are strings)."""
    body = _or_empty(data.get(key))
    _expect_mapping(body, source, _pointer(key), "a mapping of names to levels")
    for name in body:
        if not isinstance(name, str):
            raise PolicyError(
                source, f"a name must be a string, not {type(name).__name__} {name!r}", _pointer(key)
            )
    return dict(body)


def _level(body: Any, source: str, path: str) -> PolicyLevel:
    """Check one level (``thresholds``, ``operations``) and build it."""
    _expect_mapping(body, source, path, "a mapping with thresholds and/or operations")
    for key in body:
        if key not in LEVEL_KEYS:
            raise PolicyError(source, f"unknown key{_suggest(key, LEVEL_KEYS)}", _pointer_join(path, key))
    thresholds = _or_empty(body.get("thresholds"))
    _expect_mapping(
        thresholds, source, _pointer_join(path, "thresholds"), "a mapping of threshold names to numbers"
    )
    checked = {name: _threshold(name, value, source, path) for name, value in thresholds.items()}
    operations = body.get("operations")
    if operations is None:
        return PolicyLevel(path, checked, None)
    where = _pointer_join(path, "operations")
    if isinstance(operations, (str, bytes)) or not isinstance(operations, Sequence):
        raise PolicyError(source, f"expected a list of operations, got {_kind(operations)}", where)
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            raise PolicyError(
                source,
                f"unknown operation{_suggest(op, OPERATIONS)}",
                f"{where}/{i}",
            )
    return PolicyLevel(path, checked, tuple(operations))


def _threshold(name: Any, value: Any, source: str, level: str) -> int | float:
    """One threshold: a known name, a positive number (a whole one for the counts)."""
    path = _pointer_join(level, "thresholds", str(name))
    if name not in THRESHOLD_FIELDS:
        raise PolicyError(source, f"unknown threshold{_suggest(name, THRESHOLD_FIELDS)}", path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(source, f"must be a number, got {_kind(value)}", path)
    if value <= 0:
        raise PolicyError(source, f"must be positive, got {value!r}", path)
    if isinstance(getattr(Thresholds(), THRESHOLD_FIELDS[name]), float):
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise PolicyError(source, f"must be a whole number (a count), got {value!r}", path)
    return int(value)


def _or_empty(value: Any) -> Any:
    """An absent (or YAML-empty, ``key:`` with nothing after) section is an empty mapping."""
    return {} if value is None else value


def _expect_mapping(value: Any, source: str, path: str, what: str) -> None:
    if not isinstance(value, Mapping):
        raise PolicyError(source, f"expected {what}, got {_kind(value)}", path)


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _suggest(name: Any, known: Sequence[str] | Mapping[str, Any]) -> str:
    """`` 'x' (did you mean y?)``: the name and the close known one, or the list of known names."""
    names = list(known)
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"expected one of {', '.join(names)}"
    return f" {name!r} ({hint})"


def _escape(part: str) -> str:
    """RFC 6901: ``~`` as ``~0``, ``/`` as ``~1``."""
    return part.replace("~", "~0").replace("/", "~1")


def _pointer(*parts: Any) -> str:
    return "".join("/" + _escape(str(p)) for p in parts)


def _pointer_join(base: str, *parts: Any) -> str:
    return base + _pointer(*parts)
