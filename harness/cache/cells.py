"""The cache-consistency matrix: which engine settings a cell runs under.

Four factors, the settings that decide what vLLM 0.32.0 keeps between
requests: prefix caching (on, off); the multimodal processor cache (LRU
mirrored between the front end and the core, shared memory, off);
`max_num_batched_tokens` (its default, or near the model's largest media
item: it sizes the encoder cache, so there the cache holds about one item
and churns); one or two API server processes (two share no front-end
cache with each other: vLLM falls back to a processor-only cache in each).

`make nightly` runs every combination (FULL); `make run` a pairwise
subset (PAIRWISE): every two settings of two factors meet in some cell.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations, product

PREFIX = (True, False)
PROCESSOR = ("lru", "shm", "off")
BATCHED = ("default", "near-largest")
API_SERVERS = (1, 2)
FACTORS = ("prefix", "processor", "batched", "api_servers")


@dataclass(frozen=True)
class Cell:
    prefix: bool
    processor: str
    batched: str
    api_servers: int

    def __post_init__(self):
        for factor, allowed in zip(FACTORS, (PREFIX, PROCESSOR, BATCHED, API_SERVERS)):
            if getattr(self, factor) not in allowed:
                raise ValueError(f"cache cell: {factor} must be one of {list(allowed)}, "
                                 f"got {getattr(self, factor)!r}")

    @property
    def id(self) -> str:
        """The cell in a check's id: prefix-on-lru-mbt-default-api1."""
        return (f"prefix-{'on' if self.prefix else 'off'}-{self.processor}-mbt-{self.batched}"
                f"-api{self.api_servers}")

    def __str__(self) -> str:  # the engine group key (harness.schedule.retirement) reads it
        return self.id

    def engine_args(self, largest_item_tokens: int) -> dict:
        """The engine arguments that put an engine in this cell (over the
        family's). `largest_item_tokens`: the prompt tokens of the model's
        largest media item, the batched-token budget of `near-largest`."""
        args: dict = {"enable_prefix_caching": self.prefix}
        if self.processor == "off":
            args["mm_processor_cache_gb"] = 0
        else:
            args["mm_processor_cache_type"] = self.processor
        if self.batched == "near-largest":
            args["max_num_batched_tokens"] = largest_item_tokens
        if self.api_servers > 1:
            args["api_server_count"] = self.api_servers
        return args

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in FACTORS}


FULL = tuple(Cell(*values) for values in product(PREFIX, PROCESSOR, BATCHED, API_SERVERS))

# Six cells, the fewest that cover every pair (the processor cache has three
# settings, each factor it meets two): rows of an orthogonal array.
PAIRWISE = (Cell(True, "lru", "default", 1), Cell(False, "lru", "near-largest", 2),
            Cell(True, "shm", "near-largest", 1), Cell(False, "shm", "default", 2),
            Cell(True, "off", "default", 2), Cell(False, "off", "near-largest", 1))

SELECTIONS = {"pairwise": PAIRWISE, "full": FULL}
# A cell's id inside a check id's parameters.
CELL_ID = re.compile(rf"prefix-(?:on|off)-(?:{'|'.join(PROCESSOR)})-mbt-(?:{'|'.join(BATCHED)})-api\d+")


def uncovered_pairs(cells: tuple[Cell, ...]) -> list[tuple]:
    """The pairs of settings of two factors that no cell holds together."""
    levels = dict(zip(FACTORS, (PREFIX, PROCESSOR, BATCHED, API_SERVERS)))
    seen = {(a, getattr(c, a), b, getattr(c, b)) for c in cells for a, b in combinations(FACTORS, 2)}
    return [(a, x, b, y) for a, b in combinations(FACTORS, 2) for x in levels[a] for y in levels[b]
            if (a, x, b, y) not in seen]
