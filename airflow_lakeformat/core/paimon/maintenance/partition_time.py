"""The time of a partition, read from its values as Paimon's ``PartitionTimeExtractor`` reads it.

Partition expiry by ``values-time`` (``partition.expiration-strategy``) needs one local date-time per
partition. Paimon's ``PartitionTimeExtractor`` (``paimon-common``, the version before apache/paimon#6664,
which was reverted) computes it in three steps, reproduced here:

1. **Text of each value**: the Java ``toString()`` of the *internal* value (the caller passes it,
   :func:`~airflow_lakeformat.core.paimon.values.legacy_partition_string`): a STRING's text, an INT's digits,
   a DATE's **day number** (``19723``, which never parses, so DATE partitions never expire: #6439), a
   TIMESTAMP's ``LocalDateTime.toString()`` with its ``T`` (which the lenient form does not take). A null
   value is Java's ``NullPointerException``: the partition is skipped.
2. **Timestamp text**: without ``partition.timestamp-pattern`` the first partition value; with one, the
   pattern with every ``$key`` replaced by that key's value, longest key names first (#9136), so ``$dt``
   never eats the head of ``$dt1``. Every key's value is converted, so a null anywhere skips the partition.
3. **Parse**: without ``partition.timestamp-formatter`` Java's lenient form ``y-M-d[ H:m:s[.fraction]]``
   (1-10 digit year, 1-2 digit month, day, hour, minute, second, 1-9 fraction digits), resolved
   ``LENIENT`` (``2024-13-01`` is ``2025-01-01``), else a date at midnight. With a formatter, the
   ``DateTimeFormatter.ofPattern`` pattern (``SMART`` resolution: month 1-12, day 1-31 clamped to the
   month, ``24:00:00`` the next day) as a date-time, else as a date at midnight. The pattern letters
   ``y u M d H m s S`` are taken with Java's widths (``yyyy`` exactly 4 digits, ``yy`` 2000-2099,
   ``MM``/``dd``/``HH``/``mm``/``ss`` exactly 2, one letter 1 or more), adjacent numbers parsed as Java's
   adjacent value parsing does (``yyyyMMdd``), quoted text and other characters as literals. Any other
   letter (text months, am/pm, zones, optional sections) is refused with
   :class:`~airflow_lakeformat.core.errors.MaintenanceRefusedError` naming the option.

A value that does not parse raises :class:`UnparsablePartitionTime` with the reason; partition expiry
reports the partition as skipped, never expires it, never fails on it (Java logs a warning). Where this
module cannot represent what Java would compute (a year outside 1..9999, a signed number, a value with
``$`` or ``\\`` that Java's ``replaceAll`` would treat as a group reference) it skips too, saying so: the
safe side, since a skipped partition is kept.

Example:
    >>> PartitionTimeExtractor("$dt $hh:00:00", None).extract(["dt", "hh"], ["2024-01-02", "7"])
    datetime.datetime(2024, 1, 2, 7, 0)
    >>> PartitionTimeExtractor(None, "yyyyMMdd").extract(["dt"], ["20240102"])
    datetime.datetime(2024, 1, 2, 0, 0)
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from airflow_lakeformat.core.errors import MaintenanceRefusedError

NANOS_PER_DAY = 86_400 * 10**9
_LENIENT = re.compile(
    r"([0-9]{1,10})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.([0-9]{1,9}))?)?"
)


class UnparsablePartitionTime(ValueError):
    """A partition whose values give no time (Java: a ``DateTimeParseException`` or an NPE, logged and skipped)."""


@dataclass
class _Number:
    """One numeric field of a formatter pattern (Java's ``NumberPrinterParser``, strict parsing)."""

    letter: str
    min_width: int
    max_width: int
    exceeds_pad: bool = False  # yyyy: more digits than the letters only with a '+' sign
    reduced: bool = False  # yy: two digits, 2000-2099
    fraction: bool = False  # S..S: exactly that many digits of the second's fraction
    subsequent: int = 0  # widths of the fixed-width numbers adjacent after it (-1: fixed itself)

    @property
    def fixed(self) -> bool:
        return self.min_width == self.max_width and not self.exceeds_pad


@dataclass
class _Pattern:
    """A compiled ``DateTimeFormatter.ofPattern`` pattern: literals and numbers, in order."""

    parts: list[str | _Number] = field(default_factory=list)


def compile_formatter(
    pattern: str, option: str = "partition.timestamp-formatter", location: str = "partition expiry"
) -> _Pattern:
    """Compile a Java ``DateTimeFormatter`` pattern, refusing (typed, naming ``option``) what is not taken.

    Args:
        pattern: e.g. ``"yyyyMMdd"``, ``"yyyy-MM-dd HH:mm:ss"``, ``"yyyy/MM/dd'T'HH"``.
        option: the option or flag the pattern came from, for the refusal.
        location: the table, for the refusal.
    """

    def refuse(problem: str) -> MaintenanceRefusedError:
        return MaintenanceRefusedError(location, f"{option} {pattern!r}: {problem}")

    compiled = _Pattern()
    active: _Number | None = None  # the first number of the current adjacent run (Java's valueParserIndex)
    seen: dict[str, int] = {}
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = i + 1
            text = []
            while True:
                if end >= len(pattern):
                    raise refuse("an unterminated quote")
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            compiled.parts.append("'" if end == i + 1 else "".join(text))
            active = None
            i = end + 1
            continue
        if char in "[]#{}":
            raise refuse(f"{char!r} (optional sections and reserved characters) is not supported")
        if not char.isascii() or not char.isalpha():
            compiled.parts.append(char)
            active = None
            i += 1
            continue
        count = 1
        while i + count < len(pattern) and pattern[i + count] == char:
            count += 1
        number = _number(char, count, refuse)
        kind = "y" if char in "yu" else char
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] > 1:
            raise refuse(f"the field {char!r} appears twice")
        active = _adjacent(active, number)
        compiled.parts.append(number)
        i += count
    missing = [name for letter, name in (("y", "year"), ("M", "month"), ("d", "day")) if letter not in seen]
    if missing:
        raise refuse(f"no {', '.join(missing)} (a partition time needs year, month and day)")
    if (
        ("m" in seen and "H" not in seen)
        or ("s" in seen and "m" not in seen)
        or ("S" in seen and "s" not in seen)
    ):
        raise refuse("a minute needs an hour, a second a minute, a fraction a second")
    return compiled


