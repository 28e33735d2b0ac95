#!/usr/bin/env python3
"""Rebuild Iceberg's relocated Jackson jar, and check that it satisfies the Iceberg Spark runtime jar.

Why: the Java Iceberg oracle (tests/interop/iceberg_oracle.py) gets ``iceberg-spark-runtime-3.5_2.12-1.10.2.jar``
from a PyPI wheel because Maven Central is out of reach. That jar references Iceberg's shaded Jackson
(``org.apache.iceberg.shaded.com.fasterxml.jackson.*``) but does not contain it, so the first ``CREATE TABLE``
fails with ``ClassNotFoundException``. Iceberg's own build produces those classes by relocating stock Jackson;
this script does the same to the Jackson 2.15.2 jars that pyspark 3.5.7 ships in ``pyspark/jars/``:

* in every ``.class``, each constant-pool UTF8 entry containing ``com/fasterxml/jackson/`` or the dotted
  ``com.fasterxml.jackson.`` gets the ``org/apache/iceberg/shaded/`` (dotted: ``org.apache.iceberg.shaded.``)
  prefix, and its length field is fixed. Nothing else in a class file addresses those bytes by offset, so the
  rest of the file is copied unchanged;
* zip entries are renamed the same way; ``META-INF/services/*`` names and contents are rewritten;
* ``module-info.class`` and ``META-INF/versions/**`` are dropped (the base classes run on Java 17); other
  META-INF resources (licences, notices, poms) move under ``META-INF/relocated-jackson/<source jar>/``.

The checker parses class files (no JVM needed): it walks every class, method and field reference from the
runtime jar into ``org/apache/iceberg/shaded/com/fasterxml/`` (constant-pool Class/Fieldref/Methodref/
InterfaceMethodref entries, plus class names inside any descriptor or signature) and resolves each against the
provided jars, following superclasses and superinterfaces; supertypes outside the jars are read from the JDK's
``jmods`` when ``--jdk`` is given. References made by the built jar to itself are checked the same way, and any
UTF8 entry still naming unrelocated Jackson is reported. A missing class or member is a gap: exit status 1.

Pure Python (zipfile + struct), runs under any python3 >= 3.8.

Usage:
    relocate_jackson.py build --out OUT.jar (--pyspark-jars DIR | JAR [JAR ...])
    relocate_jackson.py check --runtime RUNTIME.jar --jar BUILT.jar [--jar MORE.jar ...] [--jdk JAVA_HOME] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_SLASHED = b"com/fasterxml/jackson/"
SOURCE_DOTTED = b"com.fasterxml.jackson."
SHADE_SLASHED = b"org/apache/iceberg/shaded/"
SHADE_DOTTED = b"org.apache.iceberg.shaded."
# Every relocated reference from the runtime jar lives below this package.
CHECK_PREFIX = "org/apache/iceberg/shaded/com/fasterxml/"
# The four Jackson artifacts Iceberg shades (core, databind, annotations, the java.time module).
PYSPARK_JACKSON = ("jackson-core-", "jackson-databind-", "jackson-annotations-", "jackson-datatype-jsr310-")
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # reproducible output: same inputs, same bytes

_UNSHADED = re.compile(rb"(?<!org/apache/iceberg/shaded/)com/fasterxml/jackson/")
_UNSHADED_DOTTED = re.compile(rb"(?<!org\.apache\.iceberg\.shaded\.)com\.fasterxml\.jackson\.")
_DESCRIPTOR_CLASS = re.compile(r"L([^;<>]+)[;<]")

# Constant-pool tags (JVMS 4.4) and the byte size of their payloads (UTF8 is variable).
UTF8, CLASS, FIELDREF, METHODREF, IMETHODREF, NAME_AND_TYPE = 1, 7, 9, 10, 11, 12
_FIXED_SIZES = {
    3: 4,
    4: 4,
    5: 8,
    6: 8,
    7: 2,
    8: 2,
    9: 4,
    10: 4,
    11: 4,
    12: 4,
    15: 3,
    16: 2,
    17: 4,
    18: 4,
    19: 2,
    20: 2,
}


class ClassFormatError(ValueError):
    """The bytes are not a class file this parser understands."""


# ----------------------------------------------------------------------------------------------
# Relocation
# ----------------------------------------------------------------------------------------------


def relocate_bytes(data: bytes) -> bytes:
    """Prefix every unrelocated Jackson package name (slashed or dotted) in ``data``."""
    data = _UNSHADED.sub(SHADE_SLASHED + SOURCE_SLASHED, data)
    return _UNSHADED_DOTTED.sub(SHADE_DOTTED + SOURCE_DOTTED, data)


def _constant_pool_end(data: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """Parse the constant pool; returns (offset after it, [(tag, start, end)] per slot; None-slots skipped)."""
    if len(data) < 10 or data[:4] != b"\xca\xfe\xba\xbe":
        raise ClassFormatError("not a class file (bad magic)")
    (count,) = struct.unpack_from(">H", data, 8)
    pos = 10
    entries: list[tuple[int, int, int]] = []
    index = 1
    while index < count:
        tag = data[pos]
        if tag == UTF8:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            end = pos + 3 + length
        elif tag in _FIXED_SIZES:
            end = pos + 1 + _FIXED_SIZES[tag]
        else:
            raise ClassFormatError(f"unknown constant-pool tag {tag} at offset {pos}")
        entries.append((tag, pos, end))
        # long and double take two slots; the second one has no bytes
        if tag in (5, 6):
            entries.append((0, end, end))
            index += 1
        index += 1
        pos = end
    return pos, entries


def rewrite_utf8(data: bytes, transform: Callable[[bytes], bytes]) -> bytes:
    """Return the class file ``data`` with ``transform(bytes) -> bytes`` applied to each constant-pool UTF8
    entry (length fields fixed); every byte after the constant pool is copied unchanged."""
    pool_end, entries = _constant_pool_end(data)
    out = bytearray(data[:10])
    for tag, start, end in entries:
        if tag == UTF8:
            value = transform(data[start + 3 : end])
            if len(value) > 0xFFFF:
                raise ClassFormatError("relocated UTF8 constant longer than 65535 bytes")
            out += struct.pack(">BH", UTF8, len(value)) + value
        else:
            out += data[start:end]
    out += data[pool_end:]
    return bytes(out)


def relocate_class(data: bytes) -> bytes:
    """Relocate Jackson package names inside one class file."""
    return rewrite_utf8(data, relocate_bytes)


def _relocated_name(name: str) -> str:
    return relocate_bytes(name.encode()).decode()


def relocate_jars(inputs: Iterable[Path], out: Path) -> dict[str, int]:
    """Write ``out``: the classes and service files of ``inputs``, relocated. Returns entry counts."""
    stats = {"classes": 0, "services": 0, "resources": 0, "dropped": 0}
    seen: set[str] = set()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    sources = [Path(p) for p in inputs]
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as target:

        def put(name: str, payload: bytes) -> None:
            if name in seen:
                raise ValueError(f"duplicate entry {name} in the relocated jar")
            seen.add(name)
            info = zipfile.ZipInfo(name, FIXED_DATE)
            info.compress_type = zipfile.ZIP_STORED if name.endswith("/") else zipfile.ZIP_DEFLATED
            info.external_attr = (0o40755 << 16 | 0x10) if name.endswith("/") else (0o644 << 16)
            target.writestr(info, payload)

        # Keep the manifest minimal: java.util.jar warns about repeated keys and lines over 72 bytes.
        put("META-INF/", b"")
        put("META-INF/MANIFEST.MF", b"Manifest-Version: 1.0\r\nCreated-By: relocate_jackson.py\r\n\r\n")
        put("META-INF/relocated-jackson/SOURCES", "".join(f"{p.name}\n" for p in sources).encode())
        for source in sources:
            with zipfile.ZipFile(source) as jar:
                for info in jar.infolist():
                    name = info.filename
                    if (
                        name.startswith("META-INF/versions/")
                        or name.endswith("module-info.class")
                        or name == "META-INF/MANIFEST.MF"
                    ):
                        stats["dropped"] += 1
                        continue
                    if name.endswith("/"):
                        if not name.startswith("META-INF/") and _relocated_name(name) not in seen:
                            for parent in _parents(_relocated_name(name)):
                                if parent not in seen:
                                    put(parent, b"")
                        continue
                    payload = jar.read(info)
                    if name.endswith(".class"):
                        put(_relocated_name(name), relocate_class(payload))
                        stats["classes"] += 1
                    elif name.startswith("META-INF/services/"):
                        put(_relocated_name(name), relocate_bytes(payload))
                        stats["services"] += 1
                    elif name.startswith("META-INF/"):
                        put(f"META-INF/relocated-jackson/{source.stem}/{name[len('META-INF/') :]}", payload)
                        stats["resources"] += 1
                    else:
                        put(_relocated_name(name), payload)
                        stats["resources"] += 1
    tmp.replace(out)
    return stats


def _parents(directory: str) -> list[str]:
    parts = directory.rstrip("/").split("/")
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


def pyspark_jackson_jars(jars_dir: Path) -> list[Path]:
    """The four Jackson jars in pyspark's ``jars/`` directory (exactly one of each, or an error)."""
    found = []
    for prefix in PYSPARK_JACKSON:
        matches = sorted(
            p for p in jars_dir.glob(prefix + "*.jar") if re.fullmatch(r"[\d.]+", p.stem[len(prefix) :])
        )
        if len(matches) != 1:
            raise FileNotFoundError(f"expected one {prefix}<version>.jar in {jars_dir}, found {matches}")
        found.append(matches[0])
    return found


