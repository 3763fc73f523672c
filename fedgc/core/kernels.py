"""Which CPU kernels PyTorch and its libraries run: the same on every x86-64 machine, by default.

PyTorch's CPU results depend on the instruction set its kernels use: the same seed gave the
quickstart 0.922 on an AVX-512 machine and 0.930 on an AVX2 one. Three libraries choose for
themselves, each from an environment variable read once, when it first computes: ATen (PyTorch's own
kernels: ``ATEN_CPU_CAPABILITY``), oneDNN (convolutions: ``ONEDNN_MAX_CPU_ISA``) and the BLAS (matrix
products: MKL's ``MKL_CBWR`` in PyTorch's x86 wheels, ``OPENBLAS_CORETYPE`` for OpenBLAS, which NumPy
and some PyTorch builds use). ``apply()`` — called by ``fedgc/__init__.py`` before anything in fedgc
imports torch — sets them to a portable set, AVX2 for ATen, oneDNN and OpenBLAS and MKL's
vendor-neutral ``COMPATIBLE`` path, so a CPU with AVX-512 computes what an AVX2-only one does, and
every process fedgc starts (sweep workers, Flower's SuperNodes and Ray workers) inherits them through
its environment. What each pin changes, and what it costs, is in docs/performance.md ("CPU kernel
sets").

- ``FEDGC_CPU_KERNELS=native`` opts out (each library's fastest kernels for this CPU, results that
  may differ in the last bits from another machine's); ``portable`` (the default) pins.
- A variable the user already set is left as it is: an explicit choice wins.
- If torch already ran a kernel before fedgc was imported (a notebook that used torch first), the
  pins come too late for this process: fedgc then takes them back out of the environment (so the
  processes it starts compute as this one does) and says so once, with the fix.

Flower-free and torch-free at import: ``import fedgc`` stays light.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings
from collections.abc import MutableMapping

KERNELS_ENV = "FEDGC_CPU_KERNELS"
PORTABLE = "portable"
NATIVE = "native"

# variable -> the portable value. Each is a ceiling (ATen, oneDNN) or a fixed code path (MKL, OpenBLAS).
PORTABLE_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen: element-wise ops, reductions, softmax, optimizers' updates
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (mkldnn): convolutions and their gradients
    "MKL_CBWR": "COMPATIBLE",  # MKL: matrix products; the one branch MKL runs alike on Intel and AMD
    "OPENBLAS_CORETYPE": "Haswell",  # OpenBLAS (NumPy's; PyTorch builds without MKL): AVX2 kernels
}
# Older names the libraries still read: set by the user, they count as the user's choice.
ALIASES = {"ONEDNN_MAX_CPU_ISA": ("DNNL_MAX_CPU_ISA",)}


class KernelWarning(UserWarning):
    """The portable CPU kernels could not be used in this process (shown once)."""


def _cpu_flags() -> frozenset[str]:
    """This CPU's feature flags from /proc/cpuinfo (empty where there is none: not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for _, line in zip(range(64), handle):  # the flags are in the first processor's first lines
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def setting(environ: MutableMapping[str, str] | None = None, warn: bool = True) -> str:
    """``portable`` or ``native``, from ``$FEDGC_CPU_KERNELS`` (default portable; anything else is
    refused with one warning line, unless ``warn`` is false, and the default is used)."""
    environ = os.environ if environ is None else environ
    text = environ.get(KERNELS_ENV, "").strip().lower()
    if text in ("", PORTABLE, NATIVE):
        return text or PORTABLE
    if not warn:
        return PORTABLE
    shown = text if len(text) <= 40 else text[:40] + "…"
    warnings.warn(f"{KERNELS_ENV}={shown!r} is neither {PORTABLE!r} nor {NATIVE!r}: the portable CPU "
                  "kernels are used", KernelWarning, stacklevel=3)
    return PORTABLE


def pins(machine: str | None = None, flags: frozenset[str] | None = None) -> dict[str, str]:
    """The portable pins for this machine: all four on x86-64 with AVX2, OpenBLAS's left out without
    AVX2 (forcing its Haswell kernels there would fault), none off x86-64 (the variables name x86
    instruction sets)."""
    machine = (platform.machine() if machine is None else machine).lower()
    if machine not in ("x86_64", "amd64"):
        return {}
    flags = _cpu_flags() if flags is None else flags
    chosen = dict(PORTABLE_PINS)
    if "avx2" not in flags:
        del chosen["OPENBLAS_CORETYPE"]
    return chosen


def apply(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put the portable pins into the environment unless ``FEDGC_CPU_KERNELS=native``, leaving every
    variable the user set; returns the ones set here. Call before torch computes anything."""
    environ = os.environ if environ is None else environ
    if setting(environ) == NATIVE:
        return {}
    added = {name: value for name, value in pins().items()
             if name not in environ and not any(alias in environ for alias in ALIASES.get(name, ()))}
    environ.update(added)
    torch = sys.modules.get("torch")
    if added and "ATEN_CPU_CAPABILITY" in added and torch is not None:
        # torch was imported first. ATen reads its variable when it first dispatches a kernel, so a
        # capability above AVX2 here means torch already computed with its native kernels (and so may
        # MKL and oneDNN have): this process cannot be pinned any more.
        try:
            capability = torch.backends.cpu.get_cpu_capability()
        except AttributeError:  # torch is still being imported (fedgc imported from inside it)
            return added
        if capability.upper().startswith("AVX512"):
            for name in added:
                del environ[name]
            warnings.warn(f"fedgc: torch computed before fedgc was imported, so this process runs its "
                          f"native {capability} kernels, not the portable set: a seed's metrics may "
                          f"differ in the last bits from another machine's. Import fedgc before using "
                          f"torch (restart the kernel), or set {KERNELS_ENV}=native to accept this "
                          f"machine's kernels", KernelWarning, stacklevel=3)
            return {}
    return added


def in_effect() -> dict[str, str | None]:
    """The kernel set this process runs (imports torch): fedgc's setting, ATen's capability and each
    pinned variable as the environment holds it (None: unset, the library's own choice)."""
    import torch

    record: dict[str, str | None] = {"setting": setting(warn=False),
                                     "aten": torch.backends.cpu.get_cpu_capability()}
    for name in PORTABLE_PINS:
        record[name] = os.environ.get(name)
        for alias in ALIASES.get(name, ()):
            if record[name] is None and alias in os.environ:
                record[name] = os.environ[alias]
    return record


def describe() -> str:
    """``in_effect()`` in one line, as a run's ``summary.json`` records it (``cpu_kernels``): e.g.
    ``portable: ATen avx2, ONEDNN_MAX_CPU_ISA=AVX2, MKL_CBWR=COMPATIBLE, OPENBLAS_CORETYPE=Haswell``."""
    record = in_effect()
    pins = [f"{name}={value}" for name, value in record.items() if name not in ("setting", "aten", "ATEN_CPU_CAPABILITY")
            and value is not None]
    return ", ".join([f"{record['setting']}: ATen {str(record['aten']).lower()}", *pins])
