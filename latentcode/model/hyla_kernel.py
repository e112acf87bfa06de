"""HYLA's attention core as one CPU kernel (numba): scores -> RMSHead -> the generated value network, in one pass.

The plain torch path (`MultiHeadAttention.forward`) writes several [batch, head_index, query_pos, key_pos] tensors
per layer (scores, codes, their permuted copies and gradients) and streams each through memory several times; on
a CPU that memory traffic, not arithmetic, is most of a HYLA step. This kernel works one (instance, query) row at
a time: the row's scores, codes and hidden units live in a few hundred floats, the codes are never stored, and the
backward pass recomputes them from q, k and the per-(query, key) RMS it kept (`rms_inv`, [batch, query_pos,
key_pos]). The arithmetic is the plain path's, summed in another order, so results agree to rounding (the tests
hold the two equal to 1e-12 in float64), not bitwise.

Training uses it when `TrainConfig.fused_attention` is on (the default of new runs) on a CPU, in float32 or
float64, for `score_norm="rms_head"`, `value_net="mlp"` and `value_act="relu"` (HYLA), and only while no hook is
attached to the codes (`hook_attn_scores`, `hook_pattern`, `hook_value_hidden`): extraction and interventions see
the plain path. It runs on one thread (the campaign trains one thread per run).

Layouts inside the kernels put the head axis last (contiguous, so the loops over heads vectorize):
    q [batch, query_pos, d_head_qk, head_index] (already scaled), k [batch, key_pos, d_head_qk, head_index],
    v [batch, key_pos, d_head, head_index], bias [query_pos, key_pos, head_index], keep [query_pos, key_pos].
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

_FASTMATH = {"reassoc", "contract"}  # reordered sums and fused multiply-adds; NaN and inf stay IEEE


def _forward_kernel(q, k, v, bias, keep, eps, zero, inv_heads, one, z, rms_inv):  # pragma: no cover - numba
    B, Q, E, H = q.shape
    K = k.shape[1]
    D = v.shape[2]
    codes = np.empty((K, H), q.dtype)
    hidden = np.empty((K, D), q.dtype)
    for b in range(B):
        for i in range(Q):
            for j in range(K):
                for h in range(H):  # scores: q . k + position bias
                    codes[j, h] = bias[i, j, h]
                for e in range(E):
                    for h in range(H):
                        codes[j, h] += q[b, i, e, h] * k[b, j, e, h]
                square = zero
                for h in range(H):
                    square += codes[j, h] * codes[j, h]
                r = one / math.sqrt(square * inv_heads + eps)  # RMSHead: divide by the RMS over heads
                rms_inv[b, i, j] = r
                for h in range(H):
                    codes[j, h] *= r
                m = keep[i, j]  # attention dropout, on the hidden units (as the plain path)
                for d in range(D):  # first generated layer: relu(sum_h a[h] v[h, d])
                    pre = zero
                    for h in range(H):
                        pre += codes[j, h] * v[b, j, d, h]
                    pre *= m
                    hidden[j, d] = (pre if pre > zero else zero) * m
            for d in range(D):  # second generated layer: z[h, d] = sum_k a[h, k] hidden[k, d]
                for h in range(H):
                    z[b, i, d, h] = zero
                for j in range(K):
                    c = hidden[j, d]
                    for h in range(H):
                        z[b, i, d, h] += codes[j, h] * c


def _backward_kernel(q, k, v, bias, keep, eps, zero, inv_heads, one, rms_inv, grad_z,
                     grad_q, grad_k, grad_v, grad_bias):  # pragma: no cover - numba
    B, Q, E, H = q.shape
    K = k.shape[1]
    D = v.shape[2]
    codes = np.empty(H, q.dtype)
    grad_codes = np.empty(H, q.dtype)
    hidden = np.empty(D, q.dtype)
    grad_pre = np.empty(D, q.dtype)
    for b in range(B):
        for i in range(Q):
            for j in range(K):
                r = rms_inv[b, i, j]
                for h in range(H):  # the codes again, from q, k and the kept RMS
                    codes[h] = bias[i, j, h]
                for e in range(E):
                    for h in range(H):
                        codes[h] += q[b, i, e, h] * k[b, j, e, h]
                for h in range(H):
                    codes[h] *= r
                m = keep[i, j]
                for d in range(D):
                    pre = zero
                    grad_hidden = zero  # d loss / d hidden[d] = sum_h a[h] grad_z[h, d]
                    for h in range(H):
                        pre += codes[h] * v[b, j, d, h]
                        grad_hidden += codes[h] * grad_z[b, i, d, h]
                    pre *= m
                    if pre > zero:
                        hidden[d] = pre * m
                        grad_pre[d] = grad_hidden * m * m  # through the dropout, relu, dropout
                    else:
                        hidden[d] = zero
                        grad_pre[d] = zero
                for h in range(H):  # d loss / d a[h]: from the second layer and from the first
                    grad_codes[h] = zero
                for d in range(D):
                    c_hidden = hidden[d]
                    c_pre = grad_pre[d]
                    for h in range(H):
                        grad_codes[h] += grad_z[b, i, d, h] * c_hidden + c_pre * v[b, j, d, h]
                for d in range(D):
                    c_pre = grad_pre[d]
                    for h in range(H):
                        grad_v[b, j, d, h] += codes[h] * c_pre
                along = zero  # RMSHead backward: grad_s = r (grad_a - a mean_h(grad_a a))
                for h in range(H):
                    along += grad_codes[h] * codes[h]
                along *= inv_heads
                for h in range(H):
                    grad_scores = r * (grad_codes[h] - codes[h] * along)
                    grad_bias[i, j, h] += grad_scores
                    grad_codes[h] = grad_scores
                for e in range(E):
                    for h in range(H):
                        grad_q[b, i, e, h] += grad_codes[h] * k[b, j, e, h]
                        grad_k[b, j, e, h] += grad_codes[h] * q[b, i, e, h]


@functools.cache
def _kernels() -> tuple[Any, Any]:
    """The two kernels, compiled on first use (numba is imported here: it costs about half a second)."""
    import numba

    jit = numba.njit(cache=True, fastmath=_FASTMATH, boundscheck=False, nogil=True, error_model="numpy")
    # unwrap: a runtime type checker's import hook (jaxtyping's, as the test suite installs it) may have wrapped
    # the Python functions, and numba compiles the function itself
    return jit(inspect.unwrap(_forward_kernel)), jit(inspect.unwrap(_backward_kernel))


def _head_last(x: Tensor) -> np.ndarray:
    """[batch, pos, head_index, d] -> contiguous [batch, pos, d, head_index], as a numpy view."""
    return x.detach().transpose(-1, -2).contiguous().numpy()


def _constants(dtype: torch.dtype, eps: float, n_heads: int) -> tuple[Any, ...]:
    """eps, 0, 1/H and 1 as scalars of the input's dtype, so float32 inputs are summed in float32."""
    scalar = np.float32 if dtype == torch.float32 else np.float64
    return scalar(eps), scalar(0), scalar(1.0 / n_heads), scalar(1)