# ----------------------------------------------------------------------------------------------
# Class-file model for the checker
# ----------------------------------------------------------------------------------------------


@dataclass
class ClassInfo:
    """What resolution needs from one class file: its supertypes and declared members."""

    name: str
    super_name: str | None
    interfaces: list[str]
    fields: set[tuple[str, str]]
    methods: set[tuple[str, str]]


@dataclass
class ParsedClass:
    """A class file's model plus the references it makes (kind, owner, name, descriptor) and UTF8 strings."""

    info: ClassInfo
    member_refs: set[tuple[str, str, str, str]]
    class_refs: set[str]
    utf8: list[bytes]


def decode_modified_utf8(raw: bytes) -> str:
    """Decode a class file's "modified UTF-8" (NUL as C0 80, supplementary characters as surrogate pairs)."""
    return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")


def _class_name_of(raw: str) -> str | None:
    """Turn a CONSTANT_Class name (maybe an array descriptor) into a class name; None for primitives."""
    if raw.startswith("["):
        match = _DESCRIPTOR_CLASS.search(raw)
        return match.group(1) if match else None
    return raw


def parse_class(data: bytes) -> ParsedClass:
    """Parse the parts of a class file the reference checker needs."""
    pool_end, entries = _constant_pool_end(data)
    slots: list[tuple[int, int, int] | None] = [None, *entries]

    def utf8_at(index: int) -> str:
        slot = slots[index]
        if slot is None or slot[0] != UTF8:
            raise ClassFormatError(f"constant {index} is not UTF8")
        return decode_modified_utf8(data[slot[1] + 3 : slot[2]])

    def u2(pos: int) -> int:
        return int(struct.unpack_from(">H", data, pos)[0])

    def class_at(index: int) -> str:
        slot = slots[index]
        if slot is None or slot[0] != CLASS:
            raise ClassFormatError(f"constant {index} is not a class")
        return utf8_at(u2(slot[1] + 1))

    utf8_values: list[bytes] = []
    class_refs: set[str] = set()
    member_refs: set[tuple[str, str, str, str]] = set()
    for slot in entries:
        tag, start, end = slot
        if tag == UTF8:
            utf8_values.append(data[start + 3 : end])
        elif tag == CLASS:
            name = _class_name_of(utf8_at(u2(start + 1)))
            if name:
                class_refs.add(name)
        elif tag in (FIELDREF, METHODREF, IMETHODREF):
            owner = _class_name_of(class_at(u2(start + 1)))
            nat = slots[u2(start + 3)]
            if nat is None or nat[0] != NAME_AND_TYPE:
                raise ClassFormatError("member reference without NameAndType")
            kind = {FIELDREF: "field", METHODREF: "method", IMETHODREF: "method"}[tag]
            if owner:
                member_refs.add((kind, owner, utf8_at(u2(nat[1] + 1)), utf8_at(u2(nat[1] + 3))))
    # Class names inside any descriptor or generic signature count as class references too.
    for value in utf8_values:
        if b"L" in value and b";" in value:
            for match in _DESCRIPTOR_CLASS.finditer(decode_modified_utf8(value)):
                class_refs.add(match.group(1))

    pos = pool_end
    this_index, super_index, n_interfaces = u2(pos + 2), u2(pos + 4), u2(pos + 6)
    pos += 8
    interfaces = [class_at(u2(pos + 2 * i)) for i in range(n_interfaces)]
    pos += 2 * n_interfaces
    members: list[set[tuple[str, str]]] = []
    for _ in range(2):  # fields, then methods
        declared: set[tuple[str, str]] = set()
        count = u2(pos)
        pos += 2
        for _ in range(count):
            declared.add((utf8_at(u2(pos + 2)), utf8_at(u2(pos + 4))))
            n_attributes = u2(pos + 6)
            pos += 8
            for _ in range(n_attributes):
                (length,) = struct.unpack_from(">I", data, pos + 2)
                pos += 6 + length
        members.append(declared)
    info = ClassInfo(
        name=class_at(this_index),
        super_name=class_at(super_index) if super_index else None,
        interfaces=interfaces,
        fields=members[0],
        methods=members[1],
    )
    return ParsedClass(info=info, member_refs=member_refs, class_refs=class_refs, utf8=utf8_values)


