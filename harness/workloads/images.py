"""Image workloads for the ragged-images family: images of the sizes a
model's own processor turns into different patch grids, one request per
image and one request of several, and the facts a premise guard needs
(each image's size, the processor's placeholder count).

Sizes come from the processor's limits, not from a fixed list: the fewest
and the most pixels it keeps, and the side of one language-model token in
pixels (a patch, times the merge or pooling that joins patches into one
token). The premise check then observes that the grids really differed in
one encoder call: a processor that resizes every image to one size cannot
pass as ragged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fixtures import media
from harness.workloads.audio import processor
from harness.workloads.chat import image_part, user
from harness.workloads.request import Request, Workload

PROMPT = "Describe what you see."
# Images in the ragged batch besides the request of several (its checks' `image` ids).
RAGGED_IMAGES = 4


@dataclass(frozen=True)
class ImageLimits:
    unit: int        # pixels on the side of one language-model token
    min_pixels: int  # the fewest pixels the processor keeps (it scales smaller images up)
    max_pixels: int  # the most (it scales larger images down)


def image_limits(proc) -> ImageLimits:
    """The limits of the model's image processor: Qwen-VL's `size`
    (shortest_edge and longest_edge in pixels), min_pixels/max_pixels,
    Gemma4's soft-token budget (max_soft_tokens tokens of pooled patches),
    a tiling processor's sides (Idefics3's: `size.longest_edge` the side
    every image's longest is resized to, `max_image_size.longest_edge` a
    square tile's), anyres grid pinpoints (LLaVA-NeXT's, LLaVA-OneVision's
    `image_grid_pinpoints`: a tile's side from `crop_size` or `size`),
    pan-and-scan's crops (Gemma3's `pan_and_scan_*`: one square, plus up to
    max_num_crops more), or one size for every image (`size` height and
    width)."""
    ip = getattr(proc, "image_processor", proc)
    tile = _size_field(getattr(ip, "max_image_size", None), "longest_edge")
    if tile:
        # Sides, not pixel counts. Splitting, an image's tiles follow its
        # aspect ratio, from one tile's square to the longest side's square;
        # not splitting, every image is resized to one tile.
        tile = int(tile)
        side = int(_size_field(getattr(ip, "size", None), "longest_edge") or tile) \
            if getattr(ip, "do_image_splitting", False) else tile
        return ImageLimits(tile, tile * tile, side * side)
    pinpoints = getattr(ip, "image_grid_pinpoints", None)
    if pinpoints:
        # Anyres: an image is a base tile (the whole image resized to one)
        # plus the tiles of the pinpoint (height, width) that fits it best,
        # so its pixels range from one tile's to the largest pinpoint's; the
        # sizes are whole tiles (each tile's tokens are one fixed grid).
        crop, size = getattr(ip, "crop_size", None), getattr(ip, "size", None)
        side = int(_size_field(crop, "height") or _size_field(size, "height") or _size_field(size, "shortest_edge"))
        return ImageLimits(side, side * side, max(int(h) * int(w) for h, w in pinpoints))
    crop, crops = getattr(ip, "pan_and_scan_min_crop_size", None), getattr(ip, "pan_and_scan_max_num_crops", None)
    if getattr(ip, "do_pan_and_scan", False) and crop and crops:
        # Pan-and-scan (Gemma3's): every image resized to one square (`size`
        # height), and one whose long side is pan_and_scan_min_ratio_to_activate
        # times its short one or more also cut along it into 2 to
        # pan_and_scan_max_num_crops crops of pan_and_scan_min_crop_size or
        # more a side, each resized to the square too: from one square's
        # pixels to max_num_crops squares'; the sizes are whole crops' sides.
        side = int(_size_field(getattr(ip, "size", None), "height"))
        return ImageLimits(int(crop), side * side, side * side * int(crops))
    patch = int(getattr(ip, "patch_size", None) or 14)
    joined = int(getattr(ip, "merge_size", None) or getattr(ip, "pooling_kernel_size", None) or 1)
    unit = patch * joined
    size = getattr(ip, "size", None)
    low = getattr(ip, "min_pixels", None) or _size_field(size, "shortest_edge")
    high = getattr(ip, "max_pixels", None) or _size_field(size, "longest_edge")
    tokens = getattr(ip, "max_soft_tokens", None)
    if not high and tokens:
        high = int(tokens) * unit * unit
    fixed = (_size_field(size, "height") or 0) * (_size_field(size, "width") or 0)
    if not high and fixed:
        low = high = fixed  # every image resized to one size (SigLIP's 768x768, say)
    if not high:
        raise ValueError(f"{type(ip).__name__} states no pixel limit (max_pixels, size.longest_edge or "
                         "max_soft_tokens): its images' sizes cannot be chosen from it")
    return ImageLimits(unit, int(low or 4 * unit * unit), int(high))


def _size_field(size, name: str):
    if size is None:
        return None
    return size.get(name) if isinstance(size, dict) else getattr(size, name, None)


def _shape(pixels: float, aspect: float, unit: int) -> tuple[int, int]:
    """Width and height of about `pixels` at width/height `aspect`, each a
    whole number of tokens' sides."""
    height = math.sqrt(pixels / aspect)
    return (max(unit, round(height * aspect / unit) * unit), max(unit, round(height / unit) * unit))


