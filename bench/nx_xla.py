"""The workloads of bench/nx_xla.exs through XLA's CPU compiler (jax.jit, EXLA's engine), timed in
this process. Prints one line of JSON:
  {"xla": {name: seconds per call}, "first": {name: seconds of the first, compiling call},
   "check": {name: checksum}, "jax": version}
The inputs are the formulas bench/nx_xla.exs builds (computed in f64, rounded to f32), so the
checksums compare: the sum of the magnitudes of every output, or for the random draw the mean of
its squares (a different generator: only its distribution compares).

    python bench/nx_xla.py REPEATS THREADS [cpu|gpu [PER_CALL]]

gpu: XLA's GPU compiler (jax's CUDA plugin), f32 matrix products and convolutions at full f32
precision ("highest": no TF32), as Accel's cuBLAS calls compute them.
"""
import json
import os
import sys
import time

PER_CALL = ("toy_step", "toy_softmax")  # timed as the mean of PER_CALL calls (default 2000)


def main():
    repeats, threads = int(sys.argv[1]), int(sys.argv[2])
    platform = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    per_call = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    if platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}")
    else:
        os.environ["JAX_PLATFORMS"] = "cuda"
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # s64 indices, as Nx's
    if platform != "cpu":
        jax.config.update("jax_default_matmul_precision", "highest")

    def ramp(shape, scale, fn=np.sin, factor=1.0):
        x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * scale
        return jnp.asarray((fn(x) * factor).astype(np.float32))

    def labels(n):
        return jnp.asarray((np.arange(n, dtype=np.int64) * 7) % 10)

    def softmax(z):
        e = jnp.exp(z - jnp.max(z, axis=-1, keepdims=True))
        return e / jnp.sum(e, axis=-1, keepdims=True)

    def cross_entropy(logits, y):
        logp = logits - jnp.max(logits, axis=1, keepdims=True)
        logp = logp - jnp.log(jnp.sum(jnp.exp(logp), axis=1, keepdims=True))
        onehot = (y[:, None] == jnp.arange(logits.shape[1])[None, :]).astype(jnp.float32)
        return -jnp.mean(jnp.sum(onehot * logp, axis=1))

    def sgd(params, grads):
        return tuple(p - 0.1 * g for p, g in zip(params, grads))

    def mlp_loss(params, x, y):
        w1, b1, w2, b2 = params
        h = jnp.maximum(x @ w1 + b1, 0.0)
        return cross_entropy(h @ w2 + b2, y)

    def mlp_step(x, y, w1, b1, w2, b2):
        params = (w1, b1, w2, b2)
        return sgd(params, jax.grad(mlp_loss)(params, x, y))

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def cnn_loss(params, x, y):
        kc, bc, wd, bd = params
        h = jax.lax.conv_general_dilated(x, kc, (1, 1), "SAME") + bc.reshape(1, -1, 1, 1)
        h = pool(jnp.maximum(h, 0.0)).reshape(x.shape[0], -1)
        return cross_entropy(h @ wd + bd, y)

    def cnn_step(x, y, kc, bc, wd, bd):
        params = (kc, bc, wd, bd)
        return sgd(params, jax.grad(cnn_loss)(params, x, y))

    def layer_norm(x, gamma, beta):
        mean = jnp.mean(x, axis=1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1.0e-5) * gamma + beta

    def gelu_mlp(x, w1, b1, w2, b2):
        h = x @ w1 + b1
        h = 0.5 * h * (1.0 + jnp.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
        return h @ w2 + b2

    def attention(q, k, v):
        return softmax(jnp.einsum("hqd,hkd->hqk", q, k) / 8.0) @ v

    def masked_attention(q, k, v):
        scores = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
        n = scores.shape[-1]
        causal = jnp.arange(n)[:, None] >= jnp.arange(n)[None, :]
        return softmax(jnp.where(causal, scores, -1.0e9)) @ v

    toy = (ramp((8, 4), 0.1, np.cos, 0.5), ramp((4,), 1.0, np.sin, 0.1),
           ramp((4, 2), 0.1, np.sin, 0.5), ramp((2,), 1.0, np.cos, 0.1))

    workloads = {
        "chain": (lambda x: jnp.maximum(x * 1.5 + 0.25, 0.0) * x - 1.0, (ramp((1 << 24,), 1.0e-3),)),
        "softmax": (softmax, (ramp((4096, 1024), 1.0e-3, np.sin, 4.0),)),
        "layer_norm": (layer_norm, (ramp((4096, 1024), 1.0e-3, np.sin, 4.0),
                                    ramp((1024,), 0.01, np.cos, 0.1) + 1.0, ramp((1024,), 0.01, np.sin, 0.1))),
        "gelu_mlp": (gelu_mlp, (ramp((256, 1024), 1.0e-3), ramp((1024, 4096), 1.0e-3, np.cos, 0.03),
                                ramp((4096,), 0.01, np.sin, 0.1), ramp((4096, 1024), 1.0e-3, np.sin, 0.015),
                                ramp((1024,), 0.01, np.cos, 0.1))),
        "conv": (lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME"),
                 (ramp((32, 64, 32, 32), 1.0e-3), ramp((64, 64, 3, 3), 1.0e-2, np.cos, 0.05))),
        "mlp_step": (mlp_step, (ramp((128, 784), 1.0e-3), labels(128), ramp((784, 256), 1.0e-3, np.sin, 0.05),
                                ramp((256,), 0.01, np.cos, 0.01), ramp((256, 10), 1.0e-2, np.cos, 0.1),
                                ramp((10,), 1.0, np.sin, 0.01))),
        "attention": (attention, (ramp((8, 512, 64), 1.0e-3), ramp((8, 512, 64), 1.0e-3, np.cos),
                                  ramp((8, 512, 64), 2.0e-3))),
        "masked_attention": (masked_attention, (ramp((8, 512, 64), 1.0e-3), ramp((8, 512, 64), 1.0e-3, np.cos),
                                                ramp((8, 512, 64), 2.0e-3))),
        "cnn_step": (cnn_step, (ramp((32, 1, 28, 28), 1.0e-3), labels(32), ramp((16, 1, 3, 3), 0.1, np.cos, 0.3),
                                ramp((16,), 1.0, np.sin, 0.01), ramp((3136, 10), 1.0e-3, np.sin, 0.02),
                                ramp((10,), 1.0, np.cos, 0.01))),
        "random_normal": (lambda key: jax.random.normal(key, (1 << 24,), jnp.float32), (jax.random.PRNGKey(42),)),
        "sort": (jnp.sort, (ramp((1 << 20,), 0.7, np.sin, 1000.0),)),
        "take": (lambda t, i: jnp.take(t, i, axis=0),
                 (ramp((30000, 768), 1.0e-3), jnp.asarray((np.arange(512, dtype=np.int64) * 37) % 30000))),
        "toy_step": (mlp_step, (ramp((1, 8), 1.0), labels(1)) + toy),
        "toy_softmax": (softmax, (ramp((1, 8), 1.0),)),
    }

    times, first, check = {}, {}, {}
    for name, (fn, args) in workloads.items():
        f = jax.jit(fn)
        start = time.perf_counter()
        out = jax.block_until_ready(f(*args))
        first[name] = time.perf_counter() - start
        leaves = [np.asarray(o, dtype=np.float64) for o in jax.tree_util.tree_leaves(out)]
        if name == "random_normal":
            check[name] = float(np.mean(leaves[0] ** 2))
        else:
            check[name] = float(sum(np.abs(leaf).sum() for leaf in leaves))
        calls = per_call if name in PER_CALL else 1
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                jax.block_until_ready(f(*args))
            best = min(best, (time.perf_counter() - start) / calls)
        times[name] = best

    print(json.dumps({"xla": times, "first": first, "check": check, "jax": f"{jax.__version__}, {jax.devices()[0].device_kind}"}))


if __name__ == "__main__":
    main()
