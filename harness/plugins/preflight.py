"""pytest plugin: preflight. Once the checks are collected, and before the
first one runs, verify what the selected checks need (harness.preflight):
the tier's devices, the engine's interpreter, the --engine-url server and
the model it serves, the hub token and disk for the models. Anything
missing stops the run with one message and the usage status (4), as a bad
option does, instead of failing engine start after engine start.

On the CPU tier it then says, in one line, which kernel library the engines
will load on this host (or at the forced --engine-kernels level), and which
selected checks a known issue covers there: what differs between hosts is
in sight before the first check. An engine that loads another library
than this prediction is a harness error (plugins/engines.py).

Under xdist only the workers collect: the controller checks what the
options select, before any worker starts. `--collect-only` checks nothing,
so the checks can be listed on any machine.
"""
from __future__ import annotations

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.models import ModelEntry, scenario_families
from harness.plugins.common import is_controller, is_worker, model_entry_of
from harness.preflight import Needs, problems
from harness.results.known_issues import KnownIssue
from harness.results.record import CheckRecord
from harness.setup.cpu_features import cpu_identity


def needs_of_items(config: pytest.Config, items: list[pytest.Item]) -> Needs:
    """What these checks need, read from their fixtures: a matrix entry
    (`model_entry`), the engine pool, the engine's interpreter."""
    entries = dict.fromkeys(e for item in items if (e := model_entry_of(item)) is not None)
    uses = {name for item in items for name in getattr(item, "fixturenames", ())}
    families = dict.fromkeys(item.module.__name__.rsplit(".", 1)[-1] for item in items
                             if getattr(item, "module", None) is not None)
    return _needs(config, tuple(entries), "engine_pool" in uses, "engine_interpreter" in uses, tuple(families))


def needs_of_options(config: pytest.Config) -> Needs:
    """Without the items: every entry the options select may run, in any family."""
    return _needs(config, tuple(config.hook.pytest_mmharness_models(config=config)), True, True,
                  tuple(scenario_families()))


def _needs(config: pytest.Config, entries: tuple[ModelEntry, ...], pooled: bool, interpreted: bool,
           families: tuple[str, ...]) -> Needs:
    url = config.getoption("engine_url")
    interpreter: EngineInterpreter | None = (config.hook.pytest_mmharness_engine_interpreter(config=config)
                                             if interpreted else None)
    return Needs(tier=config.getoption("tier"), entries=entries, engine_url=url,
                 starts_engines=pooled and not url, interpreter=interpreter, families=families,
                 kernel_level=config.getoption("engine_kernels"))


def stop_if_missing(needs: Needs) -> None:
    found = problems(needs)
    if found:
        raise pytest.UsageError("preflight: this run cannot work here, so no check ran:\n"
                                + "\n".join(f"  - {p}" for p in found))


@pytest.hookimpl(tryfirst=True)  # before any other plugin acts on the collection
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if is_worker(config) or config.option.collectonly:
        return
    needs = needs_of_items(config, session.items)
    stop_if_missing(needs)
    if needs.tier == "cpu" and needs.starts_engines and needs.interpreter is not None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        line = host_line(needs.interpreter, [i.nodeid for i in session.items],
                         config.hook.pytest_mmharness_known_issues(config=config) or [])
        if reporter is not None:
            reporter.write_line(line)


def host_line(interpreter: EngineInterpreter, check_ids: list[str], known: list[KnownIssue]) -> str:
    """The kernel library the engines will load, and the checks a known issue covers on this host."""
    host, ident, cpu = interpreter.host, interpreter.identity, cpu_identity()
    record_host = {"kernels": host["predicted_kernels"], "isa": host["isa"]}
    covered: dict[str, int] = {}
    for check_id in check_ids:
        probe = CheckRecord(id=check_id, engine=f"offline:{ident['distribution']}",
                            engine_version=ident["version"], host=record_host)
        if issue := next((i for i in known if i.covers(probe)), None):
            covered[issue.link] = covered.get(issue.link, 0) + 1
    where = (f"{cpu['model_name']} ({cpu['vendor']} family {cpu['family']} model {cpu['model']} "
             f"stepping {cpu['stepping']})")
    findings = ", ".join(f"{link.rsplit('/', 1)[-1].split('-', 1)[0]}: {n}" for link, n in covered.items())
    return (f"mmharness host: the engine will load {host['predicted_kernels']} (sees "
            f"{', '.join(host['isa']) or 'none of avx2, avx512f, avx512_bf16, amx'}; level "
            f"{host['kernel_level']}) on {where}; known issues cover {sum(covered.values())} of the "
            f"{len(check_ids)} selected checks on this host" + (f" ({findings})" if findings else ""))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if is_controller(config) and not config.option.collectonly:
        stop_if_missing(needs_of_options(config))
