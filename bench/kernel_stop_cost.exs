# What the stop poll in user kernels' loops costs on the CPU backend (a loop asks every 2^16
# iterations whether its caller is gone: kernels/user.h, ACCEL_STOPPED). Each kernel's text is
# compiled twice, as generated and with the poll removed, and both run over the same 2^24-element
# s64 tensor, round-robin, in one run; the table gives the medians and their ratio.
#   * the logistic map of bench/kernels.exs (10 iterations of a multiply and a remainder);
#   * a loop whose body is one add (1,000 iterations), where the poll's share is largest.
# Writes bench/results/kernel_stop_cost.md.
#
#   mix run bench/kernel_stop_cost.exs [--runs 9]
require Accel

defmodule KernelStopCost do
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

    report = """
    ## The stop poll in user kernels' loops (CPU backend, #{@n} s64 elements)

    #{System.schedulers_online()} schedulers, OTP #{System.otp_release()}. Median of #{runs} runs,
    round-robin; the same kernel compiled with and without the poll, results identical.

    | kernel | with the poll | without | cost |
    |---|---:|---:|---:|
    #{Enum.map_join(rows, "\n", fn {name, a, b} -> "| #{name} | #{ms(a)} | #{ms(b)} | #{pct(a, b)} |" end)}
    """

    IO.puts(report)
    File.write!(Path.join([__DIR__, "results", "kernel_stop_cost.md"]), report)
  end

  # A launch of `source` (the kernel's text, or a variant of it) over `input`, its result as a binary.
  defp launcher(compiled, source, kernel, input) do
    key = :crypto.hash(:sha256, source) |> Base.encode16(case: :lower) |> binary_part(0, 32)
    library = Accel.Kernel.Native.library(key, source)
    slots = Accel.Kernel.Compiler.slots(compiled, kernel.values, [nil])

    term =
      {key, source, compiled.uses_f64, library, [:s64], compiled.out_type,
       :binary.copy(<<8>>, length(compiled.slots)), "accel_user", true}

    fn ->
      {out, _flagged} =
        Accel.Tensor.allocate(&Accel.NIF.tensor_source_kernel(term, [input.ref], @n, slots, :cpu, 0, &1))

      out = Accel.Tensor.wrap(out, {@n}, compiled.out_type)
      bin = Accel.Tensor.to_binary(out)
      Accel.Tensor.free(out)
      bin
    end
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