def _iter_classes(jar: Path, prefix: str = "") -> Iterator[tuple[str, bytes]]:
    """(entry name, bytes) of every class file (outside META-INF/versions) in a jar or jmod."""
    with zipfile.ZipFile(jar) as archive:  # jmod files are zips behind a 4-byte header; zipfile copes
        for name in archive.namelist():
            if not name.endswith(".class") or name.endswith("module-info.class"):
                continue
            if name.startswith("META-INF/versions/") or not name.startswith(prefix):
                continue
            yield name, archive.read(name)


class ClassUniverse:
    """Classes available at run time: the provided jars first, then the JDK's jmods. Parsed on demand."""

    def __init__(self, jars: Iterable[Path], jdk_home: Path | None) -> None:
        self._where: dict[str, tuple[zipfile.ZipFile, str]] = {}
        self._archives: list[zipfile.ZipFile] = []
        self._parsed: dict[str, ClassInfo] = {}
        archives = [(Path(jar), "") for jar in jars]
        jmods_dir = jdk_home / "jmods" if jdk_home else None
        if jmods_dir and jmods_dir.is_dir():
            archives += [(jmod, "classes/") for jmod in sorted(jmods_dir.glob("*.jmod"))]
        for path, prefix in archives:
            archive = zipfile.ZipFile(path)  # jmods are zips behind a 4-byte header; zipfile copes
            self._archives.append(archive)
            for entry in archive.namelist():
                if (
                    entry.startswith(prefix)
                    and entry.endswith(".class")
                    and not entry.startswith("META-INF/")
                ):
                    self._where.setdefault(entry[len(prefix) : -len(".class")], (archive, entry))

    def close(self) -> None:
        """Close the archives."""
        for archive in self._archives:
            archive.close()

    def get(self, name: str) -> ClassInfo | None:
        """The class named ``name`` (internal form), or None when no jar or jmod has it."""
        if name not in self._parsed:
            located = self._where.get(name)
            if located is None:
                return None
            self._parsed[name] = parse_class(located[0].read(located[1])).info
        return self._parsed[name]


