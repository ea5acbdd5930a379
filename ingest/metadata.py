"""The top-level keys of a trace other than its events, decoded, cleaned and with secrets masked.

A trace's metadata (`deviceProperties`, `distributedInfo`, versions, and whatever a launcher adds:
`environment`, `config`, ...) is stored in `trace_files`. Before that, values msgspec cannot hold
(1e999, numbers thousands of digits long) are decoded by Python's json or nulled, non-finite numbers
and containers nested deeper than MAX_JSON_DEPTH become null, and secrets are replaced by "***":
every string or container under a key that names one, and token-shaped substrings of any string. The trace id is
the hash of the file's bytes, so it does not change.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec

from tracelake.ingest.limits import MAX_JSON_DEPTH, MAX_LABEL_CHARS

MASK = "***"
CLIPPED_MARK = "..."  # ends a label clipped to MAX_LABEL_CHARS
# Keys whose string values are secrets (case-insensitive, anywhere in the key): `HF_TOKEN`,
# `db_password`, `aws_secret_access_key`, `Authorization`, `credentials`, ... but not
# `TOKENIZERS_PARALLELISM` or `author`. Numbers and booleans under such keys (`max_tokens: 512`,
# `auth_enabled: true`) are settings, not secrets, and stay.
SECRET_KEY = re.compile(
    r"token(?!i[sz]e)|secret|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key|auth(?!or)|credential",
    re.IGNORECASE,
)
# Token shapes, masked wherever they appear in a string (each provider's documented prefix).
TOKEN_SHAPES = re.compile(
    r"""
      \bhf_[A-Za-z0-9]{16,}                               # Hugging Face
    | \bgh[pousr]_[A-Za-z0-9]{20,} | \bgithub_pat_\w{20,}  # GitHub
    | \bsk-[A-Za-z0-9_-]{16,}                             # OpenAI, Anthropic (sk-ant-...)
    | \b(?:AKIA|ASIA)[0-9A-Z]{16}\b                       # AWS access key id
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                     # Slack
    | \bglpat-[A-Za-z0-9_-]{20,}                          # GitLab
    | \bBearer\s+[A-Za-z0-9._~+/=-]{8,}                   # HTTP bearer credentials
    | \beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*  # JSON Web Token
    | (?<=://)[^/\s:@]+:[^/\s@]+(?=@)                      # user:password@ in a URL
    | (?<=[?&;])(?i:[\w-]*(?:token|secret|passw(?:or)?d|api[_-]?key|sig(?:nature)?))=[^&\s"']+  # URL query credentials
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Metadata:
    values: dict[str, Any]
    repaired: Counter[str]  # values nulled or replaced, by reason
    masked_keys: tuple[str, ...]  # the key path of each value masked (`env.HF_TOKEN`, `config[0].url`), never the value

    @property
    def masked_secrets(self) -> int:
        return len(self.masked_keys)


def decode_metadata(top: dict[str, msgspec.Raw]) -> Metadata:
    """Decode every top-level value of `top` (the events already taken out) and clean it."""
    repaired: Counter[str] = Counter()
    values: dict[str, Any] = {}
    for key, raw in top.items():
        try:
            values[key] = msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):  # a number msgspec cannot hold
            try:
                values[key] = json.loads(bytes(raw))
            except (ValueError, RecursionError):  # an integer longer than Python converts
                values[key] = None
                repaired["metadata_field_nulled"] += 1
    masked = _clean(values, repaired)
    return Metadata(values=values, repaired=Counter({k: v for k, v in repaired.items() if v}), masked_keys=tuple(masked))


def _mask_string(text: str) -> tuple[str, int]:
    return TOKEN_SHAPES.subn(MASK, text) if len(text) >= 8 else (text, 0)


def _clean(root: dict[str, Any], repaired: Counter[str]) -> list[str]:
    """Clean `root` in place, walking it with an explicit stack (any depth); returns the key path of
    each masked value (a string with two tokens in it: its path twice)."""
    masked: list[str] = []
    stack: list[tuple[Any, int, str]] = [(root, 1, "")]  # dicts and lists, indexed by key or position
    while stack:
        container, depth, path = stack.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, value in list(items):
            where = f"{path}.{key}" if isinstance(key, str) and path else (key if isinstance(key, str) else f"{path}[{key}]")
            if isinstance(key, str) and isinstance(value, (str, dict, list)) and SECRET_KEY.search(key):
                if value != MASK:
                    container[key] = MASK
                    masked.append(where)
            elif isinstance(value, str):
                container[key], count = _mask_string(value)
                masked += [where] * count
            elif type(value) is float and not math.isfinite(value):
                container[key] = None
                repaired["non_finite_numbers"] += 1
            elif isinstance(value, (dict, list)):
                if depth >= MAX_JSON_DEPTH:
                    container[key] = None
                    repaired["nesting_too_deep"] += 1
                else:
                    stack.append((value, depth + 1, where))
    return sorted(masked)


def clip_label(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """`text` cut to `limit` characters (and marked) when longer."""
    return text[:limit] + CLIPPED_MARK if len(text) > limit else text


def clip_label_args(args_json: str) -> tuple[str, int]:
    """A metadata event's args JSON with every value longer than MAX_LABEL_CHARS (a container: its
    JSON text) clipped, and how many were; args that are not a JSON object become `{}` (one clip)."""
    try:
        args = msgspec.json.decode(args_json)
    except (msgspec.DecodeError, RecursionError):  # a number msgspec cannot hold
        args = None
    if not isinstance(args, dict):
        return "{}", 1
    clipped = 0
    for key, value in args.items():
        text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
        if len(text) > MAX_LABEL_CHARS:
            args[key] = clip_label(text)
            clipped += 1
    return msgspec.json.encode(args).decode(), clipped
