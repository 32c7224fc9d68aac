defmodule Accel.Test.NxDoctests do
  @moduledoc false
  # The Nx doctests that do not run with Accel.Nx.Backend as the default backend, each with its
  # reason (test/nx/doctest_test.exs run the rest, per device).

  # Not about a backend's results: prints and sets the default backend itself.
  @unrelated [default_backend: 1]

  # Nx 0.8+ gives f64 examples too, an ulp from the device's f64 functions: the binary backend
  # computes cbrt as :math.pow(x, 1 / 3) and log1p as :math.log(1 + x), an ulp from the C
  # library's correctly rounded cbrt and log1p, and PoCL's f64 exp, expm1, acos, atan, atanh, sin,
  # sinh, tan and erfc are 1 to 3 ulp from Erlang's (test/nx/backend_test.exs checks them within
  # f64 tolerance).
  @f64_rounding_cpu [cbrt: 1, log1p: 1]
  @f64_rounding_pocl [exp: 1, expm1: 1, acos: 1, atan: 1, atanh: 1, sin: 1, sinh: 1, tan: 1, erfc: 1]

  # f32 functions compute in f64 and round, as the examples' binary backend does (guides/nx.md):
  # none of the f32 examples is excluded.
  def excluded(:cpu), do: @unrelated ++ since_nx_08(@f64_rounding_cpu)
  def excluded(:opencl), do: excluded(:cpu) ++ since_nx_08(@f64_rounding_pocl)

  defp since_nx_08(list) do
    if Version.match?(to_string(Application.spec(:nx, :vsn)), ">= 0.8.0"), do: list, else: []
  end

  # Nx.Defn and Nx.Defn.Kernel with Accel.Nx.Compiler as the default compiler
  # (test/nx/compiler_doctest_test.exs).
  def excluded_defn(_device), do: []
  def excluded_defn_kernel(_device), do: []
end
