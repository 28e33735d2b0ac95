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
        if not is_normal_path(path):
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


Prefix = tuple[str | None, str | None]


def is_normal_path(path: str) -> bool:
    """Whether :func:`normalise_path` would return ``path`` unchanged (absolute, no ``//``, no ``.`` or
    ``..`` segment, no trailing ``/``), checked with substring searches only."""
    return (
        path[:1] == "/"
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.endswith(("/", "/.", "/.."))
    )


def split_dir(path: str) -> tuple[str, str]:
    """``("/a/b/", "c")`` for ``"/a/b/c"``: the directory with its trailing ``/``, and the name."""
    cut = path.rfind("/") + 1
    return path[:cut], path[cut:]


_SPECIAL_NAMES = frozenset(("", ".", ".."))


class ValidLocations:
    """The valid set, indexed by normalised path, each path with the (scheme, authority) pairs it was seen with.

    Memory: paths are held as directory -> name -> spelling, so a directory's string is stored once and
    each file costs its name and one dict slot; the usual single spelling per path is one shared tuple.
    A million valid files cost less than a set of their full paths.

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
        self._dirs: dict[str, dict[str, Prefix | set[Prefix]]] = {}
        self._spellings: dict[str, set[Prefix]] = {}  # directory -> every spelling any of its names has
        self._prefixes: dict[Prefix, Prefix] = {}
        # directory part as spelled -> (names dict, spelling) or None (not normal): kept across calls,
        # as a table's partitions recur in every manifest. Entries of _dirs are never removed.
        self._resolved: dict[str, tuple[dict[str, Prefix | set[Prefix]], Prefix] | None] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, path: str) -> bool:
        directory, name = split_dir(path)
        names = self._dirs.get(directory)
        return names is not None and name in names

    def _store(self, path: str, prefix: Prefix) -> None:
        directory, name = split_dir(path)
        names = self._dirs.get(directory)
        if names is None:
            names = self._dirs[directory] = {}
        self._spellings.setdefault(directory, set()).add(prefix)
        current = names.get(name)
        if current is None:
            names[name] = prefix
            self._count += 1
        elif isinstance(current, set):
            current.add(prefix)
        elif current != prefix:
            names[name] = {current, prefix}

    def add(self, location: str) -> None:
        scheme, authority, raw = split_location(location)
        path = raw if is_normal_path(raw) else normalise_path(raw)
        key = (self.normaliser.scheme(scheme), self.normaliser.authority(authority))
        key = (key[0], key[1].lower() if key[1] else None)
        prefix = self._prefixes.setdefault(key, key)
        self._store(path, prefix)

    def add_all(self, locations: Iterable[str]) -> int:
        """Add every location; returns how many were given.

        Locations are split at their last ``/``: the directory part (scheme and authority included) is
        resolved once per distinct spelling for the life of the set (its names dict and spelling), so the
        many files of one directory cost a dict lookup each, in every manifest. A directory part that is not already normal, or a name that is
        ``.`` or ``..``, takes the full parse."""
        count = 0
        resolved = self._resolved
        for location in locations:
            count += 1
            cut = location.rfind("/") + 1
            directory = location[:cut]
            try:
                found = resolved[directory]
            except KeyError:
                found = resolved[directory] = self._resolve_directory(directory)
            name = location[cut:]
            if found is None or name in ("", ".", ".."):
                self.add(location)
                continue
            names, prefix = found
            current = names.get(name)
            if current is None:
                names[name] = prefix
                self._count += 1
            elif current is not prefix and current != prefix:
                if isinstance(current, set):
                    current.add(prefix)
                else:
                    names[name] = {current, prefix}
        return count

    def add_grouped(self, groups: Iterable[tuple[str, str]]) -> int:
        """:meth:`add_all` of ``directory + name`` for every name of each group, given as (directory part
        with its trailing ``/``, names joined with NUL); returns how many names were given.

        A directory in normal form takes its new names in one bulk insert (a set difference against the
        names it holds); names it already held get this spelling added one by one, as :meth:`add_all`
        does. A directory not in normal form, or names with ``""``, ``.`` or ``..``, go through
        :meth:`add_all`."""
        count = 0
        resolved = self._resolved
        for directory, joined in groups:
            names = joined.split("\0")
            count += len(names)
            try:
                found = resolved[directory]
            except KeyError:
                found = resolved[directory] = self._resolve_directory(directory)
            unique = set(names)
            if found is None or not unique.isdisjoint(_SPECIAL_NAMES):
                self.add_all([directory + name for name in names])
                continue
            held, prefix = found
            fresh = unique.difference(held)
            if len(fresh) < len(unique):  # names held before: add this spelling to theirs
                for name in unique.difference(fresh):
                    current = held[name]
                    if current is not prefix and current != prefix:
                        if isinstance(current, set):
                            current.add(prefix)
                        else:
                            held[name] = {current, prefix}
            held.update(dict.fromkeys(fresh, prefix))
            self._count += len(fresh)
        return count

    def _resolve_directory(self, directory: str) -> tuple[dict[str, Prefix | set[Prefix]], Prefix] | None:
        """(names dict, spelling) for the directory part of locations (``s3://b/t/data/``), or None when
        it is not in normal form (then each location is parsed in full)."""
        scheme, authority, raw = split_location(directory)
        if not raw.startswith("/") or not (raw == "/" or is_normal_path(raw[:-1])):
            return None
        key = (self.normaliser.scheme(scheme), self.normaliser.authority(authority))
        key = (key[0], key[1].lower() if key[1] else None)
        prefix = self._prefixes.setdefault(key, key)
        names = self._dirs.get(raw)
        if names is None:
            names = self._dirs[raw] = {}
        self._spellings.setdefault(raw, set()).add(prefix)
        return names, prefix

    def update(self, locations: Iterable[str]) -> None:
        self.add_all(locations)

    def names_in(self, directory: str) -> dict[str, Prefix | set[Prefix]] | None:
        """The valid names of one directory (given with its trailing ``/``), for joins by directory."""
        return self._dirs.get(directory)

    def spellings_in(self, directory: str) -> set[Prefix]:
        """Every (scheme, authority) any valid name of ``directory`` (with its trailing ``/``) was seen with."""
        return self._spellings.get(directory, set())

    def prefixes_of(self, path: str) -> list[Prefix]:
        directory, name = split_dir(path)
        current = self._dirs.get(directory, {}).get(name)
        if current is None:
            return []
        return sorted(current, key=str) if isinstance(current, set) else [current]

    @staticmethod
    def verdict(current: Prefix | set[Prefix] | None, scheme: str | None, authority: str | None) -> str:
        """``orphan``, ``valid`` or ``mismatch`` of an actual (scheme, authority) against a path's spellings."""
        if current is None:
            return "orphan"
        for valid_scheme, valid_authority in current if isinstance(current, set) else (current,):
            if components_match(valid_scheme, scheme) and components_match(valid_authority, authority):
                return "valid"
        return "mismatch"

    def classify(self, actual: FileURI) -> Literal["orphan", "valid", "mismatch"]:
        """``orphan`` (no valid path), ``valid`` (a compatible spelling) or ``mismatch`` (Java's conflict)."""
        directory, name = split_dir(actual.path)
        current = self._dirs.get(directory, {}).get(name)
        return self.verdict(current, actual.scheme, actual.authority)  # type: ignore[return-value]
