if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.InlineTest do
    # A small call on the CPU backend runs on the calling scheduler: a product of a few multiply-adds
    # and a small fused kernel (their work known), as elementwise operations on small tensors always
    # have, rather than waiting for a dirty scheduler, whose hand-off costs more than they do. Shown
    # by holding every dirty CPU scheduler with endless kernels: a compiled training step on small
    # tensors still finishes, with the right result; a large product waits for a dirty scheduler.
    use ExUnit.Case, async: false
    import Nx.Defn
    alias Accel.Test.Workload

    defn step(x, w1, w2) do
      grad({w1, w2}, fn {w1, w2} -> x |> Nx.dot(w1) |> Nx.tanh() |> Nx.dot(w2) |> Nx.exp() |> Nx.sum() end)
    end

    test "small products and fused kernels run inline; a large product waits for a dirty scheduler" do
      backend = {Accel.Nx.Backend, device: :cpu}

      args =
        for shape <- [{2, 8}, {8, 4}, {4, 3}],
            do: Nx.iota(shape, type: :f32, backend: backend) |> Nx.divide(40)

      step = Nx.Defn.jit(&step/3, compiler: Accel.Nx.Compiler, device: :cpu)
      expected = Nx.Defn.jit_apply(&step/3, Enum.map(args, &Nx.backend_copy/1), compiler: Nx.Defn.Evaluator)
      # compiled (kernels built) before the schedulers are taken
      apply(step, args)
      large = Nx.iota({256, 256}, type: :f32, backend: backend)

      victims = Workload.occupy_dirty_schedulers()

      try do
        small = Task.async(fn -> apply(step, args) end)
        assert {:ok, {g1, g2}} = Task.yield(small, 10_000), "a small step waited for a dirty scheduler"

        for {got, want} <- [{g1, elem(expected, 0)}, {g2, elem(expected, 1)}] do
          diff = Nx.subtract(Nx.backend_copy(got), want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
          assert diff <= 1.0e-5
        end

        big = Task.async(fn -> Nx.dot(large, large) end)
        assert Task.yield(big, 500) == nil, "a product of 2^24 multiply-adds ran on a normal scheduler"
        Enum.each(victims, &Process.exit(&1, :kill))
        assert {:ok, product} = Task.yield(big, 30_000)
        assert Nx.shape(product) == {256, 256}
      after
        Enum.each(victims, &Process.exit(&1, :kill))
      end
    end
  end
end
