# The operations models use beyond elementwise work (Accel.Nx.Backend's indexing, window, conv,
# sort and linear algebra kernels), one operation each, against XLA's CPU compiler (jax.jit of the same
# operation, EXLA's engine; bench/nx_ops_xla.py in the virtual environment `bin/setup --bench`
# makes) on the shapes of a small CNN and a transformer's embedding:
#   * conv: 32 x 64 x 32 x 32 by a 64 x 64 x 3 x 3 kernel, padding :same; max_pool: 2 x 2 windows,
#     stride 2, of that input; pool_grad: window_scatter_max of a 32 x 64 x 16 x 16 source;
#   * take: 512 rows of a 30,000 x 768 table; indexed_add: 512 rows of updates into it (the
#     embedding's gradient);
#   * sort and argsort (stable) of 2^20 f32; cumulative_sum of 2^20 (Nx's own composition on
#     Accel); erf_inv of 2^20 (what Nx.Random.normal draws through); product over the rows of
#     4096 x 1024, and its sums over axis 0 (each column's: a batch's statistics, a bias's gradient);
#   * the linear algebra on 512 x 512 f32: cholesky and solve (16 right sides) of S = G G^T / 512 + I,
#     G = sin(0.37 iota); triangular_solve of S's lower triangle; qr of S (Q and R: G has rank 2, so its Q is
#     not unique beyond two columns);
#   * fft of 64 signals of 16,384 f32 points;
#   * complex arithmetic on 2^20 c64 (Accel.Nx.Complex: kernels computing the Complex library's
#     formulas in f64): a product z w, a quotient z / w, abs(z), exp(z) and asin(z); a complex
#     conv of 8 x 16 x 32 x 32 by 16 x 16 x 3 x 3, padding :same (one real convolution of the
#     parts stacked); and Nx.complex(re, im) of two 2^20 f32 tensors (Nx's imag * i + real).
# Each round times every row on each device (Accel eagerly, with `fallback: :raise`: nothing here
# leaves the device) and runs the XLA process once: the fastest of 3 calls per operation on each
# side, after a first call (XLA's compiles, Accel's builds its kernels); medians over rounds. Results are checked against XLA's (the sum of each
# result). Writes bench/results/nx_ops.md.
#
#   mix run bench/nx_ops.exs [--runs 5]
Code.require_file("support/results.ex", __DIR__)
Code.require_file("support/peers.ex", __DIR__)

