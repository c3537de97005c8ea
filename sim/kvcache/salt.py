"""cache_salt validation as vLLM's OpenAI API applies it at the request boundary."""

from __future__ import annotations

MAX_CACHE_SALT_LENGTH = 128
FORBIDDEN_SALT_CHARACTERS = ("@", "/", "\\", "\x00")


def cache_salt_problem(salt: object) -> str | None:
    """Why `salt` would be rejected by the API, or None if it is acceptable (None means no salt)."""
    if salt is None:
        return None
    if not isinstance(salt, str):
        return f"cache_salt must be a string, got {type(salt).__name__}"
    if salt == "":
        return "cache_salt must be non-empty (omit it for no salt)"
    if len(salt) > MAX_CACHE_SALT_LENGTH:
        return f"cache_salt is {len(salt)} characters; at most {MAX_CACHE_SALT_LENGTH} allowed"
    for character in FORBIDDEN_SALT_CHARACTERS:
        if character in salt:
            return (
                f"cache_salt {salt!r} contains {character!r}; "
                "'@', '/', '\\' and NUL are not allowed"
            )
    return None
