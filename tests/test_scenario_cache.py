"""The cache matrix for real on the CPU tier's tiny Gemma4, one cell
(prefix caching on, the LRU processor cache, one API server), with the
processor cache serving the first item it saw of a size for every later
item of that size (`processor-cache-cross`, inside the engine): both
rounds, sequential and concurrent, fail with `mismatch`, and the request
whose image was crossed is named as the one that sent the first image.
The premise and the alive check still pass: the cache was used, and the
engine lives. The healthy engine's verdicts are `make run`'s."""
from __future__ import annotations

import pytest

from harness.cache.cells import Cell
from tests.scenario_runs import run_scenarios
from tests.test_mutations import MODEL, fault_test

pytestmark = pytest.mark.engine
CELL = Cell(True, "lru", "default", 1).id


@pytest.fixture(scope="module")
def crossed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cache-cross")
    return run_scenarios("test_cache_consistency.py", tmp, "--model", MODEL, "-k", CELL,
                         "--inject-faults=processor-cache-cross")


@fault_test
def test_a_cache_serving_another_items_features_fails_both_orders_with_mismatch(crossed):
    records, out = crossed
    for check in ("sequential", "concurrent"):
        rec = records[f"test_{check}_matches_references[{CELL}-{MODEL}]"]
        assert (rec.verdict, rec.cause) == ("fail", "mismatch"), (rec.message, out.stdout[-2000:])
        assert rec.message.startswith("input image-b:p1") and "it equals image-a:p1's solo answer" in rec.message, \
            rec.message
    for check in ("cell_caches_as_set", "alive_after_cell"):
        rec = records[f"test_{check}[{CELL}-{MODEL}]"]
        assert rec.verdict == "pass", rec.message
