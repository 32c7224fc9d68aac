/* The registry of element types: the one list from which everything about a type is derived, in
 * every dialect (the type codes below, core's DType, the NIF's atoms, Accel.Tensor's types and
 * Accel.Nx.Storage's mapping of Nx types, which lib/accel/tensor/types.ex reads from this file).
 *
 * X(name, code, bytes, kind, computes_in). kind: FLOAT, INT (signed), UINT or COMPLEX.
 * computes_in: the type whose kernels compute on it. Compute types (codes below
 * ACCEL_COMPUTE_TYPES) have kernels of their own (tensor_kernels.h) and compute in themselves;
 * storage types are stored as themselves, converted (accel_convert) to the type they compute in
 * and back, which gives Nx's results: integers wrap in their width, f16 rounds to nearest even
 * and bf16 as Nx writes it (the f32 value's high half). Nx 0.9+'s sub-byte integers (s2, s4, u2,
 * u4) take a byte per element here, their values wrapped to their width (Accel.Nx.Storage packs
 * and unpacks Nx's bitstrings); f8 is E5M2 as Nx writes it (the f16 value's high byte), f8_e4m3fn
 * Nx's E4M3FN (saturating, no infinities). Complex types compute in none of the
 * registry's kernels: operations that move elements take them, complex products, quotients and
 * magnitudes have kernels of their own (accel_complex, tensor_kernels.h), and Accel.Nx.Complex
 * computes the rest on their parts. Codes are positions: append only. */
#ifndef ACCEL_KERNELS_TYPES_H
#define ACCEL_KERNELS_TYPES_H

#define ACCEL_TYPES(X)            \
  X(f32, 0, 4, FLOAT, f32)        \
  X(f64, 1, 8, FLOAT, f64)        \
  X(s64, 2, 8, INT, s64)          \
  X(s32, 3, 4, INT, s32)          \
  X(u8, 4, 1, UINT, u8)           \
  X(u64, 5, 8, UINT, u64)         \
  X(u32, 6, 4, UINT, u32)         \
  X(s8, 7, 1, INT, s32)           \
  X(s16, 8, 2, INT, s32)          \
  X(u16, 9, 2, UINT, s32)         \
  X(f16, 10, 2, FLOAT, f32)       \
  X(bf16, 11, 2, FLOAT, f32)      \
  X(c64, 12, 8, COMPLEX, c64)     \
  X(c128, 13, 16, COMPLEX, c128)  \
  X(s2, 14, 1, INT, s32)          \
  X(s4, 15, 1, INT, s32)          \
  X(u2, 16, 1, UINT, s32)         \
  X(u4, 17, 1, UINT, s32)         \
  X(f8, 18, 1, FLOAT, f32)        \
  X(f8_e4m3fn, 19, 1, FLOAT, f32)

#define ACCEL_TYPE_CODE(name, code, bytes, kind, computes_in) ACCEL_TYPE_##name = code,
enum { ACCEL_TYPES(ACCEL_TYPE_CODE) ACCEL_TYPE_COUNT };
#undef ACCEL_TYPE_CODE
/* Types with kernels of their own: the first ACCEL_COMPUTE_TYPES codes. */
#define ACCEL_COMPUTE_TYPES 7

/* The names the kernels use (tensor.h's, from before the registry). */
#define ACCEL_F32_TYPE ACCEL_TYPE_f32
#define ACCEL_F64_TYPE ACCEL_TYPE_f64
#define ACCEL_S64_TYPE ACCEL_TYPE_s64
#define ACCEL_S32_TYPE ACCEL_TYPE_s32
#define ACCEL_U8_TYPE ACCEL_TYPE_u8
#define ACCEL_U64_TYPE ACCEL_TYPE_u64
#define ACCEL_U32_TYPE ACCEL_TYPE_u32
#define ACCEL_S8_TYPE ACCEL_TYPE_s8
#define ACCEL_S16_TYPE ACCEL_TYPE_s16
#define ACCEL_U16_TYPE ACCEL_TYPE_u16
#define ACCEL_F16_TYPE ACCEL_TYPE_f16
#define ACCEL_BF16_TYPE ACCEL_TYPE_bf16
#define ACCEL_C64_TYPE ACCEL_TYPE_c64
#define ACCEL_C128_TYPE ACCEL_TYPE_c128
#define ACCEL_S2_TYPE ACCEL_TYPE_s2
#define ACCEL_S4_TYPE ACCEL_TYPE_s4
#define ACCEL_U2_TYPE ACCEL_TYPE_u2
#define ACCEL_U4_TYPE ACCEL_TYPE_u4
#define ACCEL_F8_TYPE ACCEL_TYPE_f8
#define ACCEL_F8E4M3FN_TYPE ACCEL_TYPE_f8_e4m3fn

#endif /* ACCEL_KERNELS_TYPES_H */
