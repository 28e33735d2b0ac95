"""Comparable file locations for Iceberg orphan cleanup: Java's ``FileURI`` with Hadoop ``Path`` normalisation.

Metadata stores absolute URIs exactly as a writer spelled them (``s3a://b/t/data/x.parquet``,
``file:/wh/t/…``, ``/wh/t/…``), while a listing yields the store's own spelling (``s3://b/t/data/…``).
Comparing strings turns every live file into an orphan as soon as one side spells a scheme or an
authority differently (apache/iceberg #4346, #4194, #2890, #1471), so Java 1.1.0 (PR #4652,
``DeleteOrphanFilesSparkAction`` + ``core/.../actions/FileURI.java``) compares this way, and so do we:

1. Parse a location as Hadoop's ``new Path(s).toUri()`` does: the scheme is what precedes a ``:`` that
   comes before the first ``/``; an authority follows ``//``; the rest is the path. Nothing is
   percent-decoded (Hadoop takes the string literally, and so do pyiceberg's and our FileIOs).
2. Normalise the path: runs of ``/`` collapse to one, ``.``/``..`` segments resolve
   (``java.net.URI.normalize``), a trailing ``/`` goes (``Path.normalizePath``).
3. Map the scheme through ``equal_schemes`` (default ``{"s3a": "s3", "s3n": "s3"}``, Java's
   ``ImmutableMap.of("s3n,s3a", "s3")``; keys may be comma lists, user entries win) and the authority
   through ``equal_authorities`` (default none).
4. Join on the path alone. A listed file whose path no valid location has is an orphan; one whose
   valid twin has the same scheme and authority (case-insensitive; a missing or empty scheme or
   authority on the *valid* side matches anything, so ``/wh/t/x`` in metadata matches a listed
   ``file:/wh/t/x``) is valid; any other match is a *prefix mismatch*, which Java's default mode
   ``ERROR`` turns into a failed run. Here the mismatch always keeps the file: ``error`` (default)
   aborts the run before anything is deleted, ``ignore`` keeps it and reports it; Java's ``DELETE``
   mode is deliberately not offered.

Example:
    >>> normaliser = LocationNormaliser()
    >>> normaliser.parse("s3a://bucket//wh/t/data/x.parquet")
    FileURI(scheme='s3', authority='bucket', path='/wh/t/data/x.parquet')
    >>> normaliser.parse("/wh/t/./data/x.parquet")
    FileURI(scheme=None, authority=None, path='/wh/t/data/x.parquet')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

#: Java's default ``equalSchemes`` (``DeleteOrphanFilesSparkAction.EQUAL_SCHEMES_DEFAULT``), flattened.
DEFAULT_EQUAL_SCHEMES: dict[str, str] = {"s3a": "s3", "s3n": "s3"}

PrefixMismatchMode = Literal["error", "ignore"]
PREFIX_MISMATCH_MODES: tuple[str, ...] = ("error", "ignore")


@dataclass(frozen=True, slots=True)
class FileURI:
    """A location's scheme (lower case, mapped), authority (mapped; None if absent) and normalised path."""

    scheme: str | None
    authority: str | None
    path: str

    def render(self) -> str:
        """The location as a URI again (``s3://bucket/key``, ``file:/abs``, ``/abs``)."""
        if self.scheme is None:
            return self.path if self.authority is None else f"//{self.authority}{self.path}"
        if self.authority is None:
            return f"{self.scheme}:{self.path}"
        return f"{self.scheme}://{self.authority}{self.path}"


def split_location(location: str) -> tuple[str | None, str | None, str]:
    """``(scheme, authority, raw path)`` of a location, parsed exactly as Hadoop's ``Path(String)`` does.

    An empty authority (``file:///x``) comes back as ``""``; the caller decides what it means.
    """
    scheme: str | None = None
    authority: str | None = None
    start = 0
    colon = location.find(":")
    slash = location.find("/")
    if colon != -1 and (slash == -1 or colon < slash):
        scheme = location[:colon]
        start = colon + 1
    if location.startswith("//", start) and len(location) - start > 2:
        next_slash = location.find("/", start + 2)
        end = next_slash if next_slash > 0 else len(location)
        authority = location[start + 2 : end]
        start = end
    return scheme, authority, location[start:]


def normalise_path(path: str) -> str:
    """Collapse ``//``, resolve ``.`` and ``..``, strip a trailing ``/`` (the root stays ``/``)."""
    absolute = path.startswith("/")
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not absolute:
                parts.append(segment)
            continue
        parts.append(segment)
    joined = "/".join(parts)
    return "/" + joined if absolute else joined or "."


