/* What kernels generated from Elixir functions (Accel.Kernel, lib/accel/kernel/) call: Elixir's
 * integer and float operations on 64-bit values, each raising the element's `bad` flag where Elixir
 * would give a bignum or raise (the element is then recomputed on the BEAM). Written once in the
 * common subset of C++17, CUDA C++ and OpenCL C; prepended, with dialect.h, to every generated
 * kernel's text. Nothing here may trap: a zero divisor or INT64_MIN / -1 never reaches `/`. */
#ifndef ACCEL_KERNELS_USER_H
#define ACCEL_KERNELS_USER_H

#include "kernels/dialect.h"

#define ACCEL_I64_MIN (-0x7fffffffffffffffL - 1)

/* The helpers below are always inlined on the host: a call inside a loop over lanes stops its
 * vectorisation, and GCC's size limits would otherwise refuse some in a large kernel. */
#if defined(__OPENCL_VERSION__) || defined(__CUDACC__)
#define ACCEL_UFN ACCEL_FN
#else
#define ACCEL_UFN ACCEL_FN __attribute__((always_inline))
#endif

/* Accel.Nx.Compiler's max and min reductions keep this many lanes: 64 on the host (a flat loop
 * of picks that vectorises), 8 on a device (each work item's lanes are its registers). */
#if defined(__OPENCL_VERSION__) || defined(__CUDACC__)
#define ACCEL_NX_PICK_LANES 8
#else
#define ACCEL_NX_PICK_LANES 64
#endif

/* A software prefetch of the cache line at `p` for reading (Accel.Nx.Compiler's row regions fetch
 * the next row while computing over this one): the host's; nothing on a device. */
#if defined(__OPENCL_VERSION__) || defined(__CUDACC__)
#define ACCEL_NX_PREFETCH(p) ((void)0)
#else
#define ACCEL_NX_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#endif

/* Accel.Nx.Compiler's select of floats: a's bits where `take_a`, else b's, through a mask (both are
 * values already computed). Compilers vectorise it as a blend, where from a conditional GCC 12 made
 * a path for each branch through the reduction after it, with a constant branch (a causal mask's
 * -1e9) folded into each; the mask is a statement of its own, as written inline GCC folds the
 * expression back into the conditional. */
ACCEL_UFN float accel_f32_blend(int take_a, float a, float b) {
  const accel_u32 m = (accel_u32)0 - (accel_u32)(take_a != 0);
  return accel_bits_f32((accel_f32_bits(a) & m) | (accel_f32_bits(b) & ~m));
}
#if ACCEL_HAS_F64
ACCEL_UFN double accel_f64_blend(int take_a, double a, double b) {
  const accel_u64 m = (accel_u64)0 - (accel_u64)(take_a != 0);
  return accel_bits_f64((accel_f64_bits(a) & m) | (accel_f64_bits(b) & ~m));
}
#endif

/* The output's flag (many elements may raise it at once), and a double from its bits. */
#if defined(__OPENCL_VERSION__)
#define ACCEL_GLOBAL __global
#define ACCEL_USER_FLAG(flag) (*(flag) = 1)
#define ACCEL_USER_ELEMENT ACCEL_FN
#define accel_f64_of(bits) as_double((ulong)(bits))
#define ACCEL_STOPPED() 0
#elif defined(__CUDACC__)
#define ACCEL_GLOBAL
#define ACCEL_USER_FLAG(flag) (*(flag) = 1)
#define ACCEL_USER_ELEMENT ACCEL_FN
#define ACCEL_STOPPED() 0
ACCEL_UFN double accel_f64_of(accel_u64 b) {
  union { accel_u64 u; double f; } v;
  v.u = b;
  return v.f;
}
#else
#define ACCEL_GLOBAL
#define ACCEL_USER_FLAG(flag) __atomic_store_n((flag), 1, __ATOMIC_RELAXED) /* threads may race */
/* Whether the call was abandoned (its caller exited): loops ask every 2^16 iterations, so that no
 * element holds a core after its caller is gone (a device kernel cannot be stopped this way; on
 * the host it can). The CPU backend passes its poll after the last buffer (core/source_kernel.hpp);
 * the entry point keeps it for its thread. */
typedef struct accel_stop {
  int (*poll)(const void* ctx);
  const void* ctx;
} accel_stop;
static __thread const accel_stop* accel_stop_now __attribute__((unused)) = 0;
#define ACCEL_STOPPED() (accel_stop_now != 0 && accel_stop_now->poll(accel_stop_now->ctx))
/* The host runs ACCEL_LANES elements in lockstep (enough independent vectors to hide each
 * operation's latency), each run of statements a loop over the lanes, and, built for baseline
 * x86-64, builds its entry point for the x86-64 levels too, picked at load time by the CPU it finds
 * (GCC's target_clones): 4- and 8-wide doubles, vroundpd, 64-bit integer <-> double conversions. */
