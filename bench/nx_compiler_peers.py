"""The workloads of bench/nx_compiler.exs in NumPy (and PyTorch's CPU build, eager, where it is
installed), timed in this process: one line of JSON, {"numpy": {op: seconds}, "torch": {...}},
the fastest of `repeats` calls each (a round of bench/nx_compiler.exs; it takes the median over
rounds).

    python3 bench/nx_compiler_peers.py REPEATS CHAIN_N ROWS COLS BATCH IN HIDDEN OUT
"""
import json
import sys

from nx_peers import fastest


def inputs(lib, arange, chain_n, rows, cols, batch, n_in, hidden, n_out):
    def ramp(n, shape, scale):
        return arange(n).reshape(shape) / scale

    return {
        "v": ramp(chain_n, (chain_n,), chain_n),
        "m": ramp(rows * cols, (rows, cols), rows * cols),
        "x": ramp(batch * n_in, (batch, n_in), batch * n_in),
        "w1": ramp(n_in * hidden, (n_in, hidden), n_in * hidden) - 0.5 / n_in,
        "b1": ramp(hidden, (hidden,), hidden),
        "w2": ramp(hidden * n_out, (hidden, n_out), hidden * n_out) - 0.5 / hidden,
    }


def numpy_times(repeats, sizes):
    import numpy as np

    t = inputs(np, lambda n: np.arange(n, dtype=np.float32), *sizes)
    v, m = t["v"], t["m"]
    out = np.empty_like(v)

    def softmax(z):
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def mlp():
        h = np.maximum(t["x"] @ t["w1"] + t["b1"], 0.0)
        return softmax(h @ t["w2"])

    return {
        "chain": fastest(lambda: np.maximum(v * 1.5 + 0.25, 0.0) * v - 1.0, repeats),
        "copy": fastest(lambda: np.copyto(out, v), repeats),
        "softmax": fastest(lambda: softmax(m), repeats),
        "mlp": fastest(mlp, repeats),
    }


def torch_times(repeats, sizes):
    try:
        import torch
    except Exception:
        return None
    t = inputs(torch, lambda n: torch.arange(n, dtype=torch.float32), *sizes)
    v = t["v"]

    def mlp():
        h = torch.relu(t["x"] @ t["w1"] + t["b1"])
        return torch.softmax(h @ t["w2"], dim=1)

    return {
        "chain": fastest(lambda: torch.clamp(v * 1.5 + 0.25, min=0.0) * v - 1.0, repeats),
        "softmax": fastest(lambda: torch.softmax(t["m"], dim=1), repeats),
        "mlp": fastest(mlp, repeats),
    }


if __name__ == "__main__":
    repeats = int(sys.argv[1])
    sizes = [int(x) for x in sys.argv[2:9]]
    print(json.dumps({"numpy": numpy_times(repeats, sizes), "torch": torch_times(repeats, sizes)}))
