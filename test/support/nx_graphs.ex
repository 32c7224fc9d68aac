if Code.ensure_loaded?(Nx) do
  defmodule Accel.Test.NxGraphs do
    @moduledoc false
    # PropEr generators of random well-typed defn graphs, for test/nx/compiler_property_test.exs:
    # {type, x dims, y shape, tree, reduction, x values, y values}. A tree is built over two
    # parameters, x of shape `dims` and y of a shape that broadcasts to it, with the operations
    # each type family admits; integer values include their type's limits (wrapping is tested),
    # float values stay finite and away from NaN (whose ordering the binary backend defines
    # otherwise) by construction: divisors are |b| + 1, square roots and logarithms take |a|.

    # remote calls: PropEr joins the code path only when the tests start (test_helper.exs)
    alias :proper_types, as: P

    @types [{:f, 32}, {:f, 64}, {:s, 32}, {:s, 64}, {:u, 8}, {:u, 32}, {:u, 64}]
    @int_binary [
      :add,
      :subtract,
      :multiply,
      :quotient,
      :remainder,
      :min,
      :max,
      :bitwise_and,
      :bitwise_or,
      :bitwise_xor
    ]
    @int_unary [:negate, :abs, :sign, :bitwise_not]
    @float_binary [:add, :subtract, :multiply, :min, :max, :safe_divide, :atan2]
    @float_unary [:negate, :abs, :tanh, :sigmoid, :sin, :cos, :atan, :erf, :floor, :ceil, :round, :sign] ++
                   [:exp_tanh, :sqrt_abs, :log1p_abs]
    @compare [:equal, :not_equal, :less, :less_equal, :greater, :greater_equal]

    def case_gen do
      P.bind(
        P.elements(@types),
        fn type ->
          P.bind(
            P.tuple([P.integer(1, 6), P.integer(1, 6)]),
            fn {a, b} ->
              P.tuple([
                P.exactly(type),
                P.exactly({a, b}),
                P.elements([{a, b}, {b}, {a, 1}, {}]),
                tree(type, 3),
                reduction(),
                P.vector(a * b, value(type)),
                P.vector(a * b, value(type))
              ])
            end,
            false
          )
        end,
        false
      )
    end

    defp reduction do
      P.frequency([
        {2, P.exactly(nil)},
        {1,
         P.tuple([
           P.elements([:sum, :reduce_max, :reduce_min]),
           P.elements([[0], [1], [0, 1], nil]),
           P.elements([true, false])
         ])}
      ])
    end

    defp tree(type, 0), do: leaf(type)

    defp tree({kind, bits} = type, depth) do
      sub = P.lazy(fn -> tree(type, depth - 1) end)
      float = kind == :f

      common = [
        {2, leaf(type)},
        {3, P.tuple([P.exactly(:un), P.elements(if(float, do: @float_unary, else: @int_unary)), sub])},
        {4,
         P.tuple([P.exactly(:bin), P.elements(if(float, do: @float_binary, else: @int_binary)), sub, sub])},
        {1, P.tuple([P.exactly(:select), P.elements(@compare), sub, sub, sub, sub])},
        {1, P.tuple([P.exactly(:clip), sub, value(type), value(type)])},
        {1, P.tuple([P.exactly(:via), P.elements(via(type)), sub])},
        {1, P.tuple([P.exactly(:pred), P.elements([:logical_not, :is_nan, :is_infinity]), sub])}
      ]

      ints =
        if float,
          do: [],
          else: [
            {1,
             P.tuple([P.exactly(:shift), P.elements([:left_shift, :right_shift]), sub, P.integer(0, bits - 1)])},
            {1, P.tuple([P.exactly(:pow), sub, P.integer(0, 3)])}
          ]

      P.frequency(common ++ ints)
    end

    defp leaf(type),
      do:
        P.frequency([{4, P.exactly(:x)}, {3, P.exactly(:y)}, {1, P.tuple([P.exactly(:const), value(type)])}])

    # Conversions there and back whose values both backends define alike (no float beyond an
    # integer type's range, where Accel saturates and the binary backend wraps).
    defp via({:s, 32}), do: [{:s, 64}, {:u, 8}, {:f, 64}]
    defp via({:s, 64}), do: [{:s, 32}, {:u, 8}]
    defp via({:u, 8}), do: [{:s, 32}, {:s, 64}, {:f, 32}, {:f, 64}]
    defp via({:u, 32}), do: [{:s, 64}, {:f, 64}]
    defp via({:u, 64}), do: [{:s, 64}, {:u, 32}, {:u, 8}]
    defp via({:f, 32}), do: [{:f, 64}]
    defp via({:f, 64}), do: [{:f, 32}]

    defp value({:u, 8}), do: P.frequency([{1, P.elements([0, 1, 255, 128])}, {3, P.integer(0, 255)}])

    # u32 and u64: their limits, 2^(bits - 1) and the value below it, small and random values
    defp value({:u, bits}) when bits in [32, 64] do
      max = Bitwise.bsl(1, bits) - 1
      half = Bitwise.bsl(1, bits - 1)

      P.frequency([
        {1, P.elements([0, 1, max, half, half - 1])},
        {2, P.integer(0, 1000)},
        {2, P.integer(0, max)}
      ])
    end

    defp value({:s, bits}), do: int_value(bits)

    defp value({:f, _}),
      do: P.frequency([{1, P.elements([0.0, 1.0, -1.0, 0.5, 100.0])}, {4, P.float(-100.0, 100.0)}])

    defp int_value(bits) do
      max = Bitwise.bsl(1, bits - 1) - 1
      min = -max - 1

      P.frequency([
        {1, P.elements([min, max, 0, 1, -1, min + 1])},
        {2, P.integer(-1000, 1000)},
        {2, P.integer(min, max)}
      ])
    end

    @doc "The two parameters' tensors (on Nx.BinaryBackend)."
    def inputs({type, dims, y_shape, _tree, _reduction, xs, ys}) do
      x = Nx.tensor(xs, type: type, backend: Nx.BinaryBackend) |> Nx.reshape(dims)

      y =
        Nx.tensor(Enum.take(ys, Nx.size(y_shape)), type: type, backend: Nx.BinaryBackend)
        |> Nx.reshape(y_shape)

      {x, y}
    end

    @doc "The graph's value (inside jit: x and y are expressions)."
    def build(tree, reduction, type, x, y) do
      v = node(tree, type, x, y) |> Nx.broadcast(x.shape)

      case reduction do
        nil -> v
        {op, nil, keep} -> apply(Nx, op, [v, [keep_axes: keep]])
        {op, axes, keep} -> apply(Nx, op, [v, [axes: axes, keep_axes: keep]])
      end
    end

    defp node(:x, _type, x, _y), do: x
    defp node(:y, _type, _x, y), do: y
    defp node({:const, v}, type, _x, _y), do: Nx.tensor(v, type: type)

    defp node({:un, op, a}, type, x, y) do
      a = node(a, type, x, y)

      case op do
        :exp_tanh -> a |> Nx.tanh() |> Nx.exp()
        :sqrt_abs -> a |> Nx.abs() |> Nx.sqrt()
        :log1p_abs -> a |> Nx.abs() |> Nx.log1p()
        op -> apply(Nx, op, [a])
      end
    end

    defp node({:bin, op, a, b}, type, x, y) do
      [a, b] = [node(a, type, x, y), node(b, type, x, y)]

      case op do
        :safe_divide -> Nx.divide(a, b |> Nx.abs() |> Nx.add(1))
        op -> apply(Nx, op, [a, b])
      end
    end

    defp node({:select, cmp, a, b, c, d}, type, x, y) do
      [a, b, c, d] = Enum.map([a, b, c, d], &node(&1, type, x, y))
      Nx.select(apply(Nx, cmp, [a, b]), c, d)
    end

    defp node({:clip, a, lo, hi}, type, x, y),
      do: Nx.clip(node(a, type, x, y), Nx.tensor(min(lo, hi), type: type), Nx.tensor(max(lo, hi), type: type))

    defp node({:via, to, a}, type, x, y) do
      a = node(a, type, x, y)
      a |> Nx.as_type(to) |> Nx.as_type(Nx.type(a))
    end

    defp node({:pred, op, a}, type, x, y), do: apply(Nx, op, [node(a, type, x, y)]) |> Nx.as_type(type)

    defp node({:shift, op, a, k}, type, x, y),
      do: apply(Nx, op, [node(a, type, x, y), Nx.tensor(k, type: type)])

    defp node({:pow, a, k}, type, x, y), do: Nx.pow(node(a, type, x, y), Nx.tensor(k, type: type))
  end
end
