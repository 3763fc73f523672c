"""DGC's client memory: momentum correction (§3.2) and momentum factor masking (§3.3) of Lin et al., 2018.

Per parameter the client keeps a momentum ``u`` and an accumulated velocity ``v``:

    u ← m·u + g;        v ← v + u          (momentum correction, paper eq. 7)
    u ← m·(u + g);      v ← v + u + g      (Nesterov variant, as in the reference implementation)
    v ← v + g                              (momentum correction off: plain error feedback)

The sparse part of ``v`` is sent; ``v`` keeps the rest (it is zero where sent). Momentum factor
masking also zeroes ``u`` where sent, so stale momentum does not keep pushing those coordinates.
Tensors sent dense (``dim() <= 1`` with ``dense_small_tensors``) are never masked: as in the
reference implementation they get ordinary momentum SGD.

Precision trade-off (opt-in, ``momentum_dtype=torch.bfloat16``): between rounds ``u`` is stored in
bfloat16 (relative rounding error at most 2^-9 per round; the exponent range of fp32, so nothing
underflows), which takes a stateful client from 8 to 6 bytes per parameter. ``v`` always stays fp32,
so no update mass is ever lost: the sent part plus the residual still equals the compensated update
exactly; only the momentum that shapes future rounds is rounded. Arithmetic is fp32 throughout.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgc.compress.memory import Memory
from fedgc.compress.topk import on_host

MOMENTUM_KEY = "dgc_momentum/"
VELOCITY_KEY = "dgc_velocity/"


class DGCMemory(Memory):
    def __init__(
        self,
        momentum: float = 0.9,
        nesterov: bool = False,
        momentum_correction: bool = True,
        momentum_masking: bool = True,
        dense_small_tensors: bool = True,
        momentum_dtype: torch.dtype = torch.float32,
    ) -> None:
        self.momentum = momentum
        self.nesterov = nesterov
        self.momentum_correction = momentum_correction
        self.momentum_masking = momentum_masking
        self.dense_small_tensors = dense_small_tensors
        self.momentum_dtype = momentum_dtype  # how u is stored between rounds (see the module docstring)
        self.momentums: dict[str, torch.Tensor] = {}  # u
        self.velocities: dict[str, torch.Tensor] = {}  # v
        # Names whose u and v ``compensate`` made this round and no one else holds yet: ``update_in_place``
        # may then turn them into the residual and the masked momentum (``_settle_in_place``).
        self._fresh: set[str] = set()

    def compensate(self, grad: torch.Tensor, name: str) -> torch.Tensor:
        # A fresh client's u and v are zero. Without allocating them: 0 + x is computed as x + 0.0 and
        # m·0 + x as x + m·0.0 (the same bits: the zero's sign is m's, and -0.0 + 0.0 is +0.0 either way).
        velocity = self.velocities.get(name)
        if not self.momentum_correction:
            velocity = grad + 0.0 if velocity is None else velocity + grad
        else:
            momentum = self.momentums.get(name)
            if self.nesterov:
                momentum = self.momentum * (grad + 0.0 if momentum is None else momentum + grad)
                velocity = (momentum + 0.0 if velocity is None else velocity + momentum) + grad
            else:
                momentum = grad + self.momentum * 0.0 if momentum is None else self.momentum * momentum + grad
                velocity = momentum + 0.0 if velocity is None else velocity + momentum
            self.momentums[name] = momentum
        self.velocities[name] = velocity
        self._fresh.add(name)
        return velocity

    def update(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        self._fresh.discard(name)
        # The residual: exactly zero where an fp32 value was sent; with fp16 values it keeps the
        # rounding error, so nothing is lost either way.
        self.velocities[name] = compensated - sent
        sent_dense = self.dense_small_tensors and compensated.dim() <= 1
        if self.momentum_correction and self.momentum_masking and not sent_dense:
            # Sent positions are read off the dense view (an entry of v that is exactly 0 counts as
            # not sent; it carries nothing either way).
            self.momentums[name] = _zero_where_sent(self.momentums[name], sent)

    def update_in_place(self, name: str, compensated: torch.Tensor, sent: torch.Tensor) -> None:
        """``update``, the same bits, for a caller done with ``compensated``: when it is the v that
        ``compensate`` just made (and no one was handed it since), v becomes the residual and u is
        masked in those very tensors, computed at the sent entries only (on the CPU)."""
        fresh = (name in self._fresh and compensated is self.velocities.get(name)
                 and type(self).update is DGCMemory.update)  # a subclass's own update is respected
        self._fresh.discard(name)
        sent_dense = self.dense_small_tensors and compensated.dim() <= 1
        masking = self.momentum_correction and self.momentum_masking and not sent_dense
        if not (fresh and _settle_in_place(compensated, sent, self.momentums.get(name) if masking else None)):
            self.update(name, compensated, sent)

    def restore(self, name: str, sent: torch.Tensor) -> None:
        self._fresh.discard(name)
        # The unapplied values go back into v and are sent again later. The momentum masked at those
        # positions is not brought back: masking only shapes future steps, no update mass is lost.
        velocity = self.velocities.get(name)
        self.velocities[name] = sent.clone() if velocity is None else velocity + sent

    def state_dict(self) -> dict[str, torch.Tensor]:
        self._fresh.clear()  # the tensors are handed out: never changed in place from now on
        state = {MOMENTUM_KEY + k: u.to(self.momentum_dtype) for k, u in self.momentums.items()}
        state.update({VELOCITY_KEY + k: v for k, v in self.velocities.items()})
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self._fresh.clear()
        self.momentums = {k.removeprefix(MOMENTUM_KEY): u.to(torch.float32) if u.dtype != torch.float32 else u
                          for k, u in state.items() if k.startswith(MOMENTUM_KEY)}
        self.velocities = {k.removeprefix(VELOCITY_KEY): v for k, v in state.items() if k.startswith(VELOCITY_KEY)}


def _zero_where_sent(momentum: torch.Tensor, sent: torch.Tensor) -> torch.Tensor:
    """``momentum.masked_fill(sent != 0, 0.0)`` (NaN counts as sent). On the CPU numpy finds the few
    sent positions and zeroes a copy there, several times cheaper than torch's mask and fill."""
    if not (on_host(momentum, sent) and momentum.shape == sent.shape):
        return momentum.masked_fill(sent != 0, 0.0)
    masked = momentum.detach().numpy().copy()
    masked.reshape(-1)[np.flatnonzero(sent.detach().numpy() != 0)] = 0.0
    return torch.from_numpy(masked)


