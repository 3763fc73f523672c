"""A sweep with seeds: the quickstart scenario at two DGC densities, each run with two seeds, in one table.

fedgc.sweep runs every combination of the grid's values and of the seeds as a normal run; the table
averages the runs that differ only by seed (mean ± sample standard deviation, n = number of seeds).
It is what `fedgc run scenarios/quickstart.yaml --sweep compression.density=0.01,0.1 --sweep seed=0,1`
prints; the run folders and report.md go to a temporary folder here (give out="runs/my-sweep" to keep them).

    .venv/bin/python examples/sweep_with_seeds.py            # 6 rounds x 4 runs, under a minute
    .venv/bin/python examples/sweep_with_seeds.py --quick    # 2 rounds x 4 runs, for the tests
"""

import argparse
import tempfile
from pathlib import Path

import fedgc

QUICKSTART = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds (the tests use it)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds

    # the quickstart: 10 phones on 3G, a small CNN on digits, DGC; the same dotted keys as --set
    scenario = fedgc.Scenario.from_yaml(QUICKSTART, {"rounds": rounds, "compression.warmup_rounds": 0,
                                                     "eval.target_accuracy": 0.7})

    # with a folder, each table row is named after its point (compression.density=0.01); a sweep kept
    # in memory only (out=None) names its rows after the scenario
    with tempfile.TemporaryDirectory() as tmp:
        sweep = fedgc.sweep(scenario, grid={"compression.density": [0.01, 0.1]}, seeds=[0, 1],
                            out=Path(tmp) / "sweep", jobs=args.jobs)

    for run in sweep.runs:  # one fedgc.Run per point and seed, in plan order
        print(f"density {run.scenario.compression.density:<5} seed {run.scenario.seed}: "
              f"final accuracy {run.summary.final_accuracy:.1%}, {run.summary.bytes_up / 1e6:.3f} MB up")
    print()
    print(sweep.table())


if __name__ == "__main__":
    main()
