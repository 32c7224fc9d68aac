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
      # Nx's own suite (bin/nx-suite) derives Nx's protocols for structs its test files define, as
      # Nx's mix.exs allows in its test environment
      consolidate_protocols: System.get_env("ACCEL_NX_SUITE") == nil,
      # PropEr (Debian's erlang-proper, bin/setup) generates the property tests' cases: an OTP
      # library of the system's, not a dependency
      xref: [exclude: [:proper, :proper_types, :proper_arith]],
      description: "Data-parallel kernels for the BEAM on the CPU, OpenCL and CUDA, through a C++17 NIF",
      test_coverage: [ignore_modules: [Mix.Tasks.Compile.AccelCmake]],
      docs: docs()
    ]
  end

  # `mix docs` (ex_doc, a dev dependency where hex is reachable): the README, the guides as
  # chapters, the benchmarks' tables (which the guides link to), the modules grouped; internal
  # modules carry `@moduledoc false`.
  defp docs do
    [
      main: "readme",
      extras:
        ["README.md", "guides/first_steps.livemd"] ++
          Enum.map(
            ~w(backends kernels tensors nx placement pipelines reliability benchmarks contributing),
            &"guides/#{&1}.md"
          ) ++ ["RELIABILITY.md" | Path.wildcard("bench/results/*.md")],
      groups_for_extras: [
        Guides: ~r/guides\//,
        Reliability: ["RELIABILITY.md"],
        "Benchmark results": ~r/bench\/results\//
      ],
      groups_for_modules: [
        "Public API": [Accel, Accel.Device, Accel.Error, Accel.Config, Accel.Crossing, Accel.Timing],
        Kernels: [Accel.Kernel, Accel.Kernel.Source],
        Tensors: [Accel.Tensor, Accel.Nx.Backend, Accel.Nx.Compiler],
        Pipelines: [Accel.Stream, Accel.Flow, Accel.Cluster, Accel.Dispatch],
        Placement: [Accel.Placement]
      ]
    ]
  end

  def application do
    [extra_applications: [:logger, :crypto]]
  end

  # Nx and Flow are optional, declared the way Mix projects declare them: a project that depends
  # on Nx gets Accel.Nx.Backend, one that depends on Flow gets Accel.Flow (Mix compiles them before
  # Accel). Where hex is unreachable (Accel's own CI), ACCEL_HEXDEPS names a folder holding their
  # sources (bin/hexdeps sets it to ../shared/hexdeps) and they become path dependencies;
  # ACCEL_HEXDEPS=none builds Accel without either.
  defp deps do
    case System.get_env("ACCEL_HEXDEPS") do
      nil ->
        [
          {:nx, "~> 0.7", optional: true},
          {:flow, "~> 1.2", optional: true},
          {:ex_doc, "~> 0.31", only: :dev, runtime: false, optional: true}
        ]

      "none" ->
        []

      dir ->
        [
          {:nx, path: Path.join(dir, "nx"), optional: true},
          {:flow, path: Path.join(dir, "flow"), optional: true}
        ]
    end
  end
end
