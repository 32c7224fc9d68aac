defmodule Accel.Kernel.Native do
  @moduledoc false
  # A generated kernel's CPU code: its text compiled by the system's C++ compiler into a shared
  # object, cached on disk and loaded by the NIF (kernel_load). The cache (CuPy's kernel cache is
  # the model):
  #   * keyed by a hash of the text, the compiler's path and version, the flags and the machine's
  #     architecture, so a new compiler or Accel version never loads stale code;
  #   * written atomically: compiled under a unique temporary name, checksummed, then renamed into
  #     place; a reader verifies the checksum and rebuilds a file that does not match it;
  #   * shared by every VM on the machine; Accel.Kernel.clear_cache/0 empties it.
  # The compiler runs as an external program (a port): the calling process waits in `receive`,
  # holding no scheduler, normal or dirty.

  @flags ~w(-x c++ -std=c++17 -O3 -fPIC -shared -fno-math-errno -fno-trapping-math -ffp-contract=off -fno-plt)

  @doc "The loaded library for compiled kernel text `source`: loaded once per VM."
  def library(key, source) do
    case :persistent_term.get({__MODULE__, key}, nil) do
      nil ->
        lib = Accel.NIF.kernel_load(ensure_built(source))
        :persistent_term.put({__MODULE__, key}, lib)
        lib

      lib ->
        lib
    end
  end

  @doc "The path of the shared object for `source`, compiling it when the cache lacks a valid one."
  def ensure_built(source) do
    {cc, version} = compiler!()
    id = hash([source, cc, version, Enum.join(@flags, " "), :erlang.system_info(:system_architecture)])
    dir = cache_dir()
    so = Path.join(dir, id <> ".so")

    if valid?(so), do: so, else: build(cc, source, dir, so)
  end

  @doc "The directory compiled kernels are cached in."
  def cache_dir do
    Accel.Config.get!(:kernel_cache) || System.get_env("ACCEL_KERNEL_CACHE") ||
      Path.join(:filename.basedir(:user_cache, "accel"), "kernels")
  end

  defp valid?(so) do
    with {:ok, bytes} <- File.read(so), {:ok, sum} <- File.read(so <> ".sha256") do
      hash(bytes) == String.trim(sum)
    else
      _ -> false
    end
  end

  defp build(cc, source, dir, so) do
    case File.mkdir_p(dir) do
      :ok ->
        :ok

      {:error, why} ->
        raise Accel.Error,
          reason: :build_failed,
          message: "cannot create the kernel cache #{dir}: #{:file.format_error(why)}"
    end

    tmp = Path.join(dir, "tmp-#{System.unique_integer([:positive])}-#{:os.getpid()}")

    try do
      File.write!(tmp <> ".cpp", source)

      case System.cmd(cc, @flags ++ ["-o", tmp <> ".so", tmp <> ".cpp"], stderr_to_stdout: true) do
        {_, 0} ->
          File.write!(tmp <> ".sha256", hash(File.read!(tmp <> ".so")))
          File.rename!(tmp <> ".so", so)
          File.rename!(tmp <> ".sha256", so <> ".sha256")
          so

        {output, status} ->
          raise Accel.Error,
            reason: :build_failed,
            message:
              "#{cc} failed (exit status #{status}) compiling a kernel:\n#{String.slice(output, 0, 4000)}"
      end
    after
      Enum.each([".cpp", ".so", ".sha256"], &File.rm(tmp <> &1))
    end
  end

  # The compiler: $ACCEL_CXX, $CXX, else the first of c++, g++, clang++ on the PATH; and its version.
  defp compiler! do
    case :persistent_term.get({__MODULE__, :compiler}, nil) do
      nil ->
        found = find_compiler()
        :persistent_term.put({__MODULE__, :compiler}, found)
        found

      found ->
        found
    end
  end

  defp find_compiler do
    candidates = [System.get_env("ACCEL_CXX"), System.get_env("CXX"), "c++", "g++", "clang++"]

    cc =
      Enum.find_value(candidates, fn
        nil -> nil
        "" -> nil
        name -> System.find_executable(name)
      end)

    if cc == nil do
      raise Accel.Error,
        reason: :no_compiler,
        message:
          "Accel.map on :cpu compiles its kernel with a C++17 compiler, and none was found " <>
            "(looked for $ACCEL_CXX, $CXX, c++, g++, clang++); install one, or run the kernel on :opencl"
    end

    {cc, version(cc)}
  end

  # `cc --version` costs a process start (~0.1 s): remembered in the cache, by the compiler's path,
  # size and modification time, so a VM that finds its kernels cached starts no process at all.
  defp version(cc) do
    stat = File.stat!(cc, time: :posix)

    file =
      Path.join(cache_dir(), "cc-" <> hash(:erlang.term_to_binary({cc, stat.size, stat.mtime})) <> ".version")

    case File.read(file) do
      {:ok, version} ->
        version

      {:error, _} ->
        {out, _} = System.cmd(cc, ["--version"], stderr_to_stdout: true)
        version = out |> String.split("\n") |> hd()
        tmp = file <> ".#{System.unique_integer([:positive])}"

        with :ok <- File.mkdir_p(cache_dir()), :ok <- File.write(tmp, version), do: File.rename(tmp, file)

        version
    end
  end

  defp hash(data), do: :crypto.hash(:sha256, data) |> Base.encode16(case: :lower)
end
