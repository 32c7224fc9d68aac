defmodule Accel.TensorOpsTest do
  # Every operation of the registry (c_src/kernels/ops.h) on every backend and every type it takes,
  # against an Elixir reference with Elixir's meaning (integers wrap to the type's width, as Nx's
  # do); then broadcasting, type promotion, select, argmin/argmax, slice, concatenate and sums over
  # several axes. Tests for a backend carry its name as a tag.
  # Not async: Accel.TensorTest measures device memory around its own allocations.
  use ExUnit.Case, async: false
  import Bitwise
  alias Accel.Tensor, as: T

  @bits %{s64: 64, s32: 32, u8: 8, u64: 64, u32: 32}
  @unsigned [:u8, :u32, :u64]
  @ints %{
    s64: [
      0,
      1,
      -1,
      2,
      -7,
      7,
      63,
      64,
      100,
      -100,
      123_456_789,
      -987_654_321,
      0x7FFFFFFFFFFFFFFF,
      -0x8000000000000000
    ],
    s32: [0, 1, -1, 2, -7, 7, 31, 32, 100, -100, 123_456, 0x7FFFFFFF, -0x80000000],
    u8: [0, 1, 2, 7, 8, 63, 64, 100, 127, 128, 200, 255],
    u32: [0, 1, 2, 7, 31, 32, 100, 123_456, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF],
    u64: [
      0,
      1,
      2,
      7,
      63,
      64,
      100,
      0x7FFFFFFFFFFFFFFF,
      0x8000000000000000,
      0xFFFFFFFFFFFFFFFE,
      0xFFFFFFFFFFFFFFFF
    ]
  }
  # Representable in f32, and no zeros (division; log): those are checked by the native tests.
  @floats [-10.0, -2.5, -1.5, -0.125, 0.125, 0.5, 1.5, 2.5, 3.0, 10.0]

  defp wrap(x, type) when type in @unsigned, do: band(x, (1 <<< @bits[type]) - 1)

  defp wrap(x, type) do
    bits = @bits[type]
    x = band(x, (1 <<< bits) - 1)
    if x >= 1 <<< (bits - 1), do: x - (1 <<< bits), else: x
  end

  defp f32(x) when is_float(x), do: <<x::float-32-native>> |> then(fn <<y::float-32-native>> -> y end)
  defp f32(other), do: other

  defp nan(fun) do
    fun.()
  rescue
    ArithmeticError -> :nan
  end

  defp shift(x, n) when n >= 0, do: bsl(x, Kernel.min(n, 64))
  defp shift(x, n), do: bsr(x, Kernel.min(-n, 64))

  defp bool(true), do: 1
  defp bool(false), do: 0

  # Elixir's meaning of each registered operation, on integers (wrapped afterwards) and on floats.
  defp ref(:negate, :int, [x]), do: -x
  defp ref(:abs, :int, [x]), do: abs(x)
  defp ref(op, :int, [x]) when op in [:floor, :ceil, :round], do: x
  defp ref(:bitwise_not, :int, [x]), do: bnot(x)
  defp ref(:negate, :float, [x]), do: -x
  defp ref(:abs, :float, [x]), do: abs(x)
  defp ref(:exp, :float, [x]), do: :math.exp(x)
  defp ref(:log, :float, [x]), do: nan(fn -> :math.log(x) end)
  defp ref(:sqrt, :float, [x]), do: nan(fn -> :math.sqrt(x) end)
  defp ref(:tanh, :float, [x]), do: :math.tanh(x)
  defp ref(:sigmoid, :float, [x]), do: 1 / (1 + :math.exp(-x))
  defp ref(:floor, :float, [x]), do: Float.floor(x)
  defp ref(:ceil, :float, [x]), do: Float.ceil(x)
  defp ref(:round, :float, [x]), do: round(x) * 1.0
  defp ref(:sign, :int, [x]), do: bool(x > 0) - bool(x < 0)
  defp ref(:sign, :float, [x]), do: if(x == 0, do: x, else: if(x > 0, do: 1.0, else: -1.0))
  defp ref(:expm1, :float, [x]), do: :math.exp(x) - 1
  defp ref(:log1p, :float, [x]), do: nan(fn -> :math.log(1 + x) end)
  defp ref(:rsqrt, :float, [x]), do: nan(fn -> 1 / :math.sqrt(x) end)
  defp ref(:cbrt, :float, [x]), do: if(x < 0, do: -:math.pow(-x, 1 / 3), else: :math.pow(x, 1 / 3))

  defp ref(op, :float, [x])
       when op in [:sin, :cos, :tan, :asin, :acos, :atan, :sinh, :cosh, :asinh, :acosh, :atanh, :erf, :erfc],
       do: nan(fn -> apply(:math, op, [x]) end)

  defp ref(:erf_inv, :float, [x]) do
    cond do
      x == 1 -> :infinity
      x == -1 -> :neg_infinity
      x < -1 or x > 1 -> :nan
      true -> x * erf_inv_p(-:math.log((1 - x) * (1 + x)))
    end
  end

  defp ref(:add, _, [x, y]), do: x + y
  defp ref(:subtract, _, [x, y]), do: x - y
  defp ref(:multiply, _, [x, y]), do: x * y
  defp ref(:divide, :int, [x, y]), do: div(x, y)
  defp ref(:divide, :float, [x, y]), do: x / y
  defp ref(:quotient, :int, [x, y]), do: div(x, y)
  defp ref(:remainder, :int, [x, y]), do: rem(x, y)
  defp ref(:remainder, :float, [x, y]), do: :math.fmod(x, y)
  defp ref(:pow, :int, [x, y]), do: Integer.pow(x, y)
  defp ref(:pow, :float, [x, y]), do: nan(fn -> :math.pow(x, y) end)
  defp ref(:min, _, [x, y]), do: Kernel.min(x, y)
  defp ref(:max, _, [x, y]), do: Kernel.max(x, y)
  defp ref(:bitwise_and, :int, [x, y]), do: band(x, y)
  defp ref(:bitwise_or, :int, [x, y]), do: bor(x, y)
  defp ref(:bitwise_xor, :int, [x, y]), do: bxor(x, y)
  defp ref(:left_shift, :int, [x, y]), do: shift(x, y)
  defp ref(:right_shift, :int, [x, y]), do: shift(x, -y)
  defp ref(:atan2, :float, [x, y]), do: :math.atan2(x, y)
  defp ref(:equal, _, [x, y]), do: bool(x == y)
  defp ref(:not_equal, _, [x, y]), do: bool(x != y)
  defp ref(:less, _, [x, y]), do: bool(x < y)
  defp ref(:less_equal, _, [x, y]), do: bool(x <= y)
  defp ref(:greater, _, [x, y]), do: bool(x > y)
  defp ref(:greater_equal, _, [x, y]), do: bool(x >= y)
  defp ref(:logical_and, _, [x, y]), do: bool(x != 0 and y != 0)
  defp ref(:logical_or, _, [x, y]), do: bool(x != 0 or y != 0)
  defp ref(:logical_xor, _, [x, y]), do: bool(x != 0 != (y != 0))

  # Giles' polynomials, as Nx (the complex package) writes them
  defp erf_inv_p(w) when w < 5 do
    [
      2.81022636e-08,
      3.43273939e-07,
      -3.5233877e-06,
      -4.39150654e-06,
      0.00021858087,
      -0.00125372503,
      -0.00417768164,
      0.246640727,
      1.50140941
    ]
    |> horner(w - 2.5)
  end

  defp erf_inv_p(w) do
    [
      -0.000200214257,
      0.000100950558,
      0.00134934322,
      -0.00367342844,
      0.00573950773,
      -0.0076224613,
      0.00943887047,
      1.00167406,
      2.83297682
    ]
    |> horner(:math.sqrt(w) - 3)
  end

  defp horner([c | cs], x), do: Enum.reduce(cs, c, &(&2 * x + &1))

  # Operand pairs for a binary operation: every pair, minus those Accel raises for (zero divisors,
  # negative integer exponents and shift amounts), which the native tests and the error test below
  # cover.
  defp pairs(op, values) do
    for x <- values,
        y <- values,
        not (op in [:divide, :quotient, :remainder] and y == 0),
        not (op in [:left_shift, :right_shift] and y < 0),
        do: {x, y}
  end

  defp pow_pairs(values), do: for(x <- values, y <- [0, 1, 2, 3, 7, 63, 64, 100], do: {x, y})

  defp close?(got, want, type) when is_float(got) and is_float(want) do
    rel = if type == :f32, do: 1.0e-5, else: 1.0e-12
    got == want or abs(got - want) <= rel * Kernel.max(abs(want), 1.0e-30)
  end

  defp close?(got, want, _type), do: got == want

  test "every registered operation has an Elixir reference here" do
    for %{name: name, family: family, types: types} <- Accel.Tensor.Registry.ops() do
      arity = if family == :unary, do: 1, else: 2
      assert function_exported?(T, name, arity), "Accel.Tensor.#{name}/#{arity} is not defined"
      args = List.duplicate(1, arity)
      kinds = if types == :all, do: [:int, :float], else: [types]

      for kind <- kinds,
          do: assert(ref(name, kind, if(kind == :float, do: Enum.map(args, &(&1 * 1.0)), else: args)))
    end
  end

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "every registered operation, on every type it takes, equals Elixir's" do
        for %{name: op, family: family, types: types} <- Accel.Tensor.Registry.ops(),
            type <- [:s64, :s32, :u8, :u64, :u32, :f32, :f64],
            kind = if(type in [:f32, :f64], do: :float, else: :int),
            types in [:all, kind] do
          values = if kind == :float, do: Enum.map(@floats, &f32/1), else: @ints[type]

          {xs, ys} =
            case family do
              :unary -> {values, nil}
              _ when op == :pow and kind == :int -> pow_pairs(values) |> Enum.unzip()
              _ -> pairs(op, values) |> Enum.unzip()
            end

          x = T.from_list(xs, type: type, backend: @backend)
          args = if ys, do: [x, T.from_list(ys, type: type, backend: @backend)], else: [x]
          got = apply(T, op, args) |> T.to_list()
          inputs = if ys, do: Enum.zip_with(xs, ys, &[&1, &2]), else: Enum.map(xs, &[&1])

          want =
            for args <- inputs do
              r = ref(op, kind, args)

              cond do
                family == :compare -> r
                kind == :int -> wrap(r, type)
                type == :f32 -> f32(r)
                true -> r
              end
            end

          for {g, w, args} <- Enum.zip([got, want, inputs]) do
            assert close?(g, w, type),
                   "#{op}(#{Enum.map_join(args, ", ", &inspect/1)}) on #{type}: got #{inspect(g)}, want #{inspect(w)}"
          end
        end
      end

      test "integer zero divisors, negative exponents and negative shifts raise, naming the function" do
        a = T.from_list([1, 2, 3], backend: @backend)
        z = T.from_list([1, 0, 1], backend: @backend)

        for op <- [:divide, :quotient, :remainder] do
          assert_raise ArgumentError, "integer division by zero in Accel.Tensor.#{op}/2", fn ->
            apply(T, op, [a, z])
          end
        end

        assert_raise ArgumentError, ~r/negative exponent in Accel.Tensor.pow\/2/, fn -> T.pow(a, -1) end

        # as Nx raises, naming the first negative amount
        by = T.from_list([1, -2, -1], backend: @backend)
        assert_raise ArgumentError, "cannot left shift by -2", fn -> T.left_shift(a, by) end
        assert_raise ArgumentError, "cannot right shift by -2", fn -> T.right_shift(a, by) end
        assert_raise ArgumentError, ~r/Accel.Tensor.exp\/1 needs a float tensor/, fn -> T.exp(a) end

        assert_raise ArgumentError, ~r/bitwise_and\/2 needs integer tensors/, fn ->
          T.bitwise_and(T.as_type(a, :f32), 1)
        end
      end

      test "broadcasting in any dimension, and type promotion by Nx's rules" do
        col = T.from_list([[1], [2]], backend: @backend)
        row = T.from_list([10, 20, 30], backend: @backend)
        assert T.add(col, row) |> T.to_list() == [[11, 21, 31], [12, 22, 32]]

        cube = T.iota({3, 1, 2}, backend: @backend)
        four = T.iota({4, 1}, backend: @backend)
        got = T.multiply(cube, four)
        assert got.shape == {3, 4, 2}

        assert T.to_list(got) ==
                 for(i <- 0..2, do: for(j <- 0..3, do: for(k <- 0..1, do: (i * 2 + k) * j)))

        assert_raise ArgumentError, ~r/shapes \{3, 1, 2\} and \{3\} do not broadcast/, fn ->
          T.add(cube, T.iota({3}, backend: @backend))
        end

        s64 = T.from_list([1, 2], backend: @backend)
        assert %T{type: :f32} = T.add(s64, T.from_list([0.5, 0.25], type: :f32, backend: @backend))

        assert %T{type: :s32} =
                 T.add(
                   T.from_list([1], type: :u8, backend: @backend),
                   T.from_list([1], type: :s32, backend: @backend)
                 )

        assert %T{type: :f32} = x = T.multiply(s64, 1.5)
        assert T.to_list(x) == [1.5, 3.0]
        assert %T{type: :u8} = T.add(T.from_list([250], type: :u8, backend: @backend), 10)
        assert %T{type: :u8} = c = T.less(s64, 1.5)
        assert T.to_list(c) == [1, 0]
        assert T.to_list(T.logical_not(c)) == [0, 1]
      end

      test "select, argmin and argmax, slices, concatenation and sums over several axes" do
        m = T.from_list([[1.0, 5.0, 3.0], [9.0, 9.0, 2.0]], type: :f32, backend: @backend)
        assert T.select(T.greater(m, 2.0), m, 0) |> T.to_list() == [[0.0, 5.0, 3.0], [9.0, 9.0, 0.0]]
        assert T.select(T.from_list([1, 0, 2], backend: @backend), 7, -1) |> T.to_list() == [7, -1, 7]

        assert T.argmax(m) |> T.to_number() == 3
        assert T.argmax(m, axis: 1) |> T.to_list() == [1, 0]
        assert T.argmin(m, axis: 0) |> T.to_list() == [0, 0, 1]
        assert %T{type: :s64} = T.argmin(m)

        values = for i <- 0..99_999, do: rem(i * 7919, 100_003) - 50_000
        v = T.from_list(values, backend: @backend)
        assert T.argmin(v) |> T.to_number() == Enum.find_index(values, &(&1 == Enum.min(values)))

        w = T.iota({3, 4}, backend: @backend)
        assert T.slice(w, [1, 0], [2, 2], strides: [1, 3]) |> T.to_list() == [[4, 7], [8, 11]]

        assert_raise ArgumentError, ~r/axis 1 of size 4 has no 3 elements/, fn ->
          T.slice(w, [0, 2], [1, 3])
        end

        assert T.concatenate([w, T.iota({1, 4}, backend: @backend)]) |> T.to_list() ==
                 [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [0, 1, 2, 3]]

        joined = T.concatenate([w, T.from_list([[0.5], [1.5], [2.5]], backend: @backend)], axis: -1)
        assert joined.type == :f64 and joined.shape == {3, 5}
        assert hd(T.to_list(joined)) == [0.0, 1.0, 2.0, 3.0, 0.5]

        cube = T.iota({2, 3, 4}, backend: @backend)

        assert T.sum(cube, axes: [0, 2]) |> T.to_list() ==
                 for(j <- 0..2, do: Enum.sum(for i <- 0..1, k <- 0..3, do: i * 12 + j * 4 + k))

        assert T.max(cube, axes: [-1, 0]) |> T.to_list() == [15, 19, 23]

        assert T.mean(cube, axes: [0, 1]) |> T.to_list() ==
                 for(k <- 0..3, do: Enum.sum(for i <- 0..1, j <- 0..2, do: i * 12 + j * 4 + k) / 6)

        assert T.min(T.from_list([3, 1, 2], backend: @backend), 2) |> T.to_list() == [2, 1, 2]

        v1 = T.from_binary(<<1.5::float-32-native, 2.5::float-32-native>>, :f32, backend: @backend)
        assert v1.shape == {2} and T.to_list(v1) == [1.5, 2.5]
      end
    end
  end
end
