# Compiled Nx against XLA: the workloads neural networks and their users run, through
# Accel.Nx.Compiler (on each Accel device) and through XLA's CPU compiler (`jax.jit`, EXLA's engine,
# jax in _build/bench-venv: `bin/setup --bench`; bench/nx_xla.py), side by side in one run:
#   * chain: max(x * 1.5 + 0.25, 0) * x - 1 over 2^24 f32 (5 elementwise operations);
#   * softmax over the rows of 4096 x 1024; layer norm over them (mean, variance, scale, shift);
#   * GELU MLP: dot, bias, tanh-GELU, dot, bias, 256 x 1024 -> 4096 -> 1024;
#   * conv, padding same, 32 x 64 x 32 x 32 with a 64 x 64 x 3 x 3 kernel;
#   * MLP training step: forward, the gradient (Nx.Defn.grad / jax.grad), SGD update, 128 x 784 ->
#     256 -> 10, softmax cross-entropy;
#   * attention: softmax(q k^T / sqrt(64)) v for 8 heads x 512 tokens x 64; and the same with a
#     causal mask (scores where a token would attend to a later one set to -1e9, the mask from
#     iotas: a decoder's self-attention);
#   * CNN training step: conv 1 -> 16 3 x 3, relu, 2 x 2 max-pool, dense 3136 -> 10, cross-entropy,
#     gradient, SGD, batch 32 x 1 x 28 x 28;
#   * Nx.Random.normal of 2^24 (jax.random.normal), Nx.sort of 2^20, an embedding take of 512 rows
#     of 30,000 x 768;
#   * a call's fixed cost: the MLP training step at toy size (batch 1, 8 -> 4 -> 2) and a 1 x 8
#     softmax, per call (the mean over 2,000 calls).
# Per workload: the time per call (the fastest of 3 after a first call, medians over rounds; the
# peers in their own process each round), XLA's time over Accel's (above 1: Accel is faster), the
# first (compiling) call of each with an empty kernel cache (and, where its kernels build in the
# background, when later calls run fused: they are timed from there), and the fallbacks to
# Nx.BinaryBackend counted with the telemetry event [:accel, :nx, :fallback]. Results checked
# against XLA's: the sums of their magnitudes within 1e-3 (the random draw: the mean of its squares
# within 1e-2, a different generator). Writes bench/results/nx_xla.md and nx_xla.svg.
#
# Accel's columns: each device, and the CPU backend with `math: :fast` (exp, sigmoid and tanh in
# single precision within 1-2 ulps, as XLA's: the column to set beside XLA's for those rows).
#
#   mix run bench/nx_xla.exs [--runs 5] [--devices cpu,cpu_fast,opencl] [--only softmax,layer_norm]
#                            [--xla cpu|gpu] [--tag h200] [--per-call 2000]
#
# --xla gpu: the peer is XLA's GPU compiler (jax's CUDA plugin; $ACCEL_BENCH_PYTHON names a Python
# that has it, as a GPU host's own), f32 products at full precision, for the rows of Accel's GPU
# devices (bin/gpu-run's nx_xla step). --tag: writes nx_xla_TAG.md and .svg instead.
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/peers.ex", __DIR__)
Code.require_file("support/chart.ex", __DIR__)

