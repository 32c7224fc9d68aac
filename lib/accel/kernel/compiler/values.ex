defmodule Accel.Kernel.Compiler.Values do
  @moduledoc false
  # The values the compiler's passes pass around, and the state they thread (Accel.Kernel.Compiler
  # makes it): `use Accel.Kernel.Compiler.Values` imports these helpers and the integer bounds.
  #
  # %{t: :int | :float | :bool | :none, c: C text, d: C text of a double, r: {lo, hi} for ints}.
  # An integer has its 64-bit text c, or d, the same integer held exactly in a double (then
  # |value| <= 2^53, and c is nil), or both.

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF
  @full {@min, @max}
  # integers of magnitude up to 2^53 are exact in a double
  @d53 0x20000000000000
  # the largest dividend of accel_div_w/accel_rem_w (kernels/user.h), the lanes' 64-bit division
  @wide 0x4000000000000000

  defmacro __using__(_opts) do
    quote do
      import Accel.Kernel.Compiler.Values
      @min unquote(@min)
      @max unquote(@max)
      @full {@min, @max}
      @d53 unquote(@d53)
      @wide unquote(@wide)
    end
  end

  @ranges %{s64: @full, s32: {-0x80000000, 0x7FFFFFFF}, u8: {0, 255}}

  def int(c, r), do: %{c: c, d: nil, t: :int, r: clip(r)}
  def dint(d, r), do: %{c: nil, d: d, t: :int, r: r}
  def float(c), do: %{c: c, d: nil, t: :float, r: nil}
  def bool(c), do: %{c: c, d: nil, t: :bool, r: {0, 1}}
  def none, do: %{c: "0", d: nil, t: :none, r: nil}

  # An integer's text as an int64, and as a double (exact when held as one or within 2^53).
  def it(%{c: nil, d: d}), do: "((accel_i64)#{d})"
  def it(%{c: c}), do: c
  def dt(%{d: nil, c: c}), do: "((double)#{c})"
  def dt(%{d: d}), do: d

  def held_d?(v), do: v.d != nil

  # `v` re-pointed at the variable `c` or `d` (a branch's or a loop's result, an accumulator): what
  # it knew about the values it was computed from (Ops' :lin and :factors) names texts that need not
  # be in scope there, nor hold the same values; nor need it keep a capture's least magnitude (:floor).
  def repoint(v, c, d), do: v |> Map.drop([:lin, :factors, :floor]) |> Map.merge(%{c: c, d: d})
  def fits53?({lo, hi}), do: lo >= -@d53 and hi <= @d53

  # In the doubles walks, whether integers `vs` are all exact in doubles and one already is one.
  def in_doubles?(st, vs), do: st.dint and Enum.any?(vs, &held_d?/1) and Enum.all?(vs, &fits53?(&1.r))

  # A range wholly past 64 bits (a product of constants that always overflows: the row goes to
  # Elixir, and the value computed is never used) clips to the nearest end, never to an empty range.
  defp clip({lo, hi}), do: {lo |> max(@min) |> min(@max), hi |> max(@min) |> min(@max)}
  def fits?({lo, hi}), do: lo >= @min and hi <= @max

  def bind_inputs(args, caps, st) do
    {env, st} =
      caps
      |> Enum.with_index()
      |> Enum.reduce({%{}, st}, fn {kind, k}, {env, st} ->
        slot = slot_index(caps, k)

        case kind do
          {:int, bits} ->
            {c, st} = declare(st, "accel_i64", "(accel_i64)s#{slot}")
            v = Map.put(int(c, bucket_range(bits)), :floor, Accel.Kernel.Compiler.class_floor(bits))
            {Map.put(env, {:cap, k}, v), st}

          :float ->
            {c, st} = declare(st, "double", "accel_f64_of(s#{slot})")
            {Map.put(env, {:cap, k}, float(c)), %{st | float: true}}

          :bool ->
            {c, st} = declare(st, "int", "(int)s#{slot}")
            {Map.put(env, {:cap, k}, bool(c)), st}

          :range ->
            {Map.put(env, {:cap_range, k}, Enum.map(0..2, &"(accel_i64)s#{slot + &1}")), st}
        end
      end)

    # Range inputs' slots come after the captures' and the magic numbers'; the magic numbers are
    # only known once the body is lowered, so these read names #defined then (assemble/7).
    at = if st.lanes, do: "(i + l)", else: "i"

    args
    |> Enum.with_index()
    |> Enum.reduce({env, st}, fn {{type, kind}, j}, {env, st} ->
      case kind do
        {:range, bits} ->
          {c, st} =
            declare(
              st,
              "accel_i64",
              "(accel_i64)(ACCEL_RANGE_FIRST_#{j} + #{at} * ACCEL_RANGE_STEP_#{j})",
              true
            )

          {Map.put(env, {:arg, j}, int(c, bucket_range(bits))), st}

        :buffer when type in [:f32, :f64] ->
          {c, st} = declare(st, "double", "(double)in#{j}[#{at}]", true)
          {Map.put(env, {:arg, j}, float(c)), st}

        :buffer when st.narrow != nil and type in [:s64, :s32] ->
          {c, st} = declare(st, "accel_i64", "(accel_i64)in#{j}[#{at}]", true)
          {d, st} = declare(st, "double", "(double)#{c}")
          {Map.put(env, {:arg, j}, %{int(c, bucket_range(st.narrow)) | d: d}), st}

        :buffer ->
          {c, st} = declare(st, "accel_i64", "(accel_i64)in#{j}[#{at}]", true)
          {Map.put(env, {:arg, j}, int(c, @ranges[type])), st}
      end
    end)
  end

  defp slot_index(caps, k),
    do: caps |> Enum.take(k) |> Enum.reduce(0, fn c, n -> n + if(c == :range, do: 3, else: 1) end)

  defp bucket_range(64), do: @full
  defp bucket_range(bits), do: {-Bitwise.bsl(1, bits), Bitwise.bsl(1, bits) - 1}

  # A named value for `expr`. In the lanes walk, a value that differs between elements (an input,
  # or anything computed from one) is an array over the lanes, filled by a loop the C++ compiler
  # vectorises, and its text is `tN[l]`; that suffix is what marks a text as varying. Its checked
  # helpers raise the lane's own flag, lbad[l]; uniform values stay scalars.
  def declare(st, type, expr, input \\ false) do
    name = "t#{st.tmp}"
    st = %{st | tmp: st.tmp + 1}

    if st.lanes and (input or varying?(expr)) do
      lane = String.replace(expr, "&bad", "&lbad[l]")
      {name <> "[l]", st |> emit("#{type} #{name}[ACCEL_LANES];") |> emit("ACCEL_LANE #{name}[l] = #{lane};")}
    else
      {name, emit(st, "const #{type} #{name} = #{expr};")}
    end
  end

  def varying?(text), do: String.contains?(text, "[l]")

  # A variable assigned later (a branch's or a loop's value): `ref` and its declaration.
  def variable(st, type, varying) do
    name = "t#{st.tmp}"
    st = %{st | tmp: st.tmp + 1}

    if st.lanes and varying,
      do: {name <> "[l]", emit(st, "#{type} #{name}[ACCEL_LANES];")},
      else: {name, emit(st, "#{type} #{name};")}
  end

  def assign(ref, text) do
    if varying?(ref), do: "ACCEL_LANE #{ref} = #{text};", else: "#{ref} = #{text};"
  end

  # `v`'s text in the representation of `target` (a double-held integer, or its own).
  def text_as(v, %{d: d}) when d != nil, do: dt(v)
  def text_as(%{t: :int} = v, _target), do: it(v)
  def text_as(v, _target), do: v.c

  def emit(st, line), do: %{st | lines: [line | st.lines]}

  # Runs `fun` on an empty list of lines; returns its value and its lines (in order).
  def nested(st, fun) do
    outer = st.lines
    {v, st} = fun.(%{st | lines: []})
    {v, Enum.reverse(st.lines), %{st | lines: outer}}
  end

  # A value that cannot be computed for the element: its flag is raised. In the lanes walk this
  # is reached only under uniform control, so every lane fails, and the scalar `bad` says so.
  def fail(st), do: {none(), emit(st, "bad = 1;")}

  def wrong(line, st, message),
    do: raise(ArgumentError, "kernel #{st.name}#{if line, do: " (line #{line})", else: ""}: " <> message)

  def c_type(:float), do: "double"
  def c_type(:bool), do: "int"
  def c_type(_), do: "accel_i64"

  def unify(%{t: :none}, v, _line, _st), do: v
  def unify(v, %{t: :none}, _line, _st), do: v
  def unify(%{t: :int, r: {a, b}}, %{t: :int, r: {c, d}}, _line, _st), do: int("", {min(a, c), max(b, d)})
  def unify(%{t: t} = v, %{t: t}, _line, _st), do: v

  def unify(a, b, line, st),
    do:
      wrong(
        line,
        st,
        "one branch gives #{describe(a.t)} and another #{describe(b.t)}; Elixir allows that, a kernel " <>
          "needs one type for its values (write 1.0 for a float, or convert with trunc/1)"
      )

  defp describe(:int), do: "an integer"
  defp describe(:float), do: "a float"
  defp describe(:bool), do: "a boolean"

  def int_lit(@min), do: "ACCEL_I64_MIN"
  def int_lit(v), do: "((accel_i64)#{v}L)"

  # 1 / d rounded once (d < 2^53 is exact as a double); 0 stands in for 1 / 0, which flags.
  def reciprocal(0), do: 0.0
  def reciprocal(d), do: 1.0 / d

  def float_lit(v), do: "(#{Float.to_string(v)})"
end
