"""Where the models come from: the hub (its token for gated checkpoints,
disk for the download) or the tiny builds' cache."""
from __future__ import annotations

import shutil
from pathlib import Path

from fixtures.tiny_models.cache import default_cache_root
from harness.models import ModelEntry
from harness.units import GiB

# Tiny builds and crafted adapters take tens of MiB together; this leaves room for logs too.
TINY_CACHE_ROOM = 1 * GiB
# The hub gives no size without a request: room for one checkpoint of the GPU
# matrix not yet in the cache (the largest, a 26B 4-bit MoE, is about 16 GB).
HUB_DOWNLOAD_ROOM = 20 * GiB


def free_bytes(path: Path) -> int:
    """Free space where `path` is or will be made."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def in_hub_cache(model: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    if Path(model).is_dir():  # a local checkpoint: nothing to fetch
        return True
    return isinstance(try_to_load_from_cache(model, "config.json"), str)


def hub_problems(entries: list[ModelEntry], *, download: bool) -> list[str]:
    """Checkpoints not in the HF cache must be fetchable: the hub reachable
    (not HF_HUB_OFFLINE), a token for gated ones, and, where the harness
    loads them (`download`), disk for them."""
    from huggingface_hub import constants, get_token

    missing = [e for e in entries if not in_hub_cache(e.model)]
    if not missing:
        return []
    names = ", ".join(e.name for e in missing)
    if constants.HF_HUB_OFFLINE:
        return [f"{names}: not in the HF cache ({constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set, "
                f"so they cannot be fetched"]
    found = []
    gated = [e.name for e in missing if e.gated]
    if gated and not get_token():
        found.append(f"{', '.join(gated)}: gated on the hub and not in the HF cache, and there is no hub "
                     f"token: set HF_TOKEN to a token with access to them")
    need, free = len(missing) * HUB_DOWNLOAD_ROOM, free_bytes(Path(constants.HF_HUB_CACHE))
    if download and free < need:
        found.append(f"{names}: {free / GiB:.1f} GiB free for the HF cache ({constants.HF_HUB_CACHE}), "
                     f"{need / GiB:.0f} GiB wanted to fetch {len(missing)} checkpoint(s); free some, or set HF_HOME")
    return found


def tiny_cache_problems() -> list[str]:
    cache = default_cache_root().parent
    free = free_bytes(cache)
    if free < TINY_CACHE_ROOM:
        return [f"{free / GiB:.2f} GiB free for the model cache ({cache}), {TINY_CACHE_ROOM / GiB:.0f} GiB "
                f"wanted for the tiny builds; free some, or set MMHARNESS_CACHE"]
    return []
