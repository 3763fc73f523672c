"""``fedgc.baseline``: a scenario beside its baselines, the comparison ``fedgc run SCENARIO --baseline``
(and ``make run``) prints, as one call. The runs go through the command line's code (``fedgc.reports.compare``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fedgc.api.runs import Run, as_scenario, load_run, path_argument, runs_in
from fedgc.scenario.model import Scenario

if TYPE_CHECKING:
    from fedgc.reports.compare import Compared


@dataclass
class Comparison:
    """A scenario run beside its baselines. ``runs``: dense, the scenario as written, and the other
    downlink (both directions compressed, or dense downloads when the scenario compresses them), each
    ``Run.label`` as the table names it (``dense``, ``dgc up``, ``dgc up + topk down``); fewer when one
    stopped early. ``out_dir``: the comparison folder (a run folder per variant and ``comparison.md``;
    None: no files were kept)."""

    runs: list[Run]
    out_dir: Path | None = None

    def _compared(self) -> list[Compared]:
        from fedgc.reports.compare import Compared, Variant

        return [Compared(Variant(r.label, r.out_dir.name if r.out_dir is not None else r.label, r.scenario),
                         r.summary, r.out_dir) for r in self.runs]

    def table(self) -> str:
        """The table ``fedgc run --baseline`` prints: final accuracy, simulated time and rounds to the
        target, MB up and down, upload compression on the wire, speed-up over dense."""
        from fedgc.reports.compare import comparison_table

        return comparison_table(self._compared())

    def reading(self) -> str:
        """The sentence printed under the table: where the bytes went, which variant reached the target first."""
        from fedgc.reports.compare import reading

        return reading(self._compared())


def baseline(scenario: Scenario | dict[str, Any] | str | Path, out: str | Path | None = None, *, overwrite: bool = False,
             quiet: bool = True) -> Comparison:
    """Run ``scenario`` beside dense FedAvg and beside itself with both directions compressed (top-k
    downloads at density 0.1), as ``fedgc run SCENARIO --baseline``. ``out``: the comparison folder
    (``OUT/dense/``, ``OUT/<name>-up/``, ``OUT/<name>-up-down/`` and ``comparison.md``; new or empty,
    or cleared with ``overwrite``); None keeps nothing on disk."""
    from fedgc.reports.compare import baseline_variants, run_comparison, write_comparison
    from fedgc.runs.folder import claim_folder

    if out is not None:
        path_argument(out, "out", "a comparison folder's path")
    base = as_scenario(scenario)
    labels = {v.folder: v.label for v in baseline_variants(base)}

    def run_into(out_dir: Path) -> list[Run]:
        with claim_folder(out_dir, overwrite=overwrite):
            results = run_comparison(base, out_dir, quiet=quiet)
            write_comparison(results, out_dir)
        # run into a folder, each variant has its own (Compared.out_dir is None only without one)
        runs = [load_run(cast(Path, r.out_dir)) for r in results]
        for r in runs:
            r.label = labels[cast(Path, r.out_dir).name]  # load_run's Run holds its folder
        return runs

    return Comparison(*runs_in(out, "comparison", run_into))
