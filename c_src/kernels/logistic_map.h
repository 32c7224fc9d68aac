/* The logistic-map step x -> rem(mu * x * (x + 1), p), exact for every signed 64-bit x.
 * Written once in the common subset of C++17, CUDA C++ and OpenCL C: the CPU and CUDA backends
 * include it, the OpenCL backend receives the same text as a string. No host-only code here. */
#ifndef ACCEL_KERNELS_LOGISTIC_MAP_H
#define ACCEL_KERNELS_LOGISTIC_MAP_H

#include "kernels/dialect.h"

/* Why this is exact without big integers:
 *  - x * (x + 1) >= 0 for every integer x, so rem(mu * x * (x + 1), p) has the sign of mu (or is 0);
 *  - |mu * x * (x + 1)| mod p == ((|mu| mod p) * (x * (x + 1) mod p)) mod p.
 * Every quantity below is an unsigned magnitude below 2^64; the sign is applied last.
 * After one step |x| < p, which is what lets later steps take the one-reduction path. */
typedef struct accel_lm_params {
  accel_u64 p;        /* modulus, 1 <= p <= 2^63 - 1 */
  accel_u64 mu_mod;   /* |mu| mod p */
  accel_u64 barrett;  /* floor(2^64 / p), or 2^64 - 1 when p == 1 */
  accel_i64 mu_neg;   /* 1 when mu < 0: results are negated */
  accel_i64 mu_small; /* mu_mod * (p - 1) < 2^64: a product with a residue needs no 128-bit step */
  accel_i64 int_fast; /* mu_mod * p * (p - 1) < 2^64: for |x| < p a whole step fits in 64 bits */
} accel_lm_params;

/* a mod p for any 64-bit a (Barrett: one multiply-high, one correction; see core/logistic_map.cpp).
 * On an OpenCL device on the host's CPU (PoCL) the division itself: there mul_hi(ulong) is a
 * library routine and the CPU divides in a few cycles (the seed's `%` kernel ran 1.35x faster than
 * Barrett's or the f64 path's reduction, bench/opencl_peer.exs). */
ACCEL_FN accel_u64 accel_lm_reduce(accel_u64 a, accel_lm_params c) {
#if defined(__OPENCL_VERSION__) && defined(ACCEL_OPENCL_CPU)
  return a % c.p;
#else
  accel_u64 q = accel_mulhi_u64(a, c.barrett);
  accel_u64 r = a - q * c.p;
  return r >= c.p ? r - c.p : r;
#endif
}

/* (a * b) mod p for a, b < p, through a 128-bit product where the dialect has one. */
ACCEL_FN accel_u64 accel_lm_mulmod(accel_u64 a, accel_u64 b, accel_lm_params c) {
#if ACCEL_HAS_INT128
  return (accel_u64)(((unsigned __int128)a * b) % c.p);
#else
  /* Double-and-add: 64 rounds, only reached when p or mu is beyond the 64-bit fast paths. */
  accel_u64 r = 0;
  for (int bit = 63; bit >= 0; --bit) {
    r = (r >= c.p - r) ? r - (c.p - r) : r + r;
    if ((b >> bit) & 1) r = (r >= c.p - a) ? r - (c.p - a) : r + a;
  }
  return r;
#endif
}

/* x * (x + 1) mod p for any 64-bit x. */
ACCEL_FN accel_u64 accel_lm_xx1_mod(accel_i64 x, accel_lm_params c) {
  accel_u64 ux = (accel_u64)x;
  /* |x| < 2^32: x * (x + 1) < 2^64, and unsigned wrap-around gives its exact value. */
  if (ux + 0xFFFFFFFFull <= 0x1FFFFFFFEull) return accel_lm_reduce(ux * (ux + 1), c);
  accel_u64 ax = x < 0 ? (accel_u64)0 - ux : ux;              /* |x|, 2^63 for INT64_MIN */
  accel_u64 ax1 = x < 0 ? (accel_u64)0 - (ux + 1) : ux + 1;   /* |x + 1|, at most 2^63 */
  return accel_lm_mulmod(accel_lm_reduce(ax, c), accel_lm_reduce(ax1, c), c);
}