def _number(char: str, count: int, refuse: Callable[[str], MaintenanceRefusedError]) -> _Number:
    if char in "yu":
        if count == 2:
            return _Number(char, 2, 2, reduced=True)
        return _Number(char, count, 19, exceeds_pad=count >= 4)
    if char == "M" and count > 2:
        raise refuse("text months (MMM) are not supported; use MM or M")
    if char in "MdHms":
        if count > 2:
            raise refuse(f"too many pattern letters {char * count!r}")
        return _Number(char, count, 2 if count == 2 else 19)
    if char == "S":
        return _Number(char, count, count, fraction=True)
    raise refuse(f"the pattern letter {char!r} is not supported (only y u M d H m s S and literals)")


def _adjacent(active: _Number | None, number: _Number) -> _Number | None:
    """Java's adjacent value parsing: a fixed-width number after another number lends its width to the first
    number of the run (``yyyy`` in ``yyyyMMdd`` leaves four digits to ``MMdd``); a variable one ends the run."""
    if active is None:
        return number
    if number.fixed:
        active.subsequent += number.max_width
        return active
    active.subsequent = -1
    return number


def parse_with_pattern(text: str, compiled: _Pattern) -> datetime:
    """Parse ``text`` with a compiled pattern and resolve it as ``LocalDateTime`` or else ``LocalDate`` at midnight."""
    values: dict[str, int] = {}
    pos = 0
    for part in compiled.parts:
        if isinstance(part, str):
            if not text.startswith(part, pos):
                raise UnparsablePartitionTime(f"text {text!r} could not be parsed at index {pos}")
            pos += len(part)
            continue
        pos, value = _parse_number(text, pos, part)
        values["y" if part.letter in "yu" else part.letter] = value
    if pos != len(text):
        raise UnparsablePartitionTime(
            f"text {text!r} could not be parsed, unparsed text found at index {pos}"
        )
    return _resolve_smart(text, values)


def _parse_number(text: str, start: int, number: _Number) -> tuple[int, int]:
    if start < len(text) and text[start] in "+-":
        raise UnparsablePartitionTime(f"text {text!r}: a signed number at index {start} (not taken here)")
    effective_max = number.max_width + max(number.subsequent, 0)
    if start + number.min_width > len(text):
        raise UnparsablePartitionTime(f"text {text!r} could not be parsed at index {start}")
    end = start
    for attempt in range(2):
        end = start
        limit = min(start + effective_max, len(text))
        while end < limit and "0" <= text[end] <= "9":
            end += 1
        if end - start < number.min_width:
            raise UnparsablePartitionTime(f"text {text!r} could not be parsed at index {start}")
        if number.subsequent > 0 and attempt == 0:
            effective_max = max(number.min_width, end - start - number.subsequent)
            continue
        break
    digits = text[start:end]
    if number.exceeds_pad and len(digits) > number.min_width:
        raise UnparsablePartitionTime(f"text {text!r} could not be parsed at index {start}")
    if number.fraction:
        return end, int(digits.ljust(9, "0")[:9])
    value = int(digits)
    return end, 2000 + value if number.reduced else value


