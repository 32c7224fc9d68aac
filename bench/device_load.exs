# What the VM's own I/O costs while Accel is busy: the latency of a 5-byte File.read!, a small
# File.write! and Accel.devices/0, each taken 10 times while long device calls are queued, against
# the same operations on an idle VM. Reproduces the "device load" figures in RELIABILITY.md:
#   mix run bench/device_load.exs            (add --quick for fewer, shorter calls)
#
# Loads: 40 processes each calling Accel.logistic_map(1..300_000, iterations: 300, as: :binary) on
# OpenCL (when available) and on the CPU backend, and 14 processes each multiplying 1500x1500 f32
# matrices on OpenCL.
quick = "--quick" in System.argv()
callers = if quick, do: 8, else: 40
iterations = if quick, do: 60, else: 300
dir = Path.join(System.tmp_dir!(), "accel_device_load_#{System.os_time()}")
File.mkdir_p!(dir)
path = Path.join(dir, "small.txt")
File.write!(path, "hello")

probe = fn ->
  ms = fn fun ->
    {us, _} = :timer.tc(fun)
    us / 1000
  end

  samples =
    for _ <- 1..10 do
      r = ms.(fn -> File.read!(path) end)
      w = ms.(fn -> File.write!(Path.join(dir, "w.txt"), "hello") end)
      d = ms.(fn -> Accel.devices() end)
      Process.sleep(20)
      {r, w, d}
    end

  worst = fn i -> samples |> Enum.map(&elem(&1, i)) |> Enum.max() |> Float.round(1) end
  median = fn i -> samples |> Enum.map(&elem(&1, i)) |> Enum.sort() |> Enum.at(5) |> Float.round(2) end
  %{read: {median.(0), worst.(0)}, write: {median.(1), worst.(1)}, devices: {median.(2), worst.(2)}}
end

# Starts the load, waits until it is queued and running, probes, then waits for the load to end;
# the load's time runs from its start to its last call's end.
under_load = fn start_load ->
  t0 = System.monotonic_time(:microsecond)
  tasks = start_load.()
  Process.sleep(300)
  result = probe.()
  Task.await_many(tasks, :infinity)
  {result, (System.monotonic_time(:microsecond) - t0) / 1.0e6}
end

available = for %{name: n, available: true} <- Accel.backends(), do: n
# Warm up: device discovery, program builds, BLAS.
Accel.logistic_map(1..1000, backend: :opencl, as: :binary)

if :opencl in available,
  do: Accel.Tensor.iota({4, 4}, type: :f32, backend: :opencl) |> then(&Accel.Tensor.matmul(&1, &1))

rows = [{"idle", probe.(), 0.0}]

logistic = fn backend ->
  fn ->
    for _ <- 1..callers do
      Task.async(fn ->
        Accel.logistic_map(1..300_000, backend: backend, iterations: iterations, as: :binary)
      end)
    end
  end
end

matmuls = fn ->
  for _ <- 1..14 do
    Task.async(fn ->
      a = Accel.Tensor.iota({1500, 1500}, type: :f32, backend: :opencl)
      a |> Accel.Tensor.matmul(a) |> Accel.Tensor.to_binary() |> byte_size()
    end)
  end
end

loads =
  [{"#{callers} x logistic_map on :cpu", logistic.(:cpu)}] ++
    if(:opencl in available,
      do: [
        {"#{callers} x logistic_map on :opencl", logistic.(:opencl)},
        {"14 x 1500x1500 matmul on :opencl", matmuls}
      ],
      else: []
    )

rows =
  rows ++
    for {name, start} <- loads do
      {result, seconds} = under_load.(start)
      {name, result, seconds}
    end

IO.puts("""
dirty IO schedulers: #{:erlang.system_info(:dirty_io_schedulers)}, dirty CPU schedulers: \
#{:erlang.system_info(:dirty_cpu_schedulers)}; ms as median / worst of 10

| load | File.read! | File.write! | Accel.devices/0 | load took |
|---|---|---|---|---|\
""")

for {name, %{read: {rm, rw}, write: {wm, ww}, devices: {dm, dw}}, seconds} <- rows do
  IO.puts("| #{name} | #{rm} / #{rw} | #{wm} / #{ww} | #{dm} / #{dw} | #{Float.round(seconds, 1)} s |")
end

File.rm_rf!(dir)
