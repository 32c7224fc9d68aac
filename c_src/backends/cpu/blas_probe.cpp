// accel_blas_probe: prints the name of the kernels OpenBLAS picks for this CPU (its "core"),
// then exits. Accel.NIF runs it before the NIF, and OpenBLAS with it, load: OpenBLAS picks its
// kernels once, as it loads, and a release older than the CPU takes a CPU it does not know for
// a generic x86-64 one (see lib/accel/nif.ex). Linked to the same OpenBLAS as the NIF, under the
// same environment, it picks what the NIF's would.
#include <cblas.h>

#include <cstdio>

int main() {
  std::printf("%s\n", openblas_get_corename());
  return 0;
}