def _resolve_smart(text: str, values: dict[str, int]) -> datetime:
    """``ResolverStyle.SMART``: fields range-checked, the day clamped to the month's length, 24:00 the next day."""
    year, month, day = values["y"], values["M"], values["d"]
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise UnparsablePartitionTime(f"text {text!r}: invalid month {month} or day {day}")
    _check_year(text, year)
    day = min(day, calendar.monthrange(year, month)[1])
    moment = datetime(year, month, day)
    if "H" not in values:
        return moment
    hour, minute, second = values["H"], values.get("m", 0), values.get("s", 0)
    nanos = values.get("S", 0)
    if hour == 24 and minute == 0 and second == 0 and nanos == 0:
        return moment + timedelta(days=1)
    if hour > 23 or minute > 59 or second > 59:
        raise UnparsablePartitionTime(f"text {text!r}: invalid time {hour}:{minute}:{second}")
    return moment.replace(hour=hour, minute=minute, second=second, microsecond=nanos // 1000)


def parse_lenient(text: str) -> datetime:
    """Java's default: ``y-M-d[ H:m:s[.fraction]]``, every field resolved ``LENIENT`` (overflow carries)."""
    match = _LENIENT.fullmatch(text)
    if match is None:
        raise UnparsablePartitionTime(f"text {text!r} could not be parsed as y-M-d[ H:m:s[.fraction]]")
    year, month, day = (int(match[i]) for i in (1, 2, 3))
    months = year * 12 + (month - 1)
    year, month0 = divmod(months, 12)
    _check_year(text, year)
    try:
        moment = datetime(year, month0 + 1, 1) + timedelta(days=day - 1)
        if match[4] is not None:
            hour, minute, second = (int(match[i]) for i in (4, 5, 6))
            fraction = int((match[7] or "").ljust(9, "0"))
            total = ((hour * 60 + minute) * 60 + second) * 10**9 + fraction
            moment += timedelta(microseconds=total // 1000)
    except OverflowError:
        raise UnparsablePartitionTime(f"text {text!r}: a date after 9999-12-31 (not taken here)") from None
    return moment


def _check_year(text: str, year: int) -> None:
    if not 1 <= year <= 9999:
        raise UnparsablePartitionTime(f"text {text!r}: year {year} is outside 1..9999 (not taken here)")


class PartitionTimeExtractor:
    """The time of a partition from its values' texts (Paimon's ``PartitionTimeExtractor``).

    Args:
        pattern: ``partition.timestamp-pattern`` (``"$dt $hh:00:00"``) or None (the first value).
        formatter: ``partition.timestamp-formatter`` (a Java pattern) or None (the lenient default).
        formatter_option: the option or flag name a refused formatter is reported under.
        location: the table, for a refused formatter.

    Example:
        >>> PartitionTimeExtractor(None, None).extract(["dt"], ["2024-1-2 3:04:05"])
        datetime.datetime(2024, 1, 2, 3, 4, 5)
    """

    def __init__(
        self,
        pattern: str | None,
        formatter: str | None,
        formatter_option: str = "partition.timestamp-formatter",
        location: str = "partition expiry",
    ) -> None:
        self.pattern = pattern
        self.formatter = formatter
        self._compiled = None
        if formatter is not None:
            self._compiled = compile_formatter(formatter, formatter_option, location)

    def timestamp_text(self, keys: Sequence[str], values: Sequence[str | None]) -> str:
        """Step 2: the text to parse (raises :class:`UnparsablePartitionTime` for a null value)."""
        if self.pattern is None:
            if not values or values[0] is None:
                raise UnparsablePartitionTime(f"the first partition value ({keys[0]}) is null")
            return values[0]
        nulls = [k for k, v in zip(keys, values, strict=True) if v is None]
        if nulls:
            raise UnparsablePartitionTime(f"partition value of {', '.join(nulls)} is null")
        text = self.pattern
        for key, value in sorted(zip(keys, values, strict=True), key=lambda kv: -len(kv[0])):
            assert value is not None
            token = "$" + key
            if token not in text:
                continue
            if "$" in value or "\\" in value:
                raise UnparsablePartitionTime(
                    f"value {value!r} of {key} holds '$' or '\\', which Java's replaceAll reads as a group "
                    "reference (not taken here)"
                )
            text = text.replace(token, value)
        return text

    def extract(self, keys: Sequence[str], values: Sequence[str | None]) -> datetime:
        """The partition's local date-time (naive), or :class:`UnparsablePartitionTime` with the reason."""
        text = self.timestamp_text(keys, values)
        if self._compiled is None:
            return parse_lenient(text)
        return parse_with_pattern(text, self._compiled)
