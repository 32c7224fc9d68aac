defmodule Accel.Kernel.Native do
  @moduledoc false
  # A generated kernel's native code, cached on disk (CuPy's kernel cache is the model):
  #   * for :cpu, its text compiled by the system's C compiler into a shared object, loaded by
  #     the NIF (kernel_load);
  #   * for :cuda, its text compiled by NVRTC for the GPU's architecture (a cubin), loaded by the
  #     CUDA backend once per device.
  # The cache is
  #   * keyed by a hash of the text, the compiler's path and version, the flags and the target
  #     (the machine's or the GPU's architecture), so a new compiler or Accel version never loads
  #     stale code;
  #   * written atomically: compiled under a unique temporary name, checksummed, then renamed into
  #     place; a reader verifies the checksum and rebuilds a file that does not match it;
  #   * shared by the user's VMs; Accel.Kernel.clear_cache/0 empties it;
  #   * private: made with mode 0700, and refused (Accel.Error :unsafe_cache) where another user
  #     owns it or may write into it, as ssh refuses such a key directory: a shared object found
  #     there runs inside the VM. Files in it that another user could have written are rebuilt.
  #     Precompiled kernels (an application's priv/accel_kernels) are held to the same rule.
  # The C compiler runs as an external program (a port): the calling process waits in `receive`,
  # holding no scheduler, normal or dirty. NVRTC runs in the NIF, on a dirty CPU scheduler.

  # Generated texts are C (kernels/dialect.h's host dialect is C and C++), compiled as C (`-x c`),
  # which halves a kernel's first build (GCC: 0.31 s against 0.59 s for a softmax region, most of
  # C++'s spent reading <cmath>), by a C compiler's driver where there is one: a C++ driver links
  # libstdc++ into each kernel too (GCC's: 85-92 ms against 69-76 ms for a softmax region).
  @base_flags ~w(-x c -std=gnu11 -O3 -fPIC -shared -fno-math-errno -fno-trapping-math -ffp-contract=off -fno-plt)
  # glibc's vector math library, which kernels/tensor.h's f32 functions call through their SIMD
  # variants (x86-64 glibc: libc6-dev's libmvec.so); where it is not, the header is told so
  @libmvec ["/usr/lib/x86_64-linux-gnu/libmvec.so", "/usr/lib64/libmvec.so", "/usr/lib/libmvec.so"]

  @doc """
  The loaded library for compiled kernel text `source`: loaded once per VM, from `app`'s
  precompiled kernels (`priv/accel_kernels`, see Accel.Kernel.Precompile) where they hold it, else
  from the cache, compiled when the cache lacks it.
  """
  def library(key, source, app \\ nil),
    do:
      remembered(key, fn ->
        Accel.NIF.kernel_load(precompiled(source, app) || ensure_built(source), "accel_user")
      end)

  @doc """
  Builds Accel.Nx.Compiler's kernels `members` (`[{key, source}]`: generated texts, each defining
  `accel_nx_at` and `accel_user` only) into one shared object, each pair renamed by a `#define`
  (`accel_user_<i>`), and loads each as `library/3` would: one compiler run for a compiled
  function's regions rather than one per region, so the header is read, the compiler started and
  the object linked once (the 14 regions of an MLP training step: 0.68 s against 1.79 s one by
  one). Cached on disk as one text. Members this VM has loaded already are left out. Returns the
  shared object's path, or `:loaded` where it built none. `background: true` runs the compiler
  at the lowest priority (`nice -n 19`, where there is `nice`), so that it yields the cores to the
  calls that run meanwhile (on a 2-core machine a GELU MLP's unfused first call took 96-158 ms
  beside the build, 89-97 ms with the build held back a second: within that machine's noise).
  """
  def build_together(members, opts \\ []) do
    build = &ensure_built(&1, Keyword.get(opts, :background, false))

    case unloaded(members) do
      [] ->
        :loaded

      [{key, source}] ->
        path = build.(source)
        remembered(key, fn -> Accel.NIF.kernel_load(path, "accel_user") end)
        path

      todo ->
        path = todo |> together() |> build.()

        for {{key, _}, i} <- Enum.with_index(todo),
            do: remembered(key, fn -> Accel.NIF.kernel_load(path, "accel_user_#{i}") end)

        path
    end
  end

  @doc """
  Whether `build_together/2` would find `members` without running the compiler: each loaded in
  this VM, or the shared object it would build in the cache.
  """
  def built_together?(members) do
    case unloaded(members) do
      [] -> true
      [{_key, source}] -> built?(source)
      todo -> todo |> together() |> built?()
    end
  end

  defp unloaded(members), do: members |> Enum.uniq_by(&elem(&1, 0)) |> Enum.reject(&loaded?(elem(&1, 0)))

  # one text of several members, each pair renamed by a #define (accel_user_<i>)
  defp together(members) do
    members
    |> Enum.with_index()
    |> Enum.map_join(fn {{_key, source}, i} ->
      "#define accel_nx_at accel_nx_at_#{i}\n#define accel_user accel_user_#{i}\n" <>
        source <> "\n#undef accel_nx_at\n#undef accel_user\n"
    end)
  end

  defp loaded?(key), do: :persistent_term.get({__MODULE__, key}, :none) != :none

  @doc "The path of the shared object for `source`, compiling it when the cache lacks a valid one."
  def ensure_built(source, background \\ false) do
    {cc, version} = compiler!()
    cached(cache_dir(), cache_id(source, cc, version), ".so", &compile(cc, source, &1, background))
  end

  # Whether the cache holds a valid shared object for `source`. Asks no compiler for its version
  # (a process start): where the cache does not hold it, the compiler never built anything there.
  defp built?(source) do
    with {cc, version} <- :persistent_term.get({__MODULE__, :compiler}, nil) || known_compiler(),
         do: valid?(Path.join(cache_dir(), cache_id(source, cc, version) <> ".so")),
         else: (_ -> false)
  end

  defp known_compiler do
    with cc when is_binary(cc) <- compiler_path(),
         {:ok, version} <- File.read(version_file(cc)),
         do: {cc, version},
         else: (_ -> nil)
  end

  defp cache_id(source, cc, version),
    do: hash([source, cc, version, Enum.join(flags(), " "), :erlang.system_info(:system_architecture)])

  @doc """
  Compiles `source` into `dir` (an application's priv/accel_kernels, when it compiles), named by
  the text, the flags and the architecture only: a release finds it with no compiler to ask.
  """
  def precompile(source, dir) do
    {cc, _version} = compiler!()
    # readable by the user a release runs as, writable by its builder only
    cached(dir, precompiled_id(source), ".so", &compile(cc, source, &1, false), 0o755)
  end

  defp precompiled(_source, nil), do: nil

  defp precompiled(source, app) do
    with dir when is_list(dir) <- :code.priv_dir(app),
         dir = Path.join(List.to_string(dir), "accel_kernels"),
         true <- File.dir?(dir),
         :ok <- safe!(dir, :directory),
         file = Path.join(dir, precompiled_id(source) <> ".so"),
         true <- valid?(file),
         do: file,
         else: (_ -> nil)
  end

  # (the base flags and the instruction set only: a release without libc6-dev's libmvec.so must
  # find what its builder compiled, which needs only libc6's libmvec.so.1 to load; a release's
  # kernels built for AVX2 are not looked for on a CPU without it)
  defp precompiled_id(source),
    do: hash([source, Enum.join(@base_flags ++ isa_flags(), " "), :erlang.system_info(:system_architecture)])

  defp compile(cc, source, so, background) do
    cpp = so <> ".cpp"

    try do
      File.write!(cpp, source)

      {compile_flags, libs} = toolchain()
      args = compile_flags ++ ["-o", so, cpp] ++ libs
      nice = background && System.find_executable("nice")
      {command, args} = if nice, do: {nice, ["-n", "19", cc | args]}, else: {cc, args}

      case System.cmd(command, args, stderr_to_stdout: true) do
        {_, 0} ->
          :ok

        {output, status} ->
          raise Accel.Error,
            reason: :build_failed,
            message:
              "#{cc} failed (exit status #{status}) compiling a kernel:\n#{String.slice(output, 0, 4000)}"
      end
    after
      File.rm(cpp)
    end
  end

  @doc """
  NVRTC's code for `source` (kernel `entry`) on CUDA device `device` (a cubin for its architecture), from the disk
  cache or compiled; remembered for the VM's life. nil where the device does not exist (the launch
  then reports the backend unavailable, as every :cuda call does).
  """
  def cuda_code(key, source, device, entry) do
    case cuda_arch(device) do
      nil -> nil
      arch -> remembered({key, arch}, fn -> File.read!(cuda_built(source, arch, entry)) end)
    end
  end

  defp cuda_built(source, arch, entry) do
    version = remembered(:nvrtc, &Accel.NIF.cuda_kernel_compiler/0)
    # the NVRTC options are fixed in c_src/backends/cuda/nvrtc.cpp: their version is part of the key
    id = hash([source, entry, version, "nvrtc-options-1", Integer.to_string(arch)])

    cached(cache_dir(), id, ".cubin", fn out ->
      File.write!(out, elem(Accel.NIF.cuda_kernel_code(source, arch, entry), 0))
    end)
  end

  # Compute capability "9.0" -> 90, from the device list (asked once per device).
  defp cuda_arch(device) do
    remembered({:arch, device}, fn ->
      Enum.find_value(Accel.devices(), fn
        %Accel.Device{backend: :cuda, id: ^device, capability: c} when is_binary(c) ->
          [major, minor] = String.split(c, ".")
          String.to_integer(major) * 10 + String.to_integer(minor)

        _ ->
          nil
      end)
    end)
  end

  defp remembered(what, make) do
    case :persistent_term.get({__MODULE__, what}, :none) do
      :none ->
        value = make.()
        if value != nil, do: :persistent_term.put({__MODULE__, what}, value)
        value

      value ->
        value
    end
  end

  @doc "The directory compiled kernels are cached in."
  def cache_dir do
    Accel.Config.get!(:kernel_cache) || System.get_env("ACCEL_KERNEL_CACHE") ||
      Path.join(:filename.basedir(:user_cache, "accel"), "kernels")
  end

  # The cached file `id <> ext` in `dir`, made by `produce` (which writes the path it is given, or raises)
  # where the cache lacks a valid one.
  defp cached(dir, id, ext, produce, mode \\ 0o700) do
    private_dir!(dir, mode)
    file = Path.join(dir, id <> ext)
    if valid?(file), do: file, else: store(file, ext, produce)
  end

  # A file is used when it and its checksum are plain files no other user could have written, and
  # they agree.
  defp valid?(file) do
    with :ok <- safe_file(file),
         :ok <- safe_file(file <> ".sha256"),
         {:ok, bytes} <- File.read(file),
         {:ok, sum} <- File.read(file <> ".sha256") do
      hash(bytes) == String.trim(sum)
    else
      _ -> false
    end
  end

  defp safe_file(file) do
    case File.lstat(file) do
      {:ok, %File.Stat{type: :regular} = stat} -> if trusted?(stat), do: :ok, else: :unsafe
      _ -> :unsafe
    end
  end

  # The cache directory, created with `mode` (private: 0700) where it is missing; refused where
  # another user owns it or may write into it.
  defp private_dir!(dir, mode \\ 0o700) do
    existed = File.dir?(dir)

    case File.mkdir_p(dir) do
      :ok ->
        :ok

      {:error, why} ->
        raise Accel.Error,
          reason: :build_failed,
          message: "cannot create the kernel cache #{dir}: #{:file.format_error(why)}"
    end

    if not existed, do: File.chmod(dir, mode)
    safe!(dir, :directory)
  end

  defp safe!(dir, type) do
    case File.stat(dir) do
      {:ok, %File.Stat{type: ^type} = stat} ->
        if trusted?(stat),
          do: :ok,
          else: raise(Accel.Error, reason: :unsafe_cache, message: unsafe(dir, stat))

      {:ok, %File.Stat{type: other}} ->
        raise Accel.Error,
          reason: :unsafe_cache,
          message: "the kernel cache #{dir} is a #{other}, not a directory"

      {:error, why} ->
        raise Accel.Error,
          reason: :build_failed,
          message: "cannot read the kernel cache #{dir}: #{:file.format_error(why)}"
    end
  end

  # Owned by this user (or root) and writable by no one else.
  defp trusted?(%File.Stat{uid: uid, mode: mode}),
    do: uid in [own_uid(), 0] and Bitwise.band(mode, 0o022) == 0

  defp unsafe(dir, %File.Stat{uid: uid, mode: mode}) do
    why =
      if uid in [own_uid(), 0],
        do: "is writable by other users (mode #{Integer.to_string(Bitwise.band(mode, 0o777), 8)})",
        else: "belongs to another user (uid #{uid})"

    "the kernel cache #{dir} #{why}: Accel loads compiled kernels from it into the VM, so it must be " <>
      "private to you (chmod 700 #{dir}), or name another with config :accel, kernel_cache: or ACCEL_KERNEL_CACHE"
  end

  # This VM's user id: the owner of a file it creates (Erlang has no getuid).
  defp own_uid do
    remembered(:uid, fn ->
      probe = Path.join(System.tmp_dir!(), "accel-uid-#{System.unique_integer([:positive])}-#{:os.getpid()}")

      try do
        File.write!(probe, "")
        File.lstat!(probe).uid
      after
        File.rm(probe)
      end
    end)
  end

  defp store(file, ext, produce) do
    dir = Path.dirname(file)
    sweep(dir)
    tmp = Path.join(dir, "tmp-#{System.unique_integer([:positive])}-#{:os.getpid()}")

    try do
      produce.(tmp <> ext)
      File.write!(tmp <> ".sha256", hash(File.read!(tmp <> ext)))
      File.rename!(tmp <> ext, file)
      File.rename!(tmp <> ".sha256", file <> ".sha256")
      file
    after
      Enum.each([ext, ".sha256"], &File.rm(tmp <> &1))
    end
  end

  # A build's temporary files are removed when it ends, but not by a VM that stops during it (a
  # script's VM may end while a background build runs): once per VM and directory, before its
  # first build, temporary files over an hour old are removed.
  @stale_seconds 3600
  defp sweep(dir) do
    remembered({:swept, dir}, fn ->
      now = System.os_time(:second)

      for name <- File.ls!(dir),
          String.starts_with?(name, "tmp-"),
          path = Path.join(dir, name),
          {:ok, %File.Stat{type: :regular, mtime: mtime} = stat} <- [File.lstat(path, time: :posix)],
          trusted?(stat) and now - mtime > @stale_seconds,
          do: File.rm(path)

      true
    end)
  end

  # The compiler, and its version: the first of $ACCEL_CC, $ACCEL_CXX, $CC and $CXX that is set and
  # found, else the first of cc, gcc, clang, c++, g++, clang++ on the PATH (a C driver first: the
  # texts are C, and a C++ driver links libstdc++ into each).
  @compiler_variables ~w(ACCEL_CC ACCEL_CXX CC CXX)
  @compiler_names ~w(cc gcc clang c++ g++ clang++)
  defp compiler!, do: remembered(:compiler, &find_compiler/0)

  defp find_compiler do
    cc = compiler_path()

    if cc == nil do
      raise Accel.Error,
        reason: :no_compiler,
        message:
          "Accel.map on :cpu compiles its kernel with a C compiler (GCC's or Clang's driver), and none was found " <>
            "(looked for #{Enum.map_join(@compiler_variables, ", ", &("$" <> &1))}, #{Enum.join(@compiler_names, ", ")}); " <>
            "install one, or run the kernel on :opencl"
    end

    {cc, version(cc)}
  end

  defp compiler_path do
    (Enum.map(@compiler_variables, &System.get_env/1) ++ @compiler_names)
    |> Enum.find_value(fn
      nil -> nil
      "" -> nil
      name -> System.find_executable(name)
    end)
  end

  # `cc --version` costs a process start (~0.1 s): remembered in the cache, by the compiler's path,
  # size and modification time, so a VM that finds its kernels cached starts no process at all.
  defp version_file(cc) do
    stat = File.stat!(cc, time: :posix)
    Path.join(cache_dir(), "cc-" <> hash(:erlang.term_to_binary({cc, stat.size, stat.mtime})) <> ".version")
  end

  defp version(cc) do
    file = version_file(cc)

    case File.read(file) do
      {:ok, version} ->
        version

      {:error, _} ->
        {out, _} = System.cmd(cc, ["--version"], stderr_to_stdout: true)
        version = out |> String.split("\n") |> hd()
        tmp = file <> ".#{System.unique_integer([:positive])}"

        private_dir!(cache_dir())
        with :ok <- File.write(tmp, version), do: File.rename(tmp, file)

        version
    end
  end

  # {compiler flags, libraries after the source}, decided once per VM
  defp toolchain do
    case :persistent_term.get({__MODULE__, :toolchain}, nil) do
      nil ->
        flags = @base_flags ++ isa_flags()

        toolchain =
          if Enum.any?(@libmvec, &File.exists?/1),
            do: {flags, ["-lmvec", "-lm"]},
            else: {flags ++ ["-DACCEL_NO_VECTOR_LIBM=1"], ["-lm"]}

        :persistent_term.put({__MODULE__, :toolchain}, toolchain)
        toolchain

      toolchain ->
        toolchain
    end
  end

  defp flags, do: toolchain() |> Tuple.to_list() |> Enum.concat()

  # The instruction set the CPU backend's own kernels were built for and chose at load (AVX-512,
  # or AVX2 and FMA, where the CPU has them; ACCEL_HOST_ISA caps it): generated kernels target the
  # same. The flags are part of every cache key and precompiled name, so code built for one is
  # never loaded where another was chosen. (Asked of the CPU backend alone: discovering the OpenCL
  # and CUDA devices took 33-45 ms of a first compile.)
  defp isa_flags do
    case :persistent_term.get({__MODULE__, :isa_flags}, nil) do
      nil ->
        flags =
          case Accel.devices(:cpu) do
            [%Accel.Device{capability: isa} | _] when isa in ["x86-64-v3", "x86-64-v4"] -> ["-march=" <> isa]
            _ -> []
          end

        :persistent_term.put({__MODULE__, :isa_flags}, flags)
        flags

      flags ->
        flags
    end
  end

  defp hash(data), do: :crypto.hash(:sha256, data) |> Base.encode16(case: :lower)
end
