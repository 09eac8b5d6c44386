"""Worker process (CPU path) and kernel tests: plain-torch Gated DeltaNet reference ops, the oracle for the CUDA kernels.

Letters (fla style): T packed tokens, N sequences, H q/k heads, HV v heads (HV % H == 0, v-head j reads
key head j // (HV // H)), K key head dim, V value head dim, C conv channels, Kc conv width.
Math: model-spec.md 1.7 / 1.8, after transformers `modeling_qwen3_5.py`
(`torch_recurrent_gated_delta_rule`, `torch_chunk_gated_delta_rule`, `causal_conv1d_fn`, `causal_conv1d_update`).
"""
import torch
import torch.nn.functional as F

L2NORM_EPS = 1e-6


def l2norm(x: torch.Tensor, eps: float = L2NORM_EPS) -> torch.Tensor:
    """x * rsqrt(sum(x^2, -1) + eps) over the last dim (fla / transformers `l2norm`), in x's dtype."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _bounds(cu_seqlens, num_tokens: int) -> list[int]:
    if cu_seqlens is None:
        return [0, num_tokens]
    return [int(c) for c in cu_seqlens.tolist()]


def _prepare(q, k, v, g, beta, scale, use_qk_l2norm):
    """fp32 copies with q/k expanded to HV heads, l2-normalised (optional) and q scaled by `scale`."""
    num_k_heads, head_k_dim = q.shape[1], q.shape[2]
    group = v.shape[1] // num_k_heads
    qf, kf = q.float(), k.float()
    if use_qk_l2norm:
        qf, kf = l2norm(qf), l2norm(kf)
    if group > 1:
        qf = qf.repeat_interleave(group, dim=1)
        kf = kf.repeat_interleave(group, dim=1)
    qf = qf * (head_k_dim ** -0.5 if scale is None else scale)
    return qf, kf, v.float(), g.float(), beta.float()


def _initial(initial_state, num_seqs, num_v_heads, head_k_dim, head_v_dim, device):
    if initial_state is None:
        return torch.zeros(num_seqs, num_v_heads, head_k_dim, head_v_dim, dtype=torch.float32, device=device)
    return initial_state.float().clone()


def recurrent_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None,
                               use_qk_l2norm=True):
    """Token-by-token gated delta rule over a packed varlen batch (transformers `torch_recurrent_gated_delta_rule`).

    q, k [T, H, K], v [T, HV, V] (any float dtype); g [T, HV] log-decay (<= 0), beta [T, HV];
    scale: q multiplier (default K**-0.5); initial_state [N, HV, K, V] or None (zeros);
    cu_seqlens [N+1] int (None = one sequence of T tokens).
    Per sequence and v-head, state S [K, V] fp32:  S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;
    o_t = S^T q_t, with q, k l2-normalised (eps 1e-6) in fp32 when use_qk_l2norm.
    Returns o [T, HV, V] in v's dtype and final_state [N, HV, K, V] fp32.
    Steps all sequences together: the loop runs max(seq len) times.
    """
    qf, kf, vf, gf, bf = _prepare(q, k, v, g, beta, scale, use_qk_l2norm)
    bounds = _bounds(cu_seqlens, q.shape[0])
    starts = torch.tensor(bounds[:-1], dtype=torch.long, device=q.device)
    lens = torch.tensor(bounds[1:], dtype=torch.long, device=q.device) - starts
    state = _initial(initial_state, len(bounds) - 1, v.shape[1], q.shape[2], v.shape[2], q.device)
    out = torch.zeros_like(vf)
    for step in range(int(lens.max()) if lens.numel() else 0):
        rows = torch.nonzero(lens > step).flatten()
        tok = starts[rows] + step
        s = state[rows] * gf[tok].exp()[..., None, None]
        k_t, v_t = kf[tok], vf[tok]
        kv_mem = (s * k_t[..., None]).sum(dim=-2)
        delta = (v_t - kv_mem) * bf[tok][..., None]
        s = s + k_t[..., None] * delta[..., None, :]
        out[tok] = (s * qf[tok][..., None]).sum(dim=-2)
        state[rows] = s
    return out.to(v.dtype), state


def _chunk_one(q, k, v, g, beta, state, chunk_size):
    """One sequence in the WY/UT chunked form. q, k [HV, L, K], v [HV, L, V], g, beta [HV, L] fp32;
    state [HV, K, V] fp32. Returns o [HV, L, V] fp32 and the final state."""
    length = q.shape[1]
    pad = (-length) % chunk_size
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    heads, num_chunks = q.shape[0], (length + pad) // chunk_size
    q, k, v = (x.reshape(heads, num_chunks, chunk_size, -1) for x in (q, k, v))
    g, beta = (x.reshape(heads, num_chunks, chunk_size) for x in (g, beta))
    gc = g.cumsum(dim=-1)
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device).tril()
    # decay[i, j] = exp(gc_i - gc_j) for j <= i; masked before exp so positive exponents never overflow
    decay = (gc[..., :, None] - gc[..., None, :]).masked_fill(~causal, float("-inf")).exp()
    k_beta = k * beta[..., None]
    # (I + strict_lower(beta_i k_i.k_j decay_ij)) [u | w] = [beta v | beta k exp(gc)]: the UT transform
    system = (k_beta @ k.transpose(-1, -2)) * decay
    rhs = torch.cat([v * beta[..., None], k_beta * gc.exp()[..., None]], dim=-1)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    u, w = solved[..., : v.shape[-1]], solved[..., v.shape[-1]:]
    intra = (q @ k.transpose(-1, -2)) * decay
    q_decayed = q * gc.exp()[..., None]
    k_to_end = k * (gc[..., -1:] - gc).exp()[..., None]
    out = torch.empty_like(v)
    for c in range(num_chunks):
        v_new = u[:, c] - w[:, c] @ state
        out[:, c] = q_decayed[:, c] @ state + intra[:, c] @ v_new
        state = state * gc[:, c, -1].exp()[:, None, None] + k_to_end[:, c].transpose(-1, -2) @ v_new
    return out.reshape(heads, num_chunks * chunk_size, -1)[:, :length], state


def chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None,
                           use_qk_l2norm=True, chunk_size=64):
    """Chunked (WY/UT) gated delta rule, same math and signature as `recurrent_gated_delta_rule`
    (transformers `torch_chunk_gated_delta_rule`; fla `chunk_gated_delta_rule`), plus chunk_size (64).

    q, k [T, H, K], v [T, HV, V]; g, beta [T, HV]; initial_state [N, HV, K, V] fp32 or None;
    cu_seqlens [N+1] (None = one sequence). Returns o [T, HV, V] in v's dtype, final_state [N, HV, K, V] fp32.
    Agrees with the recurrence to ~1e-5 in fp32 (chunks restart at each sequence's first token).
    """
    qf, kf, vf, gf, bf = _prepare(q, k, v, g, beta, scale, use_qk_l2norm)
    bounds = _bounds(cu_seqlens, q.shape[0])
    state = _initial(initial_state, len(bounds) - 1, v.shape[1], q.shape[2], v.shape[2], q.device)
    out = torch.zeros_like(vf)
    for n in range(len(bounds) - 1):
        lo, hi = bounds[n], bounds[n + 1]
        if hi == lo:
            continue
        per_head = [x[lo:hi].transpose(0, 1) for x in (qf, kf, vf, gf, bf)]
        o, state[n] = _chunk_one(*per_head, state[n], chunk_size)
        out[lo:hi] = o.transpose(0, 1)
    return out.to(v.dtype), state


def _conv_windows(lens, starts, num_tokens, width, device):
    """Index [T, Kc] into cat(flat states [N*(Kc-1)], x [T]) of each token's conv window, oldest first,
    and index [N, Kc-1] of each sequence's last Kc-1 inputs (its next conv state)."""
    hist = width - 1
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=device), lens)
    local = torch.arange(num_tokens, device=device) - starts[seq]
    offs = torch.arange(width, device=device) - hist
    src = local[:, None] + offs
    tok_idx = torch.where(src >= 0, hist * lens.numel() + starts[seq][:, None] + src,
                          seq[:, None] * hist + hist + src)
    tail = lens[:, None] + torch.arange(-hist, 0, device=device)
    state_idx = torch.where(tail >= 0, hist * lens.numel() + starts[:, None] + tail,
                            torch.arange(lens.numel(), device=device)[:, None] * hist + hist + tail)
    return tok_idx, state_idx


