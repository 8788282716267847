"""Go's ``json.Unmarshal(data, &map[string]interface{}{})`` failure texts, for the validation
of docker-config Secrets, whose ``Invalid value`` detail is that error::

    json_object_problem(b'{"auths": {}}')   # ""
    json_object_problem(b"[1]")   # "json: cannot unmarshal array into Go value of type ..."
    json_object_problem(b"{x")    # "invalid character 'x' looking for beginning of object ..."

Syntax errors are Go's ``SyntaxError`` phrases for the first bad byte (``unexpected end of
JSON input`` when the document stops early); a valid document that is not an object (or
``null``) is an ``UnmarshalTypeError``.
"""

from __future__ import annotations

import json
from typing import Any

_TARGET = "map[string]interface {}"
_BEGIN_VALUE = "looking for beginning of value"
_CONTEXT = {  # Python's message -> where Go's scanner says it stopped
    "Expecting value": _BEGIN_VALUE,
    "Expecting property name enclosed in double quotes": (
        "looking for beginning of object key string"
    ),
    "Expecting ':' delimiter": "after object key",
    "Extra data": "after top-level value",
    "Invalid control character at": "in string literal",
    "Invalid \\escape": "in string escape code",
    "Invalid \\uXXXX escape": "in \\u hexadecimal character escape",
}
_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def quote_char(char: str) -> str:
    """Go's ``quoteChar`` for the byte the scanner stopped at."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if char in _ESCAPES:
        return f"'{_ESCAPES[char]}'"
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"'\\x{ord(char):02x}'"
    if ord(char) > 0x7F:
        return f"'\\x{char.encode()[0]:02x}'"
    return f"'{char}'"


def _open_bracket(text: str, end: int) -> str:
    """The innermost ``{`` or ``[`` still open at ``end`` (strings skipped)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text[:end]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def json_object_problem(raw: bytes) -> str:
    """Why Go would not unmarshal ``raw`` into a map, or "" if it would."""
    text = raw.decode(errors="replace")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            return "unexpected end of JSON input"
        where = _CONTEXT.get(exc.msg)
        if exc.msg == "Expecting ',' delimiter":
            inside = _open_bracket(text, exc.pos)
            where = "after object key:value pair" if inside == "{" else "after array element"
        return f"invalid character {quote_char(text[exc.pos])} {where or _BEGIN_VALUE}"
    except ValueError as exc:  # NaN, Infinity: not JSON to Go
        return f"invalid character {quote_char(str(exc)[0])} {_BEGIN_VALUE}"
    if value is None or isinstance(value, dict):
        return ""
    kind = {bool: "bool", str: "string", list: "array"}.get(type(value), "number")
    return f"json: cannot unmarshal {kind} into Go value of type {_TARGET}"
