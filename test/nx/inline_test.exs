if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.InlineTest do
    # A small call on the CPU backend runs on the calling scheduler: a product of a few multiply-adds
    # and a small fused kernel (their work known), as elementwise operations on small tensors always
    # have, and small indexing, sorts, scans and windows, rather than waiting for a dirty scheduler,
    # whose hand-off costs more than they do. Shown by holding every dirty CPU scheduler with
    # endless kernels: a compiled training step and those operations on small tensors still finish,
    # with the right result; large ones, and the linear algebra, wait for a dirty scheduler.
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

    # The calls an iterative algorithm makes on small tensors in its loops (Scholar's Trimap and
    # t-SNE: a take of a few rows, a concatenate, an indexed put, a sort of a row), and a small
    # batch's pooling, each bounded by its arguments: inline like the elementwise ones. The same
    # operations on large tensors wait for a dirty scheduler, and so does the linear algebra
    # however small: it runs on one arithmetic thread, which a large factorization may hold.
    @small [
      take: &__MODULE__.take_rows/1,
      concatenate: &__MODULE__.concatenate/1,
      indexed_put: &__MODULE__.indexed_put/1,
      argsort: &__MODULE__.argsort/1,
      cumulative_sum: &__MODULE__.cumulative_sum/1,
      fft: &__MODULE__.fft/1,
      window_max: &__MODULE__.window_max/1,
      window_scatter_max: &__MODULE__.window_scatter_max/1
    ]

    def take_rows(x), do: Nx.take(x, Nx.tensor([3, 1, 3]))
    def concatenate(x), do: Nx.concatenate([x, Nx.negate(x)], axis: 1)
    def indexed_put(x), do: Nx.indexed_put(x, Nx.tensor([[2, 1], [0, 4]]), Nx.tensor([-1.0, -2.0]))
    def cumulative_sum(x), do: Nx.cumulative_sum(x, axis: 1)
    def argsort(x), do: Nx.argsort(Nx.sin(x), axis: 1, direction: :desc)
    def fft(x), do: Nx.fft(x[0])
    def window_max(x), do: Nx.window_max(x, {3, 2}, padding: :same)

    def window_scatter_max(x),
      do: Nx.window_scatter_max(x, Nx.iota({15, 2}, type: :f32), 0.0, {2, 2}, strides: [2, 2])

    # a symmetric positive definite 5 x 5 matrix from the first rows of x
    def spd(x) do
      a = Nx.slice(x, [0, 0], [5, 5])
      Nx.add(Nx.dot(a, Nx.transpose(a)), Nx.multiply(Nx.eye(5, type: :f32), 5.0))
    end

    test "small indexing, concatenation, sorts, scans and windows run inline; large ones and the linear algebra wait" do
      backend = {Accel.Nx.Backend, device: :cpu}
      x = Nx.iota({30, 5}, type: :f32) |> Nx.divide(37)
      on_accel = Nx.backend_copy(x, backend)
      large = Nx.iota({1, 65_536}, type: :f32, backend: backend)
      # (every kernel the calls use made before the schedulers are taken)
      for {_name, f} <- @small, do: f.(on_accel)

      victims = Workload.occupy_dirty_schedulers()

      try do
        for {name, f} <- @small do
          task = Task.async(fn -> f.(on_accel) end)

          assert {:ok, got} = Task.yield(task, 10_000),
                 "#{name} of a small tensor waited for a dirty scheduler"

          want = Nx.backend_copy(f.(x))
          assert Nx.shape(got) == Nx.shape(want)

          diff =
            Nx.subtract(Nx.backend_copy(got), want)
            |> Nx.abs()
            |> Nx.reduce_max()
            |> Nx.as_type(:f64)
            |> Nx.to_number()

          assert diff <= 1.0e-5, "#{name}: #{diff} from the binary backend's"
        end

        waits = [
          take: fn -> Nx.take(large, Nx.tensor([0, 0]), axis: 0) end,
          concatenate: fn -> Nx.concatenate([large, large]) end,
          sort: fn -> Nx.sort(large, axis: 1) end,
          window_sum: fn -> Nx.window_sum(large, {1, 64}) end,
          # (5 elements, a result of 65,536: the work is the result's)
          fft: fn -> Nx.fft(on_accel[0], length: 65_536) end,
          solve: fn -> Nx.LinAlg.solve(spd(on_accel), Nx.iota({5}, type: :f32)) end,
          cholesky: fn -> Nx.LinAlg.cholesky(spd(on_accel)) end
        ]

        tasks = for {name, f} <- waits, do: {name, Task.async(f)}

        for {name, task} <- tasks,
            do: assert(Task.yield(task, 500) == nil, "#{name} ran on a normal scheduler")

        Enum.each(victims, &Process.exit(&1, :kill))
        for {_name, task} <- tasks, do: assert({:ok, %Nx.Tensor{}} = Task.yield(task, 30_000))
      after
        Enum.each(victims, &Process.exit(&1, :kill))
      end
    end
  end
end
