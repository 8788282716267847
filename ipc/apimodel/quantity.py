"""Kubernetes resource quantities (``500m``, ``64Mi``, ``1e3``, ``2``) as exact fractions.

The grammar is the API's: a signed decimal number followed by a binary suffix
(``Ki`` .. ``Ei``), a decimal suffix (``n u m k M G T P E``) or a decimal exponent
(``e3``, ``E-2``). JSON numbers are accepted as they are. Values are ``Fraction``
so ``ceil(value / divisor)`` is exact, as the API's int64 arithmetic is for the
sizes that occur.
"""

from __future__ import annotations

import enum
import math
import re
from fractions import Fraction
from typing import Any

REGEX_TEXT = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"

_NUMBER = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class BadQuantity(ValueError):
    """Not a quantity; the message is the API's."""


def parse(value: Any) -> Fraction:
    if isinstance(value, bool):
        raise BadQuantity(f"quantities must match the regular expression '{REGEX_TEXT}'")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise BadQuantity(f"quantities must match the regular expression '{REGEX_TEXT}'")
    match = _NUMBER.fullmatch(value.strip())
    if match is None:
        raise BadQuantity(f"quantities must match the regular expression '{REGEX_TEXT}'")
    sign, number, suffix = match.groups()
    amount = Fraction(number) * (-1 if sign == "-" else 1)
    if suffix in _BINARY:
        return amount * (1 << _BINARY[suffix])
    if suffix in _DECIMAL:
        return amount * Fraction(10) ** _DECIMAL[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is not None:
        power = int(exponent.group(1))
        if abs(power) > 100:
            raise BadQuantity("quantity is out of range")
        return amount * Fraction(10) ** power
    raise BadQuantity("unable to parse quantity's suffix")


def ceil_int(value: Fraction) -> int:
    """The API's ``Quantity.Value()``: rounded up to a whole number."""
    return math.ceil(value)


def milli(value: Fraction) -> int:
    """The API's ``Quantity.MilliValue()``: thousandths, rounded up."""
    return math.ceil(value * 1000)


class Format(enum.Enum):
    """How the API writes a quantity: the format its text was parsed in."""

    BINARY_SI = "BinarySI"  # 5Gi
    DECIMAL_SI = "DecimalSI"  # 5G
    DECIMAL_EXPONENT = "DecimalExponent"  # 5e9


def format_of(text: str) -> Format:
    """The format a quantity's text is in (the API keeps it for ``String()``)."""
    match = _NUMBER.fullmatch(text.strip())
    suffix = match.group(3) if match is not None else ""
    if suffix in _BINARY:
        return Format.BINARY_SI
    return Format.DECIMAL_EXPONENT if _EXPONENT.fullmatch(suffix) else Format.DECIMAL_SI


def canonical(value: Fraction | int, form: Format) -> str:
    """``Quantity.String()``: the canonical text of ``value`` in ``form``. Binary SI takes
    the largest power of 1024 that divides it (a value under 1024, or not whole, is
    written in decimal SI); decimal forms take the largest power of 1000 that does, down
    to nano (a finer value is rounded up to nano)."""
    value = Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if form is Format.BINARY_SI and (value < 1024 or value.denominator != 1):
        form = Format.DECIMAL_SI
    if form is Format.BINARY_SI:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(_BINARY):
            number, power = number // 1024, power + 1
        suffix = next((s for s, bits in _BINARY.items() if bits == power * 10), "")
        return f"{sign}{number}{suffix}"
    number, exponent = math.ceil(value * 10**9), -9
    while number % 1000 == 0 and exponent < 18:
        number, exponent = number // 1000, exponent + 3
    if form is Format.DECIMAL_EXPONENT:
        return f"{sign}{number}{f'e{exponent}' if exponent else ''}"
    suffix = next(s for s, power in _DECIMAL.items() if power == exponent)
    return f"{sign}{number}{suffix}"
