# User kernels (Accel.kernel/1 + Accel.map/3) against Accel's hand-written equivalents, same run,
# same backend, rows timed round-robin (each run times every row once), results checked identical:
#   * the original workload written as an Elixir function (10 iterations via Enum.reduce, p
#     captured) against Accel.logistic_map/2, 2^25 s64 binary in and out;
#   * saxpy and sigmoid(a*x + b) on :f32 tensors against the built-in tensor operations;
#   * the first call's cost: lowering is done at compile time, so it is specialisation plus the
#     device compile (g++ into an empty cache on :cpu, the OpenCL build), and the first call in a
#     second VM, which finds the CPU kernel in the disk cache.
# Writes bench/results/kernels.md (kernels_N.md for another --elements N, kernels_TAG.md with --tag).
#
#   mix run bench/kernels.exs [--runs 5] [--elements N] [--tag TAG]
require Accel

Code.require_file("support/results.ex", __DIR__)

defmodule KernelBench do
  alias Accel.Bench.Results

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, elements: :integer, tag: :string])
    n = opts[:elements] || 0x2000000
    runs = opts[:runs] || 5
    backends = for %{name: b, available: true} <- Accel.backends(), b in [:cpu, :opencl, :cuda], do: b
    cache = Path.join(System.tmp_dir!(), "accel-kernel-bench-#{System.unique_integer([:positive])}")
    Application.put_env(:accel, :kernel_cache, cache)

    first = first_calls(backends, cache)
    logistic = logistic_rows(backends, n, runs)
    tensors = tensor_rows(backends, div(n, 4), runs)
    File.rm_rf!(cache)

    report = """
    ## The logistic map as an Elixir kernel: #{n} s64 elements, binary in and out

    `Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, acc -> rem(22 * acc * (acc + 1), p) end) end)`
    with `p = 6_700_417` captured, against `Accel.logistic_map/2`. Median of #{runs} runs, rows
    round-robin; results identical.

    | backend | kernel, median s | logistic_map, median s | kernel / logistic_map |
    |---|---:|---:|---:|
    #{logistic}

    ## f32 tensors: #{div(n, 4)} elements, already on the device

    | backend | operation | kernel, median s | built-in tensor ops, median s | kernel / built-in |
    |---|---|---:|---:|---:|
    #{tensors}

    ## First calls

    Lowering happens when the calling code compiles; the first call specialises the kernel and
    compiles it for the device. A second VM loads the CPU kernel from the disk cache.

    | backend | first call, empty cache | later calls | first call in a second VM |
    |---|---:|---:|---:|
    #{first}
    """

    IO.puts(report)

    name =
      cond do
        opts[:tag] -> "kernels_#{opts[:tag]}.md"
        n == 0x2000000 -> "kernels.md"
        true -> "kernels_#{n}.md"
      end

    path = Results.path(name)
    File.write!(path, "# Accel.Kernel benchmark\n\n" <> report)
    IO.puts("wrote #{path}")
  end

  defp logistic_kernel do
    p = 6_700_417
    Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, acc -> rem(22 * acc * (acc + 1), p) end) end)
  end

  defp logistic_rows(backends, n, runs) do
    bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
    k = logistic_kernel()

    Enum.map_join(backends, "\n", fn b ->
      rows = [
        kernel: fn -> Accel.map(bin, k, backend: b) end,
        builtin: fn -> Accel.logistic_map(bin, backend: b) end
      ]

      check!(rows, "logistic map on #{b}")
      m = medians(rows, runs)
      "| #{b} | #{f(m[:kernel])} | #{f(m[:builtin])} | #{Float.round(m[:kernel] / m[:builtin], 2)}x |"
    end)
  end

  defp tensor_rows(backends, n, runs) do
    saxpy = Accel.kernel(fn x, y -> 2.5 * x + y end)
    sigmoid = Accel.kernel(fn x -> 1.0 / (1.0 + :math.exp(-(0.5 * x + 0.25))) end)
    alias Accel.Tensor, as: T

    Enum.map_join(backends, "\n", fn b ->
      xs = T.iota({n}, type: :f32, backend: b) |> T.multiply(1.0e-6)
      ys = T.iota({n}, type: :f32, backend: b) |> T.multiply(-2.0e-6)

      rows = [
        {"saxpy 2.5 * x + y", fn -> Accel.map({xs, ys}, saxpy) end,
         fn -> xs |> T.multiply(2.5) |> T.add(ys) end},
        {"sigmoid(0.5 * x + 0.25)", fn -> Accel.map(xs, sigmoid) end,
         fn -> xs |> T.multiply(0.5) |> T.add(0.25) |> T.sigmoid() end}
      ]

      Enum.map_join(rows, "\n", fn {name, kernel, builtin} ->
        close!(kernel.(), builtin.(), "#{name} on #{b}")
        m = medians([kernel: fn -> sync(kernel.()) end, builtin: fn -> sync(builtin.()) end], runs)

        "| #{b} | #{name} | #{f(m[:kernel])} | #{f(m[:builtin])} | #{Float.round(m[:kernel] / m[:builtin], 2)}x |"
      end)
    end)
  end

  # A tensor's work is done when its first element can be read.
  defp sync(t), do: Accel.Tensor.slice(t, [0], [1]) |> Accel.Tensor.to_binary()

  # The kernel computes in doubles and rounds once; the built-in operations round after each step:
  # equal within a few f32 ulps.
  defp close!(a, b, what) do
    as = for <<x::float-native-32 <- Accel.Tensor.to_binary(a)>>, do: x
    bs = for <<x::float-native-32 <- Accel.Tensor.to_binary(b)>>, do: x
    worst = Enum.zip(as, bs) |> Enum.map(fn {x, y} -> abs(x - y) / max(abs(y), 1.0e-30) end) |> Enum.max()
    worst <= 1.0e-6 || raise "#{what}: kernel and built-in differ by #{worst} relative"
  end

  defp first_calls(backends, cache) do
    Enum.map_join(backends, "\n", fn b ->
      bin = Accel.logistic_map(1..4096, iterations: 0, as: :binary, backend: :cpu)
      # a kernel no other row has used: its first call compiles
      k = Accel.kernel(fn x -> rem(x * 31 + 7, 1_000_003) end)
      {cold, _} = :timer.tc(fn -> Accel.map(bin, k, backend: b) end)
      {warm, _} = :timer.tc(fn -> Accel.map(bin, k, backend: b) end)
      second = if b == :cpu, do: f(second_vm(cache) / 1.0e6), else: "n/a (built per VM)"
      "| #{b} | #{f(cold / 1.0e6)} | #{f(warm / 1.0e6)} | #{second} |"
    end)
  end

  # The same kernel's first call in a fresh VM sharing the cache.
  defp second_vm(cache) do
    code = """
    require Accel
    bin = Accel.logistic_map(1..4096, iterations: 0, as: :binary, backend: :cpu)
    k = Accel.kernel(fn x -> rem(x * 31 + 7, 1_000_003) end)
    {us, _} = :timer.tc(fn -> Accel.map(bin, k, backend: :cpu) end)
    IO.puts("first_call_us=\#{us}")
    """

    {out, 0} =
      System.cmd("mix", ["run", "--no-compile", "-e", code],
        env: [{"ACCEL_KERNEL_CACHE", cache}],
        stderr_to_stdout: true
      )

    [_, us] = Regex.run(~r/first_call_us=(\d+)/, out)
    String.to_integer(us)
  end

  defp check!(rows, what) do
    [a | rest] = Enum.map(rows, fn {_, fun} -> fun.() end)
    Enum.all?(rest, &(&1 == a)) || raise "#{what}: results differ"
  end

  defp medians(rows, runs) do
    samples =
      for _ <- 1..runs, {name, fun} <- rows, reduce: %{} do
        acc ->
          {us, _} = :timer.tc(fun)
          Map.update(acc, name, [us / 1.0e6], &[us / 1.0e6 | &1])
      end

    Map.new(samples, fn {name, s} -> {name, s |> Enum.sort() |> Enum.at(div(length(s), 2))} end)
  end

  defp f(s), do: :erlang.float_to_binary(s, decimals: 3)
end

KernelBench.main(System.argv())
