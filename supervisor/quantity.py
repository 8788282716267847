"""Kubernetes resource quantities ("10Mi", "1.5G", "512k", "1e6") as whole numbers.

The grammar of ``k8s.io/apimachinery/pkg/api/resource.ParseQuantity``: an optionally
signed decimal number, then a binary SI suffix (Ki Mi Gi Ti Pi Ei), a decimal SI
suffix (n u m k M G T P E) or a decimal exponent (e3, E-2), or nothing. ``to_int``
is ``Quantity.AsInt64``: the value must be a whole number within int64.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?))"
)


def parse(text: str) -> Fraction:
    """The exact value of a quantity; ValueError naming what is wrong."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f'invalid quantity "{text}" (want e.g. "10Mi", "512k", "1000")')
    value = Fraction(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > 100:
            raise ValueError(f'quantity "{text}" is out of range')
        value *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"]
        value *= _BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]
    return -value if match["sign"] == "-" else value


def to_int(text: str) -> int:
    """A quantity as a whole number (bytes, say); ValueError if it is not one."""
    value = parse(text)
    if value.denominator != 1:
        raise ValueError(f'quantity "{text}" is not a whole number')
    if not -(2**63) <= value.numerator < 2**63:
        raise ValueError(f'quantity "{text}" is out of range')
    return value.numerator