@dataclass
class CheckReport:
    """Outcome of a reference check; ``ok`` is False when anything is missing."""

    runtime_classes_scanned: int = 0
    runtime_class_refs: int = 0
    runtime_member_refs: int = 0
    internal_class_refs: int = 0
    internal_member_refs: int = 0
    assumed_external: list[str] = field(default_factory=list)
    missing_classes: list[str] = field(default_factory=list)
    missing_members: list[str] = field(default_factory=list)
    unrelocated: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every reference resolved and nothing is left unrelocated."""
        return not (self.missing_classes or self.missing_members or self.unrelocated)

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form."""
        return {
            "ok": self.ok,
            "runtime_classes_scanned": self.runtime_classes_scanned,
            "runtime_references": self.runtime_class_refs + self.runtime_member_refs,
            "runtime_class_refs": self.runtime_class_refs,
            "runtime_member_refs": self.runtime_member_refs,
            "internal_class_refs": self.internal_class_refs,
            "internal_member_refs": self.internal_member_refs,
            "assumed_external": sorted(set(self.assumed_external)),
            "missing_classes": sorted(set(self.missing_classes)),
            "missing_members": sorted(set(self.missing_members)),
            "unrelocated": sorted(set(self.unrelocated)),
        }


def _resolve_member(universe: ClassUniverse, kind: str, owner: str, name: str, desc: str) -> str:
    """Look the member up in ``owner`` and all its supertypes (JVMS 5.4.3.2/5.4.3.3, without access checks).

    Returns 'found', 'missing', or 'external' when it is not found but a supertype outside ``CHECK_PREFIX``
    could not be read (neither in the jars nor in the JDK's jmods), so it might declare the member.
    """
    seen: set[str] = set()
    queue = [owner]
    unreadable = False
    while queue:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        info = universe.get(current)
        if info is None and current == "java/lang/Object":
            info = _OBJECT  # no JDK given: java.lang.Object's members are fixed by the JLS
        if info is None:
            unreadable = unreadable or not current.startswith(CHECK_PREFIX)
            continue
        if (name, desc) in (info.fields if kind == "field" else info.methods):
            return "found"
        if info.super_name:
            queue.append(info.super_name)
        queue.extend(info.interfaces)
    return "external" if unreadable else "missing"


