"""The operations of bench/nx_ops.exs through XLA's CPU compiler (jax.jit, EXLA's engine), timed in
this process: one line of JSON, {"xla": {op: seconds}, "check": {op: sum of the magnitudes of the result}}, the
fastest of `repeats` calls of each compiled function after a first (compiling) call. The inputs are
the same formulas bench/nx_ops.exs builds, so the checksums compare.

    python bench/nx_ops_xla.py REPEATS THREADS
"""
import json
import os
import sys
import time


def main():
    repeats, threads = int(sys.argv[1]), int(sys.argv[2])
    # XLA's CPU backend: as many threads as Accel's pool (the machine's cores)
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}")
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg
    import jax.scipy.special
    import numpy as np

    jax.config.update("jax_enable_x64", True)  # s64 indices, as Nx's

    def iota(shape, dtype=np.float64):
        return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)

    x = jnp.asarray(np.sin(iota((32, 64, 32, 32)) * 1.0e-3).astype(np.float32))
    k = jnp.asarray((np.cos(iota((64, 64, 3, 3)) * 1.0e-2) * 0.05).astype(np.float32))
    source = jnp.asarray(np.cos(iota((32, 64, 16, 16)) * 1.0e-3).astype(np.float32))
    table = jnp.asarray(np.sin(iota((30000, 768)) * 1.0e-3).astype(np.float32))
    rows = jnp.asarray((np.arange(512, dtype=np.int64) * 37) % 30000)
    updates = jnp.asarray(np.cos(iota((512, 768)) * 1.0e-3).astype(np.float32))
    zeros = jnp.zeros((30000, 768), jnp.float32)
    v = jnp.asarray((np.sin(iota((1 << 20,)) * 0.7) * 1000).astype(np.float32))
    u = jnp.asarray((np.sin(iota((1 << 20,)) * 0.7) * 0.999).astype(np.float32))
    m = jnp.asarray((1.0 + np.sin(iota((4096, 1024)) * 1.0e-3) * 1.0e-3).astype(np.float32))
    g64 = np.sin(iota((512, 512)) * 0.37)
    s64 = g64 @ g64.T / 512 + np.eye(512)
    s = jnp.asarray(s64.astype(np.float32))
    lower = jnp.asarray(np.tril(s64).astype(np.float32))
    rhs = jnp.asarray(np.cos(iota((512, 16)) * 1.0e-2).astype(np.float32))
    signal = jnp.asarray(np.sin(iota((64, 16384)) * 1.0e-3).astype(np.float32))
    j = iota((1 << 20,))
    re = jnp.asarray(np.sin(j * 1.0e-3).astype(np.float32))
    im = jnp.asarray(np.cos(j * 2.0e-3).astype(np.float32))
    z = jnp.asarray((np.sin(j * 1.0e-3) + 1j * np.cos(j * 2.0e-3)).astype(np.complex64))
    w = jnp.asarray((np.cos(j * 1.0e-3) + 1j * np.sin(j * 3.0e-3)).astype(np.complex64))
    jx, jk = iota((8, 16, 32, 32)), iota((16, 16, 3, 3))
    xc = jnp.asarray((np.sin(jx * 1.0e-3) + 1j * np.cos(jx * 2.0e-3)).astype(np.complex64))
    kc = jnp.asarray((np.cos(jk * 1.0e-2) + 1j * np.sin(jk * 2.0e-2)).astype(np.complex64))

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def pool_grad(x, s):
        # the gradient of max-pooling: XLA's select-and-scatter, as Nx's window_scatter_max
        return jax.vjp(pool, x)[1](s)[0]

    ops = {
        "conv": (lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME"), (x, k)),
        "max_pool": (pool, (x,)),
        "pool_grad": (pool_grad, (x, source)),
        "take": (lambda t, i: jnp.take(t, i, axis=0), (table, rows)),
        "indexed_add": (lambda z, i, u: z.at[i].add(u), (zeros, rows, updates)),
        "sort": (jnp.sort, (v,)),
        "argsort": (lambda v: jnp.argsort(v, stable=True), (v,)),
        "cumulative_sum": (jnp.cumsum, (v,)),
        "erf_inv": (jax.scipy.special.erfinv, (u,)),
        "product": (lambda m: jnp.prod(m, axis=1), (m,)),
        "sum_columns": (lambda m: jnp.sum(m, axis=0), (m,)),
        "cholesky": (jnp.linalg.cholesky, (s,)),
        "solve": (jnp.linalg.solve, (s, rhs)),
        "triangular_solve": (lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True), (lower, rhs)),
        # both factors, as bench/nx_ops.exs takes them
        "qr": (lambda s: jnp.concatenate(jnp.linalg.qr(s)), (s,)),
        "fft": (jnp.fft.fft, (signal,)),
        "complex_multiply": (lambda z, w: z * w, (z, w)),
        "complex_divide": (lambda z, w: z / w, (z, w)),
        "complex_abs": (jnp.abs, (z,)),
        "complex_exp": (jnp.exp, (z,)),
        "complex_asin": (jnp.arcsin, (z,)),
        "complex_conv": (lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME"), (xc, kc)),
        "complex_make": (jax.lax.complex, (re, im)),
    }

    times, check = {}, {}
    for name, (fn, args) in ops.items():
        f = jax.jit(fn)
        out = f(*args).block_until_ready()
        check[name] = float(np.abs(np.asarray(out)).astype(np.float64).sum())
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            f(*args).block_until_ready()
            best = min(best, time.perf_counter() - start)
        times[name] = best

    print(json.dumps({"xla": times, "check": check, "jax": jax.__version__}))


if __name__ == "__main__":
    main()