#define ACCEL_LANES 32
/* kept a loop (not unrolled first), so that GCC's loop vectoriser takes it whole */
#define ACCEL_LANE _Pragma("GCC unroll 1") for (int l = 0; l < ACCEL_LANES; ++l)
/* inlined into each of the entry point's clones, so that they are built for its target too */
#define ACCEL_USER_ELEMENT ACCEL_FN __attribute__((always_inline))
/* The clones only where the kernel is built for baseline x86-64: Accel.Kernel.Native builds it with
 * -march= the CPU backend's own level where that is x86-64-v3 or v4 (__AVX2__ is then defined), and
 * three clones of the same loops there would triple the compiler's work for code never picked (a
 * level capped by ACCEL_HOST_ISA is then honoured too). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && !defined(__AVX2__)
#define ACCEL_USER_HOST __attribute__((visibility("default"), target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ACCEL_USER_HOST __attribute__((visibility("default")))
#endif
/* The entry point's C linkage: Accel.Kernel.Native compiles generated kernels as C (GCC reads the
 * C headers in a fifth of the time it takes for C++'s <cmath>), a C++ test includes them as C++. */
#ifdef __cplusplus
#define ACCEL_USER_EXTERN extern "C"
#else
#define ACCEL_USER_EXTERN
#endif
ACCEL_UFN double accel_f64_of(accel_u64 b) {
  double f;
  __builtin_memcpy(&f, &b, sizeof f);
  return f;
}
#endif
#define ACCEL_F64_MAX 1.7976931348623157e308

/* A resumable loop's saved words (see the Elixir compiler's emit_resumable): a double's bits
 * (accel_f64_bits, kernels/dialect.h), and the mark (its low 16 bits) of an element that has
 * finished. */
#define ACCEL_RESUME_DONE 0xFFFFUL

/* The high half of a signed 64x64-bit product (from the 128-bit product where the dialect says
 * so: ACCEL_CL_WIDE_MUL in kernels/dialect.h). */
#if defined(__OPENCL_VERSION__) && !ACCEL_CL_WIDE_MUL
#define accel_mulhi_i64(a, b) mul_hi((accel_i64)(a), (accel_i64)(b))
#elif defined(__CUDA_ARCH__)
#define accel_mulhi_i64(a, b) __mul64hi((long long)(a), (long long)(b))
#else
ACCEL_UFN accel_i64 accel_mulhi_i64(accel_i64 a, accel_i64 b) { return (accel_i64)(((__int128)a * b) >> 64); }
#endif

ACCEL_UFN accel_i64 accel_add(accel_i64 a, accel_i64 b, int* bad) {
  accel_i64 r = (accel_i64)((accel_u64)a + (accel_u64)b);
  *bad |= ((a ^ r) & (b ^ r)) < 0;
  return r;
}

ACCEL_UFN accel_i64 accel_sub(accel_i64 a, accel_i64 b, int* bad) {
  accel_i64 r = (accel_i64)((accel_u64)a - (accel_u64)b);
  *bad |= ((a ^ b) & (a ^ r)) < 0;
  return r;
}

ACCEL_UFN accel_i64 accel_mul(accel_i64 a, accel_i64 b, int* bad) {
  accel_i64 r = (accel_i64)((accel_u64)a * (accel_u64)b);
  *bad |= accel_mulhi_i64(a, b) != (r >> 63);
  return r;
}

ACCEL_UFN accel_i64 accel_neg(accel_i64 a, int* bad) {
  *bad |= a == ACCEL_I64_MIN;
  return (accel_i64)((accel_u64)0 - (accel_u64)a);
}

ACCEL_UFN accel_i64 accel_abs(accel_i64 a, int* bad) { return a < 0 ? accel_neg(a, bad) : a; }

/* div/2 and rem/2: truncated, the remainder taking the dividend's sign. */
ACCEL_UFN accel_i64 accel_div(accel_i64 a, accel_i64 b, int* bad) {
  if (b == 0) {
    *bad = 1;
    return 0;
  }
  if (b == -1) return accel_neg(a, bad);
  return a / b;
}

ACCEL_UFN accel_i64 accel_rem(accel_i64 a, accel_i64 b, int* bad) {
  if (b == 0) {
    *bad = 1;
    return 0;
  }
  return b == -1 ? 0 : a % b;
}

