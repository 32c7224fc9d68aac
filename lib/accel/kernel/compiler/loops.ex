defmodule Accel.Kernel.Compiler.Loops do
  @moduledoc false
  # Loops: Enum.reduce(first..last//step, init, fn i, acc -> body end).
  #
  # The first iteration sees the initial value; later ones what the body gives, whose range
  # settles after it (a remainder), so the first is emitted on its own with its own checks, and
  # later ones keep the accumulator in a double when its settled range is within 2^53 (doubles
  # walks). `res` is the loop's value: the initial one when the range is empty.
  use Accel.Kernel.Compiler.Values
  alias Accel.Kernel.Compiler.Expr

  def loop(range, init, i_id, acc_id, body, line, env, st) do
    {[f, l, s], st} = range_parts(range, env, st, line)
    {iv, st} = Expr.gen(init, env, st)

    if Enum.any?([f, l, s], &(&1.t != :int)) or iv.t == :none do
      fail(st)
    else
      [fc, lc, sc] = Enum.map([f, l, s], &it/1)
      if st.lanes and Enum.any?([fc, lc, sc], &varying?/1), do: throw(:varying_control)
      index = int("", {min(elem(f.r, 0), elem(l.r, 0)), max(elem(f.r, 1), elem(l.r, 1))})
      i = "t#{st.tmp}"
      last = "t#{st.tmp + 1}"
      acc = "t#{st.tmp + 2}"
      st = %{st | tmp: st.tmp + 3}
      acc_ref = if st.lanes, do: acc <> "[l]", else: acc

      acc_as = fn
        %{t: :int} = g ->
          if st.dint and fits53?(g.r), do: repoint(g, nil, acc_ref), else: repoint(g, acc_ref, nil)

        g ->
          repoint(g, acc_ref, nil)
      end

      body_at = fn acc_v, st ->
        env = env |> Map.put({:var, acc_id}, acc_v) |> Map.put({:var, i_id}, %{index | c: i})
        {v, lines, inner} = nested(%{st | in_loop: true}, fn st -> Expr.gen(body, env, st) end)
        {v, lines, %{inner | in_loop: st.in_loop}}
      end

      # this loop's id among the resumable ones, numbered in pre-order: those in its body follow it
      id = st.loops
      parent = st.parent
      st = %{st | loops: id + 1, parent: id}
      {first_v, first_lines, st} = body_at.(iv, st)
      check_acc_type(iv, first_v, line, st)
      start = if first_v.t == :none, do: iv, else: first_v
      {later_v, later_lines, acc_v, st} = settle(start, body_at, acc_as, line, st)
      res_v = Enum.reduce([first_v, later_v], iv, &unify(&1, &2, line, st))
      res_v = if res_v.t == :int and held_d?(acc_v) and fits53?(res_v.r), do: %{res_v | d: ""}, else: res_v
      {res, st} = variable(st, if(held_d?(res_v), do: "double", else: c_type(res_v.t)), true)
      acc_type = if held_d?(acc_v), do: "double", else: c_type(acc_v.t)
      acc_decl = if st.lanes, do: "#{acc_type} #{acc}[ACCEL_LANES];", else: "#{acc_type} #{acc};"

      resumable =
        st.resumable and not st.lanes and not st.dint and (st.loops > id + 1 or long_loop?(f.r, l.r, s.r))

      st =
        if resumable,
          do: %{st | parent: parent, nest: [{id, st.loops - 1, parent} | st.nest]},
          else: %{st | loops: id, parent: parent}

      names = %{i: i, last: last, acc: acc, res: res, id: id, inner: st.loops - 1}
      loop_parts = {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v}

      st =
        if resumable,
          do: emit_resumable(st, names, iv, loop_parts),
          else: emit_loop(st, names, iv, loop_parts)

      {if(held_d?(res_v), do: repoint(res_v, nil, res), else: repoint(res_v, res, res_v.d)), st}
    end
  end

  # A loop that runs to its end in one go: the host's, and the devices' short ones.
  defp emit_loop(
         st,
         names,
         iv,
         {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v}
       ) do
    %{i: i, last: last, acc: acc, res: res} = names
    acc_ref = if st.lanes, do: acc <> "[l]", else: acc

    st
    |> emit(assign(res, text_as(iv, res_v)))
    |> emit("if (#{sc} == 0) bad = 1;")
    |> emit("else if (#{sc} > 0 ? #{fc} <= #{lc} : #{fc} >= #{lc}) {")
    |> emit(
      "  const accel_u64 #{last} = (#{sc} > 0 ? (accel_u64)#{lc} - (accel_u64)#{fc} : (accel_u64)#{fc} - (accel_u64)#{lc}) / (#{sc} > 0 ? (accel_u64)#{sc} : (accel_u64)0 - (accel_u64)#{sc});"
    )
    |> emit("  " <> acc_decl)
    |> emit("  {")
    |> emit("    const accel_i64 #{i} = #{fc};")
    |> emit_loop_body(first_lines, acc_ref, first_v, acc_v)
    |> emit("  }")
    |> emit("  for (accel_u64 #{last}k = 1; #{last}k <= #{last}; ++#{last}k) {")
    # an abandoned call stops here (host only; see ACCEL_STOPPED in kernels/user.h)
    |> emit("    if ((#{last}k & 0xFFFFUL) == 0 && ACCEL_STOPPED()) { bad = 1; break; }")
    |> emit("    const accel_i64 #{i} = (accel_i64)((accel_u64)#{fc} + #{last}k * (accel_u64)#{sc});")
    |> emit_loop_body(later_lines, acc_ref, later_v, acc_v)
    |> emit("  }")
    |> emit("  " <> assign(res, text_as(acc_v, res_v)))
    |> emit("}")
  end

  # A device cannot be interrupted, so a loop that may run long runs at most `fuel` iterations
  # (of all loops) per launch, then saves where it is and returns; the next launch resumes it. Per
  # element, rs[0] names the loop that ran out (its id + 1) and each loop has two words: the next
  # iteration and the accumulator while it is under way, then its value once it ended. A resumed
  # element computes again what comes before (the language has no side effects, so it comes out
  # the same): a loop that ended earlier in the same iteration of the loops around it gives its
  # saved value, and loops on the way to the one that ran out start where they were; no fuel is
  # spent until it is reached, so every launch gets at least one iteration further. An element
  # whose flag is raised is not suspended (the flag would be lost): it finishes, its value flagged.
  defp emit_resumable(st, names, iv, parts) do
    {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v} = parts
    %{i: i, last: last, acc: acc, res: res, id: id, inner: inner} = names
    {k, at, val} = {"#{last}k", "rs[#{2 * id + 1}]", "rs[#{2 * id + 2}]"}
    acc_type = c_type(acc_v.t)
    res_type = c_type(res_v.t)

    st
    |> emit(assign(res, text_as(iv, res_v)))
    |> emit("if (resume != 0 && (resume < #{id + 1}UL || resume > #{inner + 1}UL)) {")
    |> emit("  #{res} = #{from_word(res_type, val)};")
    |> emit("} else if (#{sc} == 0) bad = 1;")
    |> emit("else if (#{sc} > 0 ? #{fc} <= #{lc} : #{fc} >= #{lc}) {")
    |> emit(
      "  const accel_u64 #{last} = (#{sc} > 0 ? (accel_u64)#{lc} - (accel_u64)#{fc} : (accel_u64)#{fc} - (accel_u64)#{lc}) / (#{sc} > 0 ? (accel_u64)#{sc} : (accel_u64)0 - (accel_u64)#{sc});"
    )
    |> emit("  " <> String.replace_suffix(acc_decl, ";", " = 0;"))
    |> emit("  accel_u64 #{k} = 0;")
    |> emit("  if (resume != 0) {")
    |> emit("    #{k} = #{at};")
    |> emit("    #{acc} = #{from_word(acc_type, val)};")
    |> emit("    if (resume == #{id + 1}UL) resume = 0;")
    |> emit("  }")
    |> then(fn st ->
      iteration = "(accel_i64)((accel_u64)#{fc} + #{k} * (accel_u64)#{sc})"
      mark = "rs[0] = (epoch << 16) | #{id + 1}UL;"

      if inner == id do
        # innermost: as many iterations as the fuel allows, in a loop as tight as a launch's
        st
        |> emit("  if (#{k} == 0) {")
        |> emit("    if (fuel == 0) { susp = 1; #{mark} }")
        |> emit("    else {")
        |> emit("      --fuel;")
        |> emit("      const accel_i64 #{i} = #{fc};")
        |> emit_loop_body(first_lines, acc, first_v, acc_v, "      ")
        |> emit("      #{k} = 1;")
        |> emit("    }")
        |> emit("  }")
        |> emit("  if (!susp) {")
        |> emit("    const accel_u64 #{last}a = #{last} - #{k} + 1;")
        |> emit("    const accel_u64 #{last}r = #{last}a < fuel ? #{last}a : fuel;")
        |> emit("    fuel -= #{last}r;")
        |> emit("    for (accel_u64 #{last}c = 0; #{last}c < #{last}r; ++#{last}c, ++#{k}) {")
        |> emit("      const accel_i64 #{i} = #{iteration};")
        |> emit_loop_body(later_lines, acc, later_v, acc_v, "      ")
        |> emit("    }")
        |> emit("    if (#{last}r < #{last}a) { susp = 1; #{mark} }")
        |> emit("  }")
      else
        # around other resumable loops: each iteration asks for fuel, unless on the way to resume
        st
        |> emit("  for (; #{k} <= #{last}; ++#{k}) {")
        |> emit("    if (resume == 0) {")
        |> emit("      if (fuel == 0) { susp = 1; #{mark} break; }")
        |> emit("      --fuel;")
        |> emit("    }")
        |> emit("    if (#{k} == 0) {")
        |> emit("      const accel_i64 #{i} = #{fc};")
        |> emit_loop_body(first_lines, acc, first_v, acc_v, "      ")
        |> emit("    } else {")
        |> emit("      const accel_i64 #{i} = #{iteration};")
        |> emit_loop_body(later_lines, acc, later_v, acc_v, "      ")
        |> emit("    }")
        |> emit("  }")
      end
    end)
    |> emit("  if (susp) {")
    |> emit("    #{at} = #{k};")
    |> emit("    #{val} = #{to_word(acc_type, acc)};")
    |> emit("  } else {")
    |> emit("    " <> assign(res, text_as(acc_v, res_v)))
    |> emit("  }")
    |> emit("}")
    |> emit("ACCEL_KEEP_#{id}(if (!susp) #{val} = #{to_word(res_type, res)};)")
    |> emit(if st.in_loop, do: "if (susp) break;", else: "if (susp && !bad) return 2;")
  end

  defp to_word("double", x), do: "accel_f64_bits(#{x})"
  defp to_word(_, x), do: "(accel_u64)#{x}"
  defp from_word("double", w), do: "accel_f64_of(#{w})"
  defp from_word(type, w), do: "(#{type})#{w}"

  # Whether a loop may run more than a few hundred iterations: its trip count's bound from the
  # ranges of its first and last (the span between them) and its step (a step that is not one
  # constant counts as 1: `a..b` steps by +1 or -1). Shorter loops run to their end in one launch,
  # as straight-line code does: resuming costs the launch 5-25% on PoCL
  # (bench/results/kernel_stop_cost.md). `1..n` with a captured n of the 8-bit class (the logistic
  # map's 10 iterations) is short: n within -256..255 bounds it at 258 iterations.
  @short_loop 512
  defp long_loop?({f_lo, f_hi}, {l_lo, l_hi}, step) do
    span = max(max(l_hi - f_lo, f_hi - l_lo), 0)
    by = if match?({s, s} when s != 0, step), do: abs(elem(step, 0)), else: 1
    div(span, by) + 1 > @short_loop
  end

  defp emit_loop_body(st, lines, acc_ref, v, acc_v, indent \\ "    ") do
    st = Enum.reduce(lines, st, &emit(&2, indent <> &1))
    if v.t == :none, do: st, else: emit(st, indent <> assign(acc_ref, text_as(v, acc_v)))
  end

  defp check_acc_type(%{t: a} = init, %{t: b} = body, line, st) when a != b and b != :none,
    do: unify(init, body, line, st)

  defp check_acc_type(_, _, _, _), do: :ok

  # The accumulator for iterations after the first (as `acc_as` holds it): from what the first
  # gives, widened until the body keeps it (twice), else the whole 64-bit range.
  defp settle(first_v, body_at, acc_as, line, st) do
    Enum.reduce_while([1, 2, 3], first_v, fn attempt, guess ->
      guess = if attempt == 3 and guess.t == :int, do: %{guess | r: @full}, else: guess
      acc_v = acc_as.(guess)
      {v, lines, st2} = body_at.(acc_v, st)
      check_acc_type(guess, v, line, st)

      if v.t != :int or within?(v.r, guess.r) or attempt == 3,
        do: {:halt, {v, lines, acc_v, st2}},
        else: {:cont, unify(guess, v, line, st)}
    end)
  end

  defp within?({a, b}, {c, d}), do: a >= c and b <= d

  defp range_parts({:cap_range, k}, env, st, _line) do
    [f, l, s] = Map.fetch!(env, {:cap_range, k})
    {[int(f, @full), int(l, @full), int(s, @full)], st}
  end

  defp range_parts({:range, f, l, s}, env, st, _line) do
    {fv, st} = Expr.gen(f, env, st)
    {lv, st} = Expr.gen(l, env, st)

    case s do
      nil when fv.t == :int and lv.t == :int ->
        # Elixir 1.14: first..last steps by -1 when first > last.
        {c, st} = declare(st, "accel_i64", "(#{it(fv)} <= #{it(lv)} ? 1 : -1)")
        {[fv, lv, int(c, {-1, 1})], st}

      nil ->
        {[fv, lv, none()], st}

      s ->
        {sv, st} = Expr.gen(s, env, st)
        {[fv, lv, sv], st}
    end
  end
end