# java.lang.Object's public/protected methods, used only when no JDK with jmods/ is available.
_OBJECT = ClassInfo(
    name="java/lang/Object",
    super_name=None,
    interfaces=[],
    fields=set(),
    methods={
        ("<init>", "()V"),
        ("getClass", "()Ljava/lang/Class;"),
        ("hashCode", "()I"),
        ("equals", "(Ljava/lang/Object;)Z"),
        ("clone", "()Ljava/lang/Object;"),
        ("toString", "()Ljava/lang/String;"),
        ("notify", "()V"),
        ("notifyAll", "()V"),
        ("wait", "()V"),
        ("wait", "(J)V"),
        ("wait", "(JI)V"),
        ("finalize", "()V"),
    },
)


def check_references(
    runtime_jar: Path, provided: Iterable[Path], jdk_home: Path | None = None, prefix: str = CHECK_PREFIX
) -> CheckReport:
    """Resolve every reference from ``runtime_jar`` (and from ``provided`` to itself) into ``prefix``.

    Classes may come from ``provided``, the runtime jar itself or (for supertypes) the JDK's jmods.
    """
    provided = [Path(p) for p in provided]
    universe = ClassUniverse([*provided, runtime_jar], jdk_home)
    report = CheckReport()
    needle = prefix.encode()
    try:
        for jar, internal in [(runtime_jar, False), *((p, True) for p in provided)]:
            class_refs: dict[str, str] = {}
            member_refs: dict[tuple[str, str, str, str], str] = {}
            for entry, payload in _iter_classes(jar):
                if not internal:
                    report.runtime_classes_scanned += 1
                    if needle not in payload:
                        continue  # cheap pre-filter: no constant mentions the prefix
                parsed = parse_class(payload)
                if internal:
                    for value in parsed.utf8:
                        if _UNSHADED.search(value) or _UNSHADED_DOTTED.search(value):
                            report.unrelocated.append(f"{entry}: {decode_modified_utf8(value)}")
                where = f"{jar.name}!{parsed.info.name}"
                for name in parsed.class_refs:
                    if name.startswith(prefix):
                        class_refs.setdefault(name, where)
                for ref in parsed.member_refs:
                    if ref[1].startswith(prefix):
                        member_refs.setdefault(ref, where)
            if internal:
                report.internal_class_refs += len(class_refs)
                report.internal_member_refs += len(member_refs)
            else:
                report.runtime_class_refs = len(class_refs)
                report.runtime_member_refs = len(member_refs)
            _resolve_all(universe, class_refs, member_refs, report)
    finally:
        universe.close()
    return report


