"""The router work only token-drop MoE runs, timed on one GPU at the held-out rows' shapes.

Megatron-Core `apply_router_token_dropping` (drop policy `probs`): a `torch.topk` along the token
dimension of the [tokens, experts] router probabilities (k = capacity = ceil(tokens x top_k /
experts) at capacity factor 1), a `zeros_like`, an out-of-place `scatter`, `.bool()` and the
product with the probabilities (docs/cost_model.md "Token-drop MoE"). Times the top-k alone and
the chain, back to back after 3 warm-up calls (CUDA events, mean of 50): fp32 probabilities at
DeepSeek-V3's 256 experts, bf16 at Qwen3's 128.

    python3 bench/measure_token_drop_router.py
"""

import math
import sys

SHAPES = (  # tokens, experts, top_k, router dtype
    (4096, 256, 8, "float32"),
    (8192, 256, 8, "float32"),
    (2048, 128, 8, "bfloat16"),
    (4096, 128, 8, "bfloat16"),
    (16384, 128, 8, "bfloat16"),
)


def mean_us(torch, fn, n: int = 50) -> float:
    for _ in range(3):
        fn()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(n):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e3


def main() -> int:
    import torch

    print(torch.cuda.get_device_name())
    for tokens, experts, k, dtype in SHAPES:
        p = torch.rand(tokens, experts, device="cuda", dtype=getattr(torch, dtype))
        cap = math.ceil(tokens * k / experts)

        def topk(p=p, cap=cap):
            return torch.topk(p, k=cap, dim=0, sorted=False)

        def chain(p=p, cap=cap):
            _, i = torch.topk(p, k=cap, dim=0, sorted=False)
            return p * torch.zeros_like(p).scatter(0, i, 1).bool()

        print(
            tokens, experts, f"torch.{dtype}",
            f"cap {cap} topk {mean_us(torch, topk):.1f} us, chain {mean_us(torch, chain):.1f} us",
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
