"""The vectorized client executor (fedgc.execution) equals the sequential one, which is train_local."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from fedgc.data.base import ArrayDataset
from fedgc.execution import (
    DeviceError,
    TrainJob,
    batch_schedule,
    chunk_size_for_memory,
    resolve_device,
    run_sequential,
    run_vectorized,
)
from fedgc.execution.training import train_local
from fedgc.models import MODELS, build_model

ATOL = 1e-5  # float32 deltas after a few SGD steps: summation order differs between the two paths

# Every registered model, with a small input; resnet20 with BatchNorm has its own cases below.
CASES = {
    "mlp": ((1, 8, 8), {"hidden": [16]}),
    "logreg": ((1, 8, 8), {}),
    "mnist_2nn": ((1, 28, 28), {}),
    "small_cnn": ((1, 8, 8), {}),
    "mnist_cnn": ((1, 28, 28), {}),
    "resnet20": ((3, 8, 8), {"norm": "group"}),
    "char_lstm": ((6,), {"hidden_size": 8, "num_layers": 1}),
}
# (examples, steps): uneven sizes so the last batch of a pass is short (padding), and different step
# counts (clients that finished are masked); batch 5.
CLIENTS = [(13, 4), (7, 6), (20, 2), (5, 1)]


def dataset(name: str, shape: tuple[int, ...], n: int, seed: int) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    if name == "char_lstm":
        x = rng.integers(0, 10, size=(n, *shape)).astype(np.int64)
    else:
        x = rng.standard_normal((n, *shape)).astype(np.float32)
    return ArrayDataset(x, rng.integers(0, 10, n).astype(np.int64))


def make_jobs(name: str, shape: tuple[int, ...], clip: bool = True, clients=CLIENTS,
              lr: float | None = None) -> list[TrainJob]:
    return [TrainJob(dataset(name, shape, n, i), steps=steps, batch_size=5, lr=0.05 + 0.01 * i if lr is None else lr,
                      generator=torch.Generator().manual_seed(100 + i), momentum=0.9 if i != 2 else 0.0,
                      weight_decay=1e-3 * (i % 2), grad_clip_norm=0.5 if clip and i == 1 else None)
            for i, (n, steps) in enumerate(clients)]


def model_and_start(name: str, options: dict) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    model = build_model(name, CASES[name][0], 10, seed=0, options=options)
    return model, {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_results(expected, got, exact: bool = False):
    assert len(expected) == len(got)
    for a, b in zip(expected, got):
        assert list(a.delta) == list(b.delta)
        for name in a.delta:
            if exact:
                assert torch.equal(a.delta[name], b.delta[name]), name
            else:
                torch.testing.assert_close(b.delta[name], a.delta[name], atol=ATOL, rtol=0)
        assert (a.train.steps, a.train.samples, a.num_examples) == (b.train.steps, b.train.samples, b.num_examples)
        assert b.train.mean_loss == pytest.approx(a.train.mean_loss, abs=1e-5)


def test_every_registered_model_has_a_case():
    assert set(CASES) == set(MODELS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vectorized_equals_sequential(name):
    model, start = model_and_start(name, CASES[name][1])
    seq_jobs, vec_jobs = make_jobs(name, CASES[name][0]), make_jobs(name, CASES[name][0])
    notices = []
    expected = run_sequential(model, start, seq_jobs)
    got = run_vectorized(model, start, vec_jobs, notice=notices.append)
    if name == "char_lstm":  # on the CPU: sequential, said once (fedgc.execution.vectorized.slow_on)
        assert len(notices) == 1 and "recurrent layers on the CPU" in notices[0]
    else:
        assert notices == []  # really vectorized
    assert_same_results(expected, got)
    # the clients' generators end where train_local leaves them (they go on to seed the compressors)
    for a, b in zip(seq_jobs, vec_jobs):
        assert torch.equal(a.generator.get_state(), b.generator.get_state())
    assert any(float(d.abs().max()) > 1e-3 for d in got[0].delta.values())  # it trained


def test_chunks_give_the_same_deltas():
    model, start = model_and_start("small_cnn", {})
    whole = run_vectorized(model, start, make_jobs("small_cnn", (1, 8, 8)))
    chunked = run_vectorized(model, start, make_jobs("small_cnn", (1, 8, 8)), max_clients_per_chunk=3)
    assert_same_results(whole, chunked)


def test_sequential_executor_is_train_local_bit_for_bit():
    model, start = model_and_start("small_cnn", {})
    results = run_sequential(model, start, make_jobs("small_cnn", (1, 8, 8)))
    for i, (job, result) in enumerate(zip(make_jobs("small_cnn", (1, 8, 8)), results)):
        reference, _ = model_and_start("small_cnn", {})
        job.generator.manual_seed(100 + i)
        summary = train_local(reference, job.data, steps=job.steps, batch_size=job.batch_size, lr=job.lr,
                              generator=job.generator, momentum=job.momentum, weight_decay=job.weight_decay,
                              grad_clip_norm=job.grad_clip_norm)
        assert summary == result.train
        for name, value in reference.state_dict().items():
            assert torch.equal(start[name] - value, result.delta[name]), name


def test_batch_schedule_pads_the_end_of_a_pass():
    job = make_jobs("logreg", (1, 8, 8))[0]  # 13 examples, batch 5, 4 steps: 5, 5, 3, then a new pass
    sizes = [len(b) for b in batch_schedule(job)]
    assert sizes == [5, 5, 3, 5]


# Every batch full (sizes are multiples of 5, or a pass is never finished), different step counts.
EVEN_CLIENTS = [(15, 4), (10, 6), (20, 2), (12, 2)]
# BatchNorm over 5 random samples is ill-conditioned: at lr ≥ 0.05 a channel's variance can come near
# zero and rounding differences grow to 1e-2 within 2 steps, in float32 vs float64 alike. At lr 0.01
# the two executors agree within 1.4e-6 for 16 model seeds, with 1 or 2 threads.
BN_LR = 0.01


def test_batchnorm_statistics_are_kept_per_client():
    """Each client's running mean, variance and batch count move with its own batches only (a finished
    client's stay put), as in its sequential training."""
    model = build_model("resnet20", (3, 8, 8), 10, seed=0, options={"norm": "batch"})
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    notices = []
    expected = run_sequential(model, start, make_jobs("resnet20", (3, 8, 8), clients=EVEN_CLIENTS, lr=BN_LR))
    got = run_vectorized(model, start, make_jobs("resnet20", (3, 8, 8), clients=EVEN_CLIENTS, lr=BN_LR),
                         notice=notices.append)
    assert notices == []  # really vectorized
    assert_same_results(expected, got)
    tracked = [n for n in start if n.endswith("num_batches_tracked")]
    assert tracked and all(int(r.delta[n]) == -steps for r, (_, steps) in zip(got, EVEN_CLIENTS) for n in tracked)
    first_mean = next(n for n in start if n.endswith("running_mean"))
    means = [r.delta[first_mean] for r in got]
    assert all(m.abs().max() > 1e-4 for m in means) and not torch.equal(means[0], means[1])