ACCEL_FN accel_i64 accel_lm_signed(accel_u64 r, accel_lm_params c) {
  return c.mu_neg ? -(accel_i64)r : (accel_i64)r;
}

/* One exact step for any 64-bit x. */
ACCEL_FN accel_i64 accel_lm_step(accel_i64 x, accel_lm_params c) {
  accel_u64 t = accel_lm_xx1_mod(x, c);
  accel_u64 r = c.mu_small ? accel_lm_reduce(c.mu_mod * t, c) : accel_lm_mulmod(c.mu_mod, t, c);
  return accel_lm_signed(r, c);
}

/* One step for |x| < p when c.int_fast: mu_mod * x * (x + 1) < 2^64, one reduction. */
ACCEL_FN accel_i64 accel_lm_step_reduced(accel_i64 x, accel_lm_params c) {
  accel_u64 ux = (accel_u64)x;
  return accel_lm_signed(accel_lm_reduce(c.mu_mod * (ux * (ux + 1)), c), c);
}

/* `iterations` exact steps from any 64-bit x. */
ACCEL_FN accel_i64 accel_lm_iterate(accel_i64 x, accel_i64 iterations, accel_lm_params c) {
  if (iterations <= 0) return x;
  x = accel_lm_step(x, c);
  if (c.int_fast) {
    for (accel_i64 i = 1; i < iterations; ++i) x = accel_lm_step_reduced(x, c);
  } else {
    for (accel_i64 i = 1; i < iterations; ++i) x = accel_lm_step(x, c);
  }
  return x;
}

#if ACCEL_HAS_F64
/* The f64 path, used when core/logistic_map.cpp finds it exact for the call (LogisticMapPlan::
 * f64_exact): p >= 16 and every intermediate of a step from |x| < p is an integer below 2^52. Then
 * additions and products are exact, the rounded quotient a * (1 / p) is off by at most one (the
 * error of a * (1 / p) is below 1/16), q * p < 2^53 is exact, and one conditional add corrects the
 * remainder. It vectorises where 64-bit integer multiplies do not. */
#define ACCEL_LM_F64_FIRST_LIMIT 67108863 /* |x| <= 2^26 - 1: x * (x + 1) < 2^52 */

typedef struct accel_lm_f64 {
  double p, inv_p, mu; /* p, 1 / p and |mu| mod p as doubles */
} accel_lm_f64;

/* a mod p for an integer-valued 0 <= a < 2^52. */
ACCEL_FN double accel_lm_reduce_f64(double a, accel_lm_f64 f) {
  const double q = ACCEL_RINT(a * f.inv_p);
  const double r = a - q * f.p;
  return r < 0 ? r + f.p : r;
}

/* The magnitude of one step from |v| < p. */
ACCEL_FN double accel_lm_step_f64(double v, accel_lm_f64 f) { return accel_lm_reduce_f64(f.mu * (v * v + v), f); }

/* The magnitude of one step from |v| <= ACCEL_LM_F64_FIRST_LIMIT (any v, not only |v| < p). */
ACCEL_FN double accel_lm_first_step_f64(double v, accel_lm_f64 f) {
  return accel_lm_reduce_f64(f.mu * accel_lm_reduce_f64(v * v + v, f), f);
}

/* `iterations` exact steps from any 64-bit x, on the f64 path. */
ACCEL_FN accel_i64 accel_lm_iterate_f64(accel_i64 x, accel_i64 iterations, accel_lm_params c, accel_lm_f64 f) {
  if (iterations <= 0) return x;
  const double sign = c.mu_neg ? -1.0 : 1.0;
  const accel_u64 ux = (accel_u64)x;
  double v = ux + ACCEL_LM_F64_FIRST_LIMIT <= 2 * (accel_u64)ACCEL_LM_F64_FIRST_LIMIT
                 ? sign * accel_lm_first_step_f64((double)x, f)
                 : (double)accel_lm_step(x, c);
  for (accel_i64 i = 1; i < iterations; ++i) v = sign * accel_lm_step_f64(v, f);
  return (accel_i64)v;
}
#endif /* ACCEL_HAS_F64 */

#endif /* ACCEL_KERNELS_LOGISTIC_MAP_H */
