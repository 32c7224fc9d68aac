defmodule Accel.Test.ChildVM do
  @moduledoc false
  # Code that tests run in a child VM (a peer node): cases that change settings read only when the
  # NIF loads, and cases that would take the whole VM down if Accel got them wrong. test/support is
  # compiled to disk, so peers have these modules; a test module's own functions are not there.
  alias Accel.Test.ClusterHelper

  # Starts a peer, applies `env` to :accel before Accel is first used there, runs `fun` (an
  # {module, function, args}) on it, stops it and returns {:ok, result} or {:down, reason} when
  # the peer died.
  def run(env, {m, f, a}, timeout \\ 120_000) do
    ClusterHelper.start_distribution!()
    {peer, node} = ClusterHelper.start_peer!()
    ref = Node.monitor(node, true)

    try do
      for {k, v} <- env, do: :ok = :erpc.call(node, Application, :put_env, [:accel, k, v])
      {:ok, :erpc.call(node, m, f, a, timeout)}
    catch
      :error, {:erpc, :noconnection} ->
        receive do
          {:nodedown, ^node, _} -> {:down, :noconnection}
        after
          5_000 -> {:down, :noconnection}
        end
    after
      Node.monitor(node, false)
      _ = ref
      :peer.stop(peer)
    end
  end

  # 24 concurrent OpenCL calls under the queue limit set for this VM, while a watcher samples the
  # queue: {results, [{in_use, limit}]}.
  def crowd_under_queue_limit do
    watcher =
      Task.async(fn ->
        Stream.repeatedly(fn ->
          Process.sleep(2)
          for {:opencl, 0, in_use, limit} <- Accel.NIF.device_queues(), do: {in_use, limit}
        end)
        |> Enum.take(400)
        |> List.flatten()
      end)

    results =
      1..24
      |> Enum.map(fn i -> Task.async(fn -> Accel.logistic_map(1..20_000, backend: :opencl, mu: i) end) end)
      |> Task.await_many(120_000)

    {results, Task.await(watcher, 60_000)}
  end

  # The reload that once killed the VM: a tensor made, the module reloaded and its old code purged
  # (the old instance's unload callback runs), then the tensor used and a new one made.
  def reload_then_use(backend) do
    t = Accel.Tensor.iota({10}, backend: backend)
    {:module, Accel.NIF} = :code.load_file(Accel.NIF)
    # (false only means that no process had to be killed to purge it)
    _ = :code.purge(Accel.NIF)
    before = Accel.Tensor.to_list(t)

    after_reload =
      Accel.Tensor.iota({3}, backend: backend)
      |> Accel.Tensor.add(t |> Accel.Tensor.sum())
      |> Accel.Tensor.to_list()

    {before, after_reload, Accel.logistic_map([1, 2, 3], p: 61, backend: backend)}
  end

  # Large OpenCL transfers and calls of `backend`'s devices (in a VM that stages them, through
  # pinned slots), against the CPU backend: a VM binary and a list through the logistic map, in
  # one chunk and in several, and a tensor's round trip. {equal?, ...} for each.
  def staged_calls(backend) do
    n = 5_000_001
    bin = :binary.copy(Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu))
    want = Accel.logistic_map(bin, backend: :cpu)
    t = Accel.Tensor.from_binary(bin, :s64, backend: backend)

    {Accel.logistic_map(bin, backend: backend) == want,
     Accel.logistic_map(bin, backend: backend, chunk_size: 2_000_000) == want,
     Accel.Tensor.to_binary(t) == bin,
     Accel.Tensor.to_binary(Accel.Tensor.logistic_map(t, 6_700_417, 22, 10)) == want}
  end

  # Whether Accel.NIF loads with this VM's settings; the VM answering at all shows it survived.
  def try_load(key \\ :cpu_threads), do: {Code.ensure_loaded(Accel.NIF), Accel.Config.fetch(key)}

  # Results whose size comes from the caller, from 2^31 to 2^62 bytes, on every path that makes
  # one, in this (child) VM: each either works (where the machine holds it) or raises; the VM
  # answering at all shows it survived. Returns [{case, bytes, outcome}].
  def oversized_results(backend) do
    require Accel
    kernel = Accel.kernel(fn x -> x + 1 end)

    cases = [
      {"Accel.Tensor.matmul of empty factors",
       fn elems ->
         side = isqrt(elems)
         a = Accel.Tensor.from_binary(<<>>, :f64, {side, 0}, backend: backend)
         b = Accel.Tensor.from_binary(<<>>, :f64, {0, side}, backend: backend)
         Accel.Tensor.matmul(a, b)
       end},
      {"Accel.Tensor.iota", fn elems -> Accel.Tensor.iota({elems}, type: :f64, backend: backend) end},
      {"Accel.logistic_map(range, as: :binary)",
       fn elems -> Accel.logistic_map(1..elems, as: :binary, backend: backend) end},
      {"Accel.logistic_map(range, as: :list)",
       fn elems -> Accel.logistic_map(1..elems, backend: backend) end},
      {"Accel.map(range, kernel, as: :binary)",
       fn elems -> Accel.map(1..elems, kernel, backend: backend, as: :binary) end},
      {"Accel.map(range, kernel, as: :tensor)",
       fn elems -> Accel.map(1..elems, kernel, backend: backend, as: :tensor) end},
      {"Accel.Crossing.zeros_list", fn elems -> Accel.Crossing.zeros_list(elems) end}
    ]

    for {name, make} <- cases, bits <- [31, 36, 44, 50, 56, 62] do
      bytes = Bitwise.bsl(1, bits)

      outcome =
        try do
          result = make.(div(bytes, 8))
          if is_struct(result, Accel.Tensor), do: Accel.Tensor.free(result)
          :made
        rescue
          e in Accel.Error -> {:refused, e.reason}
          e in ArgumentError -> {:argument_error, Exception.message(e)}
        end

      :erlang.garbage_collect()
      {name, bits, outcome}
    end
  end

  # Fault recovery on `backend`'s device 0, with faults simulated on its next command
  # (Accel.NIF.simulate_device_fault/3): the faulting call, a tensor made before the fault, calls
  # after it; then a fault the rebuilt device does not survive. Run in a child VM: the faults lose
  # every tensor on the device, and the second fences it. Returns a map of outcomes, each
  # {:ok, value} or {reason, message}.
  def fault_recovery(backend) do
    require Accel
    alias Accel.Tensor, as: T
    kernel = Accel.kernel(fn x -> x * 3 + 1 end)
    before = T.from_list([1, 2, 3], type: :s64, backend: backend)
    :ok = Accel.NIF.simulate_device_fault(backend, 0, 1)
    fault = outcome(fn -> T.to_list(T.add(before, before)) end)
    lost = outcome(fn -> T.to_list(before) end)
    kept = T.from_list([4, 5], type: :s64, backend: backend)

    recovered = %{
      fault: fault,
      lost: lost,
      tensor: outcome(fn -> T.to_list(T.add(kept, kept)) end),
      map: outcome(fn -> Accel.map(1..100_000, kernel, backend: backend) |> Enum.take(-2) end),
      logistic_map: outcome(fn -> Accel.logistic_map([1, 2, 3], backend: backend) end),
      memory: Accel.memory(backend),
      fenced: Accel.NIF.fenced_devices()
    }

    :ok = Accel.NIF.simulate_device_fault(backend, 0, 2)

    Map.merge(recovered, %{
      fault_again: outcome(fn -> T.to_list(T.add(kept, kept)) end),
      failed: outcome(fn -> Accel.logistic_map([1, 2, 3], backend: backend) end),
      failed_tensor: outcome(fn -> T.from_list([1], type: :s64, backend: backend) end),
      fenced_after: Accel.NIF.fenced_devices(),
      all_devices: Accel.Devices.co_execution_devices(backend),
      cpu_after: outcome(fn -> Accel.logistic_map([1, 2, 3], backend: :cpu) end)
    })
  end

  # A real fault on a GPU: an expert CUDA kernel writing 2^40 elements past its output (CUDA's
  # sticky cudaErrorIllegalAddress), then what later calls on the device and on the CPU backend do.
  def real_cuda_fault do
    k =
      Accel.Kernel.cuda(
        """
        extern "C" __global__ void stray(long long* out, const long long* x, unsigned long long n) {
          unsigned long long i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x;
          if (i < n) out[i + (1ULL << 40)] = x[i];
        }
        """,
        "stray",
        inputs: [:s64],
        output: :s64
      )

    %{
      fault: outcome(fn -> Accel.map(Enum.to_list(1..1000), k, backend: :cuda) end),
      next: outcome(fn -> Accel.logistic_map([1, 2, 3], backend: :cuda) end),
      cpu: outcome(fn -> Accel.logistic_map([1, 2, 3], backend: :cpu) end)
    }
  end

  # Whether PoCL (the OpenCL runtime's device library, loaded when OpenCL looks for devices) is in
  # this VM: {after the CPU backend's devices were asked and a C kernel was built and run for it,
  # after every backend's devices were}.
  def opencl_started_by_cpu_work(cache) do
    loaded? = fn -> File.read!("/proc/self/maps") =~ "libpocl" end
    Application.put_env(:accel, :kernel_cache, cache)
    [%Accel.Device{backend: :cpu}] = Accel.devices(:cpu)
    # a map of the CPU backend: C built by the host compiler, for the CPU backend's instruction set
    require Accel
    [4, 7] = Accel.map([1, 2], Accel.kernel(fn x -> x * 3 + 1 end), backend: :cpu)
    cpu_only = loaded?.()
    _ = Accel.devices()
    {cpu_only, loaded?.()}
  end

  defp outcome(fun) do
    {:ok, fun.()}
  rescue
    e in Accel.Error -> {e.reason, e.message}
  end

  defp isqrt(n), do: n |> :math.sqrt() |> trunc()
end
