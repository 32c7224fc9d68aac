defmodule Accel.VmSurvivalTest do
  # Cases that once killed the VM, each run in a child VM so that a regression fails this test
  # instead of ending the test run: code reload with live tensors, and settings the runtime cannot
  # honour. Plus every `config :accel` key checked when read.
  use ExUnit.Case, async: false
  alias Accel.Test.ChildVM

  @moduletag timeout: 300_000

  test "reloading and purging Accel.NIF leaves CPU tensors usable" do
    assert ChildVM.run([], {ChildVM, :reload_then_use, [:cpu]}) ==
             {:ok, {Enum.to_list(0..9), [45, 46, 47], [28, 25, 37]}}
  end

  @tag :opencl
  test "reloading and purging Accel.NIF leaves OpenCL tensors usable" do
    assert ChildVM.run([], {ChildVM, :reload_then_use, [:opencl]}) ==
             {:ok, {Enum.to_list(0..9), [45, 46, 47], [28, 25, 37]}}
  end

  for backend <- [:cpu, :opencl] do
    @tag opencl: backend == :opencl
    test "results of 2^31 to 2^62 bytes are made or refused on #{backend}, never the VM's end" do
      assert {:ok, outcomes} = ChildVM.run([], {ChildVM, :oversized_results, [unquote(backend)]}, 600_000)

      for {name, bits, outcome} <- outcomes do
        assert outcome == :made or match?({:refused, :out_of_memory}, outcome) or
                 match?({:argument_error, _}, outcome),
               "#{name} of 2^#{bits} bytes: #{inspect(outcome)}"
      end

      # beyond any machine's memory, each path refuses
      for {name, bits, outcome} <- outcomes, bits >= 44 do
        assert outcome != :made, "#{name} of 2^#{bits} bytes was made"
      end
    end
  end

  # A kernel's fault on a GPU (CUDA's sticky errors, OpenCL's CL_OUT_OF_RESOURCES) is simulated on
  # the device's next command: the real detection, probe, rebuild and fencing paths run.
  for backend <- [:opencl, :cuda] do
    @tag [{backend, true}]
    test "a device that faults is rebuilt, then fenced, on #{backend}; the VM and other backends go on" do
      assert {:ok, r} = ChildVM.run([], {ChildVM, :fault_recovery, [unquote(backend)]}, 300_000)

      assert {:device_fault, message} = r.fault
      assert message =~ "simulated fault"
      assert message =~ "context was rebuilt: the tensors it held are lost"
      assert {:device_lost, message} = r.lost
      assert message =~ "was lost when the device's context was rebuilt after a fault"
      assert r.tensor == {:ok, [8, 10]}
      assert r.map == {:ok, [3 * 99_999 + 1, 3 * 100_000 + 1]}
      expected = Accel.logistic_map([1, 2, 3], backend: :cpu)
      assert r.logistic_map == {:ok, expected}
      # only the tensor made after the fault is counted
      assert r.memory == 16
      assert r.fenced == []

      assert {:device_fault, message} = r.fault_again
      assert message =~ "could not be rebuilt"
      assert {:device_failed, message} = r.failed
      assert message =~ "until the VM restarts"
      assert {:device_failed, _} = r.failed_tensor
      assert r.fenced_after == [{unquote(backend), 0}]
      refute Enum.any?(r.all_devices, &(&1.backend == unquote(backend) and &1.id == 0))
      assert r.cpu_after == {:ok, expected}
    end
  end

  # NVIDIA documents that after a sticky error "the process must be terminated and relaunched": the
  # reset may restore the device or not; either way the call says so and the VM goes on.
  @tag :cuda
  test "a CUDA kernel's illegal address fails its call; the device is rebuilt or fenced" do
    assert {:ok, r} = ChildVM.run([], {ChildVM, :real_cuda_fault, []}, 300_000)
    assert {:device_fault, message} = r.fault
    assert message =~ "cudaErrorIllegalAddress"
    expected = Accel.logistic_map([1, 2, 3], backend: :cpu)

    if message =~ "could not be rebuilt",
      do: assert({:device_failed, _} = r.next),
      else: assert(r.next == {:ok, expected})

    assert r.cpu == {:ok, expected}
  end

  test "cpu_threads out of range stops the NIF loading, with the key named; the VM lives on" do
    assert {:ok, {{:error, :on_load_failure}, {:error, message}}} =
             ChildVM.run([cpu_threads: 100_000], {ChildVM, :try_load, []})

    assert message == "config :accel, cpu_threads: must be an integer in 0..1024, got: 100000"
  end

  # PoCL is a CPU device, which staging leaves alone unless told: told here, its transfers of 4 MiB
  # and more go through the pinned slots a GPU's would (core/staging.hpp).
  @tag :opencl
  test "staged_transfers: :always stages every large OpenCL transfer, and the results are the same" do
    assert ChildVM.run([staged_transfers: :always], {ChildVM, :staged_calls, [:opencl]}, 300_000) ==
             {:ok, {true, true, true, true}}
  end

  test "staged_transfers is one of :auto, :always and :never" do
    assert {:ok, {{:error, :on_load_failure}, {:error, message}}} =
             ChildVM.run([staged_transfers: :sometimes], {ChildVM, :try_load, [:staged_transfers]})

    assert message ==
             "config :accel, staged_transfers: must be one of :auto, :always, :never, got: :sometimes"
  end

  test "1024 CPU threads, the largest allowed, start and compute" do
    assert ChildVM.run([cpu_threads: 1024], {Accel, :logistic_map, [[1, 2, 3], [p: 61, backend: :cpu]]}) ==
             {:ok, [28, 25, 37]}
  end

  describe "config :accel" do
    setup do
      saved = Application.get_all_env(:accel)

      # (one callback, in this order: on_exit runs callbacks last registered first, and two left
      # every key deleted after restoring them, test_helper.exs's settings too)
      on_exit(fn ->
        for {k, _} <- Application.get_all_env(:accel), do: Application.delete_env(:accel, k)
        for {k, v} <- saved, do: Application.put_env(:accel, k, v)
      end)
    end

    test "each key is checked when read, and the error names it" do
      cases = [
        cpu_threads: {-1, "must be an integer in 0..1024, got: -1"},
        cpu_threads: {:many, "must be an integer in 0..1024, got: :many"},
        device_queue_limit: {0, "must be an integer in 1..100000, got: 0"},
        max_bytes: {8, "must be nil or an integer of at least 16, got: 8"},
        tensor_gc_bytes: {1.5, "must be a positive integer, got: 1.5"}
      ]

      for {key, {value, text}} <- cases do
        Application.put_env(:accel, key, value)
        assert Accel.Config.fetch(key) == {:error, "config :accel, #{key}: #{text}"}
        Application.delete_env(:accel, key)
      end
    end

    test "a bad max_bytes or tensor_gc_bytes raises where it is used" do
      Application.put_env(:accel, :max_bytes, "1GB")

      assert_raise ArgumentError,
                   ~s(config :accel, max_bytes: must be nil or an integer of at least 16, got: "1GB"),
                   fn ->
                     Accel.logistic_map(1..10, backend: :cpu)
                   end

      Application.delete_env(:accel, :max_bytes)
      Application.put_env(:accel, :tensor_gc_bytes, -1)

      assert_raise ArgumentError, ~r/config :accel, tensor_gc_bytes: must be a positive integer/, fn ->
        Accel.Tensor.iota({3}, backend: :cpu)
      end
    end
  end
end
