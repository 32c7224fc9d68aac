defmodule Accel.Kernel.Lower do
  @moduledoc false
  # Elixir code -> the kernel's untyped intermediate form, at compile time (Accel.kernel/1,
  # defkernel). Anything outside the kernel language is a CompileError naming the construct and its
  # line. Variables become numbered locals (a rebinding is a new one); variables of the caller's
  # scope become captures, passed as scalars when the kernel runs.
  #
  # The form (every node a tuple):
  #   {:lit, number | boolean | nil}   {:arg, k}   {:cap, k}   {:var, id}   {:fail}
  #   {:let, id, value, body}          {:op, name, [args], line}    {:if, cond, then, else, line}
  #   {:and | :or, a, b, line} (strict booleans)   {:andalso | :orelse, a, b} (&& and ||, truthy)
  #   {:reduce, range, init, index_id, acc_id, body, line}, range {:range, first, last, step | nil}
  #   or {:cap_range, k}
  # {:fail} is where Elixir raises (no cond or case clause matched): the element is recomputed on
  # the BEAM, which raises its own error.

  @arith [:+, :-, :*, :/]
  @compare [:==, :!=, :===, :!==, :<, :<=, :>, :>=]
  @kernel_funs [div: 2, rem: 2, abs: 1, min: 2, max: 2, trunc: 1, round: 1, floor: 1, ceil: 1]
  @bitwise [band: 2, bor: 2, bxor: 2, bnot: 1, bsl: 2, bsr: 2, &&&: 2, |||: 2, <<<: 2, >>>: 2, "~~~": 1]
  @bitwise_names %{&&&: :band, |||: :bor, <<<: :bsl, >>>: :bsr, "~~~": :bnot}
  @math [
    acos: 1,
    acosh: 1,
    asin: 1,
    asinh: 1,
    atan: 1,
    atan2: 2,
    atanh: 1,
    cos: 1,
    cosh: 1,
    exp: 1,
    log: 1,
    log10: 1,
    log2: 1,
    pow: 2,
    sin: 1,
    sinh: 1,
    sqrt: 1,
    tan: 1,
    tanh: 1,
    erf: 1,
    erfc: 1,
    fmod: 2,
    ceil: 1,
    floor: 1
  ]
  @type_tests [:is_integer, :is_float, :is_number, :is_boolean]

  @doc false
  def math_functions, do: @math

  defmodule State do
    @moduledoc false
    # vars: {name, context} -> IR node; captures: [{name, context, ast}] in order of first use;
    # kernels: name -> {arity, lowered body, arg count} for calls to sibling defkernels.
    defstruct vars: %{}, captures: [], next: 0, caller: nil, kernels: %{}, args: 0, attrs: :capture
  end

  @doc """
  Lowers `fn a, b -> body end`. Returns {ir, arity, captures}, captures as [{name, ast}].
  """
  def lower_fn(fun, caller, kernels \\ %{})

  def lower_fn({:fn, _, [{:->, meta, [params, body]}]}, caller, kernels) do
    state = %State{caller: caller, kernels: kernels}
    {state, arity} = bind_params(params, meta, state)
    {ir, state} = expr(body, %{state | args: arity})
    {ir, arity, Enum.map(Enum.reverse(state.captures), fn {name, _ctx, ast} -> {name, ast} end)}
  end

  def lower_fn({:fn, meta, clauses}, caller, _kernels) when length(clauses) > 1,
    do: error(meta, caller, "a kernel is a function of one clause; use case or cond inside it")

  def lower_fn(other, caller, _kernels),
    do: error([], caller, "Accel.kernel/1 expects an anonymous function, got: #{Macro.to_string(other)}")

  @doc "Lowers a defkernel's head and body (no captures allowed: module attributes are constants)."
  def lower_def(params, body, meta, caller, kernels) do
    state = %State{caller: caller, kernels: kernels, attrs: :placeholder}
    {state, arity} = bind_params(params, meta, state)
    {ir, state} = expr(body, %{state | args: arity})

    case state.captures do
      [] ->
        {ir, arity}

      [{name, _, ast} | _] ->
        error(meta(ast), caller, "defkernel bodies cannot use variable #{name} from outside the kernel")
    end
  end

  @doc "A defkernel's IR with its module attributes' values, once the module body has set them."
  def resolve({:attr, name}, module) do
    case Module.get_attribute(module, name) do
      v when is_number(v) or is_boolean(v) ->
        {:lit, v}

      v ->
        raise ArgumentError,
              "Accel.Kernel: @#{name} must be a number or a boolean in a kernel of #{inspect(module)}, got: #{inspect(v)}"
    end
  end

  def resolve(t, module) when is_tuple(t), do: t |> Tuple.to_list() |> resolve(module) |> List.to_tuple()
  def resolve(l, module) when is_list(l), do: Enum.map(l, &resolve(&1, module))
  def resolve(x, _module), do: x

  defp bind_params(params, meta, state) do
    params
    |> Enum.with_index()
    |> Enum.reduce({state, 0}, fn
      {{name, _, ctx}, k}, {st, n} when is_atom(name) and is_atom(ctx) ->
        st = if underscore?(name), do: st, else: %{st | vars: Map.put(st.vars, {name, ctx}, {:arg, k})}
        {st, n + 1}

      {other, _k}, _ ->
        error(meta, state.caller, "kernel parameters must be plain variables, got: #{Macro.to_string(other)}")
    end)
  end

  defp underscore?(name), do: String.starts_with?(Atom.to_string(name), "_")

  # ---- expressions ----

  defp expr(n, st) when is_integer(n) or is_float(n) or is_boolean(n) or is_nil(n), do: {{:lit, n}, st}

  defp expr({:__block__, _, [e]}, st), do: expr(e, st)
  defp expr({:__block__, _, exprs}, st) when exprs != [], do: block(exprs, st)

  # A match inside an expression (`if (t = rem(x, 7)) > 2`) has the value matched, and binds for
  # what follows, as in a block.
  defp expr({:=, meta, [{name, _, ctx} = var, value]}, st) when is_atom(name) and is_atom(ctx) do
    if underscore?(name), do: expr(value, st), else: block([{:=, meta, [var, value]}, var], st)
  end

  defp expr({:=, meta, [pattern, _]}, st), do: bad_match(pattern, meta, st)

  defp expr({:|>, _, [left, {f, m, args}]}, st) when is_list(args), do: expr({f, m, [left | args]}, st)

  # A module attribute: in defkernel, a placeholder resolved when the module body runs (resolve/2);
  # in Accel.kernel/1 inside a module being compiled, its value there when it is a number or a
  # boolean (as Elixir reads `@name` in a function body: a constant, so the specialiser sees its
  # range, and a divisor's magic numbers are folded); else a captured value, read where the kernel
  # is made.
  defp expr({:@, _meta, [{name, _, atom}]} = ast, st) when is_atom(name) and is_atom(atom) do
    cond do
      st.attrs == :placeholder -> {{:attr, name}, st}
      literal?(v = compile_time_attribute(st.caller, name)) -> {{:lit, v}, st}
      true -> capture(:"@#{name}", nil, ast, [], st)
    end
  end

  defp expr({name, meta, ctx} = ast, st) when is_atom(name) and is_atom(ctx) do
    case Map.fetch(st.vars, {name, ctx}) do
      {:ok, node} -> {node, st}
      :error -> capture(name, ctx, ast, meta, st)
    end
  end

  # Kernel.op(...) and :erlang ops as the plain call
  defp expr({{:., _, [Kernel, f]}, meta, args}, st), do: expr({f, meta, args}, st)
  defp expr({{:., _, [{:__aliases__, _, [:Kernel]}, f]}, meta, args}, st), do: expr({f, meta, args}, st)
  defp expr({{:., _, [{:__aliases__, _, [:Bitwise]}, f]}, meta, args}, st), do: expr({f, meta, args}, st)
  defp expr({{:., _, [Bitwise, f]}, meta, args}, st), do: expr({f, meta, args}, st)

  defp expr({{:., _, [:math, :pi]}, _, []}, st), do: {{:lit, :math.pi()}, st}

  defp expr({{:., meta, [:math, f]}, _, args} = ast, st) do
    if {f, length(args)} in @math, do: op({:math, f}, args, meta, st), else: unsupported(ast, meta, st)
  end

  defp expr({op, meta, [a, b]}, st) when op in @arith or op in @compare, do: op(op, [a, b], meta, st)
  defp expr({:-, meta, [a]}, st), do: op(:neg, [a], meta, st)
  defp expr({:+, _, [a]}, st), do: expr(a, st)

  defp expr({f, meta, args} = ast, st) when is_atom(f) and is_list(args) do
    arity = length(args)

    cond do
      {f, arity} in @kernel_funs -> op(f, args, meta, st)
      {f, arity} in @bitwise -> op(Map.get(@bitwise_names, f, f), args, meta, st)
      f in @type_tests and arity == 1 -> op(f, args, meta, st)
      f in [:and, :or] and arity == 2 -> bool(f, args, meta, st)
      f == :not and arity == 1 -> op(:not, args, meta, st)
      f == :&& and arity == 2 -> truthy(:andalso, args, st)
      f == :|| and arity == 2 -> truthy(:orelse, args, st)
      f == :! and arity == 1 -> op(:lnot, args, meta, st)
      f == :if and arity == 2 -> if_(args, meta, st)
      f == :unless and arity == 2 -> unless_(args, meta, st)
      f == :cond and arity == 1 -> cond_(args, meta, st)
      f == :case and arity == 2 -> case_(args, meta, st)
      f == :for -> for_(args, meta, st)
      Map.has_key?(st.kernels, {f, arity}) -> inline(Map.fetch!(st.kernels, {f, arity}), args, st)
      true -> unsupported(ast, meta, st)
    end
  end

  defp expr({{:., meta, [{:__aliases__, _, [:Enum]}, :reduce]}, _, [range, init, fun]}, st),
    do: reduce(range, init, fun, meta, st)

  defp expr({{:., meta, [Enum, :reduce]}, _, [range, init, fun]}, st), do: reduce(range, init, fun, meta, st)

  defp expr({{:., meta, [module, f]}, _, args} = ast, st) when is_list(args) do
    module = Macro.expand(module, st.caller)

    if is_atom(module) and Code.ensure_compiled(module) == {:module, module} and
         function_exported?(module, :__accel_kernel__, 1) do
      case module.__accel_kernel__({f, length(args)}) do
        nil -> unsupported(ast, meta, st)
        kernel -> inline(kernel, args, st)
      end
    else
      unsupported(ast, meta, st)
    end
  end

  defp expr(ast, st), do: unsupported(ast, meta(ast), st)

  defp block([{:=, meta, [pattern, value]} | rest], st) when rest != [] do
    {v, st} = expr(value, st)

    case pattern do
      {name, _, ctx} when is_atom(name) and is_atom(ctx) ->
        if underscore?(name) do
          block(rest, st)
        else
          # A block is no scope of its own: the binding stays visible after it (Elixir's
          # `y = (t = x + 1; t * 2) + t`); the constructs that are scopes restore the variables.
          {id, st} = fresh(st)
          {body, st} = block(rest, %{st | vars: Map.put(st.vars, {name, ctx}, {:var, id})})
          {{:let, id, v, body}, st}
        end

      other ->
        bad_match(other, meta, st)
    end
  end

  defp block([e], st), do: expr(e, st)

  # An expression whose value is dropped has no effect in a kernel (nothing can print or send).
  defp block([_ | rest], st), do: block(rest, st)

  defp bad_match(pattern, meta, st),
    do:
      error(
        meta,
        st.caller,
        "only a plain variable may be bound in a kernel, got: #{Macro.to_string(pattern)} = ..."
      )

  defp fresh(st), do: {st.next, %{st | next: st.next + 1}}

  defp compile_time_attribute(%Macro.Env{module: module}, name) when module != nil do
    if Module.open?(module), do: Module.get_attribute(module, name)
  end

  defp compile_time_attribute(_caller, _name), do: nil

  defp literal?(v) when is_integer(v), do: v in -0x8000000000000000..0x7FFFFFFFFFFFFFFF
  defp literal?(v), do: is_float(v) or is_boolean(v)

  defp capture(name, ctx, ast, _meta, st) do
    case Enum.find_index(Enum.reverse(st.captures), fn {n, c, _} -> {n, c} == {name, ctx} end) do
      nil -> {{:cap, length(st.captures)}, %{st | captures: [{name, ctx, ast} | st.captures]}}
      k -> {{:cap, k}, st}
    end
  end

  defp op(name, args, meta, st) do
    {args, st} = siblings(args, st)
    {{:op, name, args, meta[:line]}, st}
  end

  # The arguments of one call: each sees the variables from before the call, none another's
  # bindings, and all of theirs are visible after it (Elixir's rule: in `band((t = x; t), t + t)`,
  # the second `t` is the one bound before).
  defp siblings(asts, st, lower \\ &expr/2) do
    before = st.vars

    {irs, {st, vars}} =
      Enum.map_reduce(asts, {st, before}, fn ast, {st, vars} ->
        {ir, st} = lower.(ast, %{st | vars: before})
        bound = for {k, v} <- st.vars, Map.get(before, k) != v, into: %{}, do: {k, v}
        {ir, {st, Map.merge(vars, bound)}}
      end)

    {irs, %{st | vars: vars}}
  end

  # The left side's bindings are visible after it; the right side's (run or not) are not.
  defp bool(name, [a, b], meta, st) do
    {a, st} = expr(a, st)
    {b, st} = scoped(b, st)
    {{name, a, b, meta[:line]}, st}
  end

  defp truthy(name, [a, b], st) do
    {a, st} = expr(a, st)
    {b, st} = scoped(b, st)
    {{name, a, b}, st}
  end

  # An expression whose bindings end with it (a branch, a clause, a function's body).
  defp scoped(ast, st) do
    {ir, inner} = expr(ast, st)
    {ir, %{inner | vars: st.vars}}
  end

  # The condition's bindings are visible in both branches and after the if; a branch's are not.
  defp if_([c, clauses], meta, st) do
    {then, otherwise} = branches(clauses, meta, st)
    {c, st} = expr(c, st)
    {t, st} = scoped(then, st)
    {e, st} = scoped(otherwise, st)
    {{:if, c, t, e, meta[:line]}, st}
  end

  defp unless_([c, clauses], meta, st) do
    {then, otherwise} = branches(clauses, meta, st)
    if_([c, [do: otherwise, else: then]], meta, st)
  end

  defp branches(clauses, meta, st) do
    case clauses do
      [do: t] -> {t, nil}
      [do: t, else: e] -> {t, e}
      _ -> error(meta, st.caller, "if/unless takes do: and else: blocks")
    end
  end

  # A clause's condition binds for its own body only.
  defp cond_([[do: clauses]], _meta, st) do
    Enum.reduce(Enum.reverse(clauses), {{:fail}, st}, fn {:->, meta, [[c], body]}, {rest, st} ->
      {c, inner} = expr(c, st)
      {b, inner} = expr(body, inner)
      {{:if, c, b, rest, meta[:line]}, %{inner | vars: st.vars}}
    end)
  end

  # case value: each clause a pattern (a literal, -literal, _, a variable, ^pinned) with an
  # optional guard. The value is bound once; a pattern is a strict (===) match.
  defp case_([value, [do: clauses]], _meta, st) do
    {v, st} = expr(value, st)
    {id, st} = fresh(st)
    subject = {:var, id}

    {body, st} =
      Enum.reduce(Enum.reverse(clauses), {{:fail}, st}, fn {:->, meta, [[head], body]}, {rest, st} ->
        {pattern, guard} =
          case head do
            {:when, _, [p, g]} -> {p, g}
            p -> {p, true}
          end

        {test, vars} = pattern(pattern, subject, meta, st)
        inner = %{st | vars: Map.merge(st.vars, vars)}
        {g, inner} = expr(guard, inner)
        {b, inner} = expr(body, inner)
        st = %{inner | vars: st.vars}
        {{:if, and_tests(test, g), b, rest, meta[:line]}, st}
      end)

    {{:let, id, v, body}, st}
  end

  defp and_tests({:lit, true}, g), do: g
  defp and_tests(t, {:lit, true}), do: t
  defp and_tests(t, g), do: {:andalso, t, g}

  defp pattern(n, subject, _meta, _st) when is_number(n) or is_boolean(n),
    do: {{:op, :===, [subject, {:lit, n}], nil}, %{}}

  defp pattern({:-, _, [n]}, subject, _meta, _st) when is_number(n),
    do: {{:op, :===, [subject, {:lit, -n}], nil}, %{}}

  defp pattern({:^, _, [{name, _, ctx}]}, subject, meta, st) when is_atom(name) and is_atom(ctx) do
    case Map.fetch(st.vars, {name, ctx}) do
      {:ok, node} -> {{:op, :===, [subject, node], meta[:line]}, %{}}
      :error -> error(meta, st.caller, "^#{name}: pinned variables must be bound inside the kernel")
    end
  end

  defp pattern({name, _, ctx}, subject, _meta, _st) when is_atom(name) and is_atom(ctx) do
    if underscore?(name), do: {{:lit, true}, %{}}, else: {{:lit, true}, %{{name, ctx} => subject}}
  end

  defp pattern(other, _subject, meta, st),
    do:
      error(
        meta,
        st.caller,
        "case patterns in a kernel are numbers, booleans, variables and ^pinned variables, got: #{Macro.to_string(other)}"
      )

  # Enum.reduce(range, init, fn i, acc -> body end)
  defp reduce(range, init, {:fn, _, [{:->, fmeta, [[i, acc], body]}]}, meta, st) do
    {[range, init], st} = range_and_init(range, init, meta, st)
    loop(range, init, i, acc, body, fmeta, meta, st)
  end

  defp reduce(_range, _init, fun, meta, st),
    do:
      error(
        meta,
        st.caller,
        "Enum.reduce/3 in a kernel takes fn index, acc -> ... end, got: #{Macro.to_string(fun)}"
      )

  defp range_and_init(range, init, meta, st),
    do:
      siblings([{:range, range}, init], st, fn
        {:range, r}, st -> range(r, meta, st)
        init, st -> expr(init, st)
      end)

  # for i <- range, reduce: init do acc -> body end
  defp for_([{:<-, _, [i, range]}, [reduce: init], [do: [{:->, fmeta, [[acc], body]}]]], meta, st) do
    {[range, init], st} = range_and_init(range, init, meta, st)
    loop(range, init, i, acc, body, fmeta, meta, st)
  end

  defp for_(_args, meta, st),
    do:
      error(
        meta,
        st.caller,
        "for in a kernel takes one generator over a range and reduce: (for i <- a..b, reduce: acc do acc -> ... end)"
      )

  defp loop(range, init, i, acc, body, fmeta, meta, st) do
    {i_id, st} = fresh(st)
    {acc_id, st} = fresh(st)
    inner = st |> bind_loop_var(i, {:var, i_id}, fmeta) |> bind_loop_var(acc, {:var, acc_id}, fmeta)
    {body, inner} = expr(body, inner)
    {{:reduce, range, init, i_id, acc_id, body, meta[:line]}, %{inner | vars: st.vars}}
  end

  defp bind_loop_var(st, {name, _, ctx}, node, _meta) when is_atom(name) and is_atom(ctx) do
    if underscore?(name), do: st, else: %{st | vars: Map.put(st.vars, {name, ctx}, node)}
  end

  defp bind_loop_var(st, other, meta, _),
    do: error(meta, st.caller, "a loop variable must be a plain variable, got: #{Macro.to_string(other)}")

  defp range({:.., _, [a, b]}, _meta, st) do
    {[a, b], st} = siblings([a, b], st)
    {{:range, a, b, nil}, st}
  end

  defp range({:"..//", _, [a, b, s]}, _meta, st) do
    {[a, b, s], st} = siblings([a, b, s], st)
    {{:range, a, b, s}, st}
  end

  defp range({name, _, ctx} = ast, meta, st) when is_atom(name) and is_atom(ctx) do
    case expr(ast, st) do
      {{:cap, k}, st} ->
        {{:cap_range, k}, st}

      _ ->
        error(meta, st.caller, "a loop runs over a range (a..b, a..b//s, or a range captured from outside)")
    end
  end

  defp range(other, meta, st),
    do: error(meta, st.caller, "a loop runs over a range (a..b or a..b//s), got: #{Macro.to_string(other)}")

  # A sibling or remote defkernel: its body with the arguments bound to fresh locals.
  defp inline({arity, body}, args, st) when length(args) == arity do
    {args, st} = siblings(args, st)
    {ids, st} = Enum.map_reduce(args, st, fn _, st -> fresh(st) end)
    offset = st.next
    body = renumber(body, offset, ids)
    st = %{st | next: st.next + max_id(body) + 1}
    {Enum.zip(ids, args) |> Enum.reverse() |> Enum.reduce(body, fn {id, a}, b -> {:let, id, a, b} end), st}
  end

  # The inlined body's args become the bound locals, its locals shift past ours.
  defp renumber({:arg, k}, _offset, ids), do: {:var, Enum.at(ids, k)}
  defp renumber({:var, id}, offset, _ids), do: {:var, id + offset}
  defp renumber({:let, id, v, b}, o, ids), do: {:let, id + o, renumber(v, o, ids), renumber(b, o, ids)}

  defp renumber({:reduce, r, init, i, a, body, line}, o, ids),
    do: {:reduce, renumber(r, o, ids), renumber(init, o, ids), i + o, a + o, renumber(body, o, ids), line}

  defp renumber(t, o, ids) when is_tuple(t),
    do: t |> Tuple.to_list() |> Enum.map(&renumber(&1, o, ids)) |> List.to_tuple()

  defp renumber(l, o, ids) when is_list(l), do: Enum.map(l, &renumber(&1, o, ids))
  defp renumber(x, _o, _ids), do: x

  defp max_id({:var, id}), do: id
  defp max_id({:let, id, v, b}), do: Enum.max([id, max_id(v), max_id(b)])
  defp max_id({:reduce, r, init, i, a, body, _}), do: Enum.max([i, a, max_id(r), max_id(init), max_id(body)])
  defp max_id(t) when is_tuple(t), do: t |> Tuple.to_list() |> max_id()
  defp max_id(l) when is_list(l), do: Enum.reduce(l, 0, &max(max_id(&1), &2))
  defp max_id(_), do: 0

  defp unsupported(ast, meta, st) do
    error(
      meta,
      st.caller,
      "#{Macro.to_string(ast) |> String.slice(0, 80)} is not supported in a kernel: a kernel uses numbers, " <>
        "arithmetic, div/rem/abs/min/max, comparisons, booleans, Bitwise, if/cond/case, local variables, " <>
        "Enum.reduce or for ... reduce: over a range, :math functions and other kernels"
    )
  end

  defp meta({_, meta, _}) when is_list(meta), do: meta
  defp meta(_), do: []

  defp error(meta, caller, message) do
    raise CompileError,
      file: caller.file,
      line: meta[:line] || caller.line,
      description: "Accel.kernel: " <> message
  end
end