def _flatten(mapping: Mapping[str, str] | None) -> dict[str, str]:
    """``{"s3n,s3a": "s3"}`` -> ``{"s3n": "s3", "s3a": "s3"}`` (Java's ``flattenMap``), keys stripped."""
    flat: dict[str, str] = {}
    for keys, value in (mapping or {}).items():
        for key in keys.split(","):
            if key.strip():
                flat[key.strip()] = value.strip()
    return flat


class LocationNormaliser:
    """Turns locations into :class:`FileURI` under one set of scheme and authority equivalences.

    Args:
        equal_schemes: extra scheme equivalences, merged over :data:`DEFAULT_EQUAL_SCHEMES`
            (``{"s3a,s3n": "s3"}``; keys may be comma lists, as in Java's ``equal_schemes``).
        equal_authorities: authority equivalences (``{"nn1,nn2": "ns"}``), none by default.

    Example:
        >>> LocationNormaliser(equal_authorities={"old-bucket": "bucket"}).parse("s3://old-bucket/k").authority
        'bucket'
    """

    def __init__(
        self,
        equal_schemes: Mapping[str, str] | None = None,
        equal_authorities: Mapping[str, str] | None = None,
    ) -> None:
        self.equal_schemes = {
            k.lower(): v.lower() for k, v in {**DEFAULT_EQUAL_SCHEMES, **_flatten(equal_schemes)}.items()
        }
        self.equal_authorities = _flatten(equal_authorities)

    def scheme(self, scheme: str | None) -> str | None:
        if not scheme:
            return None
        lowered = scheme.lower()
        return self.equal_schemes.get(lowered, lowered)

    def authority(self, authority: str | None) -> str | None:
        if not authority:
            return None
        return self.equal_authorities.get(authority, authority)

    def parse(self, location: str) -> FileURI:
        """The comparable form of one location (see the module docstring)."""
        scheme, authority, path = split_location(location)
        if "//" in path or "/." in path or path.endswith("/") or not path.startswith("/"):
            path = normalise_path(path)  # the common, already normal absolute path skips the split
        return FileURI(self.scheme(scheme), self.authority(authority), path)


def components_match(valid: str | None, actual: str | None) -> bool:
    """Java ``FileURI.uriComponentMatch``: a missing valid component matches anything; else equal ignoring case."""
    if not valid:
        return True
    return actual is not None and valid.lower() == actual.lower()


@dataclass(frozen=True, slots=True)
class PrefixMismatch:
    """A listed file whose path is valid under another scheme or authority: never deleted."""

    actual: str
    valid: str


class ValidLocations:
    """The valid set, indexed by normalised path, each path with the (scheme, authority) pairs it was seen with.

    Memory: one dict entry per distinct path; the usual single spelling per path is stored as one shared
    tuple, so a million valid files cost about what a set of their paths costs.

    Example:
        >>> valid = ValidLocations(LocationNormaliser())
        >>> valid.add("s3a://bucket/wh/t/data/a.parquet")
        >>> valid.classify(FileURI("s3", "bucket", "/wh/t/data/a.parquet"))
        'valid'
        >>> valid.classify(FileURI("s3", "other", "/wh/t/data/a.parquet"))
        'mismatch'
    """

    def __init__(self, normaliser: LocationNormaliser) -> None:
        self.normaliser = normaliser
        self._by_path: dict[str, tuple[str | None, str | None] | set[tuple[str | None, str | None]]] = {}
        self._prefixes: dict[tuple[str | None, str | None], tuple[str | None, str | None]] = {}

    def __len__(self) -> int:
        return len(self._by_path)

    def __contains__(self, path: str) -> bool:
        return path in self._by_path

    def add(self, location: str) -> None:
        uri = self.normaliser.parse(location)
        key = (uri.scheme, uri.authority.lower() if uri.authority else None)
        prefix = self._prefixes.setdefault(key, key)
        current = self._by_path.get(uri.path)
        if current is None:
            self._by_path[uri.path] = prefix
        elif isinstance(current, set):
            current.add(prefix)
        elif current != prefix:
            self._by_path[uri.path] = {current, prefix}

    def update(self, locations: Iterable[str]) -> None:
        for location in locations:
            self.add(location)

    def prefixes_of(self, path: str) -> list[tuple[str | None, str | None]]:
        current = self._by_path.get(path)
        if current is None:
            return []
        return sorted(current, key=str) if isinstance(current, set) else [current]

    def classify(self, actual: FileURI) -> Literal["orphan", "valid", "mismatch"]:
        """``orphan`` (no valid path), ``valid`` (a compatible spelling) or ``mismatch`` (Java's conflict)."""
        current = self._by_path.get(actual.path)
        if current is None:
            return "orphan"
        for scheme, authority in current if isinstance(current, set) else (current,):
            if components_match(scheme, actual.scheme) and components_match(authority, actual.authority):
                return "valid"
        return "mismatch"
