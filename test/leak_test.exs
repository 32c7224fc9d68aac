defmodule Accel.LeakTest do
  # Native memory returns to its baseline: Accel's own counter exactly, the OS resident set within
  # what the VM's allocators keep for reuse.
  use ExUnit.Case, async: false
  alias Accel.Test.Workload

  @moduletag timeout: 300_000

  test "10,000 calls leave Accel's memory and the process's RSS at their baseline" do
    # Warm up: backends initialised, VM allocators and the first large buffers sized.
    Task.await(Task.async(fn -> Workload.mixed_calls(500) end), :infinity)
    {accel_before, rss_before} = Workload.settle()

    Task.await(Task.async(fn -> Workload.mixed_calls(10_000) end), :infinity)
    {accel_after, rss_after} = Workload.settle()

    assert accel_after == accel_before
    # 10,000 calls moved ~5 GB through the NIF; a leak of even 1 KB a call would show as 10 MB.
    assert rss_after - rss_before < 64 * 1024 * 1024,
           "RSS grew by #{div(rss_after - rss_before, 1024 * 1024)} MiB over 10,000 calls"
  end

  test "100,000 tensors, freed and dropped, leave every device's tensor memory at its baseline" do
    alias Accel.Tensor, as: T
    devices = Enum.filter(Accel.devices(), &(&1.backend in [:cpu, :opencl, :cuda]))
    Workload.settle()
    before = Map.new(devices, &{&1, Accel.memory(&1)})

    for device <- devices do
      Task.await(
        Task.async(fn ->
          # two tensors an iteration: 100,000 in all
          for i <- 1..div(50_000, length(devices)) do
            t = T.iota({64}, backend: device.backend, device: device.id)
            u = T.add(t, i)
            if rem(i, 2) == 0, do: T.free(u)
          end
        end),
        :infinity
      )
    end

    Workload.settle()

    for device <- devices,
        do: assert(Accel.memory(device) == before[device], "#{device.backend}: tensor bytes leaked")
  end

  if Code.ensure_loaded?(Nx) do
    test "a compiled function's call plan keeps none of the tensors of the call it recorded" do
      # (a chain of 20 products of 32 x 32: each product's 4 KB result made by a NIF call the plan
      # recorded; the compiled function, and so its plan, lives as long as the VM)
      x =
        Nx.iota({32, 32}, type: :f32)
        |> Nx.divide(1024)
        |> Nx.backend_transfer({Accel.Nx.Backend, device: :cpu})

      chain = fn x -> Enum.reduce(1..20, x, fn _, acc -> Nx.dot(acc, x) end) end
      f = Nx.Defn.jit(chain, compiler: Accel.Nx.Compiler, device: :cpu)
      calls = fn n -> Task.await(Task.async(fn -> Enum.each(1..n, fn _ -> f.(x) end) end)) end

      # (the first call compiles; the second records, the others replay)
      calls.(1)
      {before, _rss} = Workload.settle()
      calls.(5)
      {after_calls, _rss} = Workload.settle()
      # (at most: a buffer the first call left in Accel's cache may be gone; a plan that kept its
      # recorded call's tensors would hold 20 x 4 KB more)
      assert after_calls <= before
      assert_in_delta Nx.to_number(Nx.sum(x)), 511.5, 1.0e-6
    end

    test "a compiled call frees the tensors it made and does not return, at its end" do
      # three products of 256 x 256 f32 (256 KiB each) and a sum: only the sum (1 KiB) is returned
      x =
        Nx.iota({256, 256}, type: :f32)
        |> Nx.divide(65_536)
        |> Nx.backend_transfer({Accel.Nx.Backend, device: :cpu})

      f = fn x -> x |> Nx.dot(x) |> Nx.dot(x) |> Nx.dot(x) |> Nx.reshape({256, 256}) |> Nx.sum(axes: [0]) end

      for opts <- [[], [replay: false]] do
        g = Nx.Defn.jit(f, [compiler: Accel.Nx.Compiler, device: :cpu] ++ opts)

        Task.await(
          Task.async(fn ->
            g.(x)
            Workload.settle()
            before = Accel.memory(:cpu)
            # no collection between: what the call leaves live is what it returned
            results = for _ <- 1..3, do: g.(x)
            assert Accel.memory(:cpu) - before == 3 * 256 * 4
            want = f.(Nx.backend_copy(x, Nx.BinaryBackend))

            for r <- results,
                do:
                  assert(
                    Nx.all_close(Nx.backend_copy(r, Nx.BinaryBackend), want, rtol: 1.0e-5) |> Nx.to_number() ==
                      1
                  )
          end),
          :infinity
        )
      end
    end
  end
end
