if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.FallbackConfigTest do
    # `config :accel, nx_fallback: :raise` makes every fallback raise, for every backend the VM
    # uses; a backend's own `fallback:` option wins over it. Not async: it changes the
    # application's environment, which every test reads.
    use ExUnit.Case, async: false

    test "the application's nx_fallback: :raise, and an option overriding it" do
      t = Nx.tensor([1.0, 2.0], backend: {Accel.Nx.Backend, device: :cpu})
      Application.put_env(:accel, :nx_fallback, :raise)

      try do
        assert_raise ArgumentError,
                     ~r/no cpu:0 kernel for reduce .* fallback: :raise forbids/,
                     fn ->
                       Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)
                     end

        Nx.with_default_backend({Accel.Nx.Backend, device: :cpu, fallback: :host}, fn ->
          assert Nx.to_number(Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)) == 2.0
        end)
      after
        Application.delete_env(:accel, :nx_fallback)
      end

      assert Nx.to_number(Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)) == 2.0
    end

    # Nx 0.7's binary backend lacks the optional callbacks (phase, logical_not, cumulative_*,
    # top_k, the linear algebra, ...): the fallback computes Nx's composition of them on the host
    # (Nx 0.13's has them all, and the fallback calls them).
    test "a fallback Nx.BinaryBackend has no callback for computes Nx's composition on the host" do
      z = Nx.tensor([Complex.new(1, 2), Complex.new(-3, 0), Complex.new(0, -1)])
      m = Nx.tensor([[4.0, 2.0], [2.0, 3.0]])
      on = &Nx.backend_copy(&1, {Accel.Nx.Backend, device: :cpu})

      for {name, module, args} <- [
            {:phase, Nx, [z]},
            {:logical_not, Nx, [z]},
            {:top_k, Nx, [Nx.tensor([3, 1, 4, 1, 5]), [k: 2]]},
            {:cholesky, Nx.LinAlg, [m]},
            {:determinant, Nx.LinAlg, [m]}
          ] do
        expected = apply(module, name, args)
        outs = if is_tuple(expected), do: expected, else: Nx.template(expected.shape, expected.type)

        operands =
          Enum.map(args, fn
            %Nx.Tensor{} = t -> on.(t)
            opts -> opts
          end)

        result = Accel.Nx.Fallback.run(name, [outs | operands])

        for {r, e} <- Enum.zip(List.wrap(tuple_list(result)), List.wrap(tuple_list(expected))) do
          assert %Accel.Nx.Backend{} = r.data
          assert Nx.backend_copy(r, Nx.BinaryBackend) == e, "#{name}"
        end
      end
    end

    defp tuple_list(t) when is_tuple(t), do: Tuple.to_list(t)
    defp tuple_list(t), do: t
  end
end
