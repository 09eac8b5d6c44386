"""Worker process: the sparse MoE MLP (top-k routed experts + sigmoid-gated shared expert) of Qwen3-Next / 3.5-MoE."""
import torch
import torch.nn.functional as F

from worker.layers.linear import Linear
from worker.layers.mlp import MLP


def route(x: torch.Tensor, router_weight: torch.Tensor, top_k: int, renormalise: bool) -> tuple:
    """Router of transformers `Qwen3NextTopKRouter` / `Qwen3_5MoeTopKRouter` (modeling_qwen3_next.py).

    x [T, D], router_weight [E, D] -> (weights [T, k] in x's dtype, experts [T, k] int64).
    logits = x W^T in x's dtype; p = softmax(logits) in fp32; top-k of p; if renormalise p_k /= sum_k p_k (fp32);
    then cast to x's dtype.
    """
    logits = F.linear(x, router_weight)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    if renormalise:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(logits.dtype), experts


def group_by_expert(experts: torch.Tensor, num_experts: int) -> tuple:
    """experts [T, k] int64 -> (order [T*k] int64: flat (token, slot) indices sorted by expert, stable so tokens
    stay ascending within an expert; counts [E] int64 assignments per expert)."""
    flat = experts.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts)
    return order, counts


class SparseMoeBlock(torch.nn.Module):
    """transformers `Qwen3NextSparseMoeBlock` / `Qwen3_5MoeSparseMoeBlock` (model-spec.md 1.9) on packed tokens.

    router [E, D]; gate_up [E, 2*I, D] (rows [gate(I); up(I)] per expert); down [E, D, I]; shared_expert: the
    dense MLP (shared_expert_intermediate_size); shared_gate: Linear [1, D].
    y = sum_k w_k * down_e(silu(gate_e(x)) * up_e(x)) + sigmoid(shared_gate(x)) * shared_expert(x).
    Experts run on the gathered tokens routed to them (one matmul per expert that has tokens) and are
    accumulated with index_add_ in ascending expert order, as transformers' `Qwen3NextExperts.forward`.
    """

    def __init__(self, router: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, shared_expert: MLP,
                 shared_gate: Linear, top_k: int, renormalise: bool):
        super().__init__()
        self.router = torch.nn.Parameter(router, requires_grad=False)
        self.gate_up = torch.nn.Parameter(gate_up, requires_grad=False)
        self.down = torch.nn.Parameter(down, requires_grad=False)
        self.shared_expert, self.shared_gate = shared_expert, shared_gate
        self.top_k, self.renormalise = top_k, renormalise
        self.num_experts = int(router.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [T, D] -> [T, D] in x's dtype."""
        shared = self.shared_expert(x)
        weights, experts = route(x, self.router, self.top_k, self.renormalise)
        if x.is_cuda and torch.cuda.is_current_stream_capturing():
            routed = self.experts_dense(x, weights, experts)
        else:
            routed = self.experts_forward(x, weights, experts)
        return routed + torch.sigmoid(self.shared_gate(x)) * shared

    def experts_forward(self, x: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        """x [T, D], weights [T, k] (x's dtype), experts [T, k] int64 -> sum over the k routed experts [T, D].
        One host read (the per-expert counts) per call; the loop runs over experts that received tokens."""
        out = torch.zeros_like(x)
        order, counts = group_by_expert(experts, self.num_experts)
        token_of = order // self.top_k
        weight_of = weights.reshape(-1)[order]
        start = 0
        for expert, count in enumerate(counts.tolist()):
            if count == 0:
                continue
            tokens, w = token_of[start:start + count], weight_of[start:start + count]
            start += count
            gate, up = F.linear(x[tokens], self.gate_up[expert]).chunk(2, dim=-1)
            y = F.linear(F.silu(gate) * up, self.down[expert]) * w[:, None]
            out.index_add_(0, tokens, y.to(out.dtype))
        return out

    def experts_dense(self, x: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        """Same sum as experts_forward without host reads (CUDA-graph capture): every expert runs on every token and
        is scaled by its routing weight (0 where not selected). x [T, D] -> [T, D]; costs E expert passes."""
        combine = torch.zeros(x.shape[0], self.num_experts, dtype=weights.dtype, device=x.device)
        combine.scatter_(1, experts, weights)
        out = torch.zeros_like(x)
        for expert in range(self.num_experts):
            gate, up = F.linear(x, self.gate_up[expert]).chunk(2, dim=-1)
            out += (F.linear(F.silu(gate) * up, self.down[expert]) * combine[:, expert, None]).to(out.dtype)
        return out
