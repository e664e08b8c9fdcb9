"""Credentials for remote data: they come from the operator's environment (AWS_*, GOOGLE_*/GS_*, AZURE_*), or from named
AWS profiles (`AWS_PROFILE` for every bucket, `--remote-profile s3://bucket=NAME` for one), never from a tool
argument, and never leave in a result, an error, a log or an audit line.

A worker reads its profiles (`load_profiles`) from the AWS shared files of its own machine before it confines itself:
once confined it cannot read them (its HOME is its private temporary directory, and the kernel lets it read only the
workspaces and the software), so no dataset can make GDAL read them either. The values go into GDAL as options of the
bucket's path (`drivers.set_path_options`), and into `redact`.

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


#: credential values read from profiles in this process (load_profiles): redacted like the environment's
_profile_secrets: set[str] = set()


#: the parts of an Azure connection string (AZURE_STORAGE_CONNECTION_STRING) that are credentials on their own
CONNECTION_STRING_SECRETS = ("accountkey", "sharedaccesssignature")


def _secrets() -> tuple[str, ...]:
    values = {v for k, v in os.environ.items() if CREDENTIAL_ENV.match(k) and len(v) >= MIN_SECRET_LENGTH}
    for k, v in os.environ.items():  # a message may quote a connection string's key or SAS alone
        if k.startswith("AZURE_") and k.endswith("CONNECTION_STRING"):
            for field in v.split(";"):
                name, _, value = field.partition("=")
                if name.strip().lower() in CONNECTION_STRING_SECRETS and len(value.strip()) >= MIN_SECRET_LENGTH:
                    values.add(value.strip())
    return _sorted(frozenset(values | _profile_secrets))


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


#: the password of a URL's user info: scheme://user:password@host (a database connection string, an HTTP URL)
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:'\"]+:)([^/@\s'\"]+)(@)")


def redact_queries(text: str) -> str:
    """`text` with the value of every credential-carrying URL query key, and every URL's password, replaced by '***'."""
    if "@" in text and "://" in text:
        text = _USERINFO.sub(lambda m: f"{m[1]}***{m[3]}", text)
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


# ----- named AWS profiles ----------------------------------------------------------------------------------------
#: what a profile may set, as the shared files name it -> GDAL's option
PROFILE_KEYS = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region": "AWS_REGION",
}
PROFILE_NAME = re.compile(r"^[A-Za-z0-9_.@+-]{1,64}$")


def read_profile(name: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """GDAL's options for the AWS profile `name`: its keys from the shared credentials file (AWS_SHARED_CREDENTIALS_FILE,
    else ~/.aws/credentials) and its region from the config file (AWS_CONFIG_FILE, else ~/.aws/config; `[profile
    NAME]`, or `[default]`). ValueError naming the files when the profile has no static keys (SSO, credential_process
    and assumed roles are not read: give the keys, or set them in the environment)."""
    import configparser

    env = os.environ if environ is None else environ
    home = os.path.expanduser("~")
    files = (
        env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws", "credentials"),
        env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config"),
    )
    values: dict[str, str] = {}
    for path, section in zip(files, (name, name if name == "default" else f"profile {name}"), strict=True):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as e:
            raise ValueError(f"AWS profile {name}: cannot read {path} ({type(e).__name__})") from None
        if parser.has_section(section):
            for key, option in PROFILE_KEYS.items():
                value = parser.get(section, key, fallback="").strip()
                if value and option not in values:
                    values[option] = value
    if not (values.get("AWS_ACCESS_KEY_ID") and values.get("AWS_SECRET_ACCESS_KEY")):
        raise ValueError(
            f"AWS profile {name!r} has no aws_access_key_id and aws_secret_access_key in {files[0]} (or {files[1]}) on "
            "this machine; profiles that use SSO, credential_process or a role are not read: give it static keys, or "
            "set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment"
        )
    return values


def default_profile(config: dict[str, object]) -> str | None:
    """AWS_PROFILE, when it is to be read: set, with no AWS_ACCESS_KEY_ID beside it, and S3 among the allowed
    locations (`config`: the workers' "allow_remote", or "allow_network")."""
    name = os.environ.get("AWS_PROFILE", "").strip()
    allowed = [str(e) for e in config.get("allow_remote") or ()]  # type: ignore[attr-defined]
    s3 = bool(config.get("allow_network")) or any(e.lower().startswith("s3://") for e in allowed)
    return name if name and s3 and not os.environ.get("AWS_ACCESS_KEY_ID") else None


def load_profiles(config: dict[str, object]) -> list[tuple[str, str, str]]:
    """In a worker, before it confines itself: (GDAL path prefix, option, value) for every --remote-profile the server
    names in `config` ("remote_profiles": [[GDAL path prefix, profile name], …]); with AWS_PROFILE in the environment and no
    AWS_ACCESS_KEY_ID, that profile's values go into the environment (for every bucket). Every value read is redacted
    from then on. ValueError naming the profile when one cannot be read."""
    options: list[tuple[str, str, str]] = []
    default = default_profile(config)
    if default:
        values = read_profile(default)
        _profile_secrets.update(v for k, v in values.items() if k != "AWS_REGION" and len(v) >= MIN_SECRET_LENGTH)
        for option, value in values.items():
            os.environ.setdefault(option, value)
    for prefix, name in config.get("remote_profiles") or ():  # type: ignore[attr-defined]
        values = read_profile(str(name))
        _profile_secrets.update(v for k, v in values.items() if k != "AWS_REGION" and len(v) >= MIN_SECRET_LENGTH)
        # every key, empty when the profile has none: no other profile's value for a path beginning with this one
        # applies (GDAL looks each option up by the longest matching path prefix)
        values = {**dict.fromkeys(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"), ""), **values}
        options += [(str(prefix), option, value) for option, value in values.items()]
    return options