defmodule NxXlaBench do
  alias Accel.Bench.Results
  import Nx.Defn

  @threads System.schedulers_online()
  # memory written (and freed) before anything is timed
  @warm_bytes 2 * 1024 * 1024 * 1024
  # the workloads timed per call, as the mean of --per-call calls (default 2000)
  @per_call [:toy_step, :toy_softmax]
  @workloads [
    :chain,
    :softmax,
    :layer_norm,
    :gelu_mlp,
    :conv,
    :mlp_step,
    :attention,
    :masked_attention,
    :cnn_step,
    :random_normal,
    :sort,
    :take,
    :toy_step,
    :toy_softmax
  ]
  @titles %{
    chain: "elementwise chain of 5 ops, 2^24",
    softmax: "softmax over rows, 4096x1024",
    layer_norm: "layer norm over rows, 4096x1024",
    gelu_mlp: "GELU MLP 256x1024 -> 4096 -> 1024",
    conv: "conv, same, 32x64x32x32 * 64x64x3x3",
    mlp_step: "MLP training step 128x784 -> 256 -> 10",
    attention: "attention, 8 heads x 512 x 64",
    masked_attention: "causal attention, 8 heads x 512 x 64",
    cnn_step: "CNN training step, 32x1x28x28",
    random_normal: "Nx.Random.normal, 2^24",
    sort: "sort, 2^20",
    take: "embedding take, 512 of 30000x768",
    toy_step: "training step 1x8 -> 4 -> 2 (per call)",
    toy_softmax: "softmax 1x8 (per call)"
  }

  ## The workloads, as Nx users write them

  defn(chain(x), do: Nx.max(x * 1.5 + 0.25, 0.0) * x - 1.0)

  defn softmax(z) do
    e = Nx.exp(z - Nx.reduce_max(z, axes: [-1], keep_axes: true))
    e / Nx.sum(e, axes: [-1], keep_axes: true)
  end

  defn layer_norm(x, gamma, beta) do
    mean = Nx.mean(x, axes: [1], keep_axes: true)
    var = Nx.mean((x - mean) ** 2, axes: [1], keep_axes: true)
    (x - mean) / Nx.sqrt(var + 1.0e-5) * gamma + beta
  end

  defn gelu_mlp(x, w1, b1, w2, b2) do
    h = Nx.dot(x, w1) + b1
    h = 0.5 * h * (1.0 + Nx.tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)))
    Nx.dot(h, w2) + b2
  end

  defn(conv(x, k), do: Nx.conv(x, k, padding: :same))

  defn cross_entropy(logits, y) do
    logp = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
    logp = logp - Nx.log(Nx.sum(Nx.exp(logp), axes: [1], keep_axes: true))
    onehot = Nx.equal(Nx.new_axis(y, 1), Nx.iota({1, Nx.axis_size(logits, 1)}))
    -Nx.mean(Nx.sum(onehot * logp, axes: [1]))
  end

  defn(sgd({a, b, c, d}, {ga, gb, gc, gd}), do: {a - 0.1 * ga, b - 0.1 * gb, c - 0.1 * gc, d - 0.1 * gd})

  defn mlp_step(x, y, w1, b1, w2, b2) do
    params = {w1, b1, w2, b2}

    grads =
      grad(params, fn {w1, b1, w2, b2} ->
        h = Nx.max(Nx.dot(x, w1) + b1, 0.0)
        cross_entropy(Nx.dot(h, w2) + b2, y)
      end)

    sgd(params, grads)
  end

  defn attention(q, k, v) do
    scores = Nx.dot(q, [2], [0], k, [2], [0]) / 8.0
    Nx.dot(softmax(scores), [2], [0], v, [1], [0])
  end

  defn masked_attention(q, k, v) do
    scores = Nx.dot(q, [2], [0], k, [2], [0]) / 8.0
    causal = Nx.greater_equal(Nx.iota(scores.shape, axis: 1), Nx.iota(scores.shape, axis: 2))
    Nx.dot(softmax(Nx.select(causal, scores, -1.0e9)), [2], [0], v, [1], [0])
  end

  defn cnn_step(x, y, kc, bc, wd, bd) do
    params = {kc, bc, wd, bd}

    grads =
      grad(params, fn {kc, bc, wd, bd} ->
        h = Nx.conv(x, kc, padding: :same) + Nx.reshape(bc, {1, :auto, 1, 1})
        h = Nx.window_max(Nx.max(h, 0.0), {1, 1, 2, 2}, strides: [1, 1, 2, 2])
        cross_entropy(Nx.dot(Nx.reshape(h, {Nx.axis_size(x, 0), :auto}), wd) + bd, y)
      end)

    sgd(params, grads)
  end

  defn(random_normal(key), do: Nx.Random.normal(key, shape: {16_777_216}, type: :f32))

  defn(sort(v), do: Nx.sort(v))

  defn(take(t, i), do: Nx.take(t, i, axis: 0))

  ## Inputs: bench/nx_xla.py's formulas (computed in f64, rounded to f32)

  defp ramp(shape, scale, fun \\ &Nx.sin/1, factor \\ 1.0) do
    Nx.iota(shape, type: :f64) |> Nx.multiply(scale) |> fun.() |> Nx.multiply(factor) |> Nx.as_type(:f32)
  end

  defp labels(n), do: Nx.iota({n}) |> Nx.multiply(7) |> Nx.remainder(10)

  defp toy do
    [ramp({8, 4}, 0.1, &Nx.cos/1, 0.5), ramp({4}, 1.0, &Nx.sin/1, 0.1)] ++
      [ramp({4, 2}, 0.1, &Nx.sin/1, 0.5), ramp({2}, 1.0, &Nx.cos/1, 0.1)]
  end

  defp inputs(:chain), do: [ramp({16_777_216}, 1.0e-3)]
  defp inputs(:softmax), do: [ramp({4096, 1024}, 1.0e-3, &Nx.sin/1, 4.0)]

  defp inputs(:layer_norm) do
    [ramp({4096, 1024}, 1.0e-3, &Nx.sin/1, 4.0), Nx.add(ramp({1024}, 0.01, &Nx.cos/1, 0.1), 1.0)] ++
      [ramp({1024}, 0.01, &Nx.sin/1, 0.1)]
  end

  defp inputs(:gelu_mlp) do
    [
      ramp({256, 1024}, 1.0e-3),
      ramp({1024, 4096}, 1.0e-3, &Nx.cos/1, 0.03),
      ramp({4096}, 0.01, &Nx.sin/1, 0.1)
    ] ++
      [ramp({4096, 1024}, 1.0e-3, &Nx.sin/1, 0.015), ramp({1024}, 0.01, &Nx.cos/1, 0.1)]
  end

  defp inputs(:conv), do: [ramp({32, 64, 32, 32}, 1.0e-3), ramp({64, 64, 3, 3}, 1.0e-2, &Nx.cos/1, 0.05)]

  defp inputs(:mlp_step) do
    [ramp({128, 784}, 1.0e-3), labels(128), ramp({784, 256}, 1.0e-3, &Nx.sin/1, 0.05)] ++
      [
        ramp({256}, 0.01, &Nx.cos/1, 0.01),
        ramp({256, 10}, 1.0e-2, &Nx.cos/1, 0.1),
        ramp({10}, 1.0, &Nx.sin/1, 0.01)
      ]
  end

  defp inputs(:attention),
    do: [ramp({8, 512, 64}, 1.0e-3), ramp({8, 512, 64}, 1.0e-3, &Nx.cos/1), ramp({8, 512, 64}, 2.0e-3)]

  defp inputs(:masked_attention), do: inputs(:attention)

  defp inputs(:cnn_step) do
    [ramp({32, 1, 28, 28}, 1.0e-3), labels(32), ramp({16, 1, 3, 3}, 0.1, &Nx.cos/1, 0.3)] ++
      [
        ramp({16}, 1.0, &Nx.sin/1, 0.01),
        ramp({3136, 10}, 1.0e-3, &Nx.sin/1, 0.02),
        ramp({10}, 1.0, &Nx.cos/1, 0.01)
      ]
  end

  defp inputs(:random_normal), do: [Nx.Random.key(42)]
  defp inputs(:sort), do: [ramp({1_048_576}, 0.7, &Nx.sin/1, 1000.0)]

  defp inputs(:take),
    do: [ramp({30_000, 768}, 1.0e-3), Nx.iota({512}) |> Nx.multiply(37) |> Nx.remainder(30_000)]

  defp inputs(:toy_step), do: [ramp({1, 8}, 1.0), labels(1)] ++ toy()
  defp inputs(:toy_softmax), do: [ramp({1, 8}, 1.0)]

  defp function(:toy_step), do: &mlp_step/6
  defp function(:toy_softmax), do: &softmax/1
  defp function(name), do: Function.capture(__MODULE__, name, length(inputs(name)))

  ## Running

  def main(args) do
    {:ok, _} = Application.ensure_all_started(:nx)
    # Every module of the applications in play loaded now, as a release's boot loads them (its
    # embedded mode): the first calls time tracing and compiling, not `mix run`'s loading of code
    # from disk on first use, as XLA's first calls come after jax's imports
    for app <- [:elixir, :logger, :crypto, :telemetry, :complex, :nx, :accel],
        {:ok, modules} = :application.get_key(app, :modules),
        do: :ok = :code.ensure_modules_loaded(modules)

    {opts, _} =
      OptionParser.parse!(args,
        strict: [
          runs: :integer,
          devices: :string,
          only: :string,
          xla: :string,
          tag: :string,
          per_call: :integer
        ]
      )

    runs = opts[:runs] || 5
    calls = opts[:per_call] || 2000
    platform = opts[:xla] || "cpu"
    unless platform in ["cpu", "gpu"], do: raise(ArgumentError, "--xla is cpu or gpu, got: #{platform}")
    file = if tag = opts[:tag], do: "nx_xla_#{tag}", else: "nx_xla"
    available = List.insert_at(Results.devices(), 1, :cpu_fast)

    devices =
      if d = opts[:devices], do: Enum.map(String.split(d, ","), &String.to_existing_atom/1), else: available

    names =
      if o = opts[:only], do: Enum.map(String.split(o, ","), &String.to_existing_atom/1), else: @workloads

    python = Accel.Bench.Peers.venv_python()

    fallbacks = :counters.new(1, [])

    :telemetry.attach("nx-xla-fallbacks", [:accel, :nx, :fallback], &__MODULE__.count/4, fallbacks)
    builds = [[:accel, :nx, :compile], [:accel, :nx, :built]]
    :telemetry.attach_many("nx-xla-builds", builds, &__MODULE__.build_event/4, self())

    # (the memory every side is given touched once before, by a process of neither: see
    # Accel.Bench.Peers.warm_memory/1)
    if warmed = Accel.Bench.Peers.warm_memory(@warm_bytes),
      do:
        IO.puts("memory warmed: #{div(@warm_bytes, 1024 * 1024)} MiB written in #{Float.round(warmed, 2)} s")

    # first calls, each with an empty kernel cache (of its own), and the results to check
    setup = for d <- devices, into: %{}, do: {d, setup(d, names, fallbacks, calls)}

    # the table is written after every round: a run stopped early (a GPU lease's time cap) keeps
    # the rounds it finished
    {_rounds, mismatches} =
      Enum.reduce(1..runs, {[], []}, fn round, {done, _} ->
        IO.puts("round #{round} of #{runs}")
        {us, xla} = :timer.tc(fn -> if python, do: xla(python, platform, calls), else: %{} end)
        IO.puts("  XLA's process: #{div(us, 1000)} ms")
        accel = for d <- devices, into: %{}, do: {d, Map.new(names, &{&1, time(setup[d][&1], d)})}
        done = done ++ [%{accel: accel, xla: xla}]
        {done, report(setup, done, devices, names, python, {platform, file, calls}, round == runs)}
      end)

    if mismatches != [], do: raise("results differ from XLA's:\n" <> Enum.join(mismatches, "\n"))
  end

  def count(_event, %{count: n}, _meta, counters), do: :counters.add(counters, 1, n)

  def build_event([:accel, :nx, :compile], _, %{key: key, build: build}, pid),
    do: send(pid, {:compiled, key, build})

  def build_event([:accel, :nx, :built], _, %{key: key, errors: errors}, pid),
    do: send(pid, {:built, key, errors, System.monotonic_time()})

  # After a first call: the time from its start until every kernel its compilations built in the
  # background is loaded (later calls run fused: timed from there), or nil where none did.
  defp until_fused(started) do
    keys = background_keys([])

    built =
      for key <- keys do
        receive do
          {:built, ^key, [], at} -> at
          {:built, ^key, errors, _} -> raise "a background build failed: #{Enum.join(errors, "\n")}"
        after
          600_000 -> raise "no background build finished in 600 s"
        end
      end

    if keys != [],
      do: System.convert_time_unit(Enum.max(built) - started, :native, :microsecond) / 1.0e6
  end

  defp background_keys(keys) do
    receive do
      {:compiled, key, :background} -> background_keys([key | keys])
      {:compiled, _key, _} -> background_keys(keys)
    after
      0 -> keys
    end
  end

  # a column's compiler options: a device's, or the CPU's with approximate math
  defp jit_options(:cpu_fast), do: [device: :cpu, math: :fast]
  defp jit_options(device), do: [device: device]

  defp label(:cpu_fast), do: "cpu, math: :fast"
  defp label(device), do: "#{device}"

  defp setup(column, names, fallbacks, calls) do
    options = jit_options(column)
    backend = {Accel.Nx.Backend, Keyword.take(options, [:device])}

    Map.new(names, fn name ->
      dir = Path.join(System.tmp_dir!(), "accel_nx_xla_#{System.unique_integer([:positive])}")
      Application.put_env(:accel, :kernel_cache, dir)

      try do
        args = Enum.map(inputs(name), &Nx.backend_transfer(&1, backend))
        f = Nx.Defn.jit(function(name), [compiler: Accel.Nx.Compiler] ++ options)
        before = :counters.get(fallbacks, 1)
        started = System.monotonic_time()
        {first, out} = :timer.tc(fn -> f |> apply(args) |> sync() end)
        fell = :counters.get(fallbacks, 1) - before
        fused = until_fused(started)
        IO.puts("#{label(column)} #{name}: first call #{div(first, 1000)} ms, #{fell} fallbacks")
        if fused, do: IO.puts("  fused from #{round(fused * 1000)} ms (built in the background)")

        {name,
         %{
           f: f,
           args: args,
           first: first / 1.0e6,
           fused: fused,
           fallbacks: fell,
           check: checksum(name, out),
           name: name,
           calls: if(name in @per_call, do: calls, else: 1),
           device: options[:device]
         }}
      after
        Application.delete_env(:accel, :kernel_cache)
        File.rm_rf!(dir)
      end
    end)
  end

  # the fastest of 3 (of 3 means over --per-call calls for the toy workloads). Each call waits for
  # its results, as jax.block_until_ready does: on the CPU backend a call returns once its work is
  # done; on the other devices work may still be queued, so one element of each output is read.
  # Results are dropped as they come (a list of 2,000 calls' results would be copied by every
  # garbage collection of this process, on Accel's time).
  defp time(%{f: f, args: args, name: name, calls: calls, device: device}, column) do
    call = if device == :cpu, do: fn -> apply(f, args) end, else: fn -> f |> apply(args) |> sync() end

    best =
      Enum.min(
        for _ <- 1..3 do
          {us, :ok} = :timer.tc(fn -> repeat(call, calls) end)
          us / calls / 1.0e6
        end
      )

    IO.puts("  #{label(column)} #{name}: #{t(best)}")
    best
  end

  defp repeat(_call, 0), do: :ok

  defp repeat(call, n) do
    call.()
    repeat(call, n - 1)
  end

  # device work is queued: reading one element of each output waits for it
  defp sync(out) do
    out |> leaves() |> Enum.each(&(&1 |> Nx.reshape({:auto}) |> Nx.slice([0], [1]) |> Nx.to_binary()))
    out
  end

  # an output's tensors (a tensor, or a tuple of them)
  defp leaves(out),
    do: out |> List.wrap() |> Enum.flat_map(&if(is_tuple(&1), do: Tuple.to_list(&1), else: [&1]))

  defp checksum(:random_normal, {x, _key}),
    do: x |> Nx.as_type(:f64) |> Nx.pow(2) |> Nx.mean() |> Nx.to_number()

  defp checksum(_name, out) do
    out
    |> leaves()
    |> Enum.map(&(&1 |> Nx.as_type(:f64) |> Nx.abs() |> Nx.sum() |> Nx.to_number()))
    |> Enum.sum()
  end

  defp xla(python, platform, calls),
    do:
      Accel.Bench.Peers.xla(
        python,
        Path.join(__DIR__, "nx_xla.py"),
        ["3", "#{@threads}", platform, "#{calls}"],
        times: "xla",
        first: "first",
        check: "check"
      )

  # the workloads whose results differ from XLA's (reported with the table, then raised by main/1)
  defp check(setup, xla, devices, names) do
    for device <- devices,
        name <- names,
        xla[:check],
        got = setup[device][name].check,
        want = xla.check[name],
        tol = if(name == :random_normal, do: 1.0e-2, else: 1.0e-3),
        abs(got - want) > tol * max(abs(want), 1.0) do
      "#{name} on #{device}: checksum #{got}, XLA's #{want}"
    end
  end

  ## The report

  defp median(values), do: values |> Enum.sort() |> Enum.at(div(length(values), 2))

  defp t(s) when s < 1.0e-3, do: "#{:erlang.float_to_binary(s * 1.0e6, decimals: 1)} us"
  defp t(s), do: "#{:erlang.float_to_binary(s * 1000, decimals: 2)} ms"
  defp x(r), do: "#{:erlang.float_to_binary(r, decimals: 2)}x"

  defp report(setup, rounds, devices, names, python, {platform, file, calls}, last?) do
    # the table has XLA's column where its peer ran in every round
    python = if Enum.all?(rounds, &Map.has_key?(&1.xla, :times)), do: python
    mismatches = check(setup, hd(rounds).xla, devices, names)

    xla_time = fn name -> if python, do: median(Enum.map(rounds, & &1.xla.times[name])) end
    accel_time = fn d, name -> median(Enum.map(rounds, & &1.accel[d][name])) end

    rows =
      for name <- names do
        xla = xla_time.(name)

        cells =
          Enum.map(devices, fn d ->
            a = accel_time.(d, name)
            "#{t(a)} | " <> if(xla, do: x(xla / a), else: "-")
          end)

        fallbacks = Enum.map_join(devices, " / ", &"#{setup[&1][name].fallbacks}")
        "| #{@titles[name]} | #{Enum.join(cells, " | ")} | #{if xla, do: t(xla), else: "-"} | #{fallbacks} |"
      end

    # (cpu_fast's first calls are left out: its kernels without exp, sigmoid or tanh are the cpu
    # column's, which that column's first calls loaded into the VM)
    firsts = devices -- [:cpu_fast]

    first_rows =
      for name <- names do
        xla = if python, do: hd(rounds).xla.first[name]
        cells = Enum.map_join(firsts, " | ", &t(setup[&1][name].first))
        ratio = Enum.map_join(firsts, " / ", &if(xla, do: x(xla / setup[&1][name].first), else: "-"))
        fused = Enum.map_join(firsts, " / ", &if(f = setup[&1][name].fused, do: t(f), else: "-"))
        "| #{@titles[name]} | #{cells} | #{if xla, do: t(xla), else: "-"} | #{ratio} | #{fused} |"
      end

    version = if python, do: hd(rounds).xla.version, else: "not installed (bin/setup --bench)"
    heads = Enum.map_join(devices, " | ", &"Accel #{label(&1)} | XLA / Accel #{label(&1)}")
    aligns = Enum.map_join(devices, "", fn _ -> "---:|---:|" end)

    {where, engine} =
      if platform == "gpu",
        do: {"GPU", "XLA's GPU compiler, EXLA's engine, f32 products at full precision"},
        else: {"CPU", "XLA's CPU compiler, EXLA's engine, #{@threads} threads"}

    checked =
      if mismatches == [],
        do: "",
        else: "\n**Results that differ from XLA's:** #{Enum.join(mismatches, "; ")}.\n"

    text = """
    # Compiled Nx against XLA on the #{where}

    Made by `mix run bench/nx_xla.exs` (#{length(rounds)} rounds; in each, every workload timed as the
    fastest of 3 calls, the per-call rows as the mean of #{calls} calls; medians over rounds).
    Each workload through `Accel.Nx.Compiler` on each Accel device and through `jax.jit` (jax
    #{version}, #{engine}) in its own process each round.
    "XLA / Accel": XLA's time over Accel's; above 1 Accel is faster. Fallbacks: calls of
    Nx.BinaryBackend in the first call (the telemetry event `[:accel, :nx, :fallback]`), per device.
    Results checked against XLA's (the sums of their magnitudes within 1e-3; the random draw, from
    another generator, by the mean of its squares within 1e-2). Machine: #{System.schedulers_online()} cores;
    kernels: #{Results.cpu_kernels()}.
    The script's header gives the shapes.
    #{checked}
    | workload | #{heads} | XLA | fallbacks |
    |---|#{aligns}---:|---:|
    #{Enum.join(rows, "\n")}

    ## First call (tracing and compiling), each with an empty kernel cache

    (Accel's kernel cache. PoCL keeps the OpenCL programs it compiled in a cache of its own,
    `~/.cache/pocl`, which this script does not empty: after an earlier run the OpenCL column's
    first calls skip PoCL's compiler.) The modules of Accel, Nx and Elixir are loaded before the
    first calls, as a release's boot loads them; XLA's come after jax's imports. Before anything
    is timed, a process of neither side writes and frees 2 GiB (`Accel.Bench.Peers.warm_memory/1`):
    on a virtual machine whose host backs guest memory on first use, the first side to touch fresh
    memory would otherwise pay for both (Accel's first calls run before XLA's process).

    On the CPU backend a function whose kernels are not cached runs unfused (each operation the
    backend's) while the C compiler builds them, where its unfused operations write 512 MB or less
    and their intermediates live at once exceed the fused function's by 256 MB or less
    (`Accel.Nx.Compiler`'s `build: :background`, the default); "fused from": the time from the
    first call's start until they are loaded ("-": the first call waited for them, or no kernel).

    | workload | #{Enum.map_join(firsts, " | ", &"Accel #{label(&1)}")} | XLA | XLA / Accel | fused from |
    |---|#{Enum.map_join(firsts, "", fn _ -> "---:|" end)}---:|---:|---:|
    #{Enum.join(first_rows, "\n")}
    """

    path = Results.path("#{file}.md")
    File.write!(path, text)
    if last?, do: IO.puts(text)

    if python do
      bars =
        for name <- names, d <- devices do
          {"#{name} (#{label(d)})", xla_time.(name) / accel_time.(d, name)}
        end

      Accel.Bench.Chart.bars(Results.path("#{file}.svg"), "Compiled Nx against XLA on the #{where}", bars,
        xlabel: "XLA's time over Accel's (above 1: Accel is faster)"
      )
    end

    mismatches
  end
end

NxXlaBench.main(System.argv())
