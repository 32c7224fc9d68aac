defmodule Accel.Kernel.Compiler.Ops do
  @moduledoc false
  # Operations: arithmetic, division, bitwise operations, comparisons and math functions, each with
  # the range of its integer result, checked where that range may leave 64 bits.
  use Accel.Kernel.Compiler.Values

  @float_math Accel.Kernel.Lower.math_functions() |> Keyword.keys()

  def op(:is_integer, [v], _, _, st), do: {bool(if(v.t == :int, do: "1", else: "0")), st}
  def op(:is_float, [v], _, _, st), do: {bool(if(v.t == :float, do: "1", else: "0")), st}
  def op(:is_number, [v], _, _, st), do: {bool(if(v.t in [:int, :float], do: "1", else: "0")), st}
  def op(:is_boolean, [v], _, _, st), do: {bool(if(v.t == :bool, do: "1", else: "0")), st}

  def op(name, vs, args, line, st) do
    types = Enum.map(vs, & &1.t)

    cond do
      name in [:==, :!=, :===, :!==, :<, :<=, :>, :>=] -> compare(name, vs, st)
      name == :not -> if types == [:bool], do: declare_v(st, bool("!#{hd(vs).c}")), else: fail(st)
      name == :lnot -> if types == [:bool], do: declare_v(st, bool("!#{hd(vs).c}")), else: {bool("0"), st}
      Enum.member?(types, :bool) -> fail(st)
      true -> numeric(name, vs, args, line, st)
    end
  end

  defp declare_v(st, %{d: d} = v) when d != nil do
    {name, st} = declare(st, "double", d)
    {%{v | d: name}, st}
  end

  defp declare_v(st, v) do
    {c, st} = declare(st, c_type(v.t), v.c)
    {%{v | c: c}, st}
  end

  defp as_double(%{t: :float, c: c}), do: c
  defp as_double(%{t: :int} = v), do: dt(v)

  defp numeric(name, [a, b], _args, _line, st) when name in [:+, :-, :*] do
    if a.t == :int and b.t == :int do
      {x1, x2} = a.r
      {y1, y2} = b.r

      r =
        case name do
          :+ ->
            {x1 + y1, x2 + y2}

          :- ->
            {x1 - y2, x2 - y1}

          :* ->
            intersect(Enum.min_max([x1 * y1, x1 * y2, x2 * y1, x2 * y2]), product_range(lin_of(a), lin_of(b)))
        end

      helper = %{+: "accel_add", -: "accel_sub", *: "accel_mul"}[name]

      {v, st} =
        cond do
          in_doubles?(st, [a, b]) and fits53?(r) ->
            declare_v(st, dint("(#{dt(a)} #{name} #{dt(b)})", r))

          fits?(r) ->
            {v, st} = declare_v(st, int("(accel_i64)((accel_u64)#{it(a)} #{name} (accel_u64)#{it(b)})", r))

            # a product of doubles-held factors past 2^53: rem/2 of it may reduce them first (rem_of_product/5)
            {if(name == :* and in_doubles?(st, [a, b]), do: Map.put(v, :factors, {a, b}), else: v), st}

          true ->
            declare_v(st, int("#{helper}(#{it(a)}, #{it(b)}, &bad)", r))
        end

      {if((lin = affine(name, lin_of(a), lin_of(b))) != nil, do: Map.put(v, :lin, lin), else: v), st}
    else
      declare_v(%{st | float: true}, float("accel_fin(#{as_double(a)} #{name} #{as_double(b)}, &bad)"))
    end
  end

  defp numeric(:/, [a, b], _, _, st),
    do: declare_v(%{st | float: true}, float("accel_fin(#{as_double(a)} / #{as_double(b)}, &bad)"))

  defp numeric(:neg, [%{t: :int} = a], _, _, st) do
    {lo, hi} = a.r
    r = {-hi, -lo}

    cond do
      held_d?(a) -> declare_v(st, dint("(-#{a.d})", r))
      fits?(r) -> declare_v(st, int("(-#{it(a)})", r))
      true -> declare_v(st, int("accel_neg(#{it(a)}, &bad)", r))
    end
  end

  defp numeric(:neg, [a], _, _, st), do: declare_v(st, float("(-#{a.c})"))

  defp numeric(:abs, [%{t: :int} = a], _, _, st) do
    {lo, hi} = a.r
    r = if lo >= 0, do: a.r, else: {if(hi >= 0, do: 0, else: -hi), max(-lo, hi)}

    cond do
      held_d?(a) -> declare_v(st, dint("fabs(#{a.d})", r))
      lo > @min -> declare_v(st, int("(#{it(a)} < 0 ? -#{it(a)} : #{it(a)})", r))
      true -> declare_v(st, int("accel_abs(#{it(a)}, &bad)", r))
    end
  end

  defp numeric(:abs, [a], _, _, st), do: declare_v(st, float("fabs(#{a.c})"))

  defp numeric(name, [a, b], [_, divisor], _line, st) when name in [:div, :rem] do
    if a.t != :int or b.t != :int do
      fail(st)
    else
      amax = magnitude(a.r)
      {blo, bhi} = b.r
      bmax = magnitude(b.r)

      r =
        case name do
          :div ->
            bmin = if blo > 0, do: blo, else: if(bhi < 0, do: -bhi, else: 1)
            q = div(amax, max(bmin, 1))
            {-q, q}

          :rem ->
            m = min(amax, max(bmax - 1, 0))
            {if(elem(a.r, 0) >= 0, do: 0, else: -m), if(elem(a.r, 1) <= 0, do: 0, else: m)}
        end

      helper = if name == :div, do: "accel_div", else: "accel_rem"

      cond do
        rem_of_product?(name, a, b, bmax, st) ->
          rem_of_product(a.factors, b, divisor, r, st)

        # held in doubles: the reciprocal of a divisor fixed for the call is computed once, on the host
        st.dint and held_d?(a) and fits53?(b.r) and amax + bmax <= @d53 ->
          {inv, st} = inverse(divisor, b, st)
          declare_v(st, dint("#{f_helper(helper, a)}(#{a.d}, #{dt(b)}, #{inv}, #{small(a, b)})", r))

        # 64-bit, in the lanes walks: two rounds of the reciprocal, which vectorise (AVX-512DQ)
        st.lanes and amax <= @wide and fits53?(b.r) ->
          {inv, st} = inverse(divisor, b, st)
          declare_v(st, int("#{helper}_w(#{it(a)}, #{it(b)}, #{inv})", r))

        match?({:lit, d} when is_integer(d) and d not in [0, -1], divisor) ->
          op = if name == :div, do: "/", else: "%"
          declare_v(st, int("(#{it(a)} #{op} #{it(b)})", r))

        match?({:cap, _}, divisor) ->
          {:cap, k} = divisor
          slot = "ACCEL_MAGIC_#{k}"
          st = %{st | magic: Map.put(st.magic, k, true)}
          declare_v(st, int("#{helper}_magic(#{it(a)}, #{it(b)}, #{slot}_M, #{slot}_S, #{slot}_A, &bad)", r))

        true ->
          declare_v(st, int("#{helper}(#{it(a)}, #{it(b)}, &bad)", r))
      end
    end
  end

  defp numeric(name, [a, b], _, line, st) when name in [:min, :max] do
    pick = fn x, y -> "(#{x} #{if name == :min, do: "<=", else: ">="} #{y} ? #{x} : #{y})" end

    cond do
      a.t == :int and b.t == :int ->
        {x1, x2} = a.r
        {y1, y2} = b.r
        r = if name == :min, do: {min(x1, y1), min(x2, y2)}, else: {max(x1, y1), max(x2, y2)}

        if in_doubles?(st, [a, b]),
          do: declare_v(st, dint(pick.(dt(a), dt(b)), r)),
          else: declare_v(st, int(pick.(it(a), it(b)), r))

      a.t == :float and b.t == :float ->
        declare_v(st, float(pick.(a.c, b.c)))

      true ->
        wrong(
          line,
          st,
          "#{name}/2 of an integer and a float gives either type depending on the values; convert one (x * 1.0, trunc/1)"
        )
    end
  end

  defp numeric(name, [%{t: :int} = a], _, _, st) when name in [:trunc, :round, :floor, :ceil], do: {a, st}

  defp numeric(name, [a], _, _, st) when name in [:trunc, :round, :floor, :ceil],
    do: declare_v(st, int("accel_f2i(#{name}(#{a.c}), &bad)", @full))

  defp numeric(name, vs, _, _, st) when name in [:band, :bor, :bxor, :bnot, :bsl, :bsr] do
    if Enum.any?(vs, &(&1.t != :int)), do: fail(st), else: bitwise(name, vs, st)
  end

  defp numeric({:math, f}, vs, _, _, st) when f in @float_math do
    args = Enum.map_join(vs, ", ", &as_double/1)
    declare_v(%{st | float: true}, float("accel_fin(#{f}(#{args}), &bad)"))
  end

  # Value ranges beyond intervals, for what interval arithmetic cannot see: a product of two affine
  # forms of one integer, x * (x + 1) >= 0 (the logistic map's), is a parabola in that integer.
  # An integer is known as c * base + k, exactly, for a named integer `base` (a C variable, one value
  # while an expression is evaluated) of range `br`: {base, br, c, k}, or {:const, k}.
  defp lin_of(%{t: :int, r: {k, k}}), do: {:const, k}
  defp lin_of(%{t: :int} = v), do: Map.get(v, :lin) || {v.c || v.d, v.r, 1, 0}
  defp lin_of(_), do: nil

  defp affine(:+, {:const, k}, {x, br, c, j}), do: {x, br, c, j + k}
  defp affine(:+, {x, br, c, j}, {:const, k}), do: {x, br, c, j + k}
  defp affine(:-, {x, br, c, j}, {:const, k}), do: {x, br, c, j - k}
  defp affine(:-, {:const, k}, {x, br, c, j}), do: {x, br, -c, k - j}
  defp affine(:*, {:const, k}, {x, br, c, j}), do: {x, br, c * k, j * k}
  defp affine(:*, {x, br, c, j}, {:const, k}), do: {x, br, c * k, j * k}
  defp affine(:+, {x, br, c1, j1}, {x, _, c2, j2}) when x != :const, do: {x, br, c1 + c2, j1 + j2}
  defp affine(:-, {x, br, c1, j1}, {x, _, c2, j2}) when x != :const, do: {x, br, c1 - c2, j1 - j2}
  defp affine(_, _, _), do: nil

  # The range of (c1 * v + k1) * (c2 * v + k2) over the integers v of {lo, hi}: a parabola, whose
  # extremes lie at the ends or at the integers beside its vertex, -b / 2a. Nil unless both
  # factors are affine forms of one integer.
  defp product_range({x, {lo, hi}, c1, k1}, {x, _, c2, k2}) when x != :const do
    f = fn v -> (c1 * v + k1) * (c2 * v + k2) end
    {a, b} = {c1 * c2, c1 * k2 + c2 * k1}
    vertex = if a == 0, do: [], else: [Integer.floor_div(-b, 2 * a), Integer.floor_div(-b, 2 * a) + 1]
    Enum.min_max(for v <- [lo, hi | vertex], v >= lo and v <= hi, do: f.(v))
  end

  defp product_range(_, _), do: nil

  defp intersect(r, nil), do: r
  defp intersect({lo, hi}, {lo2, hi2}), do: {max(lo, lo2), min(hi, hi2)}

  # rem(x * y, b) where x and y are held in doubles and their product may not be: as
  # rem(rem(x, b) * rem(y, b), b), every step exact in doubles where (|b| - 1)^2 <= 2^53, so that
  # the doubles walks stay in doubles (what vectorises without AVX-512DQ's 64-bit conversions).
  # Elixir's rem/2 takes the dividend's sign: both sides are congruent to x * y modulo b, below |b|
  # in magnitude, and of its sign (or 0, where b divides x or y, and then x * y).
  defp rem_of_product?(name, a, b, bmax, st) do
    case {name, Map.get(a, :factors)} do
      {:rem, {x, y}} ->
        st.dint and fits53?(b.r) and (bmax - 1) * (bmax - 1) <= @d53 and magnitude(x.r) + bmax <= @d53 and
          magnitude(y.r) + bmax <= @d53

      _ ->
        false
    end
  end

  defp rem_of_product({x, y}, b, divisor, r, st) do
    {inv, st} = inverse(divisor, b, st)
    bm = max(magnitude(b.r) - 1, 0)

    reduced = fn v, st ->
      range = if elem(v.r, 0) >= 0, do: {0, bm}, else: {-bm, bm}
      declare_v(st, dint("#{f_helper("accel_rem", v)}(#{dt(v)}, #{dt(b)}, #{inv}, #{small(v, b)})", range))
    end

    {rx, st} = reduced.(x, st)
    {ry, st} = reduced.(y, st)
    # of x * y's sign, or 0: where x * y >= 0, so is this
    {p, st} =
      declare_v(st, dint("(#{rx.d} * #{ry.d})", {if(elem(r, 0) >= 0, do: 0, else: -bm * bm), bm * bm}))

    declare_v(st, dint("#{f_helper("accel_rem", p)}(#{p.d}, #{dt(b)}, #{inv}, #{small(p, b)})", r))
  end

  # The doubles helper of div/2 or rem/2 (kernels/user.h) for dividend `a`: for rem/2 of a
  # non-negative one, accel_rem_fp, which skips Elixir's sign rule.
  defp f_helper("accel_rem", %{r: {lo, _}}) when lo >= 0, do: "accel_rem_fp"
  defp f_helper(helper, _a), do: helper <> "_f"

  # Their `small` argument: 1 where every quotient is below 2^51 in magnitude (from the dividend's
  # range and the divisor's least magnitude: a capture's class gives one), for which OpenCL's
  # rounding needs no test of sign or size.
  defp small(a, b), do: if(div(magnitude(a.r), max(least_magnitude(b), 1)) < 0x7FFFFFFFFFFFF, do: 1, else: 0)

  defp least_magnitude(%{r: {lo, hi}} = b) do
    Enum.max([Map.get(b, :floor, 0), if(lo > 0, do: lo, else: 0), if(hi < 0, do: -hi, else: 0)])
  end

  # What the reciprocal helpers (kernels/user.h) divide by: the double nearest 1 / divisor, after
  # the test they leave to the compiler, a zero divisor (none where its range or class excludes 0). A
  # divisor that is the same for every element is tested once for a block of lanes (a scalar line,
  # which the lanes' loop leaves out), not in every lane.
  defp inverse(divisor, b, st) do
    text = b.c || b.d

    st =
      cond do
        least_magnitude(b) > 0 -> st
        varying?(text) -> emit(st, "ACCEL_LANE lbad[l] |= #{text} == 0;")
        true -> emit(st, "bad |= #{text} == 0;")
      end

    reciprocal_text(divisor, b, st)
  end

  # The double nearest 1 / divisor: a slot filled on the host for a captured divisor, a literal
  # for a literal one, else computed per element.
  defp reciprocal_text({:cap, k}, _b, st), do: {"ACCEL_INV_#{k}", %{st | inv: Map.put(st.inv, k, true)}}
  defp reciprocal_text({:lit, d}, _b, st) when is_integer(d), do: {float_lit(reciprocal(d)), st}
  defp reciprocal_text(_divisor, b, st), do: {"(1.0 / #{dt(b)})", st}

  defp bitwise(:band, [a, b], st) do
    r =
      case {a.r, b.r} do
        {{lo, hi}, _} when lo >= 0 -> {0, if(elem(b.r, 0) >= 0, do: min(hi, elem(b.r, 1)), else: hi)}
        {_, {lo, hi}} when lo >= 0 -> {0, hi}
        _ -> @full
      end

    declare_v(st, int("(#{it(a)} & #{it(b)})", r))
  end

  defp bitwise(name, [a, b], st) when name in [:bor, :bxor] do
    r =
      if elem(a.r, 0) >= 0 and elem(b.r, 0) >= 0,
        do: {0, Bitwise.bsl(1, bit_length(max(elem(a.r, 1), elem(b.r, 1)))) - 1},
        else: @full

    declare_v(st, int("(#{it(a)} #{if name == :bor, do: "|", else: "^"} #{it(b)})", r))
  end

  defp bitwise(:bnot, [a], st) do
    {lo, hi} = a.r
    declare_v(st, int("(~#{it(a)})", {-hi - 1, -lo - 1}))
  end

  defp bitwise(:bsr, [a, b], st) do
    {lo, hi} = a.r
    r = if elem(b.r, 0) >= 0, do: {min(lo, 0), max(hi, 0)}, else: @full
    declare_v(st, int("accel_bsr(#{it(a)}, #{it(b)}, &bad)", r))
  end

  defp bitwise(:bsl, [a, b], st), do: declare_v(st, int("accel_bsl(#{it(a)}, #{it(b)}, &bad)", @full))

  defp bit_length(0), do: 0
  defp bit_length(n), do: n |> Integer.digits(2) |> length()

  defp magnitude({lo, hi}), do: max(abs(lo), abs(hi))

  # Comparisons follow the BEAM's term order: numbers compare by value (an integer and a float
  # exactly), every number is less than every boolean, false < true. An integer held in a double
  # is that integer exactly, so comparing doubles is exact too.
  defp compare(name, [a, b], st) do
    c_op = %{==: "==", !=: "!=", ===: "==", !==: "!=", <: "<", <=: "<=", >: ">", >=: ">="}[name]

    cond do
      name in [:===, :!==] and a.t != b.t ->
        {bool(if(name == :===, do: "0", else: "1")), st}

      a.t == :int and b.t == :int ->
        if in_doubles?(st, [a, b]),
          do: declare_v(st, bool("(#{dt(a)} #{c_op} #{dt(b)})")),
          else: declare_v(st, bool("(#{it(a)} #{c_op} #{it(b)})"))

      a.t == b.t ->
        declare_v(st, bool("(#{a.c} #{c_op} #{b.c})"))

      a.t == :int and b.t == :float ->
        if held_d?(a),
          do: declare_v(st, bool("(#{a.d} #{c_op} #{b.c})")),
          else: declare_v(st, bool("(accel_cmp_if(#{it(a)}, #{b.c}) #{c_op} 0)"))

      a.t == :float and b.t == :int ->
        if held_d?(b),
          do: declare_v(st, bool("(#{a.c} #{c_op} #{b.d})")),
          else: declare_v(st, bool("(0 #{c_op} accel_cmp_if(#{it(b)}, #{a.c}))"))

      true ->
        # a number against a boolean: the number is smaller
        order = if a.t == :bool, do: 1, else: -1
        {bool(if(apply(Kernel, name_to_fun(name), [order, 0]), do: "1", else: "0")), st}
    end
  end

  defp name_to_fun(:===), do: :==
  defp name_to_fun(:!==), do: :!=
  defp name_to_fun(n), do: n
end