def test_a_batchnorm_model_with_a_short_batch_falls_back_with_one_notice():
    model = build_model("resnet20", (3, 8, 8), 10, seed=0, options={"norm": "batch"})
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    notices = []
    got = run_vectorized(model, start, make_jobs("resnet20", (3, 8, 8))[:2], notice=notices.append)
    assert len(notices) == 1 and "\n" not in notices[0] and "full batches of one size" in notices[0]
    assert_same_results(run_sequential(model, start, make_jobs("resnet20", (3, 8, 8))[:2]), got, exact=True)


def test_other_buffers_fall_back_with_one_notice():
    model = build_model("mlp", (1, 8, 8), 10, seed=0, options={"hidden": [16]})
    model.register_buffer("scale", torch.ones(1))
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    notices = []
    run_vectorized(model, start, make_jobs("mlp", (1, 8, 8))[:2], notice=notices.append)
    assert len(notices) == 1 and "other than BatchNorm" in notices[0] and "scale" in notices[0]


def test_device_parsing():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("tpu", "cpu:1", "cuda:x"):
        with pytest.raises(DeviceError, match="not one of"):
            resolve_device(bad)
    assert chunk_size_for_memory(*model_and_start("logreg", {})[:1], make_jobs("logreg", (1, 8, 8)),
                                 torch.device("cpu")) is None
    if torch.cuda.is_available():
        assert resolve_device("auto").type == "cuda"
        with pytest.raises(DeviceError):
            resolve_device(f"cuda:{torch.cuda.device_count()}")
        return
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    for spec in ("cuda", "cuda:0", "CUDA:1"):
        with pytest.raises(DeviceError, match="CUDA is not available") as err:
            resolve_device(spec)
        assert "\n" not in str(err.value)


def test_the_executors_import_without_flower():
    code = ("import sys; sys.modules['flwr'] = None\n"
            "import fedgc.execution, fedgc.execution.vectorized\n"
            "assert not any(m == 'flwr' or m.startswith(('flwr.', 'fedgc.flower')) for m in sys.modules"
            " if sys.modules[m] is not None), 'flower was imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_clients_with_their_own_start_state():
    model, start = model_and_start("mlp", CASES["mlp"][1])

    def jobs():
        made = make_jobs("mlp", (1, 8, 8))
        made[1].start = {k: v + 0.01 for k, v in start.items()}  # e.g. a model rebuilt from a compressed download
        return made
    expected, got = run_sequential(model, start, jobs()), run_vectorized(model, start, jobs())
    assert_same_results(expected, got)
    shared_only = run_sequential(model, start, make_jobs("mlp", (1, 8, 8)))
    assert not torch.allclose(shared_only[1].delta["net.1.weight"], got[1].delta["net.1.weight"], atol=1e-4)
    torch.testing.assert_close(shared_only[0].delta["net.1.weight"], got[0].delta["net.1.weight"], atol=ATOL, rtol=0)


def test_a_chunk_out_of_memory_is_redone_in_halves(monkeypatch):
    from fedgc.execution import vectorized
    real = vectorized._run_chunk
    sizes = []

    def small_device(model, start, jobs, *args):
        sizes.append(len(jobs))
        if len(jobs) > 1:
            vectorized.batch_schedule(jobs[0])  # consume a generator first, as a real chunk would
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(model, start, jobs, *args)
    monkeypatch.setattr(vectorized, "_run_chunk", small_device)
    model, start = model_and_start("logreg", {})
    notices = []
    got = run_vectorized(model, start, make_jobs("logreg", (1, 8, 8)), max_clients_per_chunk=4, notice=notices.append)
    assert sizes == [4, 2, 1, 1, 1, 1] and len(notices) == 2
    assert_same_results(run_sequential(model, start, make_jobs("logreg", (1, 8, 8))), got)