def _resolve_all(
    universe: ClassUniverse,
    class_refs: dict[str, str],
    member_refs: dict[tuple[str, str, str, str], str],
    report: CheckReport,
) -> None:
    """Resolve collected references, appending every gap to ``report``."""
    for name, where in sorted(class_refs.items()):
        if universe.get(name) is None:
            report.missing_classes.append(f"{name} (referenced by {where})")
    for (kind, owner, name, desc), where in sorted(member_refs.items()):
        if universe.get(owner) is None:
            continue  # reported as a missing class already
        outcome = _resolve_member(universe, kind, owner, name, desc)
        text = f"{kind} {owner}.{name}{'' if kind == 'method' else ':'}{desc} (referenced by {where})"
        if outcome == "missing":
            report.missing_members.append(text)
        elif outcome == "external":
            report.assumed_external.append(text)


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring for the commands."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="relocate Jackson jars into one jar")
    build.add_argument("--out", type=Path, required=True)
    build.add_argument(
        "--pyspark-jars", type=Path, help="pyspark's jars/ directory (picks the 4 Jackson jars)"
    )
    build.add_argument("jars", nargs="*", type=Path)
    check = commands.add_parser("check", help="resolve the runtime jar's shaded-Jackson references")
    check.add_argument("--runtime", type=Path, required=True)
    check.add_argument("--jar", type=Path, action="append", required=True, dest="provided")
    check.add_argument("--jdk", type=Path, help="JAVA_HOME whose jmods/ resolve JDK supertypes")
    check.add_argument("--json", action="store_true", help="print the report as one JSON document")
    args = parser.parse_args(argv)

    if args.command == "build":
        inputs = list(args.jars)
        if args.pyspark_jars:
            inputs += pyspark_jackson_jars(args.pyspark_jars)
        if not inputs:
            parser.error("build needs --pyspark-jars or jar arguments")
        stats = relocate_jars(inputs, args.out)
        print(f"relocate_jackson: wrote {args.out} ({', '.join(f'{v} {k}' for k, v in stats.items())})")
        return 0

    report = check_references(args.runtime, args.provided, args.jdk)
    result = report.as_dict()
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(
            f"relocate_jackson: {result['runtime_references']} references from {args.runtime.name} into "
            f"{CHECK_PREFIX} ({result['runtime_class_refs']} classes, {result['runtime_member_refs']} members; "
            f"{result['internal_member_refs']} more from the provided jars to themselves): "
            + ("all resolve" if report.ok else "GAPS")
        )
        for key in ("assumed_external", "missing_classes", "missing_members", "unrelocated"):
            for line in result[key]:  # type: ignore[attr-defined]
                print(f"  {key}: {line}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
