Code.require_file("mix/compile_cmake.exs", __DIR__)

defmodule Accel.MixProject do
  use Mix.Project

  def project do
    [
      app: :accel,
      version: "0.1.0",
      elixir: "~> 1.14",
      compilers: [:accel_cmake] ++ Mix.compilers(),
      start_permanent: Mix.env() == :prod,
      deps: deps(),
      elixirc_paths: if(Mix.env() == :test, do: ["lib", "test/support"], else: ["lib"]),
      elixirc_options: [warnings_as_errors: System.get_env("CI") in ["true", "1"]],
      description: "Data-parallel kernels for the BEAM on the CPU, OpenCL and CUDA, through a C++17 NIF",
      test_coverage: [ignore_modules: [Mix.Tasks.Compile.AccelCmake]]
    ]
  end

  def application do
    [extra_applications: [:logger]]
  end

  # Flow is optional and, like every hex package, unreachable on our build machines: declare it only
  # when asked (ACCEL_FLOW=1) so that a project using Flow compiles it before Accel.Flow.
  defp deps do
    if System.get_env("ACCEL_FLOW") in ["1", "true"], do: [{:flow, "~> 1.2", optional: true}], else: []
  end
end
