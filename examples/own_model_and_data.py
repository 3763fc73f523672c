"""Bring your own model and data: a small CNN class and a .npz dataset, trained federated with DGC on 3G.

The dataset is made here from scikit-learn's bundled handwritten digits (8x8 images, 10 classes), saved
as a .npz with the four arrays fedgc reads (x_train, y_train, x_test, y_test), then loaded back with
fedgc.UserData.from_npz: any arrays of the same form work the same way. fedgc splits it among the
clients with its own partitioners (here Dirichlet, non-IID) and evaluates on the test arrays.

    .venv/bin/python examples/own_model_and_data.py            # 10 rounds, about half a minute
    .venv/bin/python examples/own_model_and_data.py --quick    # 3 rounds, for the tests
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict
from sklearn.datasets import load_digits
from torch import nn

import fedgc


class TinyCNN(nn.Module):
    """Two 3x3 convolutions and a linear classifier, for small images."""

    class Options(BaseModel):  # the keys of the scenario's model.options; any other key is an error
        model_config = ConfigDict(extra="forbid")
        channels: int = 16
        hidden: int = 64

    # fedgc calls model(input_shape, num_classes, **options); input_shape is one sample's shape
    def __init__(self, input_shape, num_classes, channels=16, hidden=64):
        super().__init__()
        c, h, w = input_shape
        self.net = nn.Sequential(
            nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(2 * channels * h * w, hidden), nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x):
        return self.net(x)


def write_digits_npz(path):
    """sklearn's digits as 1x8x8 float images in [0, 1], 80% train / 20% test, into a .npz."""
    digits = load_digits()
    x = (digits.images[:, None, :, :] / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    cut = int(0.8 * len(y))
    np.savez(path, x_train=x[:cut], y_train=y[:cut], x_test=x[cut:], y_test=y[cut:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds (the tests use it)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--network", default="3g", help="a named link profile: 3g, lte, wifi, ...")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "my_digits.npz"
        write_digits_npz(npz)
        fedgc.register_dataset("my_digits", fedgc.UserData.from_npz(npz))  # read now: the file may go
    fedgc.register_model("tiny_cnn", TinyCNN)  # its Options come with the class

    scenario = fedgc.Scenario.from_dict({
        "name": "own-model-and-data", "seed": 0, "rounds": rounds,
        "data": {"dataset": "my_digits", "num_clients": 10, "partition": "dirichlet", "alpha": 1.0},
        "model": {"name": "tiny_cnn", "options": {"channels": 8, "hidden": 64}},
        "client": {"local_steps": 20, "batch_size": 16, "lr": 0.2},
        "compression": {"name": "dgc", "density": 0.02, "momentum": 0.9},  # DGC sends 2% of each tensor
        "strategy": {"fraction": 0.5},
        "network": {"profile": args.network, "device": {"name": "constant", "samples_per_s": 200}},
        "eval": {"target_accuracy": 0.8},
    })

    def progress(record):  # called after every round with its fedgc.RoundRecord
        accuracy = f"{record.accuracy:.1%}" if record.accuracy is not None else "-"
        print(f"dgc round {record.round}/{rounds}: accuracy {accuracy}, {record.bytes_up / 1e3:.1f} kB up")

    dgc = fedgc.run(scenario, on_round=progress)
    # the same run uncompressed, for comparison: what DGC buys on this network
    dense = fedgc.run(scenario.with_overrides({"name": "own-model-dense", "compression.name": "none"}))

    print(f"\n{type(dgc.model).__name__}: {sum(p.numel() for p in dgc.model.parameters())} parameters; "
          f"{rounds} rounds on {args.network}\n")
    print(fedgc.table([dgc, dense]))


if __name__ == "__main__":
    main()
