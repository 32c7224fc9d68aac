defmodule Accel.Test.NxDoctests do
  @moduledoc false
  # The Nx doctests that do not run with Accel.Nx.Backend as the default backend, each with its
  # reason (test/nx/doctest_test.exs run the rest, per device).

  # Not about a backend's results: prints and sets the default backend itself.
  @unrelated [default_backend: 1]

  # f32 math in single precision on the device: the result is within 1 ulp of the example's,
  # which Nx.BinaryBackend computes in f64 and rounds (test/nx/backend_test.exs checks every
  # unary function against it within f32 tolerance).
  @f32_rounding [atanh: 1, cosh: 1, erfc: 1, expm1: 1, sigmoid: 1]

  # PoCL's f32 sin, cos, tan and atan2 differ from the examples by 1 ulp as well.
  @pocl_rounding [atan2: 2, cos: 1, sin: 1, tan: 1]

  # Nx 0.8+ gives f64 examples too: glibc's f64 cbrt and log1p, and PoCL's f64 exp, acos, atan and
  # sinh, are 1 ulp from the binary backend's Erlang :math (the same check covers them).
  @f64_rounding_cpu [cbrt: 1, log1p: 1]
  @f64_rounding_pocl [exp: 1, acos: 1, atan: 1, sinh: 1]

  def excluded(:cpu), do: @unrelated ++ @f32_rounding ++ since_nx_08(@f64_rounding_cpu)
  def excluded(:opencl), do: excluded(:cpu) ++ @pocl_rounding ++ since_nx_08(@f64_rounding_pocl)

  defp since_nx_08(list) do
    if Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0"), do: list, else: []
  end

  # Nx.Defn and Nx.Defn.Kernel with Accel.Nx.Compiler as the default compiler
  # (test/nx/compiler_doctest_test.exs).
  def excluded_defn(_device), do: []
  def excluded_defn_kernel(_device), do: []
end
