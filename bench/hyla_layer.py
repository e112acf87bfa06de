"""Two ideas for a faster HYLA step on a CPU, measured on one SRAVEN paper-size attention layer (docs/benchmarks.md).

1. RMSHead: the hand-written `_RMSHead` (codes stored query-major) against torch's `F.rms_norm` over a head-last
   layout, forward + backward of a [128, 16, 36, 36] score tensor.
2. Recomputing the layer in batch chunks small enough for the cache (`torch.utils.checkpoint` per chunk), and the
   fused numba kernel (`latentcode/model/hyla_kernel.py`), against the plain layer, forward + backward.

Both run with glibc keeping freed memory (`latentcode.training._allocator`), as training does. Not a test: nothing
here asserts a timing.

    OMP_NUM_THREADS=1 .venv/bin/python bench/hyla_layer.py [--chunks 4 8 16 32] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from latentcode.config import model_config
from latentcode.model.attention import MultiHeadAttention, _RMSHead
from latentcode.training._allocator import keep_freed_memory


def _ms(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return 1000 * (time.perf_counter() - start) / repeats


def rms_head(repeats: int) -> dict[str, float]:
    scores = torch.randn(128, 16, 36, 36, requires_grad=True)
    grad = torch.randn(128, 36, 16, 36).transpose(1, 2)
    head_last = torch.randn(128, 36, 36, 16, requires_grad=True)
    grad_last = torch.randn(128, 36, 36, 16)
    return {
        "RMSHead, hand-written (query-major)": _ms(lambda: _RMSHead.apply(scores, 1e-6, True).backward(grad), repeats),
        "F.rms_norm, head-last layout": _ms(lambda: F.rms_norm(head_last, (16,), eps=1e-6).backward(grad_last),
                                            repeats),
    }


def chunked(chunks: list[int], repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    attn = MultiHeadAttention(model_config("sraven", "hyla", "paper")).train()
    x = torch.randn(128, 36, 128, requires_grad=True)

    def core(q, k, v, keep):
        return attn.value_network(attn.normalize(attn.scores(q, k)), v, keep)

    def by_chunks(size: int):
        q, k, v = attn.qkv(x)
        keep = attn.dropout_mask(q.new_empty(1, 1, 36, 36))
        z = torch.cat([checkpoint(core, q[i:i + size], k[i:i + size], v[i:i + size], keep, use_reentrant=False)
                       for i in range(0, x.shape[0], size)])
        return attn.project_out(z)

    out = {"plain layer": _ms(lambda: attn(x).sum().backward(), repeats)}
    attn.fused_core = True  # latentcode/model/hyla_kernel.py, what training on a CPU runs since fused_attention
    out["fused kernel (hyla_kernel.py)"] = _ms(lambda: attn(x).sum().backward(), repeats)
    attn.fused_core = False
    for size in chunks:
        out[f"recomputed in chunks of {size}"] = _ms(lambda size=size: by_chunks(size).sum().backward(), repeats)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, nargs="+", default=[4, 8, 16, 32])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()
    for title, rows in (("RMSHead forward + backward", rms_head(args.repeats)),
                        ("HYLA layer forward + backward", chunked(args.chunks, args.repeats))):
        print(f"\n{title} (ms, one thread)")  # noqa: T201
        for name, ms in rows.items():
            print(f"  {name:<40} {ms:7.1f}")  # noqa: T201


if __name__ == "__main__":
    main()
