"""Build the run's network model from the scenario's ``network`` section."""

from __future__ import annotations

from typing import cast

import numpy as np
import simpy

from fedgc.network.availability import ALWAYS, Availability, ExponentialOnOff, IntervalAvailability, read_interval_file
from fedgc.network.compute import Device, assign_rows, read_capacity_file, tier_speeds
from fedgc.network.config import NetworkConfig
from fedgc.network.links import LINKS
from fedgc.network.links.base import LinkInputs
from fedgc.network.piecewise import PeriodicRate
from fedgc.network.profiles import PROFILES
from fedgc.network.protocol import protocol_from_config
from fedgc.network.sections import (
    ConstantLinkConfig,
    ExponentialAvailabilityConfig,
    FileDeviceConfig,
    TierDeviceConfig,
    TraceAvailabilityConfig,
    TraceLinkConfig,
)
from fedgc.network.timeline import ClientNetwork, NetworkModel
from fedgc.network.traces import read_trace


def _rates(config: NetworkConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-client (up, down) Mbit/s: the profile (or overrides), a capacity file, then the lognormal spread."""
    profile = PROFILES[config.profile]
    bandwidth_file = getattr(config.link, "bandwidth_file", None)
    if bandwidth_file is not None:
        columns = read_capacity_file(config.resolve(bandwidth_file))
        rows = assign_rows(len(columns["ul_kbps"]), n, rng)
        up, down = columns["ul_kbps"][rows] / 1000.0, columns["dl_kbps"][rows] / 1000.0
    else:
        up = np.full(n, config.up_mbps or profile.up_mbps)
        down = np.full(n, config.down_mbps or profile.down_mbps)
    if config.bandwidth_spread > 0:  # median-preserving: the profiles are medians
        up = up * rng.lognormal(0.0, config.bandwidth_spread, n)
        down = down * rng.lognormal(0.0, config.bandwidth_spread, n)
    return up, down


def _devices(config: NetworkConfig, n: int, rng: np.random.Generator) -> list[Device]:
    device = config.device
    if isinstance(device, FileDeviceConfig):
        ms = read_capacity_file(config.resolve(device.file))["computation_ms_per_sample"]
        with np.errstate(over="ignore", divide="ignore"):
            speeds = 1000.0 / (ms[assign_rows(len(ms), n, rng)] * device.scale)
        bad = speeds[~(np.isfinite(speeds) & (speeds > 0))]
        if bad.size:
            raise ValueError(f"network.device.scale: {device.scale} x computation_ms_per_sample "
                             f"of {device.file} gives a training speed of {bad[0]} samples/s "
                             "(must be finite and > 0)")
    elif isinstance(device, TierDeviceConfig):
        speeds = tier_speeds(device.tier, n, rng)
    else:
        speeds = np.full(n, device.samples_per_s)
    cache: dict[float, Device] = {}
    return [cache.setdefault(s, Device(s)) for s in speeds.tolist()]


def _availabilities(config: NetworkConfig, n: int, seeds: list[int]) -> list[Availability]:
    availability = config.availability
    if isinstance(availability, ExponentialAvailabilityConfig):
        return [ExponentialOnOff(availability.mean_on_s, availability.mean_off_s, np.random.default_rng(seeds[i]))
                for i in range(n)]
    if isinstance(availability, TraceAvailabilityConfig):
        table = read_interval_file(config.resolve(availability.file))
        keys = sorted(table)
        made = {k: IntervalAvailability(table[k], availability.period_s) for k in keys}
        return [made[keys[i % len(keys)]] for i in range(n)]
    return [ALWAYS] * n


def build_network(env: simpy.Environment, config: NetworkConfig, node_ids: list[int],
                  rng: np.random.Generator) -> NetworkModel:
    """One link, device and availability process per node (in ``node_ids`` order), all seeded from ``rng``.

    Raises a one-line ``ValueError`` naming the file when a trace, capacity or availability file is
    missing or unreadable.
    """
    n = len(node_ids)
    profile = PROFILES[config.profile]
    rtt = profile.rtt_ms if config.rtt_ms is None else config.rtt_ms
    seeds = rng.integers(2**63, size=(n, 2))
    link = config.link
    needs_rng = not isinstance(link, ConstantLinkConfig) or config.jitter_ms > 0
    link_rngs = [np.random.default_rng(s) if needs_rng else None for s in seeds[:, 0].tolist()]
    up, down = _rates(config, n, rng)
    devices = _devices(config, n, rng)
    availabilities = _availabilities(config, n, seeds[:, 1].tolist())

    cache: dict[str, PeriodicRate] = {}

    def trace(name: str) -> PeriodicRate:
        path = config.resolve(name)
        if str(path) not in cache:
            trace_link = cast(TraceLinkConfig, link)  # only a trace link reads trace files
            cache[str(path)] = read_trace(path, trace_link.format, trace_link.unit)
        return cache[str(path)]

    up_scale = (config.up_mbps or profile.up_mbps) / (config.down_mbps or profile.down_mbps)
    inputs = LinkInputs(up, down, rtt, config.jitter_ms, link_rngs, up_scale, trace)
    links = LINKS[link.name].for_clients(link, inputs)
    clients = {node_id: ClientNetwork(links[i], devices[i], availabilities[i]) for i, node_id in enumerate(node_ids)}
    mbps = 1e6
    return NetworkModel(env, clients,
                        server_up_bps=config.server_up_mbps * mbps if config.server_up_mbps else None,
                        server_down_bps=config.server_down_mbps * mbps if config.server_down_mbps else None,
                        protocol=protocol_from_config(config.protocol), max_phase_s=config.max_phase_s)
