"""Service-account tokens: ``serviceaccounts/<sa>/token`` (TokenRequest) and their checking.

Tokens are RS256 JWTs shaped as kube-apiserver issues them (``iss``, ``aud``, ``exp``,
``iat``, ``nbf``, ``jti``, ``sub``, and ``kubernetes.io`` with namespace, serviceaccount and
the bound pod/secret/node). Lifetimes, as the real server sets them:

* ``expirationSeconds`` defaults to 3600 and must be 600..2^32 (422);
* ``max_expiration`` (``--service-account-max-token-expiration``, 0 = unset) shortens a
  longer request to it, with the real warning (``requested expiration of 7200 seconds
  shortened to 3600 seconds``);
* a pod-bound request for exactly 3607 s for the server's own audiences is extended to a year
  with ``warnafter`` (``--service-account-extend-token-expiration``), while the returned
  ``expirationTimestamp`` keeps the requested lifetime.

Checking a token (for requests and TokenReviews) verifies signature, expiry (``service
account token has expired``), audience, and that the service account and the bound object
still exist with the same uid and, for a bound pod or secret, were not marked for deletion
more than 60 s ago (``service account token has been invalidated``)::

    issuer = TokenIssuer(key_pem, store)
    token, expires = issuer.issue(sa, 3600, audiences, bound_pod)
    user, audiences = issuer.review(token, ["https://kubernetes.default.svc.cluster.local"])
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.store import Store
from tests.harness.apiserver.validation import FieldError

ISSUER = "https://kubernetes.default.svc.cluster.local"
WARN_ONLY_SECONDS = 3607
EXTENDED_SECONDS = 365 * 24 * 3600
MIN_SECONDS = 600
MAX_SECONDS = 2**32
DELETION_GRACE_SECONDS = 60  # a bound object marked for deletion longer ago invalidates
Obj = dict[str, Any]


class TokenInvalid(ValueError):
    """Why a token does not authenticate (the TokenReview ``status.error`` text)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sa_username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


