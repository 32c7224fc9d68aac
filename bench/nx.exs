# Accel.Nx.Backend against what an Nx user would run instead on the same machine, in one run:
# Nx.BinaryBackend, NumPy (and PyTorch's CPU build where it is installed; bench/nx_peers.py), on
#   * Nx.dot of two N x N f32 matrices (N = 1024; the binary backend at 256, it would take minutes);
#   * Nx.sum of 2^24 f32, against the machine's copy bandwidth (NumPy's copyto of the same vector);
#   * softmax over the rows of a 4096 x 1024 f32 matrix, and Nx.exp and Nx.log of it (eager
#     elementwise math, each a kernel of the backend's own);
#   * Nx.add of two 10-element f32 tensors, per call (where GPU backends disappoint: nx#718), with
#     device: :cpu and device: :auto (placement keeps small tensors on the host).
# Every round times every row once (round-robin, the peers' process among them), medians over
# rounds. Results checked against the binary backend. Writes bench/results/nx.md.
#
#   mix run bench/nx.exs [--runs 7] [--tag TAG]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/peers.ex", __DIR__)

defmodule NxBench do
  alias Accel.Bench.Results
  @dot_n 1024
  @sum_n 16_777_216
  @rows 4096
  @cols 1024
  @small_calls 2000

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, tag: :string])
    runs = opts[:runs] || 7
    devices = Results.devices()
    python = Accel.Bench.Peers.numpy_python()

    rounds =
      for round <- 1..runs do
        IO.puts("round #{round}/#{runs}")
        accel = Map.new(devices, &{&1, time_device(&1)})
        binary = time_binary()
        peers = if python, do: time_peers(python), else: %{}
        %{accel: accel, binary: binary, peers: peers}
      end

    check(devices)
    report = report(rounds, devices)
    IO.puts(report)
    name = if opts[:tag], do: "nx_#{opts[:tag]}.md", else: "nx.md"
    File.write!(Results.path(name), report)
  end

  defp inputs(backend) do
    %{
      a: Nx.iota({@dot_n, @dot_n}, type: :f32, backend: backend) |> Nx.divide(@dot_n * @dot_n),
      v: Nx.iota({@sum_n}, type: :f32, backend: backend) |> Nx.divide(@sum_n),
      m: Nx.iota({@rows, @cols}, type: :f32, backend: backend) |> Nx.divide(@rows * @cols),
      small: Nx.iota({10}, type: :f32, backend: backend)
    }
  end

  defp softmax(m) do
    e = Nx.exp(Nx.subtract(m, Nx.reduce_max(m, axes: [1], keep_axes: true)))
    Nx.divide(e, Nx.sum(e, axes: [1], keep_axes: true))
  end

  # Results are read back (Nx.to_binary of one element) so device work is waited for.
  defp sync(t), do: Nx.to_binary(t, limit: 1)

  defp seconds(fun) do
    {us, _} = :timer.tc(fun)
    us / 1.0e6
  end

  defp fastest(fun, n \\ 3), do: Enum.min(for _ <- 1..n, do: seconds(fun))

  defp time_device(device) do
    Nx.default_backend({Accel.Nx.Backend, device: device})
    %{a: a, v: v, m: m} = inputs({Accel.Nx.Backend, device: device})
    # (m + 0.5: log's arguments away from 0)
    pos = Nx.add(m, 0.5)
    small = Nx.iota({10}, type: :f32, backend: {Accel.Nx.Backend, device: device})
    auto_small = Nx.iota({10}, type: :f32, backend: {Accel.Nx.Backend, device: :auto})

    result = %{
      dot: fastest(fn -> sync(Nx.dot(a, a)) end),
      sum: fastest(fn -> sync(Nx.sum(v)) end),
      softmax: fastest(fn -> sync(softmax(m)) end),
      exp: fastest(fn -> sync(Nx.exp(m)) end),
      log: fastest(fn -> sync(Nx.log(pos)) end),
      add10: per_call(fn -> Nx.add(small, small) end),
      add10_auto: per_call(fn -> Nx.add(auto_small, auto_small) end)
    }

    Enum.each([a, v, m, pos, small, auto_small], &Nx.backend_deallocate/1)
    result
  end

  defp time_binary do
    Nx.default_backend(Nx.BinaryBackend)
    a = Nx.iota({256, 256}, type: :f32) |> Nx.divide(65536)
    %{v: v, small: small} = inputs(Nx.BinaryBackend)
    m = Nx.iota({256, @cols}, type: :f32) |> Nx.divide(256 * @cols)

    %{
      dot256: fastest(fn -> Nx.dot(a, a) end, 1),
      sum: fastest(fn -> Nx.sum(v) end, 1),
      # 256 rows, scaled to 4096: the binary backend's time is linear in the rows.
      softmax: fastest(fn -> softmax(m) end, 1) * (@rows / 256),
      add10: per_call(fn -> Nx.add(small, small) end)
    }
  end

  defp per_call(fun),
    do: Enum.min(for _ <- 1..3, do: seconds(fn -> for _ <- 1..@small_calls, do: fun.() end)) / @small_calls

  defp time_peers(python) do
    args = ["5", "#{@dot_n}", "#{@sum_n}", "#{@rows}", "#{@cols}"]
    Accel.Bench.Peers.run(python, Path.join(__DIR__, "nx_peers.py"), args)
  end

  defp check(devices) do
    Nx.default_backend(Nx.BinaryBackend)
    m = Nx.iota({64, 32}, type: :f32) |> Nx.divide(2048)
    expected = softmax(m)

    for device <- devices do
      got =
        softmax(Nx.backend_copy(m, {Accel.Nx.Backend, device: device})) |> Nx.backend_copy(Nx.BinaryBackend)

      unless Nx.to_number(Nx.all_close(got, expected, rtol: 1.0e-5)) == 1,
        do: raise("softmax on #{device} differs")
    end
  end

  defp median(values) do
    sorted = Enum.sort(values)
    Enum.at(sorted, div(length(sorted), 2))
  end

  defp med(rounds, path),
    do:
      rounds
      |> Enum.map(&get_in(&1, path))
      |> then(&if(Enum.any?(&1, fn x -> x == nil end), do: nil, else: median(&1)))

  defp report(rounds, devices) do
    numpy = fn op -> med(rounds, [:peers, "numpy", op]) end

    torch = fn op ->
      if Enum.all?(rounds, &(&1.peers["torch"] != nil)), do: med(rounds, [:peers, "torch", op])
    end

    copy_bw = if c = numpy.("copy"), do: 2 * 4 * @sum_n / c

    rows =
      for device <- devices do
        dev = fn op -> med(rounds, [:accel, device, op]) end
        sum_bw = 4 * @sum_n / dev.(:sum)

        """
        | #{device} | Nx.dot #{@dot_n}x#{@dot_n} f32 | #{ms(dev.(:dot))} | #{ms(numpy.("dot"))} | #{ratio(dev.(:dot), numpy.("dot"))} | #{ms(torch.("dot"))} | #{ratio(dev.(:dot), torch.("dot"))} |
        | #{device} | Nx.sum 2^24 f32 | #{ms(dev.(:sum))} (#{gbs(sum_bw)}) | #{ms(numpy.("sum"))} | #{ratio(dev.(:sum), numpy.("sum"))} | #{ms(torch.("sum"))} | #{ratio(dev.(:sum), torch.("sum"))} |
        | #{device} | softmax over rows, #{@rows}x#{@cols} f32 | #{ms(dev.(:softmax))} | #{ms(numpy.("softmax"))} | #{ratio(dev.(:softmax), numpy.("softmax"))} | #{ms(torch.("softmax"))} | #{ratio(dev.(:softmax), torch.("softmax"))} |
        | #{device} | Nx.exp, #{@rows}x#{@cols} f32 | #{ms(dev.(:exp))} | #{ms(numpy.("exp"))} | #{ratio(dev.(:exp), numpy.("exp"))} | #{ms(torch.("exp"))} | #{ratio(dev.(:exp), torch.("exp"))} |
        | #{device} | Nx.log, #{@rows}x#{@cols} f32 | #{ms(dev.(:log))} | #{ms(numpy.("log"))} | #{ratio(dev.(:log), numpy.("log"))} | #{ms(torch.("log"))} | #{ratio(dev.(:log), torch.("log"))} |
        | #{device} | Nx.add, 10 f32 (per call) | #{us(dev.(:add10))} | #{us(numpy.("add10"))} | #{ratio(dev.(:add10), numpy.("add10"))} | #{us(torch.("add10"))} | #{ratio(dev.(:add10), torch.("add10"))} |
        """
      end

    bin = fn op -> med(rounds, [:binary, op]) end
    cpu = fn op -> med(rounds, [:accel, :cpu, op]) end

    """
    ## Accel.Nx.Backend against NumPy#{if torch.("dot"), do: " and PyTorch (CPU)", else: ""}

    #{machine()}. Median of #{length(rounds)} rounds, every row timed once per round (the peers in
    their own process, the fastest of 5 calls each); Accel's times include reading one element back
    (all device work done). "x" columns: the peer's time over Accel's (above 1: Accel is faster).

    | device | operation | Accel | NumPy | NumPy / Accel | PyTorch | PyTorch / Accel |
    |---|---|---:|---:|---:|---:|---:|
    #{Enum.join(rows)}
    Copy bandwidth (NumPy `copyto` of the 2^24 f32 vector, read + write): #{gbs(copy_bw)}; `Nx.sum`
    reads 64 MiB once, so its GB/s above against this is how close it runs to memory bandwidth.

    ## Against Nx.BinaryBackend

    | operation | Accel (cpu) | Nx.BinaryBackend | BinaryBackend / Accel |
    |---|---:|---:|---:|
    | Nx.add, 10 f32 (per call), device: :cpu | #{us(cpu.(:add10))} | #{us(bin.(:add10))} | #{ratio(cpu.(:add10), bin.(:add10))} |
    | Nx.add, 10 f32 (per call), device: :auto | #{us(cpu.(:add10_auto))} | #{us(bin.(:add10))} | #{ratio(cpu.(:add10_auto), bin.(:add10))} |
    | Nx.sum 2^24 f32 | #{ms(cpu.(:sum))} | #{ms(bin.(:sum))} | #{ratio(cpu.(:sum), bin.(:sum))} |
    | softmax over rows, #{@rows}x#{@cols} f32 (binary backend: 256 rows, x16) | #{ms(cpu.(:softmax))} | #{ms(bin.(:softmax))} | #{ratio(cpu.(:softmax), bin.(:softmax))} |
    | Nx.dot 256x256 f32 (binary backend) against Accel's 1024x1024 | #{ms(cpu.(:dot))} | #{ms(bin.(:dot256))} | (64x the work for Accel) |
    """
  end

  defp machine do
    cpus = System.schedulers_online()

    "#{cpus} schedulers, OTP #{System.otp_release()}, Elixir #{System.version()}, Nx #{Application.spec(:nx, :vsn)}"
  end

  defp ms(nil), do: "-"
  defp ms(s), do: "#{:erlang.float_to_binary(s * 1000, decimals: 2)} ms"
  defp us(nil), do: "-"
  defp us(s), do: "#{:erlang.float_to_binary(s * 1.0e6, decimals: 1)} us"
  defp gbs(nil), do: "-"
  defp gbs(bps), do: "#{:erlang.float_to_binary(bps / 1.0e9, decimals: 1)} GB/s"
  defp ratio(_, nil), do: "-"
  defp ratio(nil, _), do: "-"
  defp ratio(accel, peer), do: "#{:erlang.float_to_binary(peer / accel, decimals: 2)}x"
end

NxBench.main(System.argv())