/* Division by a divisor d that is the same for every element of a call, through its magic number
 * (Hacker's Delight 10-1; computed on the host by Accel.Kernel.Magic): m, the shift s and adj,
 * which is +1 (add a), -1 (subtract a) or 0. d in {-1, 0, 1} takes the plain path. */
ACCEL_UFN accel_i64 accel_div_magic(accel_i64 a, accel_i64 d, accel_i64 m, accel_i64 s, accel_i64 adj, int* bad) {
  if ((accel_u64)d + 1 <= 2) return accel_div(a, d, bad);
  accel_i64 q = (accel_i64)((accel_u64)accel_mulhi_i64(m, a) + (accel_u64)adj * (accel_u64)a);
  q >>= s;
  return q + (accel_i64)((accel_u64)q >> 63);
}

ACCEL_UFN accel_i64 accel_rem_magic(accel_i64 a, accel_i64 d, accel_i64 m, accel_i64 s, accel_i64 adj, int* bad) {
  if ((accel_u64)d + 1 <= 2) return accel_rem(a, d, bad);
  accel_i64 q = accel_div_magic(a, d, m, s, adj, bad);
  return (accel_i64)((accel_u64)a - (accel_u64)q * (accel_u64)d);
}

/* Bitwise.bsl/2 and bsr/2 for any shift count: a negative count shifts the other way; a result
 * beyond 64 bits is a bignum (bad). */
ACCEL_UFN accel_i64 accel_bsr_by(accel_i64 a, accel_u64 n) { return n >= 64 ? (a < 0 ? -1 : 0) : a >> n; }

ACCEL_UFN accel_i64 accel_bsl_by(accel_i64 a, accel_u64 n, int* bad) {
  if (a == 0) return 0;
  if (n >= 64) {
    *bad = 1;
    return 0;
  }
  accel_i64 r = (accel_i64)((accel_u64)a << n);
  *bad |= (r >> n) != a;
  return r;
}

ACCEL_UFN accel_i64 accel_bsl(accel_i64 a, accel_i64 n, int* bad) {
  if (n >= 0) return accel_bsl_by(a, (accel_u64)n, bad);
  return accel_bsr_by(a, (accel_u64)0 - (accel_u64)n);
}

ACCEL_UFN accel_i64 accel_bsr(accel_i64 a, accel_i64 n, int* bad) {
  if (n >= 0) return accel_bsr_by(a, (accel_u64)n);
  return accel_bsl_by(a, (accel_u64)0 - (accel_u64)n, bad);
}

#if ACCEL_HAS_F64
/* Every float result Elixir keeps is finite: an infinity or NaN is an ArithmeticError there. */
ACCEL_UFN double accel_fin(double x, int* bad) {
  *bad |= !(fabs(x) <= ACCEL_F64_MAX);
  return x;
}

/* A float that must become an integer (trunc/round/floor/ceil of a float): beyond 64 bits it is a
 * bignum. x is integral here. */
ACCEL_UFN accel_i64 accel_f2i(double x, int* bad) {
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0)) {
    *bad = 1;
    return 0;
  }
  return (accel_i64)x;
}

/* Round to the nearest integer, ties to even, for any double. On OpenCL, ACCEL_RINT's 2^52 trick
 * holds only below 2^51 and PoCL's rint() is a call that stops vectorisation: the trick is applied
 * with the sign of x (exact below 2^52, and every double from 2^52 up is an integer). Where the
 * compiler proves |x| < 2^51, the helpers below take plain ACCEL_RINT (`small`, a literal that
 * folds away): on PoCL the sign's selects and the magnitude test cost a doubles loop 15%. */
#if defined(__OPENCL_VERSION__)
ACCEL_UFN double accel_rint(double x) {
  const double c = x < 0 ? -4503599627370496.0 : 4503599627370496.0;
  return fabs(x) < 4503599627370496.0 ? (x + c) - c : x;
}
#else
#define accel_rint(x) ACCEL_RINT(x)
#endif
#define accel_quotient(x, small) ((small) ? ACCEL_RINT(x) : accel_rint(x))

