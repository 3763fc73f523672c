"""Bring your own compressor: a ~30-line sparsifier, measured on the wire like fedgc's own DGC and top-k.

The compressor below is "energy top-k": for each tensor it sends the fewest largest-magnitude entries
that together hold a given share of the tensor's squared L2 norm (capped at a maximum density), so its
density adapts to how concentrated each update is. It returns a fedgc.SparsePayload, one of the
payload kinds fedgc already knows, so the wire codec, error feedback, aggregation and byte accounting
work on it unchanged: the bytes in the table are the real encoded upload bytes.

    .venv/bin/python examples/own_compressor.py            # 12 rounds, about half a minute
    .venv/bin/python examples/own_compressor.py --quick    # 3 rounds, for the tests
"""

import argparse
import math

import torch
from pydantic import Field

import fedgc


class EnergyTopK(fedgc.Compressor):
    """Per tensor: the largest entries holding `energy` of its squared norm, at most `max_density` of them."""

    name = "energy_topk"  # what a scenario writes as compression.name

    class Options(fedgc.CompressorOptions):  # its own keys, next to error_feedback / value_dtype / ...
        energy: float = Field(0.2, gt=0.0, le=1.0, description="share of the tensor's squared norm to send")
        max_density: float = Field(0.1, gt=0.0, le=1.0, description="never more than this share of the entries")

    def __init__(self, energy: float, max_density: float):
        self.energy, self.max_density = energy, max_density

    @classmethod
    def from_config(cls, options):
        return cls(options.energy, options.max_density)

    def compress(self, tensor, name, ctx):
        flat = tensor.detach().flatten().float()
        cap = max(1, math.ceil(self.max_density * flat.numel()))
        top = torch.topk(flat.abs(), cap)  # the candidates, largest first
        held = torch.cumsum(top.values**2, 0) / flat.pow(2).sum().clamp_min(1e-30)
        k = min(cap, int((held < self.energy).sum()) + 1)  # the first k that reach `energy`
        indices = top.indices[:k].sort().values  # a SparsePayload lists its indices in ascending order
        return fedgc.SparsePayload(indices=indices, values=flat[indices], shape=tuple(tensor.shape))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds (the tests use it)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--network", default="3g", help="a named link profile: 3g, lte, wifi, ...")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    fedgc.register_compressor(EnergyTopK)  # now compression.name: energy_topk works in any scenario

    # 10 phones on a mobile network train an MLP (55k parameters, 0.22 MB in fp32) on sklearn's digits.
    scenario = fedgc.Scenario.from_dict({
        "name": "own-compressor", "seed": 0, "rounds": rounds,
        "data": {"dataset": "digits", "num_clients": 10, "partition": "iid"},
        "model": {"name": "mlp", "options": {"hidden": [200, 200]}},
        "client": {"local_steps": 10, "batch_size": 16, "lr": 0.3},
        # density is what dgc and topk send; each compressor's own options go under its name and
        # apply only when that compressor is the one named
        "compression": {"name": "topk", "density": 0.02,
                        "energy_topk": {"energy": 0.2, "max_density": 0.1}},
        "strategy": {"fraction": 0.5},
        "network": {"profile": args.network, "device": {"name": "constant", "samples_per_s": 500}},
        "eval": {"target_accuracy": 0.8},
    })

    # one run per compressor (plus uncompressed "none" as the baseline), all in memory
    sweep = fedgc.sweep(scenario, {"compression.name": ["none", "dgc", "topk", "energy_topk"]})

    target = scenario.eval.target_accuracy
    print(f"\n{rounds} rounds on {args.network}, target accuracy {target:.0%}\n")
    print(f"| {'compressor':<12} | {'MB up':>7} | {'ratio':>6} | {'final acc':>9} | "
          f"{'time to target (s)':>18} | {'sim time (s)':>12} |")
    print(f"|{'-' * 14}|{'-' * 8}:|{'-' * 7}:|{'-' * 10}:|{'-' * 19}:|{'-' * 13}:|")
    for run in sweep.runs:
        s = run.summary
        reached = f"{s.time_to_target_s:.1f}" if s.time_to_target_s is not None else "not reached"
        print(f"| {run.scenario.compression.name:<12} | {s.bytes_up / 1e6:>7.3f} | {s.compression_ratio_up:>5.1f}x | "
              f"{s.final_accuracy:>9.1%} | {reached:>18} | {s.sim_time_s:>12.1f} |")


if __name__ == "__main__":
    main()
