# Device tests are tagged by backend and excluded, with the reason printed, where the backend is not
# usable on this machine.
unavailable =
  for %{name: name, available: false, detail: detail} <- Accel.backends() do
    IO.puts("Excluding tests tagged #{inspect(name)}: #{detail}")
    name
  end

# NVRTC compiles :cuda kernels without a driver: its tests run wherever the toolkit's libnvrtc is.
no_nvrtc =
  try do
    Accel.NIF.cuda_kernel_compiler()
    []
  rescue
    e ->
      IO.puts("Excluding tests tagged :nvrtc: #{Exception.message(e)}")
      [:nvrtc]
  end

# Tests that compare the CPU backend with PoCL (an OpenCL device on the same cores, much slower).
no_pocl =
  if Enum.any?(Accel.devices(), &(&1.backend == :opencl and &1.type == :cpu)) do
    []
  else
    IO.puts("Excluding tests tagged :pocl: no OpenCL device on the host's CPU")
    [:pocl]
  end

# PropEr (Debian's erlang-proper, installed by bin/setup) drives the property tests.
# Elixir 1.15+ keeps only the project's applications on the code path: PropEr (an OTP library of
# the system's) is added where it is installed.
if function_exported?(Mix, :ensure_application!, 1) do
  try do
    Mix.ensure_application!(:proper)
  rescue
    _ -> :ok
  end
end

no_proper =
  if Code.ensure_loaded?(:proper) do
    []
  else
    IO.puts("Excluding tests tagged :proper: PropEr is not installed (bin/setup installs erlang-proper)")
    [:proper]
  end

# A test's time limit, 300 s rather than ExUnit's 60: every OpenCL test shares one PoCL device
# (one queue), and with cold kernel caches (CI's fresh clone) a test waits there behind the other
# async tests' kernel compiles: types_test's OpenCL integer test took 13.5 s alone and over 60 s
# in a CI run, programs_test's CNN step 29.5 s and over 60. Limits here catch hangs; speed is
# measured in bench/.
ExUnit.start(exclude: unavailable ++ no_nvrtc ++ no_pocl ++ no_proper, timeout: 300_000)

# Compiled CPU kernels (Accel.Kernel) go to a cache inside the build, not the user's cache.
Application.put_env(:accel, :kernel_cache, Path.join(Mix.Project.build_path(), "kernel_cache"))

# Accel.Nx.Compiler builds a function's fused kernels before its first call (rather than running
# the first calls unfused while they build, its default): every test's first call runs the kernels
# it compiled. compiler_test.exs tests the default.
Application.put_env(:accel, :nx_build, :wait)

# Nx (an optional dependency): its tests run where it was built (mix.exs, bin/hexdeps), with
# tensors inspected as Nx's own doctests print them (no device line).
if Code.ensure_loaded?(Nx) do
  {:ok, _} = Application.ensure_all_started(:nx)
  Application.put_env(:accel, :nx_inspect_device, false)
else
  IO.puts("Excluding the Nx tests: Nx was not built (see mix.exs)")
end

# Accel.Nx.Backend logs each fallback to Nx.BinaryBackend at debug level: not in the suite's output.
Logger.configure(level: :info)

# bin/nx-suite: Nx's own test suite against Accel (test/nx_suite/setup.exs stands in for Nx's
# test_helper.exs).
if System.get_env("ACCEL_NX_SUITE"), do: Code.require_file("nx_suite/setup.exs", __DIR__)