defmodule NxOpsBench do
  alias Accel.Bench.Results
  @threads System.schedulers_online()

  def main(args) do
    {:ok, _} = Application.ensure_all_started(:nx)
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer])
    runs = opts[:runs] || 5
    devices = Results.devices()
    python = Accel.Bench.Peers.venv_python()

    rounds =
      for round <- 1..runs do
        IO.puts("round #{round} of #{runs}")
        accel = Map.new(devices, &{&1, time_device(&1)})
        xla = if python, do: xla(python), else: %{}
        %{accel: accel, xla: xla}
      end

    check(rounds, devices)
    report(rounds, devices, python)
  end

  defp iota(shape, backend), do: Nx.iota(shape, type: :f64, backend: backend)

  # the inputs, by the formulas bench/nx_ops_xla.py uses (computed in f64, rounded to f32)
  defp inputs(backend) do
    f32 = &Nx.as_type(&1, :f32)
    g = iota({512, 512}, backend) |> Nx.multiply(0.37) |> Nx.sin()
    s = Nx.dot(g, [1], g, [1]) |> Nx.divide(512) |> Nx.add(Nx.eye(512, type: :f64, backend: backend))

    %{
      x: iota({32, 64, 32, 32}, backend) |> Nx.multiply(1.0e-3) |> Nx.sin() |> f32.(),
      k: iota({64, 64, 3, 3}, backend) |> Nx.multiply(1.0e-2) |> Nx.cos() |> Nx.multiply(0.05) |> f32.(),
      source: iota({32, 64, 16, 16}, backend) |> Nx.multiply(1.0e-3) |> Nx.cos() |> f32.(),
      table: iota({30_000, 768}, backend) |> Nx.multiply(1.0e-3) |> Nx.sin() |> f32.(),
      rows: Nx.iota({512}, backend: backend) |> Nx.multiply(37) |> Nx.remainder(30_000),
      updates: iota({512, 768}, backend) |> Nx.multiply(1.0e-3) |> Nx.cos() |> f32.(),
      zeros: Nx.broadcast(Nx.tensor(0.0, type: :f32, backend: backend), {30_000, 768}),
      v: iota({1_048_576}, backend) |> Nx.multiply(0.7) |> Nx.sin() |> Nx.multiply(1000) |> f32.(),
      u: iota({1_048_576}, backend) |> Nx.multiply(0.7) |> Nx.sin() |> Nx.multiply(0.999) |> f32.(),
      m:
        iota({4096, 1024}, backend)
        |> Nx.multiply(1.0e-3)
        |> Nx.sin()
        |> Nx.multiply(1.0e-3)
        |> Nx.add(1)
        |> f32.(),
      s: s |> f32.(),
      lower: s |> Nx.tril() |> f32.(),
      rhs: iota({512, 16}, backend) |> Nx.multiply(1.0e-2) |> Nx.cos() |> f32.(),
      signal: iota({64, 16384}, backend) |> Nx.multiply(1.0e-3) |> Nx.sin() |> f32.(),
      re: iota({1_048_576}, backend) |> Nx.multiply(1.0e-3) |> Nx.sin() |> f32.(),
      im: iota({1_048_576}, backend) |> Nx.multiply(2.0e-3) |> Nx.cos() |> f32.(),
      z: complex(iota({1_048_576}, backend), [1.0e-3, 2.0e-3], [&Nx.sin/1, &Nx.cos/1]),
      w: complex(iota({1_048_576}, backend), [1.0e-3, 3.0e-3], [&Nx.cos/1, &Nx.sin/1]),
      xc: complex(iota({8, 16, 32, 32}, backend), [1.0e-3, 2.0e-3], [&Nx.sin/1, &Nx.cos/1]),
      kc: complex(iota({16, 16, 3, 3}, backend), [1.0e-2, 2.0e-2], [&Nx.cos/1, &Nx.sin/1])
    }
  end

  # f(j * a) + g(j * b) i, in f64, as c64
  defp complex(j, [a, b], [f, g]),
    do: Nx.complex(f.(Nx.multiply(j, a)), g.(Nx.multiply(j, b))) |> Nx.as_type(:c64)

  @ops [
    :conv,
    :max_pool,
    :pool_grad,
    :take,
    :indexed_add,
    :sort,
    :argsort,
    :cumulative_sum,
    :erf_inv,
    :product,
    :sum_columns,
    :cholesky,
    :solve,
    :triangular_solve,
    :qr,
    :fft,
    :complex_multiply,
    :complex_divide,
    :complex_abs,
    :complex_exp,
    :complex_asin,
    :complex_conv,
    :complex_make
  ]

  defp op(:conv, i), do: Nx.conv(i.x, i.k, padding: :same)
  defp op(:max_pool, i), do: Nx.window_max(i.x, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
  defp op(:pool_grad, i), do: Nx.window_scatter_max(i.x, i.source, 0.0, {1, 1, 2, 2}, strides: [1, 1, 2, 2])
  defp op(:take, i), do: Nx.take(i.table, i.rows, axis: 0)
  defp op(:indexed_add, i), do: Nx.indexed_add(i.zeros, Nx.new_axis(i.rows, 1), i.updates, axes: [0])
  defp op(:sort, i), do: Nx.sort(i.v)
  defp op(:argsort, i), do: Nx.argsort(i.v, stable: true)
  defp op(:cumulative_sum, i), do: Nx.cumulative_sum(i.v)
  defp op(:erf_inv, i), do: Nx.erf_inv(i.u)
  defp op(:product, i), do: Nx.product(i.m, axes: [1])
  defp op(:sum_columns, i), do: Nx.sum(i.m, axes: [0])
  defp op(:cholesky, i), do: Nx.LinAlg.cholesky(i.s)
  defp op(:solve, i), do: Nx.LinAlg.solve(i.s, i.rhs)
  defp op(:triangular_solve, i), do: Nx.LinAlg.triangular_solve(i.lower, i.rhs)
  defp op(:fft, i), do: Nx.fft(i.signal)
  defp op(:complex_multiply, i), do: Nx.multiply(i.z, i.w)
  defp op(:complex_divide, i), do: Nx.divide(i.z, i.w)
  defp op(:complex_abs, i), do: Nx.abs(i.z)
  defp op(:complex_exp, i), do: Nx.exp(i.z)
  defp op(:complex_asin, i), do: Nx.asin(i.z)
  defp op(:complex_conv, i), do: Nx.conv(i.xc, i.kc, padding: :same)
  defp op(:complex_make, i), do: Nx.complex(i.re, i.im)
  # both factors, as a user of qr takes them (a jit of R alone lets XLA skip computing Q)
  defp op(:qr, i), do: i.s |> Nx.LinAlg.qr() |> then(fn {q, r} -> Nx.concatenate([q, r]) end)

  defp time_device(device) do
    backend = {Accel.Nx.Backend, device: device, fallback: :raise}

    Nx.with_default_backend(backend, fn ->
      i = inputs(backend)

      Map.new(@ops, fn name ->
        # a first call (kernel builds), then the fastest of 3, as XLA's; the sum of the magnitudes
        # of the result is the check
        first = op(name, i)
        check = magnitudes(first)
        Nx.backend_deallocate(first)

        fastest =
          Enum.min(
            for _ <- 1..3 do
              {us, out} = :timer.tc(fn -> op(name, i) |> sync() end)
              Nx.backend_deallocate(out)
              us
            end
          )

        {name, {fastest / 1.0e6, check}}
      end)
    end)
  end

  # the sum of a result's magnitudes
  defp magnitudes(t), do: t |> Nx.abs() |> Nx.as_type(:f64) |> Nx.sum() |> Nx.to_number()

  # device work is queued: reading one element waits for it
  defp sync(t), do: tap(t, fn t -> t |> Nx.reshape({:auto}) |> Nx.slice([0], [1]) |> Nx.to_binary() end)

  defp xla(python),
    do:
      Accel.Bench.Peers.xla(python, Path.join(__DIR__, "nx_ops_xla.py"), ["3", "#{@threads}"],
        times: "xla",
        check: "check"
      )

  # each device's result against XLA's: the sums of their magnitudes agree to 1e-4
  defp check(rounds, devices) do
    xla = hd(rounds).xla

    for device <- devices, name <- @ops, xla[:check] do
      {_, got} = hd(rounds).accel[device][name]
      want = xla.check[name]

      unless abs(got - want) <= 1.0e-4 * max(abs(want), 1.0),
        do: raise("#{name} on #{device}: sum #{got}, XLA's #{want}")
    end
  end

  defp median(values), do: values |> Enum.sort() |> Enum.at(div(length(values), 2))

  defp report(rounds, devices, python) do
    xla_time = fn name -> if python, do: median(Enum.map(rounds, & &1.xla.times[name])) end

    rows =
      for name <- @ops do
        times = for d <- devices, do: median(Enum.map(rounds, &elem(&1.accel[d][name], 0)))
        xla = xla_time.(name)
        cells = Enum.map(times, &Results.xla_cell(&1, xla))
        "| #{name} | " <> Enum.join(cells, " | ") <> " | " <> if(xla, do: Results.ms(xla), else: "-") <> " |"
      end

    version = if python, do: hd(rounds).xla.version, else: "not installed (bin/setup --bench)"

    text = """
    # Accel.Nx.Backend's indexing, window, conv, sort, linear algebra, FFT and complex kernels against XLA

    Made by `mix run bench/nx_ops.exs` (#{length(rounds)} rounds, medians of the fastest of 3 calls per
    round). Each operation eagerly on
    Accel.Nx.Backend (`fallback: :raise`: none left the device) and through `jax.jit` (jax
    #{version}, XLA's CPU compiler, #{@threads} threads), in milliseconds; in parentheses XLA's time
    over Accel's (above 1: Accel is faster). Results checked against XLA's (the sums of their magnitudes within 1e-4).
    Machine: #{System.schedulers_online()} cores; kernels: #{Results.cpu_kernels()}. See the script's header
    for the shapes.

    #{Results.xla_head("operation", devices)}
    #{Enum.join(rows, "\n")}
    """

    File.write!(Results.path("nx_ops.md"), text)
    IO.puts(text)
  end
end

NxOpsBench.main(System.argv())
