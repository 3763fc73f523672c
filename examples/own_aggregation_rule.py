"""Bring your own aggregation rule: a norm-clipped mean against fedgc's mean and median, with one bad client.

The rule is a fedgc.Aggregator: the server hands it the round's accepted updates (after its own checks
and norm bounding) and it returns the round's update, one dense tensor per parameter. Ours clips every
update to the round's median update norm, then takes the usual weighted mean.

The bad client is made with the public API alone: the dataset is the user's own (sklearn's digits as
arrays), split with partition "natural" so that client i gets group i, and group 0's data is poisoned
(labels shifted by one, features scaled by 10), which makes client 0 send large, wrong updates.

    .venv/bin/python examples/own_aggregation_rule.py            # 12 rounds, about half a minute
    .venv/bin/python examples/own_aggregation_rule.py --quick    # 3 rounds, for the tests
"""

import argparse

import numpy as np
import torch
from sklearn.datasets import load_digits

import fedgc


class ClippedMean(fedgc.Aggregator):
    """The weighted mean of the updates, each first scaled down to at most the round's median update norm."""

    name = "clipped_mean"  # what a scenario writes as strategy.aggregation
    weighted = True  # each update comes with its share of the round's examples (u.share, summing to 1)

    def aggregate(self, updates, shapes, device):
        dense = [{name: u.dense(name, device) for name in shapes} for u in updates]  # flat fp32 tensors
        norms = torch.stack([torch.sqrt(sum(t.square().sum() for t in d.values())) for d in dense])
        bound = norms.median()
        scales = [u.share * min(1.0, float(bound / n.clamp_min(1e-12))) for u, n in zip(updates, norms)]
        return {name: sum(s * d[name] for s, d in zip(scales, dense)).reshape(shape)
                for name, shape in shapes.items()}


def digits_with_groups(num_clients, poison):
    """sklearn's digits as fedgc.UserData; train rows dealt to `num_clients` groups, group 0 poisoned."""
    digits = load_digits()
    x, y = (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    cut = int(0.8 * len(y))
    x_train, y_train = x[:cut].copy(), y[:cut].copy()
    groups = np.arange(cut) % num_clients  # client i of partition "natural" = group i
    if poison:
        bad = groups == 0
        y_train[bad] = (y_train[bad] + 1) % 10
        x_train[bad] *= 10.0
    return fedgc.UserData(x_train, y_train, x[cut:], y[cut:], num_classes=10, groups=groups)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds (the tests use it)")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    clients = 8

    fedgc.register_aggregator(ClippedMean)
    fedgc.register_dataset("digits_clean", digits_with_groups(clients, poison=False))
    fedgc.register_dataset("digits_one_bad_client", digits_with_groups(clients, poison=True))

    scenario = fedgc.Scenario.from_dict({
        "name": "own-rule", "seed": 0, "rounds": rounds,
        "data": {"dataset": "digits_one_bad_client", "num_clients": clients, "partition": "natural"},
        "model": {"name": "mlp"},
        "client": {"local_steps": 10, "batch_size": 16, "lr": 0.1},
        "compression": {"name": "none"},
        "strategy": {"fraction": 1.0},  # every client, the bad one included, every round
        "network": {"profile": "lte"},
        "eval": {"target_accuracy": 0.85},
    })

    cases = [("mean", "no"), ("mean", "yes"), ("median", "yes"), ("clipped_mean", "yes")]
    runs = []
    for rule, bad in cases:
        dataset = "digits_one_bad_client" if bad == "yes" else "digits_clean"
        runs.append(fedgc.run(scenario.with_overrides({"strategy.aggregation": rule, "data.dataset": dataset})))

    print(f"\n{rounds} rounds, {clients} clients per round, target accuracy {scenario.eval.target_accuracy:.0%}\n")
    print(f"| {'rule':<12} | {'bad client':>10} | {'final acc':>9} | {'time to target (s)':>18} | "
          f"{'updates bounded by the server':>29} |")
    print(f"|{'-' * 14}|{'-' * 11}:|{'-' * 10}:|{'-' * 19}:|{'-' * 30}:|")
    for (rule, bad), run in zip(cases, runs):
        s = run.summary
        reached = f"{s.time_to_target_s:.1f}" if s.time_to_target_s is not None else "not reached"
        bounded = sum(len(r.clipped_nodes) for r in run.rounds)  # strategy.norm_bound_factor, before the rule
        print(f"| {rule:<12} | {bad:>10} | {s.final_accuracy:>9.1%} | {reached:>18} | {bounded:>29} |")


if __name__ == "__main__":
    main()
