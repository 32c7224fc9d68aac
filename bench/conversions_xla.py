"""The conversions of bench/conversions.exs through XLA's CPU compiler (jax.jit of x.astype(t),
EXLA's engine), timed in this process: one line of JSON, {"xla": {pair: seconds}, "check": {pair:
sum of the result's magnitudes as f64}, "jax": version}, the fastest of `repeats` calls after a
first (compiling) call. The inputs are the formulas bench/conversions.exs uses.

    python bench/conversions_xla.py REPEATS THREADS
"""
import json
import os
import sys
import time


def main():
    repeats, threads = int(sys.argv[1]), int(sys.argv[2])
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}")
    import jax
    import jax.numpy as jnp
    import numpy as np

    n = 1 << 22
    j = np.arange(n, dtype=np.float64)
    # floats within every narrow float's range (f8_e4m3fn's is +-448); small integers for s4
    x = jnp.asarray((np.sin(j * 1.0e-3) * 100).astype(np.float32))
    small = jnp.asarray((np.sin(j * 1.0e-3) * 7).astype(np.float32))
    types = {
        "f16": jnp.float16,
        "bf16": jnp.bfloat16,
        "f8": jnp.float8_e5m2,
        "f8_e4m3fn": jnp.float8_e4m3fn,
        "s8": jnp.int8,
        "s4": jnp.int4,
    }

    times, check = {}, {}
    for name, t in types.items():
        source = small if name == "s4" else x
        narrow = jax.jit(lambda a, t=t: a.astype(t))
        wide = jax.jit(lambda a: a.astype(jnp.float32))
        made = narrow(source).block_until_ready()
        for pair, f, arg in [(f"f32_{name}", narrow, source), (f"{name}_f32", wide, made)]:
            out = f(arg).block_until_ready()
            check[pair] = float(np.abs(np.asarray(out.astype(jnp.float32))).astype(np.float64).sum())
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                f(arg).block_until_ready()
                best = min(best, time.perf_counter() - start)
            times[pair] = best

    print(json.dumps({"xla": times, "check": check, "jax": jax.__version__}))


if __name__ == "__main__":
    main()
