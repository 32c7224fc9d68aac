# Accel.Nx.Compiler against the same functions run op by op on Accel.Nx.Backend (the compiler
# with fuse: false: Nx.Defn.Evaluator over the backend), against one pass over memory, and
# against NumPy (and PyTorch's CPU build where it is installed; bench/nx_compiler_peers.py):
#   * a chain of 5 elementwise operations on 2^24 f32 (max(x * 1.5 + 0.25, 0) * x - 1): its bytes
#     (64 MiB read, 64 MiB written) over the copy bandwidth measured in the same round (NumPy's
#     copyto into a preallocated vector, and the backend's negate into a new tensor on the same
#     device) is the time one pass over memory takes;
#   * softmax over the rows of a 256 x 4096 f32 matrix;
#   * a 2-layer MLP forward pass on a batch of 256 (1024 -> 1024 relu -> 128 softmax);
#   * compile times: the first call with an empty kernel cache (tracing, fusion, code generation
#     and the C++ compiler or the OpenCL build), a warm call, and the first call in a second VM
#     whose kernel cache on disk is warm.
# Every round times every row once (the peers' process among them), medians over rounds; results
# checked against Nx.Defn.Evaluator on Nx.BinaryBackend. Writes bench/results/nx_compiler.md.
#
#   mix run bench/nx_compiler.exs [--runs 7] [--tag TAG]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/peers.ex", __DIR__)

