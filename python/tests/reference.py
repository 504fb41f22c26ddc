"""fp64 references for the tests, written from the operators' definitions (not from ck-rs)."""

import numpy as np


def bf16_round(a):
    """Rounds float32 values to bfloat16 (round to nearest, ties to even), as float32."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def rmsnorm(x, gamma, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gamma.astype(np.float64)


def rmsnorm_backward(dy, x, gamma, eps):
    """The gradients of ``sum(dy · rmsnorm(x))`` by the chain rule: ``(dx, dgamma)``."""
    dy, x, gamma = (a.astype(np.float64) for a in (dy, x, gamma))
    n = x.shape[-1]
    r = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    dot = (dy * gamma * x).sum(axis=-1, keepdims=True)
    dx = r * gamma * dy - x * r**3 * dot / n
    dgamma = (dy * x * r).reshape(-1, n).sum(axis=0)
    return dx, dgamma


def layernorm(x, gamma, beta, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    return (x - mean) * rstd * gamma + beta, mean[..., 0], rstd[..., 0]


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, causal, scale):
    """Plain softmax per query row over the keys it sees (row i sees keys j ≤ i + Sk − Sq when
    causal); a row that sees none gives O = 0 and LSE = −∞."""
    b, h, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    o = np.zeros((b, h, sq, d))
    lse = np.full((b, h, sq), -np.inf)
    for bi in range(b):
        for hi in range(h):
            kh = hi // (h // hkv)
            s = scale * q[bi, hi].astype(np.float64) @ k[bi, kh].astype(np.float64).T
            for i in range(sq):
                seen = sk if not causal else max(0, min(sk, i + sk - sq + 1))
                if seen == 0:
                    continue
                row = s[i, :seen]
                mx = row.max()
                p = np.exp(row - mx)
                o[bi, hi, i] = p @ v[bi, kh, :seen].astype(np.float64) / p.sum()
                lse[bi, hi, i] = mx + np.log(p.sum())
    return o, lse


def rel_err(got, want):
    """Norm-wise relative error."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300)
