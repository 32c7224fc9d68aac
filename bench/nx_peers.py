"""The operations of bench/nx.exs in NumPy (and PyTorch's CPU build where it is installed), timed
in this process: one line of JSON, {"numpy": {op: seconds}, "torch": {...}}, the fastest of
`repeats` calls each (a round of bench/nx.exs; it takes the median over rounds).

    python3 bench/nx_peers.py REPEATS DOT_N SUM_N ROWS COLS
"""
import json
import sys
import time


def fastest(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def numpy_times(repeats, dot_n, sum_n, rows, cols):
    import numpy as np

    a = np.arange(dot_n * dot_n, dtype=np.float32).reshape(dot_n, dot_n) / (dot_n * dot_n)
    v = np.arange(sum_n, dtype=np.float32) / sum_n
    m = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / (rows * cols)
    pos = m + np.float32(0.5)
    small = np.arange(10, dtype=np.float32)
    out = np.empty_like(v)

    def softmax():
        e = np.exp(m - m.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return {
        "dot": fastest(lambda: a @ a, repeats),
        "sum": fastest(lambda: v.sum(), repeats),
        "softmax": fastest(softmax, repeats),
        "exp": fastest(lambda: np.exp(m), repeats),
        "log": fastest(lambda: np.log(pos), repeats),
        "add10": fastest(lambda: small + small, repeats * 100),
        "copy": fastest(lambda: np.copyto(out, v), repeats),
    }


def torch_times(repeats, dot_n, sum_n, rows, cols):
    try:
        import torch
    except Exception:
        return None
    a = torch.arange(dot_n * dot_n, dtype=torch.float32).reshape(dot_n, dot_n) / (dot_n * dot_n)
    v = torch.arange(sum_n, dtype=torch.float32) / sum_n
    m = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) / (rows * cols)
    pos = m + 0.5
    small = torch.arange(10, dtype=torch.float32)
    return {
        "dot": fastest(lambda: a @ a, repeats),
        "sum": fastest(lambda: v.sum(), repeats),
        "softmax": fastest(lambda: torch.softmax(m, dim=1), repeats),
        "exp": fastest(lambda: torch.exp(m), repeats),
        "log": fastest(lambda: torch.log(pos), repeats),
        "add10": fastest(lambda: small + small, repeats * 100),
    }


if __name__ == "__main__":
    repeats, dot_n, sum_n, rows, cols = (int(x) for x in sys.argv[1:6])
    print(json.dumps({"numpy": numpy_times(repeats, dot_n, sum_n, rows, cols),
                      "torch": torch_times(repeats, dot_n, sum_n, rows, cols)}))
