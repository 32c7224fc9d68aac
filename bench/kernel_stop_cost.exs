# What stopping abandoned user kernels costs. Each kernel is compiled twice and both texts run over
# the same s64 input, round-robin, in one run; the tables give the medians and their ratio.
#   * CPU backend (2^24 elements): loops ask every 2^16 iterations whether their caller is gone
#     (kernels/user.h, ACCEL_STOPPED); compared with the same text, the poll removed.
#   * Devices (OpenCL, CUDA; 2^20 elements): loops that may run long run a bounded number of
#     iterations per launch and resume in the next (Accel.Kernel.Compiler, emit_resumable);
#     compared with the same kernel compiled to run in one launch.
# Kernels: the logistic map of bench/kernels.exs (10 iterations of a multiply and a remainder; on
# devices 300, the count captured as a caller's variable, which makes the loop resumable), and a
# loop whose body is one add (1,000 iterations), where the check's share is largest.
# Writes bench/results/kernel_stop_cost.md.
#
#   mix run bench/kernel_stop_cost.exs [--runs 9]
require Accel

Code.require_file("support/results.ex", __DIR__)

defmodule KernelStopCost do
  alias Accel.Bench.Results
  @n 16_777_216
  @poll ~r/\n[ \t]*if \(\(t\d+k & 0xFFFFUL\) == 0 && ACCEL_STOPPED\(\)\) \{ bad = 1; break; \}/

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer])
    runs = opts[:runs] || 9
    p = 6_700_417

    kernels = [
      {"logistic map (bench/kernels.exs)",
       Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, acc -> rem(22 * acc * (acc + 1), p) end) end)},
      {"1,000 adds", Accel.kernel(fn x -> Enum.reduce(1..1000, x, fn i, acc -> acc + i end) end)}
    ]

    input =
      Accel.Tensor.from_binary(Accel.logistic_map(1..@n, iterations: 0, as: :binary), :s64, backend: :cpu)

    rows =
      for {name, kernel} <- kernels do
        compiled = Accel.Kernel.Map.compiled(kernel, [:s64])
        without = Regex.replace(@poll, compiled.source, "")
        if without == compiled.source, do: raise("#{name}: no poll found in the kernel's text")
        with_poll = launcher(compiled, compiled.source, kernel, input)
        no_poll = launcher(compiled, without, kernel, input)
        if with_poll.() != no_poll.(), do: raise("#{name}: the two texts disagree")

        {a, b} =
          Enum.reduce(1..runs, {[], []}, fn _, {a, b} ->
            {[seconds(with_poll) | a], [seconds(no_poll) | b]}
          end)

        {name, median(a), median(b)}
      end

    iterations = 300

    device_kernels = [
      {"logistic map, 300 iterations captured",
       Accel.kernel(fn x -> Enum.reduce(1..iterations, x, fn _, acc -> rem(22 * acc * (acc + 1), p) end) end)},
      {"1,000 adds", Accel.kernel(fn x -> Enum.reduce(1..1000, x, fn i, acc -> acc + i end) end)}
    ]

    device_rows =
      for %{name: backend, available: true} <- Accel.backends(), backend != :cpu do
        {backend, device_rows(backend, device_kernels, runs)}
      end

    report = """
    ## The stop poll in user kernels' loops (CPU backend, #{@n} s64 elements)

    #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}. Median of #{runs} runs,
    round-robin; the same kernel compiled with and without the poll, results identical.

    | kernel | with the poll | without | cost |
    |---|---:|---:|---:|
    #{Enum.map_join(rows, "\n", fn {name, a, b} -> "| #{name} | #{ms(a)} | #{ms(b)} | #{pct(a, b)} |" end)}
    #{Enum.map_join(device_rows, "\n", &device_table/1)}
    """

    IO.puts(report)
    File.write!(Results.path("kernel_stop_cost.md"), report)
  end

  # A launch of `source` (the kernel's text, or a variant of it) over `input`, its result as a binary.
  defp launcher(compiled, source, kernel, input) do
    key = :crypto.hash(:sha256, source) |> Base.encode16(case: :lower) |> binary_part(0, 32)
    library = Accel.Kernel.Native.library(key, source)
    slots = Accel.Kernel.Compiler.slots(compiled, kernel.values, [nil])

    term =
      {key, source, compiled.uses_f64, library, [:s64], compiled.out_type,
       :binary.copy(<<8>>, length(compiled.slots)), "accel_user", true}

    run(term, compiled.out_type, input, @n, slots, {:cpu, 0})
  end

  # One launch of the kernel term over `input`'s n elements, its result as a binary.
  defp run(term, out_type, input, n, slots, {backend, device}) do
    fn ->
      {out, _flagged} =
        Accel.Tensor.allocate(
          &Accel.NIF.tensor_source_kernel(term, [input.ref], n, slots, backend, device, &1)
        )

      out = Accel.Tensor.wrap(out, {n}, out_type)
      bin = Accel.Tensor.to_binary(out)
      Accel.Tensor.free(out)
      bin
    end
  end

  @device_n 1_048_576

  # Each kernel compiled with resumable loops (as Accel.map runs it) and to run in one launch.
  defp device_rows(backend, kernels, runs) do
    device = Enum.find(Accel.devices(), &(&1.backend == backend)).id
    bin = Accel.logistic_map(1..@device_n, iterations: 0, as: :binary)
    input = Accel.Tensor.from_binary(bin, :s64, backend: backend, device: device)

    for {name, kernel} <- kernels do
      resumable = Accel.Kernel.Map.compiled(kernel, [:s64])
      one_launch = Accel.Kernel.Map.compiled(kernel, [:s64], resumable: false)
      if resumable.resume_words == 0, do: raise("#{name}: no resumable loop in the kernel")
      a = device_launcher(resumable, kernel, input, {backend, device})
      b = device_launcher(one_launch, kernel, input, {backend, device})
      if a.() != b.(), do: raise("#{name}: the two forms disagree on #{backend}")

      {ta, tb} = Enum.reduce(1..runs, {[], []}, fn _, {ta, tb} -> {[seconds(a) | ta], [seconds(b) | tb]} end)

      {name, median(ta), median(tb)}
    end
  end

  defp device_launcher(compiled, kernel, input, {backend, device}) do
    code =
      if backend == :cuda,
        do: Accel.Kernel.Native.cuda_code(compiled.key, compiled.source, device, "accel_user")

    slots = Accel.Kernel.Compiler.slots(compiled, kernel.values, [nil])

    term =
      {compiled.key, compiled.source, compiled.uses_f64, code, [:s64], compiled.out_type,
       :binary.copy(<<8>>, length(compiled.slots)), "accel_user", true, nil, compiled.resume_words}

    run(term, compiled.out_type, input, @device_n, slots, {backend, device})
  end

  defp device_table({backend, rows}) do
    """

    ## Bounded, resumable launches of user kernels' loops (#{backend}, #{@device_n} s64 elements)

    The same kernel compiled with resumable loops (launches of about 40 ms, each resuming where the
    last stopped) and to run in one launch, results identical.

    | kernel | resumable | one launch | cost |
    |---|---:|---:|---:|
    #{Enum.map_join(rows, "\n", fn {name, a, b} -> "| #{name} | #{ms(a)} | #{ms(b)} | #{pct(a, b)} |" end)}
    """
  end

  defp seconds(fun) do
    {us, _} = :timer.tc(fun)
    us / 1.0e6
  end

  defp median(values), do: Accel.Timing.summarize(values).median
  defp ms(s), do: "#{:erlang.float_to_binary(s * 1000, decimals: 1)} ms"
  defp pct(a, b), do: "#{:erlang.float_to_binary((a / b - 1) * 100, decimals: 1)}%"
end

KernelStopCost.main(System.argv())