class HylaCore(torch.autograd.Function):
    """z = value_network(rms_head(scores(q, k) + bias), v, keep) for HYLA, forward and backward in numba."""

    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, bias: Tensor, keep: Tensor, scale: float,
                eps: float) -> Tensor:
        forward_kernel, _ = _kernels()
        q_, k_, v_ = _head_last(q * scale), _head_last(k), _head_last(v)
        bias_ = bias.detach().permute(1, 2, 0).contiguous().numpy()
        keep_ = keep.detach().contiguous().numpy()
        B, Q, _, H = q_.shape
        z = q.new_empty(B, Q, v_.shape[2], H)
        rms_inv = q.new_empty(B, Q, k_.shape[1])
        forward_kernel(q_, k_, v_, bias_, keep_, *_constants(q.dtype, eps, H), z.numpy(), rms_inv.numpy())
        ctx.arrays = (q_, k_, v_, bias_, keep_, rms_inv.numpy())
        ctx.scale, ctx.eps, ctx.dtype = scale, eps, q.dtype
        return z.transpose(-1, -2)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_z: Tensor) -> tuple[Tensor | None, ...]:
        _, backward_kernel = _kernels()
        q_, k_, v_, bias_, keep_, rms_inv = ctx.arrays
        grads = [np.zeros_like(a) for a in (q_, k_, v_, bias_)]
        backward_kernel(q_, k_, v_, bias_, keep_, *_constants(ctx.dtype, ctx.eps, q_.shape[-1]), rms_inv,
                        _head_last(grad_z), *grads)
        grad_q, grad_k, grad_v, grad_bias = (torch.from_numpy(g) for g in grads)
        return (grad_q.transpose(-1, -2) * ctx.scale, grad_k.transpose(-1, -2), grad_v.transpose(-1, -2),
                grad_bias.permute(2, 0, 1), None, None, None)


def hyla_core(
    q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None, keep: Tensor | None, scale: float, eps: float
) -> Tensor:
    """HYLA's z [batch, query_pos, head_index, d_head] from q [batch, query_pos, head_index, d_head_qk], k and v
    [batch, key_pos, head_index, d], the position bias [head_index, query_pos, key_pos] (None: no bias) and the
    dropout multiplier [query_pos, key_pos] (None: none); the queries are the last query_pos key positions."""
    Q, K = q.shape[1], k.shape[1]
    if bias is None:
        bias = q.new_zeros(q.shape[2], Q, K)
    if keep is None:
        keep = q.new_ones(Q, K)
    return HylaCore.apply(q, k, v, bias, keep, scale, eps)
