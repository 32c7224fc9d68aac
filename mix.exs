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
    [extra_applications: [:logger, :crypto]]
  end

  # Flow is optional, declared the way Mix projects declare it: a project that depends on Flow gets
  # Accel.Flow, since Mix then compiles Flow before Accel. Accel's own scripts (bin/) also run where
  # hex is unreachable: there, without deps/flow, they set ACCEL_WITHOUT_FLOW=1, which drops the
  # declaration (`mix deps.get` first makes them run against Flow).
  defp deps do
    if System.get_env("ACCEL_WITHOUT_FLOW") in ["1", "true"],
      do: [],
      else: [{:flow, "~> 1.2", optional: true}]
  end
end