def ragged_sizes(limits: ImageLimits) -> list[tuple[int, int]]:
    """Four sizes, each its own grid: the smallest the processor keeps, a
    square at its largest, wide and tall at a third of it."""
    small = _shape(limits.min_pixels, 1.0, limits.unit)
    return [small, _shape(limits.max_pixels * 0.95, 1.0, limits.unit),
            _shape(limits.max_pixels / 3, 4.0, limits.unit), _shape(limits.max_pixels / 3, 0.25, limits.unit)]


def grids(proc, sizes: list[tuple[int, int]]) -> list[tuple]:
    """The patch grid the processor makes of each size: Qwen-VL's
    (t, h, w), Gemma4's (patches, columns, rows) of its patch positions,
    else the pixel tensor's shape (a tiling processor's (tiles, channels,
    side, side); pan-and-scan's (the image and its crops, channels, side,
    side); one size for every image where the processor resizes them all)."""
    import numpy as np

    ip = getattr(proc, "image_processor", proc)
    out = []
    for w, h in sizes:
        got = ip(images=[media.image(w, h, seed=0)], return_tensors="np")
        if "image_grid_thw" in got:
            out.append(tuple(int(v) for v in got["image_grid_thw"][0]))
        elif "image_position_ids" in got:
            valid = got["image_position_ids"][0][got["image_position_ids"][0][:, 0] >= 0]
            out.append((len(valid), int(valid[:, 0].max()) + 1, int(valid[:, 1].max()) + 1))
        elif "num_crops" in got:
            # Pan-and-scan: the whole image and its crops, stacked along the first axis.
            out.append((int(got["num_crops"][0]) + 1, *np.asarray(got["pixel_values"]).shape[1:]))
        else:
            out.append(tuple(np.asarray(got["pixel_values"]).shape[1:]))
    return out


def equal_size(limits: ImageLimits) -> tuple[int, int]:
    return _shape(limits.max_pixels / 3, 1.5, limits.unit)


def _image(size: tuple[int, int], seed: int) -> dict:
    return image_part(media.encode_image(media.image(*size, seed=seed), "png"))


def image_workload(name: str, sizes: list[tuple[int, int]], *, several: int = 0) -> Workload:
    """One request per size (`image<i>:<w>x<h>`), each image of its own seeded
    content; with several >= 2, one more request of that many images, the
    sizes in turn (`several:<w>x<h>+...`)."""
    reqs = [Request(f"image{i}:{w}x{h}", user(_image((w, h), seed=500 + i), PROMPT),
                    {"images": [[w, h]]}, [(w, h)]) for i, (w, h) in enumerate(sizes)]
    if several >= 2:
        chosen = [sizes[i % len(sizes)] for i in range(several)]
        parts = [_image(size, seed=600 + k) for k, size in enumerate(chosen)]
        reqs.append(Request("several:" + "+".join(f"{w}x{h}" for w, h in chosen), user(*parts, PROMPT),
                            {"images": [list(s) for s in chosen]}, chosen))
    return Workload(name, tuple(reqs), {"sizes": [list(s) for s in sizes]})


def image_token_id(proc) -> int:
    """The placeholder token the processor repeats once per image token: the
    tokenizer's `image_token` where it names another than the processor's
    (whose own is then the prompt's marker that it expands: Gemma3's
    <start_of_image>, expanded to <image_soft_token>s)."""
    named = getattr(getattr(proc, "tokenizer", None), "image_token", None)
    if named is not None and named != getattr(proc, "image_token", None):
        return int(proc.tokenizer.convert_tokens_to_ids(named))
    token = getattr(proc, "image_token", None)
    ids = getattr(proc, "image_token_id", None)
    if ids is None and token is not None:
        ids = proc.tokenizer.convert_tokens_to_ids(token)
    if ids is None:
        raise ValueError(f"{type(proc).__name__} names no image token")
    return int(ids)


def image_tokens(proc, sizes: list[tuple[int, int]]) -> int:
    """Placeholders the model's own processor puts in a prompt of these images."""
    pictures = [media.image(w, h, seed=0) for w, h in sizes]
    messages = [{"role": "user", "content": [*({"type": "image"} for _ in pictures),
                                              {"type": "text", "text": PROMPT}]}]
    text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = proc(text=[text], images=pictures, return_tensors="np")["input_ids"][0]
    return int((ids == image_token_id(proc)).sum())
