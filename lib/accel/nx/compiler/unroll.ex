if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler.Unroll do
    @moduledoc false
    # `while` loops that run a fixed number of times, replaced by their body repeated: a counter
    # that starts at a constant, steps by a constant and is compared with a constant (Nx.Random's
    # threefry rounds: `while {x = 1, state}, x < 6` around `while xs, r <- rotations`), up to
    # @max_trips iterations and @max_nodes nodes. The evaluator would run such a loop one step at
    # a time: each iteration's condition a download, its counter, slices and rotations small
    # device operations (about 700 jobs in one Nx.Random.normal), and its body's elementwise work
    # one region per iteration. Unrolled, the counter, the slices of constant tensors it indexes
    # and the arithmetic on them fold into constants, and Fusion sees the iterations' work as
    # one expression (and Plan may replay it in one crossing).
    #
    # Each iteration is the body with the loop's parameters replaced by the state before it:
    # nodes that read no parameter (loop invariants, the loop's captures) are shared; the others
    # are rebuilt with new ids. Loops nested in the body are unrolled first, where they qualify.
    # Loops whose body holds a hook or token stay loops (their side effects keep their order).

    alias Nx.Defn.{Composite, Expr, Tree}
    alias Nx.Tensor, as: T

    @max_trips 32
    @max_nodes 5_000
    @comparisons [:less, :less_equal, :greater, :greater_equal, :not_equal]
    @foldable [:add, :subtract, :multiply, :bitwise_and, :bitwise_or, :bitwise_xor, :left_shift, :right_shift]
    @effects [:token, :attach_token, :runtime_call]

    @doc "The expression with every fixed-count loop unrolled."
    def expr(expr) do
      {expr, _memo} = Composite.traverse(expr, %{}, &node/2)
      expr
    end

    defp node(%T{data: %Expr{op: :constant}} = t, memo), do: {t, memo}

    defp node(%T{data: %Expr{id: id}} = t, memo) do
      case memo do
        %{^id => done} ->
          {done, memo}

        _ ->
          {done, memo} = rewrite(t, memo)
          {done, Map.put(memo, id, done)}
      end
    end

    # an element of a loop's state: the unrolled loop's value for it
    defp rewrite(%T{data: %Expr{op: :elem, args: [%T{data: %Expr{id: loop}} = w, i]} = data} = t, memo) do
      {w, memo} = node(w, memo)

      case memo do
        %{{:states, ^loop} => states} -> {revectorize(Enum.at(states, i), t), memo}
        _ -> {%{t | data: %{data | args: [w, i]}}, memo}
      end
    end

    defp rewrite(%T{data: %Expr{op: :while, id: id} = data} = t, memo) do
      {args, memo} = Tree.apply_args(t, :all, memo, &node/2)
      t = %{t | data: %{data | args: args}}

      case unrolled(args, data.context) do
        nil ->
          {t, memo}

        # a loop of one tensor is that tensor; a tuple's elements are read by `elem` nodes
        [state] when not is_tuple(hd(args)) ->
          {revectorize(state, t), Map.put(memo, {:states, id}, [state])}

        states ->
          {t, Map.put(memo, {:states, id}, states)}
      end
    end

    defp rewrite(%T{data: data} = t, memo) do
      {args, memo} = Tree.apply_args(t, :all, memo, &node/2)
      {%{t | data: %{data | args: args}}, memo}
    end

    # A loop computes devectorized (Nx flattens a vectorized state into its shape); its outputs
    # carry their vectorized axes, which the unrolled value takes back.
    defp revectorize(state, %T{vectorized_axes: []}), do: state
    defp revectorize(state, %T{vectorized_axes: axes}), do: Nx.vectorize(state, axes)

    ## Which loops, how many times

    defp unrolled([initial, arg, condition, body], context) do
      [initial, arg, body] = Enum.map([initial, arg, body], &Composite.flatten_list([&1]))

      with {k, test} <- counter_test(condition, arg),
           c0 when is_integer(c0) <- constant(Enum.at(initial, k)),
           step when is_integer(step) and step != 0 <- counter_step(Enum.at(body, k), Enum.at(arg, k)),
           trips when is_integer(trips) <- trips(c0, step, test),
           true <- within_type?(c0, step, trips, Enum.at(arg, k).type),
           size = body_size(body),
           true <- size != :effects and size * trips <= @max_nodes do
        params = Enum.map(arg, & &1.data.id)
        scope = {hd(arg).data.context, context}

        Enum.reduce(1..trips//1, initial, fn _, state ->
          map = Map.new(Enum.zip(params, state))
          {next, _memo} = Enum.map_reduce(body, %{}, &subst(&1, map, scope, &2))
          next
        end)
      else
        _ -> nil
      end
    end

    # The condition as the counter's position and a test of its value: a comparison of one of
    # the loop's parameters with a constant.
    defp counter_test(%T{data: %Expr{op: op, args: [a, b]}}, arg) when op in @comparisons do
      position = fn t -> Enum.find_index(arg, &(&1.data.id == t.data.id)) end

      case {position.(a), constant(b), position.(b), constant(a)} do
        {k, limit, _, _} when is_integer(k) and is_integer(limit) -> {k, &compare(op, &1, limit)}
        {_, _, k, limit} when is_integer(k) and is_integer(limit) -> {k, &compare(op, limit, &1)}
        _ -> nil
      end
    end

    defp counter_test(_condition, _arg), do: nil

    defp compare(:less, a, b), do: a < b
    defp compare(:less_equal, a, b), do: a <= b
    defp compare(:greater, a, b), do: a > b
    defp compare(:greater_equal, a, b), do: a >= b
    defp compare(:not_equal, a, b), do: a != b

    # the body's next counter: the counter plus (or minus) a constant
    defp counter_step(%T{data: %Expr{op: op, args: [a, b]}}, %T{data: %Expr{id: id}})
         when op in [:add, :subtract] do
      case {a, b} do
        {%T{data: %Expr{id: ^id}}, c} -> if op == :add, do: constant(c), else: negate(constant(c))
        {c, %T{data: %Expr{id: ^id}}} when op == :add -> constant(c)
        _ -> nil
      end
    end

    defp counter_step(_next, _counter), do: nil

    defp negate(n) when is_integer(n), do: -n
    defp negate(_), do: nil

    defp trips(value, step, test, count \\ 0) do
      cond do
        not test.(value) -> count
        count == @max_trips -> nil
        true -> trips(value + step, step, test, count + 1)
      end
    end

    # Every value the counter takes, the one that ends the loop too, within its type: a counter
    # that would wrap is not counted here (its loop may not end).
    defp within_type?(c0, step, trips, {kind, _} = type) when kind in [:s, :u] do
      {low, high} =
        {Nx.Constants.min_finite(type, backend: Nx.BinaryBackend),
         Nx.Constants.max_finite(type, backend: Nx.BinaryBackend)}

      Enum.all?([c0, c0 + step * trips], &(&1 >= Nx.to_number(low) and &1 <= Nx.to_number(high)))
    end

    defp within_type?(_c0, _step, _trips, _type), do: false

    defp constant(%T{data: %Expr{op: :constant, args: [n]}}) when is_integer(n), do: n
    defp constant(_), do: nil

    # the nodes of one iteration (every scope in it), or :effects where one has side effects
    defp body_size(body) do
      seen =
        Enum.reduce_while(body, %{}, fn t, seen ->
          case walk(t, seen) do
            :effects -> {:halt, :effects}
            seen -> {:cont, seen}
          end
        end)

      if seen == :effects, do: :effects, else: map_size(seen)
    end

    defp walk(_t, :effects), do: :effects
    defp walk(%T{data: %Expr{op: op}}, _seen) when op in @effects, do: :effects

    defp walk(%T{data: %Expr{id: id}} = t, seen) do
      if Map.has_key?(seen, id) do
        seen
      else
        {_, seen} = Tree.apply_args(t, :all, Map.put(seen, id, true), fn a, acc -> {a, walk(a, acc)} end)
        seen
      end
    end

    ## One iteration: the body with the parameters replaced

    # (`scope`: the loop's own context and the one around it, which the body's nodes move to: Nx
    # builds no expression from nodes of two contexts)
    defp subst(%T{data: %Expr{op: :constant}} = t, _map, _scope, memo), do: {t, memo}

    defp subst(%T{data: %Expr{id: id} = data} = t, map, {inner, outer} = scope, memo) do
      case {map, memo} do
        {%{^id => state}, _} ->
          {state, memo}

        {_, %{^id => done}} ->
          {done, memo}

        _ ->
          {args, {memo, changed}} =
            Tree.apply_args(t, :all, {memo, false}, fn arg, {memo, changed} ->
              {new, memo} = subst(arg, map, scope, memo)
              {new, {memo, changed or new.data.id != arg.data.id}}
            end)

          context = if data.context == inner, do: outer, else: data.context

          done =
            if changed,
              do: fold(%{t | data: %{data | id: Expr.id(), args: args, context: context}}),
              else: %{t | data: %{data | context: context}}

          {done, Map.put(memo, id, done)}
      end
    end

    # What the unrolled counter makes constant, computed now (on the binary backend: Fusion runs
    # with Expr as the process's default backend): arithmetic on integer constants, their
    # conversions, and slices and squeezes of constant tensors at constant positions (a rotation
    # amount picked from a table by the counter).
    defp fold(%T{type: {kind, _}, data: %Expr{op: op, args: [a, b]}} = t)
         when op in @foldable and kind in [:s, :u] do
      with x when is_integer(x) <- constant(a), y when is_integer(y) <- constant(b) do
        value = apply(Nx, op, [number(x, a.type), number(y, b.type)])
        Expr.constant(t, value |> Nx.as_type(t.type) |> Nx.to_number(), [])
      else
        _ -> t
      end
    end

    defp fold(%T{type: {kind, _}, data: %Expr{op: :as_type, args: [a]}} = t) when kind in [:s, :u] do
      case constant(a) do
        x when is_integer(x) ->
          Expr.constant(t, number(x, a.type) |> Nx.as_type(t.type) |> Nx.to_number(), [])

        nil ->
          t
      end
    end

    defp fold(%T{data: %Expr{op: :slice, args: [source, start, lengths, strides]} = data} = t) do
      # (a constant start within its axis, where a tensor start's clamping leaves it as it is)
      start =
        Enum.zip_with([start, Tuple.to_list(source.shape), lengths], fn [s, size, length] ->
          c = if is_integer(s), do: s, else: constant(s)
          if is_integer(c) and c >= 0 and c + length <= size, do: c, else: s
        end)

      value = literal(source)

      if value != nil and Enum.all?(start, &is_integer/1),
        do: literal(t, Nx.slice(value, start, lengths, strides: strides)),
        else: %{t | data: %{data | args: [source, start, lengths, strides]}}
    end

    defp fold(%T{data: %Expr{op: :squeeze, args: [source, axes]}} = t) do
      case literal(source) do
        %T{} = value -> literal(t, Nx.squeeze(value, axes: axes))
        nil -> t
      end
    end

    defp fold(t), do: t

    defp number(n, type), do: Nx.tensor(n, type: type, backend: Nx.BinaryBackend)

    defp literal(%T{data: %Expr{op: :tensor, args: [%T{} = value]}}), do: value
    defp literal(_), do: nil

    # the folded value as a constant or literal, with the node's axis names
    defp literal(t, value), do: %{Expr.tensor(value) | names: t.names}
  end
end
