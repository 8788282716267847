"""The failures the API answers with: ``ApiError`` carries a ``Status`` as kube-apiserver sends it.

Every constructor mirrors one of apimachinery's ``errors.New...`` functions, with the same
message form, reason, code and ``details`` (``details.kind`` is the *resource* for most errors
and the *Kind* for ``Invalid``, as in the real server)::

    raise errors.not_found("", "pods", "web")      # 404 pods "web" not found
    raise errors.conflict("", "pods", "web", errors.OPTIMISTIC_LOCK)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.harness.apiserver.validation import FieldError

OPTIMISTIC_LOCK = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
GENERIC_404 = "the server could not find the requested resource"
GENERIC_405 = "the server does not allow this method on the requested resource"
GENERIC_422 = "the server rejected our request due to an error in our request"


def qualified(group: str, name: str) -> str:
    """``GroupResource.String()`` / ``GroupKind.String()``: ``leases.coordination.k8s.io``."""
    return f"{name}.{group}" if group else name


class ApiError(Exception):
    """A failed request: ``code`` is the HTTP status, ``status()`` the body to send."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(group: str, kind: str, name: str = "", **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    details.update({k: v for k, v in extra.items() if v})
    return details


def not_found(group: str, resource: str, name: str) -> ApiError:
    message = f'{qualified(group, resource)} "{name}" not found'
    return ApiError(404, "NotFound", message, _details(group, resource, name))


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", GENERIC_404, {})


def already_exists(group: str, resource: str, name: str) -> ApiError:
    message = f'{qualified(group, resource)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(group, resource, name))


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {qualified(group, resource)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(group, resource, name))


def precondition_failed(
    group: str, resource: str, name: str, storage_key: str, what: str, wanted: str, found: str
) -> ApiError:
    """A failed ``preconditions`` check: a Conflict wrapping etcd3's StorageError text."""
    why = (
        f"StorageError: invalid object, Code: 4, Key: {storage_key}, ResourceVersion: 0, "
        f"AdditionalErrorMsg: Precondition failed: {what} in precondition: {wanted}, "
        f"{what} in object meta: {found}"
    )
    return conflict(group, resource, name, why)


def invalid(group: str, kind: str, name: str, errs: Sequence[FieldError]) -> ApiError:
    texts = list(dict.fromkeys(str(err) for err in errs))
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    message = f'{qualified(group, kind)} "{name}" is invalid: {summary}'
    causes = [{"reason": e.type.reason, "message": e.body(), "field": e.field} for e in errs]
    return ApiError(422, "Invalid", message, _details(group, kind, name, causes=causes))


def unprocessable() -> ApiError:
    """422 without details, as a failed JSON patch operation is answered."""
    return ApiError(422, "Invalid", GENERIC_422, {})


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(group: str, resource: str, name: str, why: str) -> ApiError:
    subject = qualified(group, resource)
    if not subject:  # a non-resource path
        message = f"forbidden: {why}"
    elif name:
        message = f'{subject} "{name}" is forbidden: {why}'
    else:
        message = f"{subject} is forbidden: {why}"
    return ApiError(403, "Forbidden", message, _details(group, resource, name))


def namespace_terminating(group: str, resource: str, name: str, namespace: str) -> ApiError:
    why = f"unable to create new content in namespace {namespace} because it is being terminated"
    error = forbidden(group, resource, name, why)
    assert error.details is not None
    error.details["causes"] = [
        {
            "reason": "NamespaceTerminating",
            "message": f"namespace {namespace} is being terminated",
            "field": "metadata.namespace",
        }
    ]
    return error


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", GENERIC_405, {})


def method_not_supported(group: str, resource: str, action: str) -> ApiError:
    message = f'{action} is not supported on resources of kind "{qualified(group, resource)}"'
    return ApiError(405, "MethodNotAllowed", message, _details(group, resource))


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message, {})


def not_acceptable(accepted: Sequence[str]) -> ApiError:
    message = f"only the following media types are accepted: {', '.join(accepted)}"
    return ApiError(406, "NotAcceptable", message)


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def unknown(code: int, message: str) -> ApiError:
    """A plain Go ``error`` turned into a Status: no reason, the error text as message."""
    return ApiError(code, "", message)


def too_large_resource_version(requested: int, current: int) -> ApiError:
    message = f"Too large resource version: {requested}, current: {current}"
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    return ApiError(504, "Timeout", message, details)
