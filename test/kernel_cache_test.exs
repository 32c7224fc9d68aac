defmodule Accel.KernelCacheTest.Precompiled do
  # Kernels whose CPU code is compiled with this file, into priv/accel_kernels.
  require Accel

  def step(p), do: Accel.kernel(fn x -> rem(23 * x * (x + 1), p) end, precompile: [[:s64], [:s32]])
  def scaled(s), do: Accel.kernel(fn x -> x * s - 1.5 end, precompile: [{[:f64], s: :float}])
end

defmodule Accel.KernelCacheTest do
  # The CPU kernel cache (Accel.Kernel.Native): checksummed files, a damaged one rebuilt, cleared
  # on request, and a clear error without a compiler. Not async: it swaps the cache directory and
  # the compiler, which every CPU kernel of the VM uses.
  use ExUnit.Case, async: false
  require Accel

  setup do
    dir = Path.join(System.tmp_dir!(), "accel-cache-test-#{System.unique_integer([:positive])}")
    previous = Application.get_env(:accel, :kernel_cache)
    Application.put_env(:accel, :kernel_cache, dir)

    on_exit(fn ->
      Application.put_env(:accel, :kernel_cache, previous)
      File.rm_rf!(dir)
    end)

    %{dir: dir}
  end

  defp source(n) do
    k = Accel.kernel(fn x -> x * 3 + n end)
    Accel.Kernel.Compiler.compile(k.ir, [{:s64, :buffer}], [{:int, 8}], "test").source
  end

  test "a kernel is compiled once into the cache, with its checksum, and found there", %{dir: dir} do
    so = Accel.Kernel.Native.ensure_built(source(1))
    assert Path.dirname(so) == dir
    sum = File.read!(so <> ".sha256")
    assert sum == :crypto.hash(:sha256, File.read!(so)) |> Base.encode16(case: :lower)
    %{mtime: built} = File.stat!(so, time: :posix)
    assert Accel.Kernel.Native.ensure_built(source(1)) == so
    assert File.stat!(so, time: :posix).mtime == built
    # no temporary files left behind
    assert dir |> File.ls!() |> Enum.reject(&String.starts_with?(&1, "cc-")) |> Enum.sort() ==
             Enum.sort([Path.basename(so), Path.basename(so) <> ".sha256"])
  end

  test "a build removes temporary files over an hour old, which a VM stopped during a build left", %{dir: dir} do
    File.mkdir_p!(dir)
    File.chmod!(dir, 0o700)
    stale = Path.join(dir, "tmp-1-99999.so")
    recent = Path.join(dir, "tmp-2-99999.so.cpp")
    File.write!(stale, "half a shared object")
    File.write!(recent, "a build under way")
    File.touch!(stale, System.os_time(:second) - 7200)
    Accel.Kernel.Native.ensure_built(source(7))
    refute File.exists?(stale)
    assert File.exists?(recent)
  end

  test "a damaged file fails its checksum and is rebuilt, not loaded" do
    so = Accel.Kernel.Native.ensure_built(source(2))
    good = File.read!(so)
    File.write!(so, binary_part(good, 0, div(byte_size(good), 2)))
    assert Accel.Kernel.Native.ensure_built(source(2)) == so
    rebuilt = File.read!(so)
    assert byte_size(rebuilt) == byte_size(good)
    assert File.read!(so <> ".sha256") == :crypto.hash(:sha256, rebuilt) |> Base.encode16(case: :lower)
  end

  test "the cache is made private to the user", %{dir: dir} do
    Accel.Kernel.Native.ensure_built(source(4))
    assert Bitwise.band(File.stat!(dir).mode, 0o777) == 0o700
  end

  test "a cache other users may write into is refused, naming it", %{dir: dir} do
    File.mkdir_p!(dir)
    File.chmod!(dir, 0o777)
    e = assert_raise Accel.Error, fn -> Accel.Kernel.Native.ensure_built(source(5)) end
    assert e.reason == :unsafe_cache
    assert e.message =~ "the kernel cache #{dir} is writable by other users (mode 777)"
    # and so is a kernel run on :cpu
    k = Accel.kernel(fn x -> x * 5 + 1 end)
    assert_raise Accel.Error, ~r/writable by other users/, fn -> Accel.map([1, 2], k, backend: :cpu) end
    File.chmod!(dir, 0o755)
    assert Accel.map([1, 2], k, backend: :cpu) == [6, 11]
  end

  # chown needs root (as the CI machines run); elsewhere it is refused and the test checks nothing more
  test "a cache another user owns is refused", %{dir: dir} do
    File.mkdir_p!(dir)
    File.chmod!(dir, 0o700)

    case File.chown(dir, 65_534) do
      :ok ->
        e = assert_raise Accel.Error, fn -> Accel.Kernel.Native.ensure_built(source(6)) end
        assert e.message =~ "the kernel cache #{dir} belongs to another user (uid 65534)"

      {:error, :eperm} ->
        :ok
    end
  end

  test "a cached file another user could have written is rebuilt, not loaded" do
    so = Accel.Kernel.Native.ensure_built(source(7))
    File.chmod!(so, 0o666)
    %{inode: planted} = File.stat!(so)
    assert Accel.Kernel.Native.ensure_built(source(7)) == so
    rebuilt = File.stat!(so)
    assert rebuilt.inode != planted
    assert Bitwise.band(rebuilt.mode, 0o022) == 0
  end

  test "clear_cache/0 removes every compiled kernel", %{dir: dir} do
    Accel.Kernel.Native.ensure_built(source(3))
    assert Accel.Kernel.clear_cache() >= 2
    assert File.ls!(dir) == []
  end

  # Runs `fun` as a machine without a C compiler would: none on the PATH, none named, none
  # remembered.
  defp without_compiler(fun) do
    key = {Accel.Kernel.Native, :compiler}
    saved = :persistent_term.get(key, nil)
    path = System.get_env("PATH")
    env = for v <- ["ACCEL_CC", "ACCEL_CXX", "CC", "CXX"], do: {v, System.get_env(v)}

    try do
      :persistent_term.erase(key)
      System.put_env("PATH", "/nonexistent")
      Enum.each(env, fn {v, _} -> System.delete_env(v) end)
      fun.()
    after
      System.put_env("PATH", path)
      Enum.each(env, fn {v, value} -> if value, do: System.put_env(v, value) end)
      if saved, do: :persistent_term.put(key, saved), else: :persistent_term.erase(key)
    end
  end

  test "without a compiler, a CPU kernel says so" do
    without_compiler(fn ->
      e = assert_raise Accel.Error, fn -> Accel.Kernel.Native.ensure_built(source(4)) end
      assert e.reason == :no_compiler
      assert e.message =~ "none was found"
    end)
  end

  # What a release sees: no compiler on the PATH. Precompiled signatures run from priv; anything
  # else needs the compiler, and says so.
  test "precompiled kernels run with no compiler, from the application's priv", %{dir: dir} do
    alias Accel.KernelCacheTest.Precompiled
    priv = Path.join(:code.priv_dir(:accel), "accel_kernels")
    assert length(Path.wildcard(Path.join(priv, "*.so"))) >= 3

    without_compiler(fn ->
      xs = [0, 1, -7, 6_700_416, 0x7FFFFFFFFFFFFFFF, -0x8000000000000000]
      bin = for x <- xs, into: <<>>, do: <<x::signed-native-64>>
      expected = Enum.map(xs, &rem(23 * &1 * (&1 + 1), 6_700_417))
      assert Accel.map(bin, Precompiled.step(6_700_417), backend: :cpu, as: :list) == expected
      # another divisor: the same code, which takes any 64-bit capture
      assert Accel.map(xs, Precompiled.step(-3), backend: :cpu) == Enum.map(xs, &rem(23 * &1 * (&1 + 1), -3))
      s32 = for x <- [5, -0x80000000], into: <<>>, do: <<x::signed-native-32>>
      want = Enum.map([5, -0x80000000], &rem(23 * &1 * (&1 + 1), 7))
      assert Accel.map(s32, Precompiled.step(7), backend: :cpu, type: :s32, as: :list) == want
      assert Accel.map([1.0, -2.5], Precompiled.scaled(2.0), backend: :cpu) == [0.5, -6.5]
      # nothing compiled at run time
      assert Path.wildcard(Path.join(dir, "*.so")) == []

      # a signature not precompiled (a range input) needs the compiler
      e = assert_raise Accel.Error, fn -> Accel.map(1..3, Precompiled.step(7), backend: :cpu) end
      assert e.reason == :no_compiler
    end)
  end

  test "precompile: signatures are checked when the kernel compiles" do
    for {opts, message} <- [
          {"precompile: [[:s64, :s64]]", "must name 1 input type(s)"},
          {"precompile: [[:f16]]", "must name 1 input type(s) among"},
          {"precompile: [{[:s64], q: :float}]", "captures no variable :q"},
          {"precompile: [{[:s64], p: :complex}]", "capture p is :complex"},
          {"precompile: :s64", "takes a list of signatures"},
          {"precompile: [[:s64]]", "[s64: :buffer]: "},
          {"fast: true", "takes one option, precompile:"}
        ] do
      # a value of two types: refused when the kernel is specialised, as it is precompiled
      code = "require Accel\np = 3\nAccel.kernel(fn x -> if x > p, do: x, else: 2.5 end, #{opts})"
      e = assert_raise CompileError, fn -> Code.compile_string(code, "precompile_source.ex") end
      assert Exception.message(e) =~ message
    end
  end

  test "a compiler error is an Accel.Error carrying the compiler's output" do
    e = assert_raise Accel.Error, fn -> Accel.Kernel.Native.ensure_built("this is not C++") end
    assert e.reason == :build_failed
    assert e.message =~ "failed (exit status"
  end
end
