defmodule Accel.KernelDifferentialTest do
  # Accel.map(input, kernel) against Enum.map(input, the same function) on every available backend:
  # 95 functions (overflow at the edges, negative rem/div, rem of products past 2^53, division by zero, float/int mixing,
  # `/` always float, comparisons and booleans, bitwise, shifts past 63, nested if/cond/case, Elixir's variable scopes, loops,
  # captured divisors) on extreme and random int64 and f64 inputs. Elements where Elixir raises are
  # checked apart: Accel.map must raise the BEAM's exception of the first of them.
  use ExUnit.Case, async: true
  import Bitwise
  require Accel

  # A fresh checkout's kernel cache is empty: the CPU backend then compiles each of these ~180
  # kernels with the system's C++ compiler on first use, beside the suite's other async tests.
  @moduletag timeout: 300_000

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF

  @ints (fn ->
           :rand.seed(:exsss, {7, 11, 13})

           edges =
             [
               0,
               1,
               -1,
               2,
               -2,
               3,
               -3,
               7,
               -7,
               61,
               255,
               256,
               -256,
               0x7FFFFFFF,
               -0x80000000,
               0xFFFFFFFF,
               0x100000000
             ] ++
               [0x1FFFFFFFFFFFFF, 0x20000000000000, 0x20000000000001, -0x20000000000001, 0x3FFFFFFFFFFFFFFF] ++
               [
                 0x4000000000000000,
                 @max,
                 @max - 1,
                 @min,
                 @min + 1,
                 6_700_417,
                 -6_700_417,
                 3_037_000_499,
                 3_037_000_500
               ]

           random =
             for bits <- [4, 8, 16, 31, 32, 33, 48, 53, 62, 63], _ <- 1..12 do
               v = :rand.uniform(1 <<< bits) - 1
               if :rand.uniform(2) == 1, do: -v, else: v
             end

           edges ++ random
         end).()

  @floats (fn ->
             :rand.seed(:exsss, {3, 5, 8})

             edges = [
               0.0,
               -0.0,
               1.0,
               -1.0,
               0.5,
               1.5,
               -2.5,
               2.5,
               1.0e308,
               -1.0e308,
               5.0e-324,
               1.0e-300,
               3.0e9,
               9.007199254740993e15
             ]

             random =
               for e <- [-40, -5, 0, 3, 10, 20, 40, 200],
                   _ <- 1..8,
                   do: (:rand.uniform() - 0.5) * :math.pow(10, e)

             edges ++ random
           end).()

  @doc false
  def int_kernels do
    p = 6_700_417
    q = -12_345
    small_p = 61
    lo = -3
    shift = 5

    [
      add: Accel.kernel(fn x -> x + 1 end),
      sub: Accel.kernel(fn x -> x - 1 end),
      square: Accel.kernel(fn x -> x * x end),
      affine: Accel.kernel(fn x -> x * 3 + 7 end),
      neg: Accel.kernel(fn x -> -x end),
      abs: Accel.kernel(fn x -> abs(x) end),
      div_lit: Accel.kernel(fn x -> div(x, 7) end),
      rem_lit: Accel.kernel(fn x -> rem(x, 7) end),
      div_neg_lit: Accel.kernel(fn x -> div(x, -3) end),
      rem_neg_lit: Accel.kernel(fn x -> rem(x, -3) end),
      div_by_x: Accel.kernel(fn x -> div(1_000_000, x) end),
      rem_by_x: Accel.kernel(fn x -> rem(@max, x) end),
      rem_captured: Accel.kernel(fn x -> rem(x, p) end),
      div_captured_neg: Accel.kernel(fn x -> div(x, q) end),
      div_captured_minus_one: Accel.kernel(fn x -> div(x, lo + 2) end),
      logistic: Accel.kernel(fn x -> rem(22 * x * (x + 1), 6_700_417) end),
      logistic_loop:
        Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, acc -> rem(22 * acc * (acc + 1), small_p) end) end),
      for_reduce:
        Accel.kernel(fn x ->
          for i <- 1..5, reduce: x do
            acc -> acc + i * i
          end
        end),
      down_loop: Accel.kernel(fn x -> Enum.reduce(10..1//-3, x, fn i, acc -> acc * 2 - i end) end),
      computed_loop: Accel.kernel(fn x -> Enum.reduce(0..band(x, 7), 0, fn i, acc -> acc + i end) end),
      # an accumulator that leaves 64 bits on every row (PropEr's seed 416944): Elixir's bignum
      always_overflows:
        Accel.kernel(fn _x -> Enum.reduce(0..0, 4_294_967_295, fn _, acc -> (0 + acc) * acc end) end),
      half: Accel.kernel(fn x -> x / 2 end),
      scale: Accel.kernel(fn x -> x * 2.5 end),
      reciprocal: Accel.kernel(fn x -> 1 / x end),
      min: Accel.kernel(fn x -> min(x, 100) end),
      max: Accel.kernel(fn x -> max(x, -100) end),
      positive: Accel.kernel(fn x -> x > 0 end),
      between: Accel.kernel(fn x -> x > 0 and x < 100 end),
      neg_or_even: Accel.kernel(fn x -> x < 0 or rem(x, 2) == 0 end),
      not_gt: Accel.kernel(fn x -> not (x > 5) end),
      if_else: Accel.kernel(fn x -> if x > 0, do: x * 2, else: -x end),
      nested_if:
        Accel.kernel(fn x ->
          if x > 0, do: if(x > 1000, do: 1, else: 2), else: if(x < -1000, do: 3, else: 4)
        end),
      cond:
        Accel.kernel(fn x ->
          cond do
            x < -1000 -> 1
            x < 0 -> 2
            x == 0 -> 3
            true -> 4
          end
        end),
      case:
        Accel.kernel(fn x ->
          case rem(x, 3) do
            0 -> 10
            -1 -> 20
            y when y > 0 -> 30 + y
            _ -> 40
          end
        end),
      band: Accel.kernel(fn x -> band(x, 0xFF) end),
      bor: Accel.kernel(fn x -> bor(x, 1) end),
      bxor: Accel.kernel(fn x -> bxor(x, -1) end),
      bnot: Accel.kernel(fn x -> bnot(x) end),
      bsl: Accel.kernel(fn x -> bsl(x, 3) end),
      bsr_past_63: Accel.kernel(fn x -> bsr(x, 70) end),
      bsl_varying: Accel.kernel(fn x -> bsl(1, rem(x, 70)) end),
      bsr_varying: Accel.kernel(fn x -> x >>> rem(x, 100) end),
      operators: Accel.kernel(fn x -> (x &&& 0xF0F0) ||| 1 end),
      captured_shift: Accel.kernel(fn x -> bsl(x, shift) end),
      trunc_div: Accel.kernel(fn x -> trunc(x / 3) end),
      round_half: Accel.kernel(fn x -> round(x * 0.5) end),
      eq_float: Accel.kernel(fn x -> x == 1.0 end),
      exact_compare: Accel.kernel(fn x -> x > 9_007_199_254_740_992.0 end),
      strict_eq: Accel.kernel(fn x -> x === 3 end),
      cond_no_clause:
        Accel.kernel(fn x ->
          cond do
            x > 0 -> 1
          end
        end),
      case_no_clause:
        Accel.kernel(fn x ->
          case x do
            1 -> 1
            -1 -> 2
          end
        end),
      andalso: Accel.kernel(fn x -> x > 0 && x < 10 end),
      orelse_number: Accel.kernel(fn x -> x > 0 || x * 2 > 0 end),
      mixed_eq: Accel.kernel(fn x -> x + 1 == x + 1.0 end),
      local_vars:
        Accel.kernel(fn x ->
          y = x * 3
          z = y - x
          y = z + 1
          y * 2
        end),
      # bindings in blocks, case subjects, if conditions and loop ranges stay visible after them;
      # a cond condition's only in its own clause
      binding_after_block:
        Accel.kernel(fn x ->
          y =
            (
              t = band(x, 0xFFFF) + 1
              t * 2
            )

          y + t
        end),
      case_subject_binding:
        Accel.kernel(fn x ->
          t = x

          r =
            case (
                   t = rem(t, 5)
                   t
                 ) do
              0 -> t
              _ -> t + t
            end

          r * 10 + t
        end),
      if_condition_binding:
        Accel.kernel(fn x ->
          r = if (t = rem(x, 7)) > 2, do: t, else: -t
          r * 10 + t
        end),
      cond_condition_scope:
        Accel.kernel(fn x ->
          t = 1

          cond do
            (t = rem(x, 3)) == 0 -> t + 100
            true -> t
          end
        end),
      sibling_arguments:
        Accel.kernel(fn x ->
          t = 3

          band(
            (
              t = x
              t
            ),
            t + t
          ) + t
        end),
      range_binding:
        Accel.kernel(fn x ->
          r = Enum.reduce(0..(n = band(x, 7)), 0, fn i, a -> a + i end)
          r + n
        end)
    ]
  end

  # Loops whose accumulator settles within 2^53, so that the CPU and doubles-capable devices run
  # later iterations on integers held in doubles: rem/div by a captured divisor `d` (of the 8-bit
  # class for the first three, so dividends reach 2^52, the reciprocal's worst case), by a literal,
  # and compare/min/max/abs on such values.
  @doc false
  def double_kernels(d) do
    [
      rem_near_2_52:
        Accel.kernel(fn x -> Enum.reduce(1..6, x, fn i, acc -> rem(acc * 17_592_186_044_417 + i, d) end) end),
      div_near_2_52:
        Accel.kernel(fn x ->
          Enum.reduce(1..5, x, fn i, acc -> rem(div(acc * 17_592_186_044_417 - i * 7, d) + acc, d) end)
        end),
      min_max_abs:
        Accel.kernel(fn x ->
          Enum.reduce(1..4, rem(x, d), fn i, acc -> rem(max(abs(acc) * 3, i) - min(acc, -i) * 5, d) end)
        end),
      compare:
        Accel.kernel(fn x ->
          Enum.reduce(1..4, rem(x, d), fn i, acc -> if acc * 2 > i, do: rem(acc * 7 + 1, d), else: acc - 1 end)
        end),
      rem_24_bits:
        Accel.kernel(fn x -> Enum.reduce(1..6, x, fn i, acc -> rem(acc * 268_435_459 - i, d) end) end),
      literal:
        Accel.kernel(fn x -> Enum.reduce(1..8, x, fn _, acc -> rem(acc * 1_000_003 + 5, -999_983) end) end),
      to_float: Accel.kernel(fn x -> Enum.reduce(1..3, x, fn _, acc -> rem(acc * 3, d) end) / 2 end),
      # quotients from 2^51 to 2^52.3, where a 2^52 rounding trick without the sign is off by one
      quotients_past_2_51:
        Accel.kernel(fn x ->
          Enum.reduce(1..4, rem(x, 2), fn i, acc ->
            rem(div(acc * 4_503_599_627_370_491 + i, 1) + div(acc * 2_251_799_813_685_245 - i, 2), 2)
          end)
        end),
      # rem/2 of a product of doubles-held factors past 2^53, which the doubles walks reduce
      # factor by factor (rem(rem(x, d) * rem(y, d), d)): signs, zero factors, each narrowed range
      rem_of_product:
        Accel.kernel(fn x -> Enum.reduce(1..3, x, fn i, acc -> rem(22 * acc * (acc + i), d) end) end),
      rem_of_product_signs:
        Accel.kernel(fn x -> rem((rem(x, 1 <<< 26) - 3) * (5 - rem(x, 1 <<< 26)) * 9, d) end),
      # products of two affine forms of one value, whose range is a parabola's: x * x >= 0 and
      # x * (x + 1) >= 0 take rem/2's unsigned form, the others' signs change inside the range
      parabola_square: Accel.kernel(fn x -> Enum.reduce(1..3, x, fn i, acc -> rem(acc * acc + i, d) end) end),
      parabola_signs:
        Accel.kernel(fn x -> Enum.reduce(1..3, x, fn i, acc -> rem((acc - 3 * i) * (acc + 5), d) end) end),
      parabola_concave:
        Accel.kernel(fn x -> Enum.reduce(1..3, x, fn _, acc -> rem((2 * acc + 1) * (3 - acc), d) end) end),
      parabola_scaled:
        Accel.kernel(fn x -> Enum.reduce(1..3, x, fn _, acc -> rem((acc + 1) * 7 * (acc * 3), d) - 2 end) end),
      # an accumulator that was such a product: the next iteration's rem/2 must not reach back
      # to the previous iteration's factors
      product_accumulator:
        Accel.kernel(fn x ->
          Enum.reduce(1..4, x, fn _, acc -> rem(acc, d) * (rem(acc, d) + 90_071_992_547) end)
        end),
      product_branch:
        Accel.kernel(fn x ->
          y = if d > 5, do: rem(x, d) * (rem(x, d) + 90_071_992_547), else: rem(x, d) * 3
          rem(y, d) + rem(y * 1, 7)
        end),
      # m * d * (1 / d) rounds below m for many m and d (49 is one): the quotient's correction
      exact_multiples:
        Accel.kernel(fn x -> Enum.reduce(1..4, rem(x, 100_000), fn _, acc -> rem(acc * d, d) + acc end) end)
    ]
  end

  @divisors [
              0,
              1,
              -1,
              2,
              -2,
              3,
              -3,
              7,
              49,
              -97,
              127,
              255,
              -256,
              256,
              -257,
              4096,
              65_536,
              65_537,
              6_700_417,
              -6_700_417,
              16_777_215
            ] ++
              [-16_777_216, 0x7FFFFFFF, 0xFFFFFFFFFFFF]

  @doc false
  def float_kernels do
    [
      poly: Accel.kernel(fn x -> x * x + 1.0 end),
      sqrt: Accel.kernel(fn x -> :math.sqrt(x) end),
      exp: Accel.kernel(fn x -> :math.exp(x) end),
      third: Accel.kernel(fn x -> x / 3.0 end),
      fmax: Accel.kernel(fn x -> max(x, 0.5) end),
      floor: Accel.kernel(fn x -> floor(x) end),
      trunc: Accel.kernel(fn x -> trunc(x) end),
      sin: Accel.kernel(fn x -> :math.sin(x) end),
      sigmoid: Accel.kernel(fn x -> 1.0 / (1.0 + :math.exp(-x)) end),
      fneg: Accel.kernel(fn x -> -x * 2 end),
      fcompare: Accel.kernel(fn x -> x < 1 end)
    ]
  end

  @doc false
  def pair_kernels do
    [
      mul_sub: Accel.kernel(fn x, y -> x * y - y end),
      div_pair: Accel.kernel(fn x, y -> div(x, y) end),
      rem_pair: Accel.kernel(fn x, y -> rem(x, y) end),
      # a divisor that differs between elements, held in doubles where inputs are small: its zero
      # test is each element's own
      rem_div_pair: Accel.kernel(fn x, y -> rem(rem(x, 1 <<< 40), y) + div(x * 3, y) end),
      max_pair: Accel.kernel(fn x, y -> if x > y, do: x, else: y end)
    ]
  end

  # float kernels whose results come from a device's math library: compared within 2 ulps there
  @library_math [:exp, :sin, :sigmoid]

  # What lets rem/div by a capture skip its zero test and take OpenCL's cheaper rounding: a
  # captured integer's class (the smallest that holds it) says how small it cannot be.
  test "a captured integer's class gives a least magnitude it never undercuts" do
    alias Accel.Kernel.Compiler
    floor = &Compiler.class_floor(Compiler.bucket(&1))

    for bits <- 0..62, v <- [1 <<< bits, (1 <<< bits) - 1, (1 <<< bits) + 1], x <- [v, -v] do
      assert floor.(x) <= abs(x), "class #{Compiler.bucket(x)} of #{x}"
    end

    assert Enum.map([255, -256, 256, -257, 65_535, 65_536, 1 <<< 48, @max, @min], floor) ==
             [0, 0, 256, 256, 256, 65_536, 0, 0, 0]
  end

  for backend <- [:cpu, :opencl, :cuda] do
    @tag backend
    test "#{backend}: integer kernels equal Enum.map on int64 edges and random values" do
      for {name, k} <- int_kernels(), do: check(name, k, [@ints], unquote(backend), :exact)
    end

    @tag backend
    test "#{backend}: float kernels equal Enum.map on f64 edges and random values" do
      for {name, k} <- float_kernels() do
        tolerance = if unquote(backend) != :cpu and name in @library_math, do: :ulps, else: :exact
        check(name, k, [@floats], unquote(backend), tolerance)
      end
    end

    @tag backend
    test "#{backend}: integers held in doubles equal Enum.map for divisors of every magnitude" do
      for d <- @divisors,
          {name, k} <- double_kernels(d),
          do: check("#{name}, d = #{d}", k, [@ints], unquote(backend), :exact)
    end

    # The CPU runs blocks of 32 elements whose inputs all lie within -2^b..2^b-1 in a form
    # specialised to that range: blocks at each candidate b's edges, inside and just outside.
    @tag backend
    test "#{backend}: blocks of small inputs, at the edges of the narrowed ranges" do
      :rand.seed(:exsss, {1, 2, 3})

      xs =
        for b <- [8, 16, 21, 24, 26, 31, 32, 40, 48],
            {edges, limit} <- [{[(1 <<< b) - 1, -(1 <<< b)], 1 <<< b}, {[1 <<< b, -(1 <<< b) - 1], 1 <<< b}],
            x <- edges ++ for(_ <- 1..30, do: :rand.uniform(2 * limit) - limit - 1),
            do: x

      for {name, k} <- int_kernels() ++ double_kernels(6_700_417) ++ double_kernels(-7),
          do: check(name, k, [xs], unquote(backend), :exact)
    end

    # Nothing else in these can fail, and a boolean holds no sentinel by chance: with d = 0, only
    # the divisor's own test (once per block of lanes on the CPU, whole blocks here) makes them raise.
    @tag backend
    test "#{backend}: a zero divisor fixed for the call raises by its own test" do
      d = 0
      wide = Accel.kernel(fn x -> rem(rem(x, 1000) * 3, d) > 1 end)
      narrowed = Accel.kernel(fn x -> rem(22 * x * (x + 1), d) == 1 end)
      for k <- [wide, narrowed], do: check("d = 0", k, [Enum.to_list(1..64)], unquote(backend), :exact)
    end

    @tag backend
    test "#{backend}: two-input kernels equal Enum.zip_with" do
      ys = Enum.map(@ints, &rem(&1 * 7 + 3, 1000)) |> List.replace_at(3, -1) |> List.replace_at(5, 0)
      for {name, k} <- pair_kernels(), do: check(name, k, [@ints, ys], unquote(backend), :exact)

      # small inputs, which the CPU runs in its narrowed form (blocks of 32 within -2^b..2^b-1)
      xs = Enum.map(@ints, &rem(&1, 1 <<< 20))
      for {name, k} <- pair_kernels(), do: check("#{name}, small", k, [xs, ys], unquote(backend), :exact)
    end

    @tag backend
    test "#{backend}: f32 tensors in, f32 out, computed in doubles and rounded once" do
      k = Accel.kernel(fn x -> x * 3.0 + 1.0 end)
      # 3.0e38 * 3.0 is a double beyond :f32, stored as infinity, as <<v::float-32>> stores it
      t =
        Accel.Tensor.from_list([1.5, -2.25, 1.0e-3, 7.0, 0.1, 3.0e38], type: :f32, backend: unquote(backend))

      out = Accel.map(t, k)
      assert out.type == :f32

      expected =
        for <<x::float-native-32 <- Accel.Tensor.to_binary(t)>>, into: <<>> do
          v = x * 3.0 + 1.0
          <<v::float-native-32>>
        end

      assert Accel.Tensor.to_binary(out) == expected
    end
  end

  # Where no GPU is: every kernel above, as :cuda runs it, compiled by NVRTC (which needs no
  # driver) to machine code for sm_90 and sm_75, and to PTX for a GPU newer than NVRTC knows.
  @tag :nvrtc
  test "nvrtc: every kernel of the suite compiles for CUDA" do
    sources =
      for {name, k} <-
            int_kernels() ++ double_kernels(6_700_417) ++ double_kernels(0xFFFFFFFFFFFF) ++ pair_kernels(),
          do: {name, Accel.Kernel.source(k)}

    sources = sources ++ for({name, k} <- float_kernels(), do: {name, Accel.Kernel.source(k, [:f64])})
    f32 = Accel.Kernel.source(Accel.kernel(fn x -> x * 3.0 + 1.0 end), [:f32])
    sources = [{:f32, f32} | sources]

    for {name, source} <- sources do
      assert {<<0x7F, "ELF", _::binary>>, "sm_90"} = Accel.NIF.cuda_kernel_code(source, 90, "accel_user"),
             "#{name}"
    end

    {_, two_inputs} = Enum.find(sources, &(elem(&1, 0) == :div_pair))

    for source <- [f32, two_inputs] do
      assert {<<0x7F, "ELF", _::binary>>, "sm_75"} = Accel.NIF.cuda_kernel_code(source, 75, "accel_user")
      assert {ptx, "compute_" <> _} = Accel.NIF.cuda_kernel_code(source, 990, "accel_user")
      assert ptx =~ ".entry accel_user("
      assert :binary.last(ptx) == 0
    end

    e = assert_raise Accel.Error, fn -> Accel.NIF.cuda_kernel_code("int x = ;", 90, "accel_user") end
    assert e.reason == :build_failed and e.message =~ "accel_kernel.cu(1): error"
    e = assert_raise Accel.Error, fn -> Accel.NIF.cuda_kernel_code(f32, 30, "accel_user") end
    assert e.reason == :build_failed and e.message =~ "none of the architectures up to sm_30"

    assert_raise ArgumentError, ~r/compute capability such as 90, got 9$/, fn ->
      Accel.NIF.cuda_kernel_code(f32, 9, "accel_user")
    end
  end

  # Compares Accel.map with the reference element by element: elements where the reference raises
  # are left out of the comparison and checked to raise the same exception first.
  defp check(name, k, inputs, backend, tolerance) do
    rows = Enum.zip(inputs)

    expected =
      Enum.map(rows, fn row ->
        try do
          {:ok, apply(k.fun, Tuple.to_list(row))}
        rescue
          e -> {:raise, e}
        end
      end)

    first_raise =
      Enum.find_value(expected, fn
        {:raise, e} -> e
        _ -> nil
      end)

    arg = fn rows -> columns(rows, length(inputs)) end

    if first_raise do
      e = assert_raise(first_raise.__struct__, fn -> Accel.map(arg.(rows), k, backend: backend) end)
      assert Exception.message(e) == Exception.message(first_raise), "#{name} on #{backend}"
    end

    kept = rows |> Enum.zip(expected) |> Enum.filter(&match?({_, {:ok, _}}, &1))

    got =
      if kept == [],
        do: [],
        else: Accel.map(arg.(Enum.map(kept, &elem(&1, 0))), k, backend: backend, as: :list)

    for {{row, {:ok, want}}, have} <- Enum.zip(kept, got) do
      assert same?(want, have, tolerance),
             "#{name} on #{backend}, input #{inspect(row)}: expected #{inspect(want)}, got #{inspect(have)}"
    end
  end

  defp columns(rows, 1), do: Enum.map(rows, &elem(&1, 0))
  defp columns(rows, n), do: List.to_tuple(for(j <- 0..(n - 1), do: Enum.map(rows, &elem(&1, j))))

  defp same?(a, b, _) when is_integer(a) or is_boolean(a), do: a === b
  defp same?(a, b, :exact) when is_float(a) and is_float(b), do: <<a::float>> == <<b::float>>

  defp same?(a, b, :ulps) when is_float(a) and is_float(b),
    do: a == b or abs(a - b) <= 4.5e-16 * max(abs(a), abs(b))

  defp same?(_, _, _), do: false
end
