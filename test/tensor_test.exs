defmodule Accel.TensorTest do
  # Every tensor operation on every backend against a pure-Elixir reference on random data: exact
  # for integers, within Accel.Tensor's documented tolerances for floats. Tests for a backend carry
  # its name as a tag; test_helper.exs excludes the tags of unusable backends.
  use ExUnit.Case, async: true
  import Bitwise
  alias Accel.Tensor, as: T
  doctest Accel.Tensor

  @ints [:s64, :s32, :u8]
  @floats [:f32, :f64]

  defp wrap(x, :s64), do: x |> band(0xFFFFFFFFFFFFFFFF) |> signed(64)
  defp wrap(x, :s32), do: x |> band(0xFFFFFFFF) |> signed(32)
  defp wrap(x, :u8), do: band(x, 0xFF)
  defp signed(x, bits), do: if(x >= 1 <<< (bits - 1), do: x - (1 <<< bits), else: x)

  defp random(:s64, n), do: for(_ <- 1..n, do: Enum.random(-0x8000000000000000..0x7FFFFFFFFFFFFFFF))
  defp random(:s32, n), do: for(_ <- 1..n, do: Enum.random(-0x80000000..0x7FFFFFFF))
  defp random(:u8, n), do: for(_ <- 1..n, do: Enum.random(0..255))
  # Floats exactly representable in f32, so the reference sees the same inputs as the device.
  defp random(type, n) when type in @floats, do: for(_ <- 1..n, do: (:rand.uniform() * 8 - 4) |> f32())
  defp f32(x), do: <<x::float-32-native>> |> then(fn <<y::float-32-native>> -> y end)

  defp tol(:f32), do: 1.0e-5
  defp tol(:f64), do: 1.0e-12

  defp close?(a, b, rel) when is_float(a) and is_float(b),
    do: a == b or abs(a - b) <= rel * Enum.max([abs(a), abs(b), 1.0e-30])

  defp assert_close(got, want, rel) do
    assert length(got) == length(want)

    for {g, w, i} <- Enum.zip([got, want, 0..(length(got) - 1)]) do
      assert close?(g, w, rel), "element #{i}: got #{g}, want #{w}"
    end
  end

  defp ref_binary(op, x, y, type) when type in @ints do
    case op do
      :add -> wrap(x + y, type)
      :subtract -> wrap(x - y, type)
      :multiply -> wrap(x * y, type)
      :divide -> wrap(div(x, y), type)
    end
  end

  defp ref_binary(op, x, y, _float) do
    case op do
      :add -> x + y
      :subtract -> x - y
      :multiply -> x * y
      :divide -> x / y
    end
  end

  defp ref_compare(:greater, x, y), do: if(x > y, do: 1, else: 0)
  defp ref_compare(:less_equal, x, y), do: if(x <= y, do: 1, else: 0)

  # `a` of shape `out` with `b` of `shape` (broadcast), b first when `swap`, each op against the
  # reference over the same elements read by index.
  defp assert_broadcast(backend, type, out, shape, swap, ops) do
    n = Tuple.product(out)
    m = Tuple.product(shape)
    xs = random(type, n)
    ys = random(type, m) |> Enum.map(&if(&1 == 0, do: 1, else: &1))
    a = T.from_list(xs, type: type, backend: backend) |> T.reshape(out)
    b = T.from_list(ys, type: type, backend: backend) |> T.reshape(shape)
    yt = List.to_tuple(ys)
    yb = Enum.map(broadcast_indices(shape, out), &elem(yt, &1))

    for op <- ops do
      {got, pairs} =
        if swap, do: {apply(T, op, [b, a]), Enum.zip(yb, xs)}, else: {apply(T, op, [a, b]), Enum.zip(xs, yb)}

      assert got.shape == out
      got = got |> T.reshape({n}) |> T.to_list()

      want =
        Enum.map(pairs, fn {x, y} ->
          if op in [:greater, :less_equal], do: ref_compare(op, x, y), else: ref_binary(op, x, y, type)
        end)

      label = "#{type} #{op} #{inspect(out)} with #{inspect(shape)}#{if swap, do: " (first)"}"

      if type in @floats and op not in [:greater, :less_equal],
        do: assert_close(got, want, tol(type)),
        else: assert(got == want, label)
    end
  end

  # For each element of `out` in order, the index of the element of `shape` it reads.
  defp broadcast_indices(shape, out) do
    dims = Tuple.to_list(out)
    own = List.duplicate(1, length(dims) - tuple_size(shape)) ++ Tuple.to_list(shape)

    {strides, _} =
      Enum.map_reduce(Enum.reverse(own), 1, fn d, acc -> {if(d == 1, do: 0, else: acc), acc * d} end)

    strides = Enum.reverse(strides)

    Enum.reduce(Enum.zip(dims, strides), [0], fn {d, s}, acc ->
      for base <- acc, k <- 0..(d - 1), do: base + k * s
    end)
  end

  for backend <- [:cpu, :opencl, :cuda] do
    describe "#{backend}" do
      @describetag backend
      @backend backend

      test "lists and binaries round-trip in every type; iota is made on the device" do
        for type <- @ints ++ @floats do
          data = random(type, 37)
          t = T.from_list(data, type: type, backend: @backend)
          assert t.device == {@backend, 0} and t.shape == {37} and t.type == type
          assert T.to_list(t) == data
          t2 = T.from_binary(T.to_binary(t), type, {37}, backend: @backend)
          assert T.to_list(t2) == data

          assert T.to_list(T.iota({2, 3}, type: type, backend: @backend)) ==
                   [[0, 1, 2], [3, 4, 5]]
                   |> Enum.map(fn r -> Enum.map(r, &if(type in @floats, do: &1 * 1.0, else: &1)) end)
        end

        assert T.to_list(T.iota({2, 0}, backend: @backend)) == [[], []]
        assert T.to_list(T.from_list([], backend: @backend)) == []
        assert T.to_number(T.sum(T.from_list([], backend: @backend))) == 0

        assert inspect(T.from_list([[1, 2], [3, 4]], backend: @backend)) ==
                 "#Accel.Tensor<s64[2][2] #{@backend}:0 [1, 2, 3, 4]>"
      end

      test "elementwise operations with tensors, scalars on either side and trailing broadcasting" do
        for type <- @ints ++ @floats, op <- [:add, :subtract, :multiply, :divide] do
          xs = random(type, 1000)
          ys = random(type, 1000) |> Enum.map(&if(&1 == 0, do: 1, else: &1))
          a = T.from_list(xs, type: type, backend: @backend)
          b = T.from_list(ys, type: type, backend: @backend)
          s = if type in @floats, do: 1.5, else: 3

          cases = [
            {apply(T, op, [a, b]), Enum.zip_with(xs, ys, &ref_binary(op, &1, &2, type))},
            {apply(T, op, [a, s]), Enum.map(xs, &ref_binary(op, &1, s, type))},
            {apply(T, op, [s, b]), Enum.map(ys, &ref_binary(op, s, &1, type))}
          ]

          for {got, want} <- cases do
            if type in @ints,
              do: assert(T.to_list(got) == want, "#{type} #{op}"),
              else: assert_close(T.to_list(got), want, tol(type))
          end
        end

        m = T.from_list([[1, 2, 3], [4, 5, 6]], backend: @backend)
        row = T.from_list([10, 20, 30], backend: @backend)
        assert T.to_list(T.add(m, row)) == [[11, 22, 33], [14, 25, 36]]
        assert T.to_list(T.subtract(row, m)) == [[9, 18, 27], [6, 15, 24]]
      end

      # The CPU backend reads such operands as rows of its vectorised loops (one element or a
      # contiguous run per row); rows of at least 16 elements, split across threads' chunks.
      test "broadcast operands: 0-d tensors, repeats and columns, on either side" do
        shapes = [{}, {1}, {33}, {70, 33}, {3, 1, 33}, {3, 70, 1}, {1, 70, 1}, {3, 1, 1}, {70, 1}, {1, 1, 1}]

        for type <- [:s32, :u8, :f64, :f32], shape <- shapes, swap <- [false, true] do
          assert_broadcast(@backend, type, {3, 70, 33}, shape, swap, [:subtract, :greater])
        end

        for shape <- [{}, {37}, {600, 37}, {4, 600, 1}, {4, 1, 37}] do
          assert_broadcast(@backend, :f32, {4, 600, 37}, shape, false, [:add])
          assert_broadcast(@backend, :s64, {4, 600, 37}, shape, true, [:multiply, :less_equal])
        end

        m = T.from_list(Enum.map(1..40, fn r -> Enum.to_list(r..(r + 19)) end), type: :s32, backend: @backend)
        column = T.from_list(Enum.map(1..40, &[if(&1 == 33, do: 0, else: &1)]), type: :s32, backend: @backend)

        assert_raise ArgumentError, "integer division by zero in Accel.Tensor.divide/2", fn ->
          T.divide(m, column)
        end

        assert T.to_list(T.divide(m, T.from_list([7], type: :s32, backend: @backend) |> T.reshape({}))) ==
                 Enum.map(1..40, fn r -> Enum.map(r..(r + 19), &div(&1, 7)) end)
      end

      test "integer semantics: wrap-around, truncating division, MIN / -1, zero divisors raise" do
        max = T.from_list([0x7FFFFFFFFFFFFFFF, -0x8000000000000000], backend: @backend)
        assert T.to_list(T.add(max, 1)) == [-0x8000000000000000, -0x7FFFFFFFFFFFFFFF]
        assert T.to_list(T.divide(max, -1)) == [-0x7FFFFFFFFFFFFFFF, -0x8000000000000000]
        assert T.to_list(T.negate(max)) == [-0x7FFFFFFFFFFFFFFF, -0x8000000000000000]
        assert T.to_list(T.abs(max)) == [0x7FFFFFFFFFFFFFFF, -0x8000000000000000]
        assert T.to_list(T.divide(T.from_list([7, -7], type: :s32, backend: @backend), 2)) == [3, -3]
        assert T.to_list(T.multiply(T.from_list([200], type: :u8, backend: @backend), 2)) == [144]

        assert_raise ArgumentError, "integer division by zero in Accel.Tensor.divide/2", fn ->
          T.divide(T.from_list([1, 2], backend: @backend), T.from_list([1, 0], backend: @backend))
        end
      end

      test "unary operations" do
        for type <- @floats do
          xs = random(type, 500) |> Enum.map(&(&1 + 4.5))
          t = T.from_list(xs, type: type, backend: @backend)

          for {op, fun} <- [
                negate: &(-&1),
                abs: &Kernel.abs/1,
                exp: &:math.exp/1,
                log: &:math.log/1,
                sqrt: &:math.sqrt/1,
                tanh: &:math.tanh/1,
                sigmoid: &(1 / (1 + :math.exp(-&1)))
              ] do
            assert_close(T.to_list(apply(T, op, [t])), Enum.map(xs, fun), tol(type))
          end
        end

        assert_raise ArgumentError, ~r/needs a float tensor/, fn -> T.exp(T.iota({3}, backend: @backend)) end
      end

      test "reductions over the whole tensor and along each axis" do
        for type <- @ints ++ @floats do
          rows = for _ <- 1..7, do: random(type, 300)
          t = T.from_list(rows, type: type, backend: @backend)
          flat = List.flatten(rows)
          sum_ref = fn list -> if type in @ints, do: wrap(Enum.sum(list), :s64), else: Enum.sum(list) end
          # A float sum's error is bounded by the sum of the magnitudes, not by the result (which
          # may cancel to nearly zero): the tolerance scales with it.
          magnitude = fn list -> list |> Enum.map(&Kernel.abs/1) |> Enum.sum() end
          cols = Enum.zip_with(rows, & &1)

          sums = [
            {T.sum(t), [flat]},
            {T.sum(t, axis: 0), cols},
            {T.sum(t, axis: -1), rows}
          ]

          for {got, slices} <- sums do
            got = List.wrap(T.to_list(got))
            want = Enum.map(slices, sum_ref)

            if type in @ints do
              assert got == want
            else
              for {g, w, slice} <- Enum.zip([got, want, slices]),
                  do: assert(Kernel.abs(g - w) <= tol(type) * magnitude.(slice), "sum: got #{g}, want #{w}")
            end
          end

          # min and max are exact for every type.
          assert T.to_number(T.min(t)) == Enum.min(flat)
          assert T.to_number(T.max(t)) == Enum.max(flat)
          assert T.to_list(T.max(t, axis: 0)) == Enum.map(cols, &Enum.max/1)
          assert T.to_list(T.min(t, axis: 1)) == Enum.map(rows, &Enum.min/1)

          mean = T.to_number(T.mean(t))
          assert Kernel.abs(mean - Enum.sum(flat) / length(flat)) <= 1.0e-4 * magnitude.(flat) / length(flat)
        end

        big = T.iota({1 <<< 20}, backend: @backend)
        assert T.to_number(T.sum(big)) == div((1 <<< 20) * ((1 <<< 20) - 1), 2)
        # 0/0 is NaN: min and max propagate it; 1/0 is infinity.
        special = T.from_list([1.0, 0.0, -1.0], backend: @backend) |> T.divide(0.0)
        assert T.to_list(special) == [:infinity, :nan, :neg_infinity]
        assert T.to_number(T.max(special)) == :nan
        assert T.to_number(T.min(special)) == :nan
      end

      test "transpose, matmul and dot against the definition" do
        for type <- @floats do
          {m, k, n} = {13, 17, 11}
          a = for _ <- 1..m, do: random(type, k)
          b = for _ <- 1..k, do: random(type, n)
          ta = T.from_list(a, type: type, backend: @backend)
          tb = T.from_list(b, type: type, backend: @backend)
          bt = Enum.zip_with(b, & &1)
          # Each element is a sum of products: its error is bounded relative to the sum of their
          # magnitudes (the result itself may cancel to nearly zero).
          rel = if type == :f32, do: 1.0e-5, else: 1.0e-12

          dot_ref = fn u, w ->
            {Enum.sum(Enum.zip_with(u, w, &*/2)), Enum.sum(Enum.zip_with(u, w, &Kernel.abs(&1 * &2)))}
          end

          assert_dots = fn got, pairs ->
            for {g, {u, w}} <- Enum.zip(got, pairs) do
              {want, magnitude} = dot_ref.(u, w)
              assert Kernel.abs(g - want) <= rel * magnitude, "got #{g}, want #{want}"
            end
          end

          assert_dots.(List.flatten(T.to_list(T.matmul(ta, tb))), for(row <- a, col <- bt, do: {row, col}))
          assert T.to_list(T.transpose(ta)) == Enum.zip_with(a, & &1)
          assert T.dot(ta, T.transpose(ta)).shape == {m, m}
          xs = random(type, n)

          assert_dots.(
            T.to_list(T.dot(tb, T.from_list(xs, type: type, backend: @backend))),
            for(row <- b, do: {row, xs})
          )

          v = T.from_list(xs, type: type, backend: @backend)
          assert_close([T.to_number(T.dot(v, v))], [Enum.sum(Enum.map(xs, &(&1 * &1)))], 1.0e-4)
        end

        # integers: exact, wrapping in their type (no BLAS takes them)
        ints = T.from_list([[3, -1], [2, 0x7FFFFFFFFFFFFFFF]], backend: @backend)
        # (-3 - (2^63 - 1), 6 + 2 (2^63 - 1) and -2 + (2^63 - 1)^2, each modulo 2^64)
        assert T.to_list(T.matmul(ints, ints)) == [[7, 0x7FFFFFFFFFFFFFFE], [4, -1]]
        u8 = T.from_list([[200, 100], [1, 2]], type: :u8, backend: @backend)

        assert T.to_list(T.matmul(u8, u8)) == [
                 [rem(200 * 200 + 100, 256), rem(200 * 100 + 200, 256)],
                 [202, 104]
               ]
      end

      test "as_type converts, truncating and saturating floats" do
        t = T.from_list([1.9, -2.9, 1.0e20, -1.0e20, 300.0], backend: @backend)
        assert T.to_list(T.as_type(t, :s32)) == [1, -2, 2_147_483_647, -2_147_483_648, 300]
        assert T.to_list(T.as_type(t, :u8)) == [1, 0, 255, 0, 255]
        assert T.to_list(T.as_type(T.from_list([-1, 256], backend: @backend), :u8)) == [255, 0]
      end

      test "sub-byte integers and 8-bit floats: lists, conversions, and values that do not fit" do
        for {type, values} <- [s2: [-2, 1, 0, -1], s4: [-8, 7, 3], u2: [3, 0, 2], u4: [15, 0, 9]] do
          t = T.from_list(values, type: type, backend: @backend)
          assert T.to_list(t) == values
          # a byte per element, the value in its width
          assert byte_size(T.to_binary(t)) == length(values)
          assert T.to_list(T.as_type(t, :s64)) == values

          assert_raise ArgumentError,
                       ~r/element at index \[1\] \(#{if type in [:s2, :s4], do: "-", else: ""}/,
                       fn ->
                         T.from_list([0, if(type in [:s2, :s4], do: -9, else: 16)],
                           type: type,
                           backend: @backend
                         )
                       end
        end

        # a byte per element, wrapped to the width
        assert T.to_list(T.from_binary(<<0xFF, 0x17, 0x08>>, :s4, backend: @backend)) == [-1, 7, -8]
        assert T.to_list(T.from_binary(<<0xFF, 0x17, 0x08>>, :u2, backend: @backend)) == [3, 3, 0]

        # wrapping and saturating into them, as into the wider integers
        wide = T.from_list([-1, 300, 7, 8], backend: @backend)
        assert T.to_list(T.as_type(wide, :s4)) == [-1, -4, 7, -8]
        assert T.to_list(T.as_type(wide, :u2)) == [3, 0, 3, 0]
        assert T.to_list(T.as_type(T.from_list([-9.5, 9.5, -1.5], backend: @backend), :s4)) == [-8, 7, -1]

        floats = [1.0, -2.5, 0.375, 448.0, 0.0]
        assert T.to_list(T.from_list(floats, type: :f8_e4m3fn, backend: @backend)) == floats
        assert T.to_list(T.from_list(floats, type: :f8, backend: @backend)) == floats
        # E4M3FN: 1.99 keeps its exponent, beyond 448 saturates (as Nx writes it); E5M2: the f16's high byte
        e4 = T.as_type(T.from_list([1.99, 1000.0, -0.3], backend: @backend), :f8_e4m3fn)
        assert T.to_binary(e4) == <<0x3F, 0x7E, 0xAA>>
        assert T.to_list(e4) == [1.875, 448.0, -0.3125]
        assert T.to_list(T.as_type(T.from_list([3.3, 1.0e5], backend: @backend), :f8)) == [3.0, :infinity]
        assert T.to_binary(T.from_list([0.3], type: :f8_e4m3fn, backend: @backend)) == <<0x2A>>

        assert_raise ArgumentError, ~r/element at index \[0\] \(449.0\) does not fit type :f8_e4m3fn/, fn ->
          T.from_list([449.0], type: :f8_e4m3fn, backend: @backend)
        end

        assert_raise ArgumentError, ~r/does not fit type :f8/, fn ->
          T.from_list([1.0e5], type: :f8, backend: @backend)
        end
      end

      test "Accel.logistic_map/2 runs on a tensor in place on its device" do
        t = T.iota({100_000}, backend: @backend) |> T.add(1)
        want = Accel.logistic_map(1..100_000, backend: :cpu, as: :binary)
        result = Accel.logistic_map(t)
        assert result.device == t.device
        assert T.to_binary(result) == want

        assert T.to_list(
                 Accel.logistic_map(t, p: 61, iterations: 1)
                 |> T.reshape({10, 10_000})
                 |> T.sum(axis: 1)
               )
               |> length() == 10

        assert_raise ArgumentError, ~r/does not apply to a tensor/, fn -> Accel.logistic_map(t, as: :list) end
      end

      test "errors: shapes, types, use after free, freed memory is released" do
        a = T.iota({2, 3}, backend: @backend)

        assert_raise ArgumentError, ~r/add\/2: shapes \{2, 3\} and \{2\} do not broadcast/, fn ->
          T.add(a, T.iota({2}, backend: @backend))
        end

        # Mixed types promote (Nx's rules): s64 with f64 is f64.
        assert %T{type: :f64} = mixed = T.add(a, T.iota({2, 3}, type: :f64, backend: @backend))
        assert T.to_list(mixed) == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]

        assert_raise ArgumentError, ~r/needs shapes/, fn -> T.matmul(a, a) end
        assert %T{type: :f32} = T.add(a, 1.5)

        assert_raise ArgumentError, ~r/out of range for type :u8/, fn ->
          T.add(T.iota({2}, type: :u8, backend: @backend), 256)
        end

        # What freeing releases: test/tensor_memory_test.exs (device counts need no async neighbours).
        big = T.iota({1_000_000}, backend: @backend)
        assert T.free(big) == :ok
        assert_raise ArgumentError, ~r/was freed/, fn -> T.to_list(big) end
        assert_raise ArgumentError, ~r/was freed/, fn -> T.add(big, 1) end
        assert inspect(big) =~ "(freed)"
      end
    end
  end

  # from_list/2 and to_list/1 run natively (c_src/nif/tensor_lists.cpp) when a list is well formed,
  # and through the Elixir definition otherwise: both must build the same tensors.
  test "native list codec: shapes, inferred types and special floats as the definition has them" do
    cases = [
      {[[1, 2, 3], [4, 5, 6]], nil, {2, 3}, :s64},
      {[[1, 2.5], [3, 4]], nil, {2, 2}, :f64},
      {[[[], []], [[], []]], nil, {2, 2, 0}, :s64},
      {[[[[[[[[[[7]]]]]]]]]], nil, List.to_tuple(List.duplicate(1, 10)), :s64},
      {[1, 2, 255], :u8, {3}, :u8},
      {[-2_147_483_648, 2_147_483_647], :s32, {2}, :s32},
      {[0.1, 1.0e38, -3], :f32, {3}, :f32},
      {Enum.to_list(1..100_000), nil, {100_000}, :s64}
    ]

    for {list, type, shape, want_type} <- cases do
      opts = if type, do: [type: type, backend: :cpu], else: [backend: :cpu]
      t = T.from_list(list, opts)
      assert {t.shape, t.type} == {shape, want_type}, inspect(list, limit: 5)
      # The bytes the Elixir definition encodes, element by element.
      flat = List.flatten(list)
      assert T.to_binary(t) == Enum.map_join(flat, &Accel.Tensor.Codec.encode_one(&1, want_type))
      back = T.to_list(t)

      assert back ==
               if(want_type in [:f32, :f64], do: nest_like(list, &decode_float(&1, want_type)), else: list)
    end

    # Lists the native path declines are answered by the definition, with its messages.
    assert_raise ArgumentError, ~r/element at index \[1\] \(2.5\) does not fit type :s64/, fn ->
      T.from_list([1, 2.5], type: :s64, backend: :cpu)
    end

    assert_raise ArgumentError, ~r/the list at index \[1\] should have 2 elements/, fn ->
      T.from_list([[1, 2], [3]], backend: :cpu)
    end

    assert T.from_list([1, 1 <<< 70], type: :f64, backend: :cpu) |> T.to_list() == [
             1.0,
             1.1805916207174113e21
           ]

    specials = <<0x7FC00000::32-native, 0x7F800000::32-native, 0xFF800000::32-native>>

    assert T.from_binary(specials, :f32, {3}, backend: :cpu) |> T.to_list() == [
             :nan,
             :infinity,
             :neg_infinity
           ]
  end

  defp nest_like(list, fun) when is_list(list), do: Enum.map(list, &nest_like(&1, fun))
  defp nest_like(x, fun), do: fun.(x)

  defp decode_float(x, :f64), do: x * 1.0
  defp decode_float(x, :f32), do: <<x * 1.0::float-32-native>> |> then(fn <<y::float-32-native>> -> y end)

  @tag :opencl
  test "tensors on different devices do not mix until transferred" do
    cpu = T.iota({4}, backend: :cpu)
    cl = T.iota({4}, backend: :opencl)

    assert_raise ArgumentError, ~r/different devices \(:cpu device 0 and :opencl device 0\)/, fn ->
      T.add(cpu, cl)
    end

    moved = T.transfer(cl, :cpu)
    assert moved.device == {:cpu, 0}
    assert T.to_list(T.add(cpu, moved)) == [0, 2, 4, 6]
  end
end