class TokenIssuer:
    def __init__(
        self,
        key_pem: bytes,
        store: Store,
        audiences: Sequence[str] = (ISSUER,),
        extend_expiration: bool = True,
        max_expiration: int = 0,
    ) -> None:
        if extend_expiration and 0 < max_expiration < WARN_ONLY_SECONDS:
            raise ValueError(
                f"the max token expiration ({max_expiration} s) must be at least "
                f"{WARN_ONLY_SECONDS} s while token expiration is extended"
            )
        key = serialization.load_pem_private_key(key_pem, None)
        assert isinstance(key, rsa.RSAPrivateKey)
        self._key = key
        self.store = store
        self.audiences = tuple(audiences)
        self.extend_expiration = extend_expiration
        self.max_expiration = max_expiration
        public = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.key_id = _b64(hashlib.sha256(public).digest())

    # ----------------------------------------------------------------------- issuing

    def capped(self, seconds: int) -> tuple[int, str]:
        """The lifetime a request gets under ``max_expiration``, and the warning if cut."""
        if self.max_expiration and seconds > self.max_expiration:
            return self.max_expiration, (
                f"requested expiration of {seconds} seconds shortened to "
                f"{self.max_expiration} seconds"
            )
        return seconds, ""

    def issue(
        self,
        sa: Obj,
        seconds: int,
        audiences: Sequence[str],
        bound: Obj | None,
        node: Obj | None = None,
    ) -> tuple[str, int]:
        """A signed token and its ``exp``; ``bound`` is the pod/secret/node it is bound to."""
        now = int(time.time())
        lifetime, warn_after = seconds, 0
        if (
            self.extend_expiration
            and bound is not None
            and bound.get("kind") == "Pod"
            and seconds == WARN_ONLY_SECONDS
            and set(audiences) <= set(self.audiences)
        ):
            lifetime, warn_after = EXTENDED_SECONDS, now + seconds
        meta = sa["metadata"]
        private: dict[str, Any] = {
            "namespace": meta["namespace"],
            "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
        }
        if bound is not None:
            ref = {"name": bound["metadata"]["name"], "uid": bound["metadata"]["uid"]}
            private[bound.get("kind", "").lower()] = ref
        if node is not None:
            private["node"] = {k: v for k, v in node["metadata"].items() if k in ("name", "uid")}
        if warn_after:
            private["warnafter"] = warn_after
        claims = {
            "aud": list(audiences),
            "exp": now + lifetime,
            "iat": now,
            "iss": ISSUER,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": now,
            "sub": sa_username(meta["namespace"], meta["name"]),
        }
        return self._sign(claims), now + lifetime

    def _sign(self, claims: Obj) -> str:
        header = {"alg": "RS256", "kid": self.key_id}
        signing_input = (
            _b64(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64(json.dumps(claims, separators=(",", ":")).encode())
        )
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64(signature)

    # ----------------------------------------------------------------------- checking

    def authenticate_token(self, token: str) -> UserInfo | None:
        """For requests to the API: the token's user, None if not a JWT of ours."""
        if token.count(".") != 2:
            return None
        return self.review(token, self.audiences)[0]

    def review(self, token: str, audiences: Sequence[str]) -> tuple[UserInfo, list[str]]:
        claims = self._verified_claims(token)
        accepted = [a for a in claims.get("aud", []) if a in audiences]
        if not accepted:
            raise TokenInvalid(
                f"token audiences {json.dumps(claims.get('aud'))} is invalid "
                f"for the target audiences {json.dumps(list(audiences))}"
            )
        return self._user(claims), accepted

    def _verified_claims(self, token: str) -> Obj:
        try:
            header_b64, claims_b64, signature_b64 = token.split(".")
            claims = json.loads(_unb64(claims_b64))
            self._key.public_key().verify(
                _unb64(signature_b64),
                f"{header_b64}.{claims_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (ValueError, InvalidSignature) as exc:
            raise TokenInvalid("square/go-jose: error in cryptographic primitive") from exc
        if claims.get("iss") != ISSUER:
            raise TokenInvalid("token issuer is not valid")
        now = time.time()
        if claims.get("exp", 0) < now:
            raise TokenInvalid("service account token has expired")
        if claims.get("nbf", 0) > now + 60:
            raise TokenInvalid("service account token is not valid yet")
        return dict(claims)

    def _user(self, claims: Obj) -> UserInfo:
        private = claims.get("kubernetes.io") or {}
        namespace = private.get("namespace", "")
        sa_ref = private.get("serviceaccount") or {}
        sa = self.store.get("serviceaccounts", namespace, sa_ref.get("name", ""))
        if sa is None or sa["metadata"]["uid"] != sa_ref.get("uid"):
            raise TokenInvalid("service account token has been invalidated")
        extra: dict[str, tuple[str, ...]] = {
            "authentication.kubernetes.io/credential-id": (f"JTI={claims.get('jti')}",)
        }
        for kind, bucket in (("pod", "pods"), ("secret", "secrets")):
            ref = private.get(kind)
            if ref is None:
                continue
            found = self.store.get(bucket, namespace, ref.get("name", ""))
            if found is None or found["metadata"]["uid"] != ref.get("uid"):
                raise TokenInvalid("service account token has been invalidated")
            if _deleted_long_ago(found["metadata"].get("deletionTimestamp")):
                raise TokenInvalid("service account token has been invalidated")
            if kind == "pod":
                extra["authentication.kubernetes.io/pod-name"] = (ref["name"],)
                extra["authentication.kubernetes.io/pod-uid"] = (ref["uid"],)
        node = private.get("node")
        if node is not None:
            extra["authentication.kubernetes.io/node-name"] = (node["name"],)
            if node.get("uid"):
                extra["authentication.kubernetes.io/node-uid"] = (node["uid"],)
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
        name = sa_username(namespace, sa_ref.get("name", ""))
        return UserInfo(name, groups, sa_ref.get("uid", ""), extra)


# --------------------------------------------------------------------------- TokenRequest


def _deleted_long_ago(stamp: str | None) -> bool:
    if not stamp:
        return False
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    limit = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=DELETION_GRACE_SECONDS)
    return when < limit


def validate_token_request(request: Obj) -> None:
    """``ValidateTokenRequest`` (the spec's defaults first: 3600 s)."""
    spec = request.setdefault("spec", {})
    seconds = spec.setdefault("expirationSeconds", 3600)
    problems = []
    if seconds < MIN_SECONDS:
        problems.append(
            FieldError.invalid(
                "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"
            )
        )
    if seconds > MAX_SECONDS:
        problems.append(
            FieldError.invalid(
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )
        )
    if problems:
        raise errors.invalid("authentication.k8s.io", "TokenRequest", "", problems)


def expiration_timestamp(seconds: int) -> str:
    stamp = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
