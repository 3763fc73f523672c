"""fedgc: what does compression buy, in bytes, simulated wall-clock time and accuracy, on real mobile
networks? A federated-learning simulator (Flower clients, DGC and 14 other compressors, a simpy model
of mobile links).

The public Python API (docs/api.md) — everything else in the package may change::

    import fedgc

    scenario = fedgc.Scenario.from_yaml("scenarios/quickstart.yaml", {"rounds": 5})
    run = fedgc.run(scenario)                  # in this process; no files unless out=...
    print(run.summary.final_accuracy, run.summary.bytes_up)
    sweep = fedgc.sweep(scenario, {"compression.density": [0.01, 0.001]}, seeds=[0, 1])
    print(sweep.table())
    print(fedgc.baseline(scenario).table())  # beside dense and both directions compressed

``fedgc.__version__`` is the installed version (from the package metadata, set in pyproject.toml).

The names are imported when first used, so ``import fedgc`` stays light (the command line starts fast).
"""

from __future__ import annotations

import importlib
from typing import Any

from fedgc.core import kernels as _kernels

# Before anything in fedgc imports torch: the same CPU kernels on every x86-64 machine (opt out with
# FEDGC_CPU_KERNELS=native; docs/performance.md, "CPU kernel sets"). Processes fedgc starts inherit them.
_kernels.apply()

# Public name -> the module that defines it.
_PUBLIC = {
    "FedgcError": "fedgc.errors",  # the base of every one-line user error below (docs/api.md, "Errors")
    "Scenario": "fedgc.scenario.model",
    "ScenarioError": "fedgc.scenario.model",
    "Run": "fedgc.api.runs",
    "run": "fedgc.api.runs",
    "load_run": "fedgc.api.runs",
    "RunFolderError": "fedgc.reports.run_reports",
    "Sweep": "fedgc.api.sweeps",
    "sweep": "fedgc.api.sweeps",
    "load_sweep": "fedgc.api.sweeps",
    "report": "fedgc.api.sweeps",
    "plot": "fedgc.api.sweeps",
    "table": "fedgc.api.sweeps",
    "baseline": "fedgc.api.baseline",
    "Comparison": "fedgc.api.baseline",
    "RoundRecord": "fedgc.runs.metrics",
    "ClientRecord": "fedgc.runs.metrics",
    "Summary": "fedgc.runs.metrics",
    "RoundObserver": "fedgc.core.observe",
    # extending fedgc: a researcher's own model, dataset and compressor (docs/api.md, "Extending")
    "register_model": "fedgc.plugins.registry",
    "register_dataset": "fedgc.plugins.registry",
    "register_compressor": "fedgc.plugins.registry",
    "register_aggregator": "fedgc.plugins.registry",
    "register_server_optimizer": "fedgc.plugins.registry",
    "ServerOptimizer": "fedgc.aggregation.server_optim",
    "Aggregator": "fedgc.aggregation.aggregators",
    "AcceptedUpdate": "fedgc.aggregation.aggregators",
    "registered": "fedgc.plugins.registry",
    "PluginError": "fedgc.plugins.import_paths",
    "UserData": "fedgc.data.user",
    "Compressor": "fedgc.compress.base",
    "CompressorOptions": "fedgc.compress.base",
    "CompressionContext": "fedgc.compress.base",
    "DensePayload": "fedgc.compress.payloads",
    "SparsePayload": "fedgc.compress.payloads",
    "QuantizedPayload": "fedgc.compress.payloads",
    "SignPayload": "fedgc.compress.payloads",
    "TernaryPayload": "fedgc.compress.payloads",
    "LowRankPayload": "fedgc.compress.payloads",
}

__all__ = sorted(_PUBLIC)  # noqa: PLE0605 — the names above, one list


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's version: pyproject.toml's, the one source
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("fedgc")
        except PackageNotFoundError:  # the package imported from a checkout that was never installed
            value = "0+unknown"
        globals()[name] = value
        return value
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'fedgc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, "__version__"})
