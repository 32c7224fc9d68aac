defmodule Accel.Kernel.Compiler.Expr do
  @moduledoc false
  # Expressions: one lowered node (Accel.Kernel.Lower) -> its value and the lines computing it.
  use Accel.Kernel.Compiler.Values
  alias Accel.Kernel.Compiler.{Loops, Ops}

  def gen({:lit, v}, _env, st) when is_integer(v) and v >= @min and v <= @max,
    do: {int(int_lit(v), {v, v}), st}

  def gen({:lit, v}, _env, st) when is_integer(v), do: fail(st)
  def gen({:lit, v}, _env, st) when is_float(v), do: {float(float_lit(v)), %{st | float: true}}
  def gen({:lit, true}, _env, st), do: {bool("1"), st}
  def gen({:lit, false}, _env, st), do: {bool("0"), st}

  def gen({:lit, nil}, _env, st),
    do: wrong(nil, st, "a value may be nil (an if without else?): a kernel returns numbers or booleans")

  def gen({:fail}, _env, st), do: fail(st)
  def gen({:arg, _} = a, env, st), do: {Map.fetch!(env, a), st}
  # (a variable bound in a block stays visible after it: see Accel.Kernel.Lower.block/2)
  def gen({:var, _} = a, env, st), do: {Map.get_lazy(env, a, fn -> Map.fetch!(st.binds, a) end), st}

  def gen({:cap, k} = c, env, st) do
    case Map.fetch(env, c) do
      {:ok, v} -> {v, st}
      :error -> wrong(nil, st, "captured value #{k} is a range, used as a number")
    end
  end

  def gen({:let, id, value, body}, env, st) do
    {v, st} = gen(value, env, st)
    gen(body, Map.put(env, {:var, id}, v), %{st | binds: Map.put(st.binds, {:var, id}, v)})
  end

  def gen({:op, name, args, line}, env, st) do
    {vs, st} = Enum.map_reduce(args, st, &gen(&1, env, &2))

    if Enum.any?(vs, &(&1.t == :none)) and name not in [:is_integer, :is_float, :is_number, :is_boolean],
      do: {none(), st},
      else: Ops.op(name, vs, args, line, st)
  end

  def gen({:if, c, t, e, line}, env, st) do
    {cv, st} = gen(c, env, st)

    case cv.t do
      :bool -> branch(cv.c, t, e, env, line, st)
      :none -> {none(), st}
      _ -> gen(t, env, st)
    end
  end

  def gen({:and, a, b, line}, env, st), do: strict(a, b, line, env, st, true)
  def gen({:or, a, b, line}, env, st), do: strict(a, b, line, env, st, false)

  def gen({:andalso, a, b}, env, st) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool -> branch(av.c, b, {:lit, false}, env, nil, st)
      :none -> {none(), st}
      _ -> gen(b, env, st)
    end
  end

  def gen({:orelse, a, b}, env, st) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool -> branch_values(av.c, fn st -> {av, st} end, fn st -> gen(b, env, st) end, nil, st)
      :none -> {none(), st}
      _ -> {av, st}
    end
  end

  def gen({:reduce, range, init, i_id, acc_id, body, line}, env, st),
    do: Loops.loop(range, init, i_id, acc_id, body, line, env, st)

  # `and`/`or`: the left side must be a boolean (BadBooleanError otherwise); the right is
  # evaluated only when needed.
  defp strict(a, b, line, env, st, is_and) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool ->
        if is_and,
          do: branch_values(av.c, fn st -> gen(b, env, st) end, fn st -> {bool("0"), st} end, line, st),
          else: branch_values(av.c, fn st -> {bool("1"), st} end, fn st -> gen(b, env, st) end, line, st)

      _ ->
        fail(st)
    end
  end

  defp branch(c, t, e, env, line, st),
    do: branch_values(c, fn st -> gen(t, env, st) end, fn st -> gen(e, env, st) end, line, st)

  # A branch on an element's value cannot run in lockstep: the lanes walk gives up, and the CPU
  # runs the one-element form.
  defp branch_values(c, then_fun, else_fun, line, st) do
    if st.lanes and varying?(c), do: throw(:varying_control)
    {tv, t_lines, st} = nested(st, then_fun)
    {ev, e_lines, st} = nested(st, else_fun)
    v = unify(tv, ev, line, st)
    present = Enum.reject([tv, ev], &(&1.t == :none))
    v = if v.t == :int and present != [] and Enum.all?(present, &held_d?/1), do: %{v | d: ""}, else: v
    type = if held_d?(v), do: "double", else: c_type(v.t)
    {ref, st} = variable(st, type, Enum.any?(present, &varying?(text_as(&1, v))))

    st =
      st
      |> emit("if (#{c}) {")
      |> emit_block(t_lines, ref, tv, v)
      |> emit("} else {")
      |> emit_block(e_lines, ref, ev, v)
      |> emit("}")

    {if(held_d?(v), do: repoint(v, nil, ref), else: repoint(v, ref, v.d)), st}
  end

  defp emit_block(st, lines, ref, v, target) do
    st = Enum.reduce(lines, st, &emit(&2, "  " <> &1))
    if v.t == :none, do: st, else: emit(st, "  " <> assign(ref, text_as(v, target)))
  end
end
