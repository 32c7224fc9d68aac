# Conversions between f32 and the narrow types (Accel.Tensor.as_type/2, what Accel.Nx.Backend runs
# around every operation on f16, bf16, f8 or a sub-byte integer, and what quantizing and
# dequantizing weights is) against XLA's CPU compiler (jax.jit of x.astype(t), EXLA's engine;
# bench/conversions_xla.py in the virtual environment `bin/setup --bench` makes), on 2^22
# elements: sin(j / 1000) * 100 (within f8_e4m3fn's +-448), and * 7 for s4. Each round times every
# conversion on each device (the fastest of 3 calls after a first) and runs the XLA process once;
# medians over rounds. Results are checked against XLA's by the sum of their magnitudes, within the
# rounding the two may differ by: Nx writes bf16 and f8 (E5M2) by truncating (bf16: the f32's
# high half; f8: the f16's high byte) where XLA rounds to nearest, and its f8_e4m3fn caps the
# mantissa at 7 where XLA carries into the exponent, so those sums differ by up to a few percent
# (f8 by about 9%, the mean of half an E5M2 ulp). Writes bench/results/conversions.md.
#
#   mix run bench/conversions.exs [--runs 5]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/peers.ex", __DIR__)

defmodule ConversionsBench do
  alias Accel.Bench.Results
  alias Accel.Tensor, as: T
  @threads System.schedulers_online()
  @types [:f16, :bf16, :f8, :f8_e4m3fn, :s8, :s4]
  # how far a result's sum may be from XLA's (the rounding each type's conversion differs by)
  @tolerance %{f16: 1.0e-6, bf16: 1.0e-2, f8: 0.15, f8_e4m3fn: 0.02, s8: 1.0e-6, s4: 1.0e-6}

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer])
    runs = opts[:runs] || 5
    devices = Results.devices()
    python = Accel.Bench.Peers.venv_python()

    rounds =
      for round <- 1..runs do
        IO.puts("round #{round} of #{runs}")
        accel = Map.new(devices, &{&1, time_device(&1)})

        xla =
          if python,
            do:
              Accel.Bench.Peers.xla(python, Path.join(__DIR__, "conversions_xla.py"), ["3", "#{@threads}"],
                times: "xla",
                check: "check"
              ),
            else: %{}

        %{accel: accel, xla: xla}
      end

    check(rounds, devices)
    report(rounds, devices, python)
  end

  defp pairs, do: Enum.flat_map(@types, &[{:f32, &1}, {&1, :f32}])
  defp key({from, to}), do: :"#{from}_#{to}"
  defp narrow({:f32, t}), do: t
  defp narrow({t, :f32}), do: t

  defp time_device(device) do
    # in f64, rounded to f32 once, as the XLA script makes them
    j = T.iota({4_194_304}, type: :f64, backend: device) |> T.multiply(1.0e-3) |> T.sin()
    x = j |> T.multiply(100.0) |> T.as_type(:f32)
    small = j |> T.multiply(7.0) |> T.as_type(:f32)

    Map.new(pairs(), fn {from, to} = pair ->
      source = if narrow(pair) == :s4, do: small, else: x
      source = if from == :f32, do: source, else: T.as_type(source, from)
      first = T.as_type(source, to)
      check = first |> T.as_type(:f32) |> T.abs() |> T.as_type(:f64) |> T.sum() |> T.to_number()
      T.free(first)

      fastest =
        Enum.min(
          for _ <- 1..3 do
            {us, out} = :timer.tc(fn -> source |> T.as_type(to) |> sync() end)
            T.free(out)
            us
          end
        )

      {key(pair), {fastest / 1.0e6, check}}
    end)
  end

  # device work is queued: reading one element waits for it
  defp sync(t), do: tap(t, fn t -> t |> T.slice([0], [1]) |> T.to_binary() end)

  defp check(rounds, devices) do
    xla = hd(rounds).xla

    for device <- devices, pair <- pairs(), xla[:check] do
      {_, got} = hd(rounds).accel[device][key(pair)]
      want = xla.check[key(pair)]
      tolerance = @tolerance[narrow(pair)]

      unless abs(got - want) <= tolerance * max(abs(want), 1.0),
        do: raise("#{key(pair)} on #{device}: sum #{got}, XLA's #{want}")
    end
  end

  defp median(values), do: Accel.Timing.summarize(values).median

  defp report(rounds, devices, python) do
    rows =
      for {from, to} = pair <- pairs() do
        name = key(pair)
        xla = if python && hd(rounds).xla[:times], do: median(Enum.map(rounds, & &1.xla.times[name]))

        cells =
          for d <- devices, do: Results.xla_cell(median(Enum.map(rounds, &elem(&1.accel[d][name], 0))), xla)

        "| #{from} -> #{to} | " <>
          Enum.join(cells, " | ") <> " | " <> if(xla, do: Results.ms(xla), else: "-") <> " |"
      end

    version = if python, do: hd(rounds).xla[:version], else: "not installed (bin/setup --bench)"

    text = """
    # Conversions to and from the narrow types against XLA

    Made by `mix run bench/conversions.exs` (#{length(rounds)} rounds, medians of the fastest of 3 calls
    per round): `Accel.Tensor.as_type/2` of 2^22 elements and `jax.jit(lambda a: a.astype(t))` (jax #{version}, XLA's CPU compiler,
    #{@threads} threads), in milliseconds; in parentheses XLA's time over Accel's (above 1: Accel is
    faster). Results checked against XLA's by the sums of their magnitudes (within the rounding
    where Nx's conversions and XLA's differ: the script's header). Machine: #{System.schedulers_online()} cores;
    kernels: #{Results.cpu_kernels()}.

    #{Results.xla_head("conversion", devices)}
    #{Enum.join(rows, "\n")}
    """

    File.write!(Results.path("conversions.md"), text)
    IO.puts(text)
  end
end

ConversionsBench.main(System.argv())
