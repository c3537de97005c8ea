"""cache_salt validation at the API boundary: non-empty string, at most 128 chars, no @ / \\ NUL."""

from __future__ import annotations

import pytest

from sim.kvcache import cache_salt_problem


@pytest.mark.parametrize("salt", [None, "tenant-1", "a", "x" * 128, "ünïcødé salt", "a b:c.d"])
def test_acceptable_salts(salt):
    """None (no salt), ordinary strings and a salt of exactly 128 characters are accepted."""
    assert cache_salt_problem(salt) is None


def test_empty_salt_is_rejected():
    """The API rejects "" (the engine would hash it like no salt)."""
    assert cache_salt_problem("") == "cache_salt must be non-empty (omit it for no salt)"


def test_salt_over_128_characters_is_rejected_with_its_length():
    """129 characters is one too many; the message gives the length and the limit."""
    assert cache_salt_problem("x" * 129) == "cache_salt is 129 characters; at most 128 allowed"


@pytest.mark.parametrize("character", ["@", "/", "\\", "\x00"])
def test_forbidden_characters_are_rejected(character):
    """'@', '/', '\\' and NUL are refused anywhere in the salt; the message names the one found."""
    problem = cache_salt_problem(f"tenant{character}1")
    assert problem is not None
    assert repr(character) in problem
    assert "not allowed" in problem


@pytest.mark.parametrize(("salt", "type_name"), [(7, "int"), (b"tenant", "bytes"), (["a"], "list")])
def test_non_string_salt_is_rejected_naming_its_type(salt, type_name):
    """A salt must be a string."""
    assert cache_salt_problem(salt) == f"cache_salt must be a string, got {type_name}"
