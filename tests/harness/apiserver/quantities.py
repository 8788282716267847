"""``resource.Quantity``: parsing, comparing and the canonical form the server prints.

kube-apiserver re-serialises every quantity, so ``0.1`` comes back as ``100m``, ``1024Mi``
as ``1Gi`` and ``1000`` as ``1k``; a malformed one is a decode error::

    canonical("1024Mi")          # "1Gi"
    parse("250m") < parse("1")   # True
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal

_PATTERN = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_BINARY_BY_EXP = {v: k for k, v in _BINARY.items()}
ERROR = (
    "quantities must match the regular expression "
    "'^([+-](?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eEinumkKMGTP]*[-+]?\\d*)?)$'"
)


class QuantityError(ValueError):
    """Not a quantity; the message is apimachinery's."""


def parse(text: str) -> Decimal:
    return _parse(text)[0]


def _parse(text: str) -> tuple[Decimal, str]:
    match = _PATTERN.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(ERROR)
    number, suffix = match.groups()
    try:
        value = Decimal(number)
    except ArithmeticError:
        raise QuantityError(ERROR) from None
    if suffix in _BINARY:
        return value * (Decimal(2) ** _BINARY[suffix]), "binary"
    if suffix in _DECIMAL:
        return value.scaleb(_DECIMAL[suffix]), "decimal"
    if suffix[:1] in ("e", "E") and re.fullmatch(r"[eE][-+]?[0-9]+", suffix):
        return value.scaleb(int(suffix[1:])), "exponent"
    raise QuantityError(ERROR)


def canonical(text: str) -> str:
    value, style = _parse(text)
    value = (
        value.quantize(Decimal("1e-9"), rounding=ROUND_CEILING)
        if value % Decimal("1e-9")
        else value
    )
    if style == "binary" and (abs(value) < 1024 or value != value.to_integral_value()):
        style = "decimal"
    if style == "binary":
        return _binary_form(int(value))
    return _decimal_form(value, style)


def _binary_form(value: int) -> str:
    exponent = 0
    while value and value % 1024 == 0 and exponent < 60:
        value //= 1024
        exponent += 10
    return f"{value}{_BINARY_BY_EXP.get(exponent, '')}"


def _decimal_form(value: Decimal, style: str) -> str:
    if value == 0:
        return "0"
    exponent = -9
    mantissa = int(value.scaleb(9))
    while mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    if style == "exponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_BY_EXP[exponent]}"
