"""Results that travel: a seed gives the same metrics.jsonl on an AVX-512 CPU as on an AVX2-only one.

fedgc pins the CPU kernels of PyTorch (ATen), oneDNN and the BLAS before torch computes
(``fedgc.core.kernels``, docs/performance.md "CPU kernel sets"). A machine whose CPU stops at AVX2 is
played on this one by capping each library at AVX2 through its own variable — what such a CPU makes
every library choose by itself. Each run is a fresh process: the pins must be in place before torch
first computes, and this test process's own environment already holds them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from fedgc.core.kernels import KERNELS_ENV, PORTABLE_PINS, _cpu_flags, pins

FLAGS = _cpu_flags()
X86 = platform.machine().lower() in ("x86_64", "amd64")
# The variables that decide the kernels: a test gives each run exactly the ones it names.
KERNEL_VARIABLES = {*PORTABLE_PINS, "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE", KERNELS_ENV}
# What each library picks by itself on a CPU whose widest vectors are AVX2's (MKL: its AVX2 dispatch).
AVX2_ONLY_CPU = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                 "OPENBLAS_CORETYPE": "Haswell"}
needs_avx512 = pytest.mark.skipif(not (X86 and "avx512f" in FLAGS and "avx2" in FLAGS),
                                  reason="this CPU has no AVX-512: its native kernels are the portable ones, "
                                         "so there is no second kernel set to compare against")
needs_x86 = pytest.mark.skipif(not (X86 and "avx2" in FLAGS),
                               reason="the pinned kernel sets name x86 instruction sets: this CPU is not x86-64 "
                                      "with AVX2")

QUICKSTART_2_ROUNDS = ["-m", "fedgc", "run", "scenarios/quickstart.yaml", "--set", "rounds=2", "--quiet"]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def environment(**variables: str) -> dict[str, str]:
    """This process's environment without any kernel variable, plus ``variables``."""
    return {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES} | variables


def python(args: list[str], cwd: str = REPO, **variables: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=environment(**variables), capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def kernels_of(code: str, **variables: str) -> tuple[dict, str]:
    """What a fresh process that runs ``code`` (then reports) has in effect, and its stderr."""
    done = python(["-c", code + "\nimport json, fedgc.core.kernels as k; print(json.dumps(k.in_effect()))"],
                  **variables)
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


@needs_avx512
@pytest.mark.slow
def test_a_seed_gives_the_same_metrics_on_an_avx512_cpu_as_on_an_avx2_only_one(tmp_path):
    python([*QUICKSTART_2_ROUNDS, "--out", str(tmp_path / "here")])  # this machine, fedgc's defaults
    python([*QUICKSTART_2_ROUNDS, "--out", str(tmp_path / "avx2")], **AVX2_ONLY_CPU)
    python([*QUICKSTART_2_ROUNDS, "--out", str(tmp_path / "native")], **{KERNELS_ENV: "native"})
    here, avx2, native = ((tmp_path / name / "metrics.jsonl").read_bytes() for name in ("here", "avx2", "native"))
    assert here == avx2
    # the opt-out runs this CPU's own AVX-512 kernels, whose float sums round differently
    assert native != here


@needs_x86
def test_the_processes_fedgc_starts_run_the_portable_kernels(tmp_path):
    (tmp_path / "report_kernels.py").write_text(
        "import os, torch\n"
        "def report(_task):\n"
        "    return [os.getpid(), torch.backends.cpu.get_cpu_capability(),\n"
        f"            {{name: os.environ.get(name) for name in {sorted(PORTABLE_PINS)!r}}}]\n")
    code = ("import json, fedgc\nfrom fedgc.sweeps.jobs import run_all\nimport report_kernels\n"
            "import os\nprint(json.dumps([os.getpid(), run_all(report_kernels.report, [0, 1], jobs=2)]))")
    done = python(["-c", code], PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]))
    driver, reports = json.loads(done.stdout.splitlines()[-1])
    assert len(reports) == 2 and driver not in {pid for pid, _, _ in reports}  # computed in sweep workers
    for _, capability, variables in reports:
        assert capability == "AVX2"
        assert variables == PORTABLE_PINS


@needs_avx512
def test_what_the_user_set_wins_and_native_opts_out():
    chosen, _ = kernels_of("import fedgc", ATEN_CPU_CAPABILITY="avx512")
    assert chosen["aten"] == "AVX512" and chosen["ATEN_CPU_CAPABILITY"] == "avx512"
    assert chosen["ONEDNN_MAX_CPU_ISA"] == "AVX2" and chosen["MKL_CBWR"] == "COMPATIBLE"
    chosen, _ = kernels_of("import fedgc", DNNL_MAX_CPU_ISA="AVX512_CORE")  # oneDNN's older name counts too
    assert chosen["ONEDNN_MAX_CPU_ISA"] == "AVX512_CORE"
    chosen, _ = kernels_of("import fedgc", **{KERNELS_ENV: "native"})
    assert chosen == {"setting": "native", "aten": "AVX512", **dict.fromkeys(PORTABLE_PINS)}


@needs_avx512
def test_torch_imported_first_is_pinned_until_it_computes_then_fedgc_says_so_once():
    chosen, stderr = kernels_of("import torch\nimport fedgc")
    assert chosen["aten"] == "AVX2" and "KernelWarning" not in stderr
    chosen, stderr = kernels_of("import torch\ntorch.ones(3).exp()\nimport fedgc")
    # too late for this process: it and every process it starts keep the native kernels, consistently
    assert chosen == {"setting": "portable", "aten": "AVX512", **dict.fromkeys(PORTABLE_PINS)}
    warned = [line for line in stderr.splitlines() if "KernelWarning" in line]
    assert len(warned) == 1
    assert "native AVX512 kernels" in warned[0] and "Import fedgc before using torch" in warned[0]
    assert f"{KERNELS_ENV}=native" in warned[0]


@needs_x86
def test_a_setting_that_is_neither_portable_nor_native_is_one_warning_and_the_default():
    chosen, stderr = kernels_of("import fedgc", **{KERNELS_ENV: "fast" * 100})
    assert chosen["aten"] == "AVX2" and chosen["MKL_CBWR"] == "COMPATIBLE"
    warned = [line for line in stderr.splitlines() if "KernelWarning" in line]
    assert len(warned) == 1 and len(warned[0]) < 250
    assert "is neither 'portable' nor 'native': the portable CPU kernels are used" in warned[0]


def test_the_pins_name_x86_instruction_sets_only_where_the_cpu_has_them():
    assert pins("x86_64", frozenset({"avx2", "avx512f"})) == PORTABLE_PINS
    # OpenBLAS would run its Haswell kernels even without AVX2 and fault: left to OpenBLAS there
    assert pins("x86_64", frozenset({"sse4_2"})) == {k: v for k, v in PORTABLE_PINS.items()
                                                     if k != "OPENBLAS_CORETYPE"}
    assert pins("aarch64", frozenset()) == {} and pins("arm64", frozenset({"avx2"})) == {}
