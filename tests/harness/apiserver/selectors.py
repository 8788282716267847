"""``labelSelector`` and ``fieldSelector`` query parameters: parsing and matching.

Label selectors take the full apimachinery syntax (``a=b``, ``a==b``, ``a!=b``,
``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``, ``a>1``, ``a<1``); field selectors take
``k=v``, ``k==v`` and ``k!=v`` joined by commas, with backslash escapes. A parse failure is a
``SelectorError`` whose text is what the real server puts in its 400::

    labels = LabelSelector.parse("app in (web),tier!=db")
    labels.matches({"app": "web"})          # True
    fields = FieldSelector.parse("spec.nodeName=n1")
    fields.unsupported({"metadata.name", "spec.nodeName"})   # [] or the offending keys
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tests.harness.apiserver.validation import FieldError, label_value, qualified_name

_SPECIAL = " \t,()=!<>"


class SelectorError(ValueError):
    """A selector that does not parse; the message is the server's."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # exists, !, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "gt" else number < bound


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text or not text.strip():
            return cls()
        return cls(tuple(_LabelParser(text).parse()))


class _LabelParser:
    """A small lexer + recursive parser for the label selector grammar."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.pos = 0

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements = [self.requirement()]
        while self.peek():
            if self.take() != ",":
                raise SelectorError(
                    f"found '{self.tokens[self.pos - 1]}', expected: ',' or 'end of string'"
                )
            requirements.append(self.requirement())
        return requirements

    def requirement(self) -> Requirement:
        negated = self.peek() == "!"
        if negated:
            self.take()
        key = self.take()
        if not key or key in _OPERATORS or key in ",()":
            raise SelectorError(f"found '{key}', expected: identifier")
        _check_key(key)
        if negated:
            return Requirement(key, "!")
        operator = self.peek()
        if operator in ("", ","):
            return Requirement(key, "exists")
        self.take()
        if operator in ("in", "notin"):
            return Requirement(key, operator, tuple(self.value_set(key)))
        if operator in ("=", "==", "!="):
            value = "" if self.peek() in ("", ",") else self.take()
            _check_value(key, value)
            return Requirement(key, "!=" if operator == "!=" else "=", (value,))
        if operator in (">", "<"):
            value = self.take()
            if not value.lstrip("-").isdigit():
                raise SelectorError(
                    f"unable to parse requirement: for 'Gt', 'Lt' operators, "
                    f"the value must be an integer: {value}"
                )
            return Requirement(key, "gt" if operator == ">" else "lt", (value,))
        raise SelectorError(f"found '{operator}', expected: in, notin, =, ==, !=, gt, lt")

    def value_set(self, key: str) -> list[str]:
        if self.take() != "(":
            raise SelectorError("found '', expected: '('")
        values: list[str] = []
        while True:
            token = self.take()
            if token == ")":
                return values
            if token == ",":
                continue
            if token == "":
                raise SelectorError("found '', expected: ')'")
            _check_value(key, token)
            values.append(token)


_OPERATORS = {"=", "==", "!=", "!", ">", "<", "in", "notin"}


def _lex(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char in " \t":
            i += 1
        elif char in ",()<>":
            tokens.append(char)
            i += 1
        elif char in "=!":
            pair = text[i : i + 2]
            token = pair if pair in ("==", "!=") else char
            tokens.append(token)
            i += len(token)
        else:
            start = i
            while i < len(text) and text[i] not in _SPECIAL:
                i += 1
            tokens.append(text[start:i])
    return tokens


def _check_key(key: str) -> None:
    problems = qualified_name(key)
    if problems:
        raise SelectorError(
            "unable to parse requirement: "
            + str(FieldError.invalid("key", key, "; ".join(problems)))
        )


def _check_value(key: str, value: str) -> None:
    problems = label_value(value)
    if problems:
        raise SelectorError(
            "unable to parse requirement: "
            + str(FieldError.invalid(f"values[0][{key}]", value, "; ".join(problems)))
        )


# --------------------------------------------------------------------------- fields


@dataclass(frozen=True)
class FieldTerm:
    key: str
    value: str
    negated: bool

    def matches(self, fields: Mapping[str, str]) -> bool:
        equal = fields.get(self.key, "") == self.value
        return not equal if self.negated else equal


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(t.matches(fields) for t in self.terms)

    def unsupported(self, supported: Iterable[str]) -> list[str]:
        known = set(supported)
        return [t.key for t in self.terms if t.key not in known]

    def renamed(self, names: Mapping[str, str]) -> FieldSelector:
        """The selector with keys translated (an API version's field label conversion)."""
        return FieldSelector(
            tuple(FieldTerm(names.get(t.key, t.key), t.value, t.negated) for t in self.terms)
        )

    def value_of(self, key: str) -> str | None:
        """The value an ``=`` term requires for ``key``, if there is one."""
        for term in self.terms:
            if term.key == key and not term.negated:
                return term.value
        return None

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        if not text:
            return cls()
        return cls(tuple(_field_term(part, text) for part in _split_unescaped(text, ",")))


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            current += text[i : i + 2]
            i += 2
            continue
        if text[i] == separator:
            parts.append(current)
            current = ""
        else:
            current += text[i]
        i += 1
    parts.append(current)
    return [p for p in parts if p]


def _field_term(part: str, whole: str) -> FieldTerm:
    for operator in ("!=", "==", "="):
        index = _find_unescaped(part, operator)
        if index >= 0:
            key = part[:index].strip()
            value = _unescape(part[index + len(operator) :])
            if not key:
                break
            return FieldTerm(key, value, operator == "!=")
    raise SelectorError(f"invalid selector: '{whole}'; can't understand '{part}'")


def _find_unescaped(text: str, operator: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text.startswith(operator, i):
            return i
        i += 1
    return -1


def _unescape(value: str) -> str:
    out, i = "", 0
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value):
            out += value[i + 1]
            i += 2
        else:
            out += value[i]
            i += 1
    return out