def causal_conv1d(x, weight, conv_state=None, cu_seqlens=None):
    """Causal depthwise conv + SiLU over a packed varlen batch, continuing from per-sequence state.

    x [T, C] (any float dtype); weight [C, Kc]; conv_state [N, C, Kc-1] (the previous Kc-1 pre-conv inputs,
    oldest first) or None (zeros: a fresh sequence); cu_seqlens [N+1] (None = one sequence).
    y[t, c] = silu(sum_j weight[c, j] * xx[t - (Kc-1) + j, c]) with xx = [state ; x] per sequence; the sum is
    taken in fp32 and rounded to x's dtype before the SiLU.
    Returns y [T, C] in x's dtype and new_conv_state [N, C, Kc-1] in conv_state's dtype (x's if None).
    Source: transformers `causal_conv1d_fn` (prefill) / `causal_conv1d_update` (decode).
    """
    bounds = _bounds(cu_seqlens, x.shape[0])
    starts = torch.tensor(bounds[:-1], dtype=torch.long, device=x.device)
    lens = torch.tensor(bounds[1:], dtype=torch.long, device=x.device) - starts
    channels, width = weight.shape
    num_seqs = lens.numel()
    if conv_state is None:
        conv_state = torch.zeros(num_seqs, channels, width - 1, dtype=x.dtype, device=x.device)
    flat_state = conv_state.float().transpose(1, 2).reshape(num_seqs * (width - 1), channels)
    source = torch.cat([flat_state, x.float()], dim=0)
    tok_idx, state_idx = _conv_windows(lens, starts, x.shape[0], width, x.device)
    windows = source[tok_idx]
    # the conv sum is rounded to x's dtype before the SiLU, as transformers' bf16 conv1d + activation does
    y = F.silu((windows * weight.float().t()[None]).sum(dim=1).to(x.dtype))
    new_state = source[state_idx].transpose(1, 2).to(conv_state.dtype)
    return y, new_state
