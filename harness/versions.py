"""Engine versions against specifiers, one rule everywhere (noise profiles,
known issues, what a model entry says the engine supports)."""
from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def version_in(version: str | None, specifiers: str) -> bool:
    """`version` satisfies `specifiers` ("*": any version, known or not). A
    local build (0.32.0+patch) satisfies only specifiers that name a local
    label themselves: a patched build is another engine, and meets its own
    profiles and findings (packaging alone lets ==0.32.0 match it)."""
    if specifiers == "*":
        return True
    try:
        parsed = Version(version or "")
        spec = SpecifierSet(specifiers)
    except (InvalidVersion, InvalidSpecifier):
        return False
    if parsed.local and "+" not in specifiers:
        return False
    return spec.contains(parsed, prereleases=True)
