# Nx's own test suite run against Accel (bin/nx-suite): required by test/test_helper.exs when
# ACCEL_NX_SUITE names a copy of Nx's test/ folder (made by bin/nx-suite; the test files are Nx's,
# unchanged). This file stands in for Nx's test_helper.exs: it loads Nx's test support modules,
# makes Accel the global default backend (and Accel.Nx.Compiler the global defn compiler with
# --compiler), leaves out the tests listed in exclusions.exs (each with its reason), and counts
# every test per file into ACCEL_NX_SUITE_REPORT (report.exs turns the counts into a table).
device = System.get_env("ACCEL_NX_SUITE_DEVICE", "cpu") |> String.to_atom()
mode = if System.get_env("ACCEL_NX_SUITE_COMPILER") in ["1", "true"], do: :compiler, else: :backend
nx = Application.spec(:nx, :vsn) |> to_string()

Code.require_file("harness.ex", __DIR__)
{exclusions, _} = Code.eval_file("exclusions.exs", __DIR__)

# the binary backend's run is the baseline: nothing excluded
excluded =
  for %{test: name, reason: reason} = e <- exclusions,
      device != :binary,
      Accel.Test.NxSuite.applies?(e, nx: nx, device: device, mode: mode) do
    {name, reason}
  end

# Nx's test_helper.exs: assert_receive's timeout, and no second and third node (:distributed
# tests start peers that would need Accel's NIF on their code path: they test Nx's distribution,
# not a backend's results)
ExUnit.configure(
  assert_receive_timeout: 1000,
  exclude: [:distributed | Enum.map(excluded, fn {name, _} -> {:test, name} end)],
  formatters: [ExUnit.CLIFormatter, Accel.Test.NxSuite.Counter]
)

Application.put_env(:accel, :nx_suite, %{
  report: System.get_env("ACCEL_NX_SUITE_REPORT"),
  run: %{nx: nx, device: device, mode: mode},
  exclusions: Map.new(excluded)
})

# device binary: Nx.BinaryBackend and Nx.Defn.Evaluator, the baseline Accel is held to (through
# the same harness)
if device == :binary do
  Nx.global_default_backend(Nx.BinaryBackend)
else
  Nx.global_default_backend({Accel.Nx.Backend, device: device})

  if mode == :compiler,
    do: Nx.Defn.global_default_options(compiler: Accel.Nx.Compiler, device: device)
end

IO.puts(
  "Nx #{nx}'s suite on Accel: device #{device}, #{mode}, #{map_size(Map.new(excluded))} tests excluded (test/nx_suite/exclusions.exs)"
)
