"""Credentials for remote data: they come from the operator's environment (AWS_*, GOOGLE_*/GS_*, AZURE_*, or the
profiles those name), never from a tool argument, and never leave in a result, an error, a log or an audit line.

`redact` replaces the value of every credential variable set in this process's environment in a text (GDAL quotes an
S3 error response, which can carry the access key id); `signed_query` names a URL query key that carries a credential
(a presigned URL's signature or token), which the sandbox refuses in tool arguments.
"""

from __future__ import annotations

import functools
import os
import re

#: environment variables that hold a secret or an identity GDAL, boto3 or the cloud SDKs read
CREDENTIAL_ENV = re.compile(
    r"^(AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|SECURITY_TOKEN)|GS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|OAUTH2_\w+)"
    r"|GOOGLE_\w*(KEY|TOKEN|SECRET|CREDENTIALS)\w*|AZURE_\w*(KEY|TOKEN|SECRET|CONNECTION_STRING|SAS)\w*"
    r"|OSS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY)|SWIFT_\w*KEY\w*|GDAL_HTTP_(USERPWD|AUTH|HEADERS|BEARER|PROXYUSERPWD)\w*"
    r"|HTTPS?_PROXY|https?_proxy)$"
)
#: URL query keys that carry a credential (presigned S3/GCS URLs, Azure SAS, generic tokens)
SIGNED_QUERY_KEYS = frozenset(
    k.lower()
    for k in (
        "X-Amz-Credential",
        "X-Amz-Signature",
        "X-Amz-Security-Token",
        "AWSAccessKeyId",
        "Signature",
        "X-Goog-Credential",
        "X-Goog-Signature",
        "GoogleAccessId",
        "sig",
        "se",
        "token",
        "access_token",
        "api_key",
        "apikey",
        "key",
        "password",
        "secret",
    )
)
MIN_SECRET_LENGTH = 6  # shorter values (a region, 'NO') would redact ordinary words


def _secrets() -> tuple[str, ...]:
    values = {v for k, v in os.environ.items() if CREDENTIAL_ENV.match(k) and len(v) >= MIN_SECRET_LENGTH}
    return _sorted(frozenset(values))


@functools.lru_cache(maxsize=8)
def _sorted(values: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str) -> str:
    """`text` with every credential value of the environment replaced by '***'."""
    for secret in _secrets():
        if secret in text:
            text = text.replace(secret, "***")
    return text


_QUERY_VALUE = re.compile(r"([?&;])([^=&;?#\s\"']+)=([^&;#\s\"']*)")


def redact_queries(text: str) -> str:
    """`text` with the value of every credential-carrying URL query key in it replaced by '***'."""
    if "=" not in text:
        return text
    return _QUERY_VALUE.sub(lambda m: f"{m[1]}{m[2]}=***" if _is_signed_key(m[2]) else m[0], text)


def redact_obj(obj: object) -> object:
    """redact and redact_queries over every string of a JSON-like value (arguments in the audit log)."""
    if isinstance(obj, str):
        return redact(redact_queries(obj))
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    return obj


#: key endings that name a credential whatever comes before (client_secret, X-Amz-Signature, id_token …)
SIGNED_KEY_ENDINGS = ("signature", "credential", "secret", "token", "password", "passwd", "apikey", "api_key", "jwt")


def _is_signed_key(raw: str) -> bool:
    from urllib.parse import unquote

    key = unquote(unquote(raw)).strip().lower().rstrip("[]")
    return key in SIGNED_QUERY_KEYS or key.endswith(SIGNED_KEY_ENDINGS) or key in ("auth", "authorization")


def signed_query(query: str) -> str | None:
    """The first query key of a URL that carries a credential, or None: keys compared decoded (servers decode
    'X%2DAmz%2DSignature'), split on '&' and ';'."""
    for part in re.split(r"[&;]", query):
        raw = part.split("=", 1)[0]
        if raw and _is_signed_key(raw):
            return raw
    return None
