"""The JVM client's pure-Java trainer (clients/jvm/src/main/java/fedgc/train) against fedgc's PyTorch
local training (fedgc.execution.training.train_local) for the ``logreg`` and ``mlp`` models.

Same initial weights (fedgc's build_model, handed to Java as an .npz of the state_dict), same data
(an .npz of x and y, read by Java's Dataset.loadNpz: zip + .npy), same batch order (the permutations
train_local's generator draws, handed to Java), SGD with momentum and weight decay; partial batches
and reshuffles included. After the steps every weight must match PyTorch's within
``atol = 1e-6 + rtol = 1e-5`` (float32 sums in a different order than BLAS; the largest difference seen
is 1.2e-7), while the weights have
moved by far more than that; steps, samples and the mean loss (to 1e-5) must match too.
Skipped, with one line, only where no JDK/protoc/protobuf-java is installed (fixture of test_jvm_client).
"""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
import torch

from fedgc.data.base import ArrayDataset
from fedgc.execution.training import train_local
from fedgc.models import build_model

from .test_jvm_client import JAR, TESTS_JAR, jar  # noqa: F401  (the fixture: make jvm, or skip)

pytestmark = pytest.mark.usefixtures("jar")

ATOL, RTOL = 1e-6, 1e-5  # observed: at most 1.2e-7 (a few float32 ulps)


@pytest.mark.parametrize(("model_name", "options", "momentum", "weight_decay", "compressed"), [
    ("logreg", None, 0.0, 0.0, False),
    ("logreg", None, 0.9, 1e-3, True),
    ("mlp", {"hidden": [16]}, 0.9, 5e-4, False),
    ("mlp", {"hidden": [24, 12]}, 0.5, 0.0, True),
])
def test_java_trainer_matches_pytorch(tmp_path, model_name, options, momentum, weight_decay, compressed):
    input_shape, classes, n, batch, steps, lr, seed = (1, 5, 6), 4, 37, 8, 13, 0.1, 5
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, *input_shape)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int64)
    model = build_model(model_name, input_shape, classes, seed=3, options=options)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    (np.savez_compressed if compressed else np.savez)(tmp_path / "data.npz", x=x, y=y)
    np.savez(tmp_path / "model.npz", **{k: v.numpy() for k, v in initial.items()})
    # the permutations train_local's generator will draw (one per pass; more than enough)
    g = torch.Generator().manual_seed(seed)
    orders = np.stack([torch.randperm(n, generator=g).numpy() for _ in range(steps)]).astype("<i4")
    (tmp_path / "orders.i32").write_bytes(orders.tobytes())
    (tmp_path / "train.txt").write_text(f"steps {steps}\nbatch_size {batch}\nlr {lr!r}\nmomentum {momentum!r}\n"
                                        f"weight_decay {weight_decay!r}\n")

    result = train_local(model, ArrayDataset(x, y), steps=steps, batch_size=batch, lr=lr,
                         generator=torch.Generator().manual_seed(seed), momentum=momentum, weight_decay=weight_decay)
    java = subprocess.run(["java", "-cp", f"{JAR}{os.pathsep}{TESTS_JAR}", "fedgc.cli.check.JvmCheck", "train",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert java.returncode == 0, java.stdout + java.stderr

    j_steps, j_samples, j_loss, j_examples = (tmp_path / "java" / "result.txt").read_text().split()
    assert (int(j_steps), int(j_samples), int(j_examples)) == (result.steps, result.samples, n)
    assert abs(float(j_loss) - result.mean_loss) <= 1e-5, (j_loss, result.mean_loss)
    for name, trained in model.state_dict().items():
        got = np.frombuffer((tmp_path / "java" / f"trained_{name}.f32").read_bytes(), dtype="<f4")
        want = trained.detach().numpy().reshape(-1)
        np.testing.assert_allclose(got, want, atol=ATOL, rtol=RTOL, err_msg=name)
        moved = float(np.abs(want - initial[name].numpy().reshape(-1)).max())
        assert moved > 50 * ATOL, (name, moved)  # the tolerance is far below what training changed