/* rem/2 and div/2 of integers held exactly in doubles, for |a| + |b| <= 2^53 (the compiler proves
 * it from value ranges), through inv, the double nearest 1 / b: vectorisable where 64-bit integer
 * division and multiply-high are not. b is not 0: the compiler tests it first (a zero divisor
 * raises the element's flag; where the divisor is the same for every element, once for them all).
 * a * inv is a / b to within e, where e < 0.5 for every b: for |b| >= 5, e < 2 / |b| (two
 * roundings of relative 2^-53 on a quotient below 2^53 / |b|); for |b| in {1, 2, 4}, e = 0 (1 / b
 * and the product are exact); for |b| = 3, e < 1/4 + 1/6 (the product's rounding, half a unit in
 * the last place of a quotient below 2^52, and 1 / 3's, relative 2^-54). So q, the integer
 * nearest a * inv, leaves |a - q * b| <= |b| (0.5 + e) < |b|. q * b and a - q * b are integers
 * within 2^53, hence exact; a remainder in (-|b|, |b|) takes one correction to Elixir's, which has
 * the dividend's sign and |r| < |b|. `small`: 1 where |a| < 2^51, so that |a * inv| is too. */
ACCEL_UFN double accel_rem_f(double a, double b, double inv, int small) {
  const double mag = fabs(b), s = a < 0 ? -1.0 : 1.0;
  const double rs = (a - accel_quotient(a * inv, small) * b) * s; /* the remainder, sign-normalised: want 0 <= rs < |b| */
  return (rs < 0 ? rs + mag : rs) * s;
}

/* accel_rem_f for a dividend the compiler proved non-negative: no sign to carry. */
ACCEL_UFN double accel_rem_fp(double a, double b, double inv, int small) {
  const double r = a - accel_quotient(a * inv, small) * b;
  return r < 0 ? r + fabs(b) : r;
}

ACCEL_UFN double accel_div_f(double a, double b, double inv, int small) {
  const double s = a < 0 ? -1.0 : 1.0, step = s * (b < 0 ? -1.0 : 1.0);
  const double q = accel_quotient(a * inv, small);
  return (a - q * b) * s < 0 ? q - step : q;
}

/* rem/2 and div/2 of 64-bit integers, |a| <= 2^62 and 0 < |b| <= 2^53, in two rounds of the
 * reciprocal: what the CPU's lanes run, since 64-bit conversions and multiplies vectorise
 * (AVX-512DQ) where a multiply-high does not. Round one: (double)a * inv is a / b to within
 * 1537 / |b| (three roundings of relative 2^-53 on a quotient below 2^62 / |b|), so
 * r1 = a - q1 * b has |r1| <= |b| / 2 + 1537 < 2^53, exact as a double. Round two: r1 * inv is
 * r1 / b to within |r1 / b| 2^-52 (1 + 2^-52), so |r1 - q2 * b| <= |b| / 2 + |r1| 2^-52 (1 + 2^-52),
 * below |b| / 2 + 1.01 and so below |b| for |b| >= 3; for |b| <= 2, inv and the product are exact
 * and it is at most |b| / 2. The products wrap in 64 bits, but their differences are small and
 * exact. One correction then gives Elixir's remainder, as in accel_rem_f. */
ACCEL_UFN accel_i64 accel_rem_w_(accel_i64 a, accel_i64 b, double inv, accel_i64* q) {
  /* rounded in a double first: GCC folds (int64)rint(x) into lrint(x), which does not vectorise */
  const double q1d = accel_rint((double)a * inv);
  const accel_i64 q1 = (accel_i64)q1d;
  const accel_i64 r1 = (accel_i64)((accel_u64)a - (accel_u64)q1 * (accel_u64)b);
  const double q2d = accel_rint((double)r1 * inv);
  const accel_i64 q2 = (accel_i64)q2d;
  *q = q1 + q2;
  return (accel_i64)((accel_u64)r1 - (accel_u64)q2 * (accel_u64)b);
}

ACCEL_UFN accel_i64 accel_rem_w(accel_i64 a, accel_i64 b, double inv) {
  accel_i64 q;
  const accel_i64 mag = b < 0 ? -b : b, s = a < 0 ? -1 : 1;
  const accel_i64 rs = accel_rem_w_(a, b, inv, &q) * s;
  return (rs < 0 ? rs + mag : rs) * s;
}

ACCEL_UFN accel_i64 accel_div_w(accel_i64 a, accel_i64 b, double inv) {
  accel_i64 q;
  const accel_i64 s = a < 0 ? -1 : 1, step = b < 0 ? -s : s;
  return accel_rem_w_(a, b, inv, &q) * s < 0 ? q - step : q;
}

/* Integer against float, exactly, as the BEAM compares them: -1, 0 or 1. */
ACCEL_UFN int accel_cmp_if(accel_i64 i, double d) {
  if (d >= 9223372036854775808.0) return -1;
  if (d < -9223372036854775808.0) return 1;
  accel_i64 t = (accel_i64)d; /* d truncated: in range, and exact as a double */
  if (i != t) return i < t ? -1 : 1;
  double frac = d - (double)t;
  return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}
#endif

#endif /* ACCEL_KERNELS_USER_H */