defmodule NxCompilerBench do
  alias Accel.Bench.Results
  import Nx.Defn

  @chain_n 16_777_216
  @rows 256
  @cols 4096
  @batch 256
  @n_in 1024
  @hidden 1024
  @n_out 128

  defn(chain(x), do: Nx.max(x * 1.5 + 0.25, 0.0) * x - 1.0)

  defn softmax(z) do
    e = Nx.exp(z - Nx.reduce_max(z, axes: [1], keep_axes: true))
    e / Nx.sum(e, axes: [1], keep_axes: true)
  end

  defn mlp(x, w1, b1, w2) do
    h = Nx.max(Nx.dot(x, w1) + b1, 0.0)
    softmax(Nx.dot(h, w2))
  end

  def main(args) do
    # Nx is an optional dependency: its application (and telemetry's) starts here
    {:ok, _} = Application.ensure_all_started(:nx)

    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, tag: :string, second_vm: :string])

    if device = opts[:second_vm] do
      second_vm(String.to_existing_atom(device))
    else
      run(opts)
    end
  end

  defp run(opts) do
    runs = opts[:runs] || 7
    devices = Results.devices()
    python = Accel.Bench.Peers.numpy_python()
    compile = Map.new(devices, &{&1, compile_times(&1)})

    rounds =
      for round <- 1..runs do
        IO.puts("round #{round}/#{runs}")
        accel = Map.new(devices, &{&1, time_device(&1)})
        peers = if python, do: time_peers(python), else: %{}
        %{accel: accel, peers: peers}
      end

    Enum.each(devices, &check/1)
    report = report(rounds, devices, compile)
    IO.puts(report)
    name = if opts[:tag], do: "nx_compiler_#{opts[:tag]}.md", else: "nx_compiler.md"
    File.write!(Results.path(name), report)
  end

  defp ramp(shape, scale, backend),
    do: Nx.iota(shape, type: :f32, backend: backend) |> Nx.divide(scale)

  defp inputs(backend) do
    %{
      v: ramp({@chain_n}, @chain_n, backend),
      m: ramp({@rows, @cols}, @rows * @cols, backend),
      x: ramp({@batch, @n_in}, @batch * @n_in, backend),
      w1: ramp({@n_in, @hidden}, @n_in * @hidden, backend) |> Nx.subtract(0.5 / @n_in),
      b1: ramp({@hidden}, @hidden, backend),
      w2: ramp({@hidden, @n_out}, @hidden * @n_out, backend) |> Nx.subtract(0.5 / @hidden)
    }
  end

  # (build: :wait: a first call builds its kernels, rather than running unfused while they build
  # in the background, so that every timed call runs fused and the first calls time the compiler)
  defp jits(device, fuse) do
    opts = [compiler: Accel.Nx.Compiler, device: device, fuse: fuse, build: :wait]

    %{
      chain: Nx.Defn.jit(&chain/1, opts),
      softmax: Nx.Defn.jit(&softmax/1, opts),
      mlp: Nx.Defn.jit(&mlp/4, opts)
    }
  end

  # Results are read back (one element) so device work is waited for; results are freed at once.
  defp sync(t) do
    Nx.to_binary(t, limit: 1)
    Nx.backend_deallocate(t)
  end

  defp seconds(fun) do
    {us, _} = :timer.tc(fun)
    us / 1.0e6
  end

  defp fastest(fun, n \\ 3), do: Enum.min(for _ <- 1..n, do: seconds(fun))

  defp time_device(device) do
    backend = {Accel.Nx.Backend, device: device}
    %{v: v, m: m, x: x, w1: w1, b1: b1, w2: w2} = t = inputs(backend)
    fused = jits(device, true)
    op_by_op = jits(device, false)

    result =
      for {name, f} <- [fused: fused, op_by_op: op_by_op], into: %{} do
        {name,
         %{
           chain: fastest(fn -> sync(f.chain.(v)) end),
           softmax: fastest(fn -> sync(f.softmax.(m)) end),
           mlp: fastest(fn -> sync(f.mlp.(x, w1, b1, w2)) end)
         }}
      end

    # one pass over the chain's memory in Accel: the backend's negate, into a new tensor
    copy = fastest(fn -> sync(Nx.negate(v)) end)
    Enum.each(Map.values(t), &Nx.backend_deallocate/1)
    Map.put(result, :copy, copy)
  end

  # First call with an empty kernel cache, then a warm call, then the first call of a second VM
  # over the same (now warm) cache on disk: each function's own compile, in one VM per device.
  defp compile_times(device) do
    dir = Path.join(System.tmp_dir!(), "accel_bench_kernels_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    Application.put_env(:accel, :kernel_cache, dir)

    try do
      %{v: v, m: m, x: x, w1: w1, b1: b1, w2: w2} = t = inputs({Accel.Nx.Backend, device: device})
      calls = [chain: [v], softmax: [m], mlp: [x, w1, b1, w2]]
      f = jits(device, true)

      times =
        for {name, args} <- calls, into: %{} do
          first = seconds(fn -> sync(apply(f[name], args)) end)
          warm = fastest(fn -> sync(apply(f[name], args)) end)
          {name, %{first: first, warm: warm}}
        end

      Enum.each(Map.values(t), &Nx.backend_deallocate/1)
      Map.put(times, :second_vm, second_vm_times(device, dir))
    after
      Application.delete_env(:accel, :kernel_cache)
      File.rm_rf!(dir)
    end
  end

  defp second_vm_times(device, dir) do
    {out, 0} =
      System.cmd("mix", ["run", "--no-compile", __ENV__.file, "--second-vm", to_string(device)],
        env: [{"ACCEL_KERNEL_CACHE", dir}],
        stderr_to_stdout: true
      )

    line = out |> String.split("\n", trim: true) |> Enum.find(&String.starts_with?(&1, "second-vm "))
    [_ | values] = String.split(line)
    Enum.zip([:chain, :softmax, :mlp], Enum.map(values, &String.to_float/1)) |> Map.new()
  end

  defp second_vm(device) do
    %{v: v, m: m, x: x, w1: w1, b1: b1, w2: w2} = inputs({Accel.Nx.Backend, device: device})
    f = jits(device, true)

    times =
      for {name, args} <- [chain: [v], softmax: [m], mlp: [x, w1, b1, w2]],
          do: seconds(fn -> sync(apply(f[name], args)) end)

    IO.puts("second-vm " <> Enum.map_join(times, " ", &Float.to_string/1))
  end

  defp time_peers(python) do
    sizes = [@chain_n, @rows, @cols, @batch, @n_in, @hidden, @n_out]

    Accel.Bench.Peers.run(python, Path.join(__DIR__, "nx_compiler_peers.py"), [
      "5" | Enum.map(sizes, &to_string/1)
    ])
  end

  # The compiled functions against Nx.Defn.Evaluator on Nx.BinaryBackend, on small inputs.
  defp check(device) do
    b = Nx.BinaryBackend
    v = ramp({1000}, 1000, b)
    m = ramp({8, 64}, 512, b)
    x = ramp({4, 16}, 64, b)
    w1 = ramp({16, 8}, 128, b)
    b1 = ramp({8}, 8, b)
    w2 = ramp({8, 5}, 40, b)
    f = jits(device, true)
    ref = fn fun, args -> apply(Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator), args) end

    for {got, want} <- [
          {f.chain.(v), ref.(&chain/1, [v])},
          {f.softmax.(m), ref.(&softmax/1, [m])},
          {f.mlp.(x, w1, b1, w2), ref.(&mlp/4, [x, w1, b1, w2])}
        ] do
      got = Nx.backend_copy(got, b)

      unless Nx.to_number(Nx.all_close(got, want, rtol: 1.0e-5, atol: 1.0e-6)) == 1,
        do: raise("#{device}: results differ")
    end
  end

  defp median(values), do: Accel.Timing.summarize(values).median

  defp med(rounds, path) do
    values = Enum.map(rounds, &get_in(&1, path))
    if Enum.any?(values, &is_nil/1), do: nil, else: median(values)
  end

  defp report(rounds, devices, compile) do
    numpy = fn op -> med(rounds, [:peers, "numpy", op]) end

    torch = fn op ->
      if Enum.all?(rounds, &(&1.peers["torch"] != nil)), do: med(rounds, [:peers, "torch", op])
    end

    bytes = 2 * 4 * @chain_n
    numpy_pass = numpy.("copy")

    rows =
      for device <- devices do
        fused = fn op -> med(rounds, [:accel, device, :fused, op]) end
        op_by_op = fn op -> med(rounds, [:accel, device, :op_by_op, op]) end
        accel_pass = med(rounds, [:accel, device, :copy])

        workloads = [
          {"chain of 5 ops, 2^24 f32", "chain"},
          {"softmax over rows, #{@rows}x#{@cols} f32", "softmax"},
          {"MLP #{@n_in}-#{@hidden}-#{@n_out}, batch #{@batch}, f32", "mlp"}
        ]

        table =
          Enum.map_join(workloads, "", fn {label, op} ->
            key = String.to_atom(op)

            "| #{device} | #{label} | #{ms(fused.(key))} | #{ms(op_by_op.(key))} | #{ratio(fused.(key), op_by_op.(key))} | " <>
              "#{ms(numpy.(op))} | #{ratio(fused.(key), numpy.(op))} | #{ms(torch.(op))} | #{ratio(fused.(key), torch.(op))} |\n"
          end)

        passes = """
        | #{device} | #{ms(fused.(:chain))} | #{ms(numpy_pass)} (#{gbs(bytes / numpy_pass)}) | #{times(fused.(:chain), numpy_pass)} | #{ms(accel_pass)} (#{gbs(bytes / accel_pass)}) | #{times(fused.(:chain), accel_pass)} | #{times(5 * accel_pass, fused.(:chain))} |
        """

        {table, passes}
      end

    compile_rows =
      for device <- devices, {op, label} <- [chain: "chain", softmax: "softmax", mlp: "MLP"] do
        c = compile[device]
        "| #{device} | #{label} | #{ms(c[op].first)} | #{ms(c[op].warm)} | #{ms(c.second_vm[op])} |\n"
      end

    """
    ## Accel.Nx.Compiler: fused against op by op, one pass over memory, NumPy#{if torch.("chain"), do: " and PyTorch (CPU, eager)", else: ""}

    #{machine()}. Median of #{length(rounds)} rounds, every row timed once per round (the peers in
    their own process, the fastest of 5 calls each); Accel's times include reading one element back
    (all device work done). "x" columns: the other's time over the compiled function's (above 1:
    the compiled function is faster). Op by op: the same function with `fuse: false` (Nx's
    evaluator over `Accel.Nx.Backend`).

    | device | function | compiled | op by op | op by op / compiled | NumPy | NumPy / compiled | PyTorch | PyTorch / compiled |
    |---|---|---:|---:|---:|---:|---:|---:|---:|
    #{Enum.map_join(rows, "", &elem(&1, 0))}
    ### The chain against one pass over its memory (64 MiB read, 64 MiB written)

    | device | compiled chain | NumPy copyto | chain / copyto | backend negate, new tensor | chain / negate | 5 negates / chain |
    |---|---:|---:|---:|---:|---:|---:|
    #{Enum.map_join(rows, "", &elem(&1, 1))}
    The target: the chain within 1.5x of one pass (a ratio of 1.50 or less). The last column is the
    compiled chain against five single passes of the backend, what op by op would take if each of
    its operations ran at the speed of the backend's fastest (op by op above is slower: an operation
    with a scalar operand takes the backend's general broadcasting path, and each allocates anew).

    ### Compile times

    First call with an empty kernel cache (tracing, fusion, code generation, then the C++ compiler
    for `:cpu` or the OpenCL build), a warm call, and the first call in a second VM whose kernel
    cache on disk is warm (the OpenCL build is per VM; PoCL keeps its own cache).

    | device | function | first call, empty cache | warm call | first call, second VM |
    |---|---|---:|---:|---:|
    #{Enum.join(compile_rows)}
    """
  end

  defp machine do
    "#{System.schedulers_online()} schedulers, OTP #{System.otp_release()}, Elixir #{System.version()}, Nx #{Application.spec(:nx, :vsn)}"
  end

  defp ms(nil), do: "-"
  defp ms(s), do: "#{:erlang.float_to_binary(s * 1000, decimals: 2)} ms"
  defp gbs(bps), do: "#{:erlang.float_to_binary(bps / 1.0e9, decimals: 1)} GB/s"
  defp times(a, b), do: :erlang.float_to_binary(a / b, decimals: 2)
  defp ratio(_, nil), do: "-"
  defp ratio(nil, _), do: "-"
  defp ratio(compiled, other), do: "#{:erlang.float_to_binary(other / compiled, decimals: 2)}x"
end

NxCompilerBench.main(System.argv())
