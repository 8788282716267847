"""One API call as the registry sees it: the resource, scope, user, query and warnings.

``Query`` reads the query string with the real server's parsing rules for the parameters
the registry uses (booleans, integers, ``fieldValidation``, ``dryRun``)::

    call = Call(resource, namespace="default", name="web", user=user, query=Query(qs))
    call.query.flag("watch"); call.query.integer("limit")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.resources import ResourceType

Obj = dict[str, Any]
FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


class Query:
    def __init__(self, raw: str = "") -> None:
        self.values: dict[str, list[str]] = parse_qs(raw, keep_blank_values=True)

    @classmethod
    def of(cls, **params: Any) -> Query:
        query = cls()
        query.values = {k: [str(v)] for k, v in params.items()}
        return query

    def get(self, key: str, default: str = "") -> str:
        return self.values.get(key, [default])[0]

    def all(self, key: str) -> list[str]:
        return self.values.get(key, [])

    def has(self, key: str) -> bool:
        return key in self.values

    def flag(self, key: str) -> bool:
        """``strconv.ParseBool`` of the parameter; absent or empty is false."""
        value = self.get(key)
        if value in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if value in ("", "0", "f", "F", "FALSE", "false", "False"):
            return False
        raise errors.bad_request(f'strconv.ParseBool: parsing "{value}": invalid syntax')

    def integer(self, key: str) -> int | None:
        if not self.has(key) or self.get(key) == "":
            return None
        try:
            return int(self.get(key))
        except ValueError:
            raise errors.bad_request(
                f'strconv.ParseInt: parsing "{self.get(key)}": invalid syntax'
            ) from None

    def field_validation(self) -> str:
        directive = self.get("fieldValidation", "Warn") or "Warn"
        if directive not in FIELD_VALIDATION:
            raise errors.bad_request(f"fieldValidation parameter unsupported: {directive}")
        return directive

    def dry_run(self) -> bool:
        values = self.all("dryRun")
        for value in values:
            if value != "All":
                raise errors.bad_request(f"Invalid dry run option: {value}")
        return bool(values)


@dataclass
class Call:
    resource: ResourceType
    namespace: str
    name: str
    user: UserInfo
    query: Query = field(default_factory=Query)
    subresource: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def group(self) -> str:
        return self.resource.group

    @property
    def plural(self) -> str:
        return self.resource.plural
