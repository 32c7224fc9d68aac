defmodule Mix.Tasks.Compile.AccelCmake do
  @moduledoc """
  Builds Accel's NIF (`priv/accel_nif.so`) with CMake. Loaded by `mix.exs` rather than compiled from
  `lib/`, because Mix runs compilers before it compiles the project's own modules.

  Configures once into `_build/<env>/native` (again when the checkout was copied or moved, or the
  warnings setting changed), printing CMake's summary of the enabled backends, then lets CMake
  decide what is stale. Warnings are
  errors when `CI` or `ACCEL_WERROR` is set. `ACCEL_CMAKE_ARGS` adds CMake arguments at configure time
  (e.g. `ACCEL_CMAKE_ARGS="-DACCEL_CUDA_ARCHITECTURES=90"`); delete `_build/<env>/native` to apply
  new ones to an existing build.
  """
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    build_dir = build_dir()

    with :ok <- ensure_cmake(),
         :ok <- configure(build_dir),
         {:ok, output} <- cmake(["--build", build_dir, "--target", "accel_nif", "--parallel"]) do
      if output =~ "Building CXX", do: Mix.shell().info("Compiled Accel NIF (#{build_dir})")
      {:ok, []}
    else
      {:error, message} ->
        Mix.shell().error(message)

        {:error,
         [
           %Mix.Task.Compiler.Diagnostic{
             compiler_name: "accel_cmake",
             file: Path.expand("CMakeLists.txt"),
             message: "the native build failed (see above)",
             position: nil,
             severity: :error
           }
         ]}
    end
  end

  @impl true
  def clean do
    File.rm_rf!(build_dir())
    File.rm(Path.join("priv", "accel_nif.so"))
    File.rm(Path.join("priv", "accel_opencl.so"))
    :ok
  end

  defp build_dir, do: Path.join(Mix.Project.build_path(), "native")

  defp ensure_cmake do
    if System.find_executable("cmake"),
      do: :ok,
      else: {:error, "cmake is not installed: run bin/setup (installs it from Debian's packages)"}
  end

  defp configure(build_dir) do
    werror = System.get_env("CI") in ["true", "1"] or System.get_env("ACCEL_WERROR") in ["true", "1"]

    args =
      [
        "-S",
        File.cwd!(),
        "-B",
        build_dir,
        "-DCMAKE_BUILD_TYPE=Release",
        "-DACCEL_PRIV_DIR=#{Path.expand("priv")}",
        "-DERTS_INCLUDE_DIR=#{erts_include_dir()}",
        "-DACCEL_WERROR=#{if werror, do: "ON", else: "OFF"}"
      ] ++ OptionParser.split(System.get_env("ACCEL_CMAKE_ARGS", ""))

    case configure_needed(build_dir, File.cwd!(), werror) do
      nil ->
        :ok

      reason ->
        # A cache made for another source or build directory (a copied or moved checkout) would
        # build the original's code, and CMake refuses to reuse it: start afresh.
        if reason == :moved, do: File.rm_rf!(build_dir)

        with {:ok, output} <- cmake(args) do
          for line <- String.split(output, "\n"),
              String.starts_with?(line, "-- Accel:"),
              do: Mix.shell().info(String.trim_leading(line, "-- "))

          :ok
        end
    end
  end

  @doc false
  # Why the build directory must be configured (:missing, :moved, :werror), or nil.
  def configure_needed(build_dir, source_dir, werror) do
    cache_path = Path.join(build_dir, "CMakeCache.txt")

    with {:ok, cache} <- File.read(cache_path) do
      cached = fn key -> Regex.run(~r/^#{key}:INTERNAL=(.*)$/m, cache, capture: :all_but_first) end

      cond do
        cached.("CMAKE_HOME_DIRECTORY") != [Path.expand(source_dir)] -> :moved
        cached.("CMAKE_CACHEFILE_DIR") != [Path.expand(build_dir)] -> :moved
        cache =~ "ACCEL_WERROR:BOOL=ON" != werror -> :werror
        true -> nil
      end
    else
      _ -> :missing
    end
  end

  defp erts_include_dir do
    Path.join([:code.root_dir(), "erts-#{:erlang.system_info(:version)}", "include"])
  end

  defp cmake(args) do
    case System.cmd("cmake", args, stderr_to_stdout: true) do
      {output, 0} -> {:ok, output}
      {output, status} -> {:error, "cmake #{Enum.join(args, " ")} exited with #{status}:\n#{output}"}
    end
  end
end
