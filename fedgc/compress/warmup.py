"""DGC's warm-up: exponentially rising sparsity over the first rounds (Lin et al., 2018, §3.3).

The paper raises sparsity 75% → 93.75% → 98.4375% → 99.6% → 99.9%, i.e. it sends the densities
0.25, 0.0625, 0.015625, 0.004, 0.001 during warm-up and the target density afterwards. The five
stages are spread evenly over ``warmup_rounds``: round r (1-based) is in stage
``floor((r - 1) * 5 / warmup_rounds)``, so with ``warmup_rounds = 5`` each stage lasts one round,
with 10 two rounds, and with fewer than 5 rounds some stages are skipped.

Warm-up is on only for the compressors listed in ``compression.warmup_for`` (default: ``dgc``), so a
sweep of ``compression.name`` over a DGC scenario does not warm up top-k behind the user's back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fedgc.compress.config import CompressionConfig

WARMUP_DENSITIES: tuple[float, ...] = (0.25, 0.0625, 0.015625, 0.004, 0.001)


def warmup_density(round: int, warmup_rounds: int, target_density: float) -> float:
    """Density to use in ``round`` (1-based); never sparser than ``target_density``."""
    if round < 1:
        raise ValueError(f"rounds are 1-based, got {round}")
    if warmup_rounds <= 0 or round > warmup_rounds:
        return target_density
    stage = (round - 1) * len(WARMUP_DENSITIES) // warmup_rounds
    return max(WARMUP_DENSITIES[stage], target_density)


def scheduled_density(config: CompressionConfig, round: int) -> float:
    """The density sent to clients in ``round``: warmed up when ``config.name`` is in ``warmup_for``."""
    warmup_rounds = config.warmup_rounds if config.name in config.warmup_for else 0
    return warmup_density(round, warmup_rounds, config.density)


def recorded_density(config: CompressionConfig, round: int) -> float | None:
    """``density`` in metrics.jsonl: the scheduled density, or None for a compressor that has none."""
    from fedgc.compress.registry import uses_density

    return scheduled_density(config, round) if uses_density(config.name) else None