_INT_VIEWS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _settle_in_place(velocity: torch.Tensor, sent: torch.Tensor, momentum: torch.Tensor | None) -> bool:
    """``velocity -= sent`` and, with a ``momentum``, ``momentum[sent != 0] = 0``, in place and only
    where ``sent`` is not +0.0 (on the CPU, for contiguous tensors of one float dtype and shape; False,
    nothing done, otherwise). The same bits as ``velocity - sent`` and ``masked_fill``: ``x - (+0.0)``
    is ``x`` for every x (-0.0 and NaN included), so only the few sent entries are computed (by torch
    when both are NaN somewhere: numpy keeps the first of two NaNs, torch the second). A sent -0.0 is computed too
    (``-0.0 - (-0.0)`` is +0.0); masking counts it as not sent, as ``!= 0`` does."""
    tensors = (velocity, sent) if momentum is None else (velocity, sent, momentum)
    if not (on_host(*tensors) and all(t.dtype == velocity.dtype and t.shape == velocity.shape
                                      and t.is_contiguous() for t in tensors)):
        return False
    v, s = velocity.detach().numpy().reshape(-1), sent.detach().numpy().reshape(-1)
    where = np.flatnonzero(s.view(_INT_VIEWS[s.dtype]) != 0)  # every bit pattern but +0.0
    values = s[where]
    if bool((np.isnan(v[where]) & np.isnan(values)).any()):  # torch's choice between two NaNs
        flat, positions = velocity.detach().view(-1), torch.from_numpy(where)
        flat[positions] = flat[positions] - sent.detach().view(-1)[positions]
    else:
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN, as in torch
            v[where] -= values
    if momentum is not None:
        momentum.detach().numpy().reshape(-1)[where[values != 0]] = 0.0
    return True
