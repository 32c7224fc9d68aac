/* OpenCL entry point for the logistic map. The build prepends kernels/dialect.h and
 * kernels/logistic_map.h (cmake/embed_opencl.cmake), so the math is the CPU backend's, unchanged.
 * data holds n int64s updated in place, or receives a range first + i * step generated here.
 * use_f64 selects the f64 path (built only with -DACCEL_FP64=1); its constants come as bit patterns
 * so the signature is the same on devices without doubles. */
__kernel void accel_logistic_map(__global long* data, const ulong n, const long first, const long step,
                                 const int from_range, const ulong p, const ulong mu_mod, const ulong barrett,
                                 const long mu_neg, const long mu_small, const long int_fast, const long iterations,
                                 const int use_f64, const ulong f64_p, const ulong f64_inv_p, const ulong f64_mu) {
  const size_t i = get_global_id(0);
  if (i >= n) return;
  accel_lm_params c;
  c.p = p;
  c.mu_mod = mu_mod;
  c.barrett = barrett;
  c.mu_neg = mu_neg;
  c.mu_small = mu_small;
  c.int_fast = int_fast;
  const long x = from_range ? (long)((ulong)first + (ulong)i * (ulong)step) : data[i];
#if ACCEL_HAS_F64
  if (use_f64) {
    accel_lm_f64 f;
    f.p = as_double(f64_p);
    f.inv_p = as_double(f64_inv_p);
    f.mu = as_double(f64_mu);
    data[i] = accel_lm_iterate_f64(x, iterations, c, f);
    return;
  }
#endif
  data[i] = accel_lm_iterate(x, iterations, c);
}
