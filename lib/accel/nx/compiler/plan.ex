if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler.Plan do
    @moduledoc false
    # A traced function compiled once into a list of steps that a call runs in order: what
    # Nx.Defn.Evaluator does on every call (walk the expression, count and look up each node's
    # uses in maps, work out each operation's arguments and backend) is done here when the
    # function compiles. Each step calls the backend's callback as the evaluator would, with the
    # same arguments, so results are the evaluator's; its value lands in a slot of a tuple of
    # registers, slots reused once a value's last use has run (a register file as small as the
    # values live at once).
    #
    # `while` and `cond` are steps holding scopes of their own, compiled likewise once: a loop's
    # condition and body (whose parameters are the loop's state), each clause's predicate and
    # body. Which scope computes a node is Nx.Defn.Tree.scope_ids's split, the evaluator's; an
    # enclosing scope's node that only branches read is computed on the first branch's demand, as
    # the evaluator computes it, so that a branch not taken costs nothing (scope/4). A function
    # with hooks or inner functions (`reduce`'s `fn`) is left to the evaluator (compile/2 returns
    # :evaluator), as is a vectorized node (Nx traces vectorized arguments devectorized; the
    # evaluator raises for one).

    alias Accel.Tensor, as: AT
    alias Nx.Defn.{Composite, Expr, Tree}

    @creation_ops [:eye, :iota, :from_binary]
    @list_ops [:concatenate, :stack]
    @indices_ops [:slice, :put_slice]
    @unsupported [:fun, :token, :attach_token, :hook, :runtime_call]
    @held_bytes 4096

    @doc """
    The plan of `expr` (the traced function's result) for `backend` (`{module, options}`, where
    the run's default backend), as `{fn [params] -> [result] end, peak}` (the function in
    Nx.Defn.Evaluator.__compile__'s shape; `peak`: the most bytes of intermediate tensors a run
    holds at once, peak/3), or `:evaluator` where the expression has nodes a plan does not run.
    """
    def compile(expr, backend, replay \\ true) do
      # (the results' templates as the function returns them, the values as the steps compute
      # them: devectorized, as the evaluator computes them)
      skeleton = Composite.traverse(expr, &Nx.to_template/1)
      {_, outputs} = Composite.traverse(expr, [], &{&1, [Nx.devectorize(&1) | &2]})
      outputs = Enum.reverse(outputs)

      {%{parts: [steps], slots: slots, refs: [refs], peak: peak}, [], held} =
        scope([outputs], backend, nil, nil)

      run = fn params ->
        {registers, made} = run(steps, :erlang.make_tuple(slots, nil), {params, {}}, [])
        result = output(skeleton, refs, registers) |> unshare(held)
        release(made, result)
        result
      end

      # (a loop or a branch runs operations chosen by the data: no one recording replays them)
      control? =
        Enum.any?(steps, fn {_slot, step, _made?, _dying} -> elem(step, 0) in [:while, :cond, :lazy] end)

      run = if control?, do: &with_lazy(run, &1), else: run

      fun =
        case backend do
          {Accel.Nx.Backend, _} when replay and not control? ->
            # (only the parameters the steps read: Nx's lazy containers load the others never)
            used = for {_slot, {:parameter, i}, _made?, _dying} <- steps, do: i
            cell = Accel.NIF.plan_cell()
            fn [params] -> [call(cell, run, params, used)] end

          _ ->
            fn [params] -> [run.(List.to_tuple(params))] end
        end

      {fun, peak}
    catch
      :evaluator -> :evaluator
    end

    # A scope's steps: `groups` lists of results (a predicate, then a body's), each group's steps
    # a part of their own, run in turn (a body only where its predicate holds). `parent`, for a
    # branch, is what its enclosing scopes compute: `ids` their nodes (Nx.Defn.Tree.scope_ids, the
    # evaluator's split), which the branch reads from the outer values its step hands it (in the
    # order of the list returned with the scope), and `eager` those they compute whatever a branch
    # does (eager_ids/2). A scope's other nodes, which only its branches read (one that two
    # `cond`s read, say), are lazy steps: computed once, on a branch's first demand, as the
    # evaluator computes them, so that a branch not taken costs nothing. `held`: the references of
    # the constants made once for the plan (nil: made on each run).
    defp scope(groups, backend, parent, held) do
      results = Enum.concat(groups)
      %{ids: parent_ids, eager: parent_eager} = parent || %{ids: %{}, eager: %{}}

      state = %{
        values: %{},
        steps: [],
        # (value number -> the bytes of its tensors)
        sizes: %{},
        count: 0,
        backend: backend,
        parent_ids: parent_ids,
        # (what this scope's branches see as their parent)
        scope: %{
          ids: Tree.scope_ids(List.to_tuple(results), parent_ids),
          eager: eager_ids(results, parent_eager)
        },
        outer: [],
        held: held
      }

      {groups, state} =
        Enum.map_reduce(groups, state, fn outputs, state ->
          {refs, state} = Enum.map_reduce(outputs, state, &value/2)
          {{refs, state.count}, state}
        end)

      traced = Enum.reverse(state.steps)
      results = Enum.flat_map(groups, &elem(&1, 0))
      uses = last_uses(traced, results)
      {steps, slots, refs} = allocate(traced, results, uses)
      peak = peak(traced, uses, state.sizes)

      {parts, _} =
        Enum.map_reduce(groups, {steps, 0}, fn {_, ends}, {steps, start} ->
          {part, rest} = Enum.split(steps, ends - start)
          {part, {rest, ends}}
        end)

      {refs, []} = Enum.map_reduce(groups, refs, fn {group, _}, refs -> Enum.split(refs, length(group)) end)
      {%{parts: parts, slots: slots, refs: refs, peak: peak}, Enum.reverse(state.outer), state.held}
    end

    ## Tracing: each node a step with a value number, arguments as {:value, n}

    # A node's value: {:value, n} once its step is recorded (each node once, by its id).
    defp value(%Nx.Tensor{data: %Expr{op: :metadata, args: [inner, _meta]}}, state) do
      if match?(%Nx.Tensor{}, inner), do: value(inner, state), else: throw(:evaluator)
    end

    defp value(%Nx.Tensor{data: %Expr{id: id}} = ans, state) do
      case state.values do
        %{^id => ref} ->
          {ref, state}

        %{} when is_map_key(state.parent_ids, id) ->
          # (the enclosing scope's: computed there, read from the outer values)
          outer = [ans | state.outer]
          record(id, {:outer, length(outer) - 1}, %{state | outer: outer})

        %{} ->
          {step, state} = step(ans, state)
          {{:value, n} = ref, state} = record(id, step, state)
          {ref, %{state | sizes: Map.put(state.sizes, n, bytes(ans, step))}}
      end
    end

    # (a number or a tensor that is not an expression: used as it is)
    defp value(other, state), do: {{:literal, other}, state}

    # (the bytes of a node's value; a tuple's, those of the tensors its step's template holds)
    defp bytes(%Nx.Tensor{type: {:tuple, _}}, {kind, _, out, _, _, _}) when kind in [:optional, :block],
      do: Composite.reduce(out, 0, &(&2 + Nx.byte_size(&1)))

    defp bytes(%Nx.Tensor{type: {:tuple, _}}, _step), do: 0
    defp bytes(%Nx.Tensor{} = t, _step), do: Nx.byte_size(t)

    defp record(id, step, state) do
      step = if is_map_key(state.scope.eager, id), do: step, else: {:lazy, step}
      n = state.count
      ref = {:value, n}

      state = %{
        state
        | steps: [{n, step} | state.steps],
          count: n + 1,
          values: Map.put(state.values, id, ref)
      }

      {ref, state}
    end

    defp step(%Nx.Tensor{vectorized_axes: [_ | _]}, _state), do: throw(:evaluator)
    defp step(%Nx.Tensor{data: %Expr{op: op}}, _state) when op in @unsupported, do: throw(:evaluator)

    defp step(%Nx.Tensor{data: %Expr{op: :tensor, args: [t]}}, state), do: {{:literal, t}, state}

    # A loop: its initial state's values here, its condition and body a scope of their own whose
    # parameters are the state's tensors (in the order Nx numbers them: the tuples flattened).
    defp step(%Nx.Tensor{data: %Expr{op: :while, args: [initial, _arg, condition, body]}}, state) do
      {args, state} = Enum.map_reduce(leaves(initial), state, &value/2)
      groups = [[condition], leaves(body)]
      {loop, [], held} = scope(groups, state.backend, nil, state.held || [])
      {{:while, args, loop, shape(initial)}, %{state | held: held}}
    end

    # A branch: each clause's predicate and body, and the last body, a scope whose parent is this
    # one; the values they read that this one computes anyway are computed here first (the `cond`
    # step's arguments).
    defp step(%Nx.Tensor{data: %Expr{op: :cond, args: [clauses, last]}}, state) do
      {clauses, state} =
        Enum.map_reduce(clauses, state, fn {pred, body}, state ->
          branch([[pred], leaves(body)], body, state)
        end)

      {last, state} = branch([leaves(last)], last, state)
      {{:cond, clauses, last}, state}
    end

    # A small constant of a loop's or a branch's scope is made once, when the plan compiles,
    # rather than on every iteration (an upload each); one the function would return is copied
    # first (unshare/2), so that no caller holds it.
    defp step(%Nx.Tensor{data: %Expr{op: :constant, args: [constant]}} = ans, state) do
      {module, options} = state.backend

      if module == Accel.Nx.Backend and is_list(state.held) and Nx.byte_size(ans) <= @held_bytes do
        held = module.constant(ans, constant, options)
        {{:literal, held}, %{state | held: [accel_ref(held) | state.held]}}
      else
        {{:constant, module, out(ans), constant, options}, state}
      end
    end

    defp step(%Nx.Tensor{data: %Expr{op: :parameter, args: [i]}}, state), do: {{:parameter, i}, state}

    defp step(%Nx.Tensor{data: %Expr{op: :elem, args: [tuple, i]}}, state) do
      if not match?(%Nx.Tensor{}, tuple), do: throw(:evaluator)
      {ref, state} = value(tuple, state)
      {{:elem, ref, i}, state}
    end

    # Nx 0.7: an optional operation, the backend's callback where it has one, otherwise the
    # default expression over its tensor operands (Fused.evaluate: as Nx.Defn.Evaluator runs it).
    defp step(%Nx.Tensor{data: %Expr{op: :optional, args: [call, default, _callback]}}, state) do
      %{data: %{args: call_args, op: name}} = call
      {args, state} = Enum.map_reduce(call_args, state, &argument/2)
      out = if match?({:tuple, _}, call.type), do: out(default), else: out(call)
      tensors = call_args |> Enum.take_while(&(not is_list(&1))) |> length()
      {{:optional, name, out, args, tensors, default}, state}
    end

    # Nx 0.13: a block, run by the first operands' backend (which runs the default function
    # where it has no implementation of its own).
    defp step(%Nx.Tensor{data: %Expr{op: :block, args: [struct, in_args, default, callback]}} = ans, state) do
      {args, state} = Enum.map_reduce(in_args, state, &argument/2)
      out = if match?({:tuple, _}, ans.type), do: out(default), else: out(ans)
      prefix = Enum.take_while(in_args, &(not is_list(&1))) |> length()
      {{:block, struct, out, args, prefix, callback}, state}
    end

    defp step(%Nx.Tensor{data: %Expr{op: op}} = ans, state) do
      {marked, {state, refs}} =
        Tree.apply_args(ans, {state, []}, fn arg, {state, refs} ->
          {ref, state} = value(arg, state)
          marker = {__MODULE__, length(refs)}
          {marker, {state, [ref | refs]}}
        end)

      refs = refs |> Enum.reverse() |> List.to_tuple()
      args = Enum.map(marked, &argument_of(&1, refs))

      {module, options} = state.backend

      call =
        cond do
          op in @creation_ops -> {:module, module, [out(ans)], [options]}
          op in @list_ops -> {:list_impl, :first_list, [out(ans)], []}
          op in @indices_ops -> {:list_impl, :indices, [out(ans)], []}
          match?({:tuple, _}, ans.type) -> {:list_impl, :all, [], []}
          true -> {:list_impl, :all, [out(ans)], []}
        end

      {{:apply, op, call, args}, state}
    end

    # The result's template that a step hands its callback as `out` (the backend reads its shape,
    # type and names): not the node, whose arguments reach back through the whole expression,
    # which the compiled function (kept for the VM's life) then need not hold.
    defp out(ans), do: Composite.traverse(ans, &Nx.to_template/1)

    # An argument: {:value, n}, {:literal, term}, or {:list, arguments} (a list that holds values).
    defp argument(%Nx.Tensor{} = t, state), do: value(t, state)
    defp argument(other, state), do: {{:literal, other}, state}

    defp argument_of({__MODULE__, i}, refs), do: elem(refs, i)

    defp argument_of(list, refs) when is_list(list) do
      if Enum.any?(list, &match?({__MODULE__, _}, &1)),
        do: {:list, Enum.map(list, &argument_of(&1, refs))},
        else: {:literal, list}
    end

    defp argument_of(other, _refs) do
      # (a value inside another term than a list: not a shape this plan knows)
      if marked?(other), do: throw(:evaluator), else: {:literal, other}
    end

    defp marked?({__MODULE__, i}) when is_integer(i), do: true
    defp marked?(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> marked?()
    defp marked?(list) when is_list(list), do: Enum.any?(list, &marked?/1)
    defp marked?(%{} = map), do: map |> Map.values() |> marked?()
    defp marked?(_), do: false

    defp branch(groups, body, state) do
      {scope, outer, held} = scope(groups, state.backend, state.scope, state.held || [])
      {args, state} = Enum.map_reduce(outer, %{state | held: held}, &value/2)
      {{scope, args, shape(body)}, state}
    end

    # The nodes a scope computes whatever its branches do: those its results read outside any
    # `cond`, and each `cond`'s first predicate (which decides the branch), with theirs; not a
    # loop's body (a scope of its own) nor a block's default expression. (Added to `ids`, the
    # enclosing scopes', whose nodes are not visited again.)
    defp eager_ids(results, ids), do: Enum.reduce(results, ids, &eager/2)

    defp eager(%Nx.Tensor{data: %Expr{id: id, op: op, args: args}} = t, ids) do
      case ids do
        %{^id => _} ->
          ids

        %{} when op == :cond ->
          [[{pred, _} | _], _] = args
          eager(pred, Map.put(ids, id, true))

        %{} ->
          {_, ids} = Tree.apply_args(t, :scope, Map.put(ids, id, true), &{&1, eager(&1, &2)})
          ids
      end
    end

    defp eager(_other, ids), do: ids

    # A loop's state or a branch's result: tuples of tensors, flattened in order (as the
    # evaluator hands a loop's state to its body); `shape/1` keeps the tuples to rebuild it.
    defp leaves(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.flat_map(&leaves/1)
    defp leaves(%Nx.Tensor{} = t), do: [t]
    defp leaves(_other), do: throw(:evaluator)

    defp shape(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&shape/1) |> List.to_tuple()

    defp shape(%Nx.Tensor{}), do: :tensor

    defp rebuild(:tensor, [value | rest]), do: {value, rest}

    defp rebuild(tuple, values) do
      {items, rest} = tuple |> Tuple.to_list() |> Enum.map_reduce(values, &rebuild/2)
      {List.to_tuple(items), rest}
    end

    ## Registers: a slot per value live at once

    # Values become slots (1-based tuple positions); a slot is free again after its value's last
    # use, so a step may write where one of its own operands was. Each step lists the slots whose
    # values its run reads last (`dying`) among those an operation made: the run frees such a
    # tensor there (run/4), so that a call holds the tensors live at once rather than every one
    # it made, as XLA's buffer assignment reuses memory. Not in a scope with lazy steps, whose
    # values read their operands later, when a branch first demands them.
    defp allocate(steps, results, {freed_by, outputs}) do
      makers =
        if lazy?(steps),
          do: MapSet.new(),
          else: for({n, step} <- steps, made?(step), into: MapSet.new(), do: n)

      {steps, {slot_of, _free, slots}} =
        Enum.map_reduce(steps, {%{}, [], 0}, fn {n, step}, {slot_of, free, slots} ->
          made? = made?(step) and not MapSet.member?(outputs, n)
          step = resolve(step, slot_of)
          dead = Map.get(freed_by, n, [])
          dying = for m <- dead, MapSet.member?(makers, m), do: Map.fetch!(slot_of, m)
          free = Enum.reduce(dead, free, &[Map.fetch!(slot_of, &1) | &2])

          {slot, free, slots} =
            case free do
              [slot | free] -> {slot, free, slots}
              [] -> {slots + 1, [], slots + 1}
            end

          {{slot, step, made?, dying}, {Map.put(slot_of, n, slot), free, slots}}
        end)

      {steps, max(slots, 1), Enum.map(results, &resolve_ref(&1, slot_of))}
    end

    # {step number -> the values it reads last, the values the results read}: the results are
    # read after every step.
    defp last_uses(steps, results) do
      last_use =
        Enum.reduce(steps, %{}, fn {n, step}, acc ->
          step |> refs() |> Enum.reduce(acc, &Map.put(&2, &1, n))
        end)

      outputs = results |> Enum.flat_map(&refs/1) |> MapSet.new()

      freed_by =
        for {m, n} <- last_use, not MapSet.member?(outputs, m), reduce: %{} do
          acc -> Map.update(acc, n, [m], &[m | &1])
        end

      {freed_by, outputs}
    end

    # The most bytes of intermediate tensors (values operations made that are not results) live
    # at once in a run, each freed after its last reader as run/4 frees it (an operation's result
    # made while its operands live); a loop's or a branch's steps count their own on top of the
    # values live at their step. Accel.Nx.Compiler weighs from it whether a first call runs
    # unfused while the kernels build.
    defp peak(steps, {freed_by, outputs}, sizes) do
      # (a scope with lazy steps frees nothing before its end: allocate/3)
      freed_by = if lazy?(steps), do: %{}, else: freed_by

      {peak, _live, _total} =
        Enum.reduce(steps, {0, %{}, 0}, fn {n, step}, {peak, live, total} ->
          {live, total} =
            if made?(step) and not MapSet.member?(outputs, n) do
              size = Map.get(sizes, n, 0)
              {Map.put(live, n, size), total + size}
            else
              {live, total}
            end

          peak = max(peak, total + inner_peak(step))
          {gone, live} = Map.split(live, Map.get(freed_by, n, []))
          {peak, live, total - Enum.sum(Map.values(gone))}
        end)

      peak
    end

    defp lazy?(steps), do: Enum.any?(steps, &match?({_n, {:lazy, _}}, &1))

    defp inner_peak({:lazy, step}), do: inner_peak(step)
    defp inner_peak({:while, _args, %{peak: peak}, _shape}), do: peak

    defp inner_peak({:cond, clauses, last}),
      do: [last | clauses] |> Enum.map(fn {%{peak: peak}, _args, _shape} -> peak end) |> Enum.max()

    defp inner_peak(_step), do: 0

    # Whether a step makes its value (an operation's result: not a parameter, a constant, a
    # captured tensor or a tensor made by a creation operation, which a backend might keep).
    defp made?({:apply, op, _call, _args}), do: op not in @creation_ops
    defp made?({:optional, _, _, _, _, _}), do: true
    defp made?({:block, _, _, _, _, _}), do: true
    defp made?(_step), do: false

    # The value numbers a step reads.
    defp refs({:value, m}), do: [m]
    defp refs({:elem, ref, _}), do: refs(ref)
    defp refs({:list, items}), do: Enum.flat_map(items, &refs/1)
    defp refs({:apply, _op, _call, args}), do: Enum.flat_map(args, &refs/1)
    defp refs({:optional, _, _, args, _, _}), do: Enum.flat_map(args, &refs/1)
    defp refs({:block, _, _, args, _, _}), do: Enum.flat_map(args, &refs/1)
    defp refs({:while, args, _loop, _shape}), do: Enum.flat_map(args, &refs/1)
    defp refs({:lazy, step}), do: refs(step)

    defp refs({:cond, clauses, last}),
      do: Enum.flat_map([last | clauses], fn {_scope, args, _shape} -> Enum.flat_map(args, &refs/1) end)

    defp refs(_), do: []

    defp resolve({:elem, ref, i}, slot_of), do: {:elem, resolve_ref(ref, slot_of), i}
    defp resolve({:apply, op, call, args}, slot_of), do: {:apply, op, call, resolve_args(args, slot_of)}

    defp resolve({:optional, name, out, args, n, default}, slot_of),
      do: {:optional, name, out, resolve_args(args, slot_of), n, default}

    defp resolve({:block, struct, out, args, n, callback}, slot_of),
      do: {:block, struct, out, resolve_args(args, slot_of), n, callback}

    defp resolve({:while, args, loop, shape}, slot_of), do: {:while, resolve_args(args, slot_of), loop, shape}

    defp resolve({:cond, clauses, last}, slot_of) do
      resolve_branch = fn {scope, args, shape} -> {scope, resolve_args(args, slot_of), shape} end
      {:cond, Enum.map(clauses, resolve_branch), resolve_branch.(last)}
    end

    defp resolve({:lazy, step}, slot_of), do: {:lazy, resolve(step, slot_of)}
    defp resolve(step, _slot_of), do: step

    defp resolve_args(args, slot_of), do: Enum.map(args, &resolve_ref(&1, slot_of))

    defp resolve_ref({:value, m}, slot_of), do: {:slot, Map.fetch!(slot_of, m)}
    defp resolve_ref({:list, items}, slot_of), do: {:list, resolve_args(items, slot_of)}
    defp resolve_ref(other, _slot_of), do: other

    ## One crossing: the steps' NIF calls, recorded once and replayed (c_src/nif/call_plans.hpp)

    # A call whose parameters are all Accel tensors replays the cell's plan where it has one for
    # their places and types; the cell asks for a call to be recorded (from the second on, a few
    # tries) while it has none; any other call, and any the replay reports a mismatch for, runs
    # the steps.
    defp call(cell, run, params, used) do
      params = List.to_tuple(params)
      tensors = Enum.map(used, &parameter(elem(params, &1)))

      # (the steps' parameters: each read once above, so given as its value; only where they run)
      steps = fn ->
        used |> Enum.zip(tensors) |> Enum.reduce(params, fn {i, t}, acc -> put_elem(acc, i, fn -> t end) end)
      end

      case signature(tensors, [], []) do
        nil ->
          run.(steps.())

        {refs, signature} ->
          {refs, signature} = distinct(refs, signature)

          case Accel.NIF.plan_replay(cell, refs, signature) do
            {outputs, since_gc, template} ->
              Accel.Tensor.note_made(since_gc)
              fill(template, outputs)

            :record ->
              record(cell, run, steps.(), refs, signature)

            _none_or_mismatch ->
              run.(steps.())
          end
      end
    end

    # One tensor given as several parameters is one parameter of the plan (the NIF takes each
    # tensor once); the signature then says where each parameter is among the distinct ones, so
    # that a call repeating other parameters, or none, is another signature: a mismatch.
    defp distinct(refs, signature) do
      case Enum.uniq(refs) do
        ^refs ->
          {refs, signature}

        unique ->
          places = Map.new(Enum.with_index(unique))
          {unique, {signature, Enum.map(refs, &Map.fetch!(places, &1))}}
      end
    end

    defp record(cell, run, params, refs, signature) do
      case Accel.NIF.plan_record_start(cell) do
        false -> run.(params)
        recording -> run_recorded(recording, run, params, refs, signature)
      end
    end

    defp run_recorded(recording, run, params, refs, signature) do
      try do
        result = run.(params)

        case output_refs(result) do
          nil -> :ok
          outputs -> Accel.NIF.plan_record_finish(recording, refs, outputs, signature, template(result))
        end

        result
      after
        Accel.NIF.plan_record_stop(recording)
      end
    end

    # Each parameter's reference and, for the signature, its Accel tensor's shape, type, place and
    # `auto` flag; nil where one is not an Accel tensor.
    defp signature([%Nx.Tensor{data: %Accel.Nx.Backend{tensor: %AT{} = a, auto: auto}} | rest], refs, sig),
      do: signature(rest, [a.ref | refs], [{a.shape, a.type, a.device, auto} | sig])

    defp signature([], refs, sig), do: {Enum.reverse(refs), Enum.reverse(sig)}
    defp signature([_ | _], _refs, _sig), do: nil

    defp output_refs(result) do
      result
      |> Composite.reduce([], fn
        %Nx.Tensor{data: %Accel.Nx.Backend{tensor: %AT{ref: ref}}}, acc when is_list(acc) -> [ref | acc]
        _other, _acc -> nil
      end)
      |> then(&(&1 && Enum.reverse(&1)))
    end

    # The results without their references (what a replay fills in).
    defp template(result) do
      Composite.traverse(result, fn %Nx.Tensor{data: %Accel.Nx.Backend{tensor: a} = data} = t ->
        %{t | data: %{data | tensor: %{a | ref: nil}}}
      end)
    end

    defp fill(template, refs) do
      {result, []} =
        Composite.traverse(template, refs, fn %Nx.Tensor{data: %{tensor: a} = data} = t, [ref | refs] ->
          {%{t | data: %{data | tensor: %{a | ref: ref}}}, refs}
        end)

      result
    end

    ## Running

    # The registers at the end, and the references of the tensors the steps made that are no
    # operand's (an operation may give an operand back as its result: a reshape of a contiguous
    # tensor, say).
    # (`env`: the parameters, and the outer values of a branch's scope)
    defp run([{slot, step, made?, dying} | steps], registers, env, made) do
      value = exec(step, registers, env)

      made =
        cond do
          made? -> made(value, step, registers, made)
          match?({:accel_lazy, _, _}, value) -> [{:lazy, elem(value, 1)} | made]
          true -> made
        end

      case dying do
        [] ->
          run(steps, :erlang.setelement(slot, registers, value), env, made)

        _ ->
          # (the values read last here leave the registers, which then hold the live values only)
          gone = for s <- dying, do: elem(registers, s - 1)
          registers = Enum.reduce(dying, registers, &:erlang.setelement(&1, &2, nil))
          registers = :erlang.setelement(slot, registers, value)
          run(steps, registers, env, drop(gone, registers, made))
      end
    end

    defp run([], registers, _env, made), do: {registers, made}

    defp made(%Nx.Tensor{data: %Accel.Nx.Backend{tensor: %AT{ref: ref}}}, step, registers, made) do
      if ref in operand_refs(step, registers), do: made, else: [ref | made]
    end

    defp made(_value, _step, _registers, made), do: made

    # Frees each tensor of `gone` that this run made (in `made`, which no longer lists it) and
    # that no live register holds (an operation may give an operand back: a no-op reshape's
    # result is its operand's tensor).
    defp drop([], _registers, made), do: made

    defp drop([value | gone], registers, made) do
      ref = accel_ref(value)

      if ref != nil and ref in made and not held?(registers, ref) do
        Accel.NIF.tensor_free(ref)
        drop(gone, registers, List.delete(made, ref))
      else
        drop(gone, registers, made)
      end
    end

    defp held?(tuple, ref) when is_tuple(tuple), do: held?(Tuple.to_list(tuple), ref)
    defp held?([value | rest], ref), do: held?(value, ref) or held?(rest, ref)
    defp held?(%Nx.Tensor{} = t, ref), do: accel_ref(t) == ref
    defp held?(_other, _ref), do: false

    defp operand_refs({_kind, _op, _call, args}, registers), do: tensor_refs(args, registers)
    defp operand_refs({_kind, _name, _out, args, _n, _default}, registers), do: tensor_refs(args, registers)

    defp tensor_refs(args, registers) do
      for arg <- args, t <- List.wrap(read(arg, registers)), ref = accel_ref(t), ref != nil, do: ref
    end

    defp accel_ref(%Nx.Tensor{data: %Accel.Nx.Backend{tensor: %AT{ref: ref}}}), do: ref
    defp accel_ref(_other), do: nil

    # The tensors a call made and does not return are freed at its end rather than when the
    # caller's process collects its garbage (which may be many calls later): their memory goes
    # back to Accel's caches for the next call, as XLA reuses its buffers (a 128 x 784 -> 256 ->
    # 10 training step's first calls otherwise each touched fresh pages for its products).
    defp release([], _result), do: :ok

    defp release(made, result) do
      kept = Composite.reduce(result, [], &[accel_ref(&1) | &2])

      for item <- made do
        case item do
          {:lazy, key} -> forget(key)
          ref -> if ref not in kept, do: Accel.NIF.tensor_free(ref)
        end
      end

      :ok
    end

    ## Lazy steps: a value only branches read, computed on the first one's demand

    # A lazy step's value is a thunk over the registers as they are where the step stands (its
    # operands are live there); the first read computes it and keeps the value, in a map in the
    # process dictionary that a scope's run empties of its own when it ends (release/2) and that a
    # call restores, whatever happens, when it returns (with_lazy/2).
    @lazy {__MODULE__, :lazy}

    defp with_lazy(run, params) do
      outer = Process.put(@lazy, %{})

      try do
        run.(params)
      after
        if outer == nil, do: Process.delete(@lazy), else: Process.put(@lazy, outer)
      end
    end

    defp force({:accel_lazy, key, fun}) do
      case Process.get(@lazy) do
        %{^key => value} ->
          value

        _ ->
          value = fun.()
          Process.put(@lazy, Map.put(Process.get(@lazy), key, value))
          value
      end
    end

    defp force(value), do: value

    defp forget(key), do: Process.put(@lazy, Map.delete(Process.get(@lazy), key))

    defp exec({:apply, op, {how, rule, prefix, suffix}, args}, registers, _params) do
      args = Enum.map(args, &read(&1, registers))

      module =
        case how do
          :module -> rule
          :list_impl -> Nx.Shared.list_impl!(operands(rule, args))
        end

      apply(module, op, prefix ++ args ++ suffix)
    end

    defp exec({:parameter, i}, _registers, {params, _outer}), do: parameter(elem(params, i))
    defp exec({:outer, k}, _registers, {_params, outer}), do: force(elem(outer, k))

    defp exec({:lazy, step}, registers, env),
      do: {:accel_lazy, make_ref(), fn -> exec(step, registers, env) end}

    # A loop: the condition's part, then (while it holds) the body's, whose results are the
    # next state; the tensors an iteration made and does not hand on are freed at its end.
    defp exec({:while, args, loop, shape}, registers, _env) do
      state = Enum.map(args, &read(&1, registers))
      {value, []} = rebuild(shape, iterate(loop, state))
      value
    end

    # A branch: the first clause whose predicate holds (the last body where none does).
    defp exec({:cond, clauses, last}, registers, {params, _outer}),
      do: choose(clauses, last, registers, params)

    defp exec({:constant, module, ans, constant, options}, _registers, _params),
      do: module.constant(ans, constant, options)

    defp exec({:literal, term}, _registers, _params), do: term
    defp exec({:elem, ref, i}, registers, _params), do: elem(read(ref, registers), i)

    defp exec({:optional, name, out, args, n, default}, registers, _params) do
      args = Enum.map(args, &read(&1, registers))
      backend = Nx.Shared.list_impl!(args)

      if function_exported?(backend, name, length(args) + 1),
        do: apply(backend, name, [out | args]),
        else: Accel.Nx.Compiler.Fused.evaluate(default, Enum.take(args, n))
    end

    defp exec({:block, struct, out, args, n, callback}, registers, _params) do
      args = Enum.map(args, &read(&1, registers))
      backend = Nx.Shared.list_impl!(Enum.take(args, n))
      backend.block(struct, out, args, callback)
    end

    defp iterate(%{parts: [condition, body], slots: slots, refs: [[pred], results]} = loop, state) do
      env = {List.to_tuple(state), {}}
      {registers, made} = run(condition, :erlang.make_tuple(slots, nil), env, [])

      if Nx.to_number(read(pred, registers)) != 0 do
        {registers, made} = run(body, registers, env, made)
        state = Enum.map(results, &read(&1, registers))
        release(made, List.to_tuple(state))
        iterate(loop, state)
      else
        release(made, {})
        state
      end
    end

    defp choose(
           [{%{parts: [condition, body], slots: slots, refs: [[pred], results]}, args, shape} | clauses],
           last,
           registers,
           params
         ) do
      env = branch_env(params, args, registers)
      {branch, made} = run(condition, :erlang.make_tuple(slots, nil), env, [])

      if Nx.to_number(read(pred, branch)) != 0 do
        finish(body, branch, env, made, results, shape)
      else
        release(made, {})
        choose(clauses, last, registers, params)
      end
    end

    defp choose([], {%{parts: [body], slots: slots, refs: [results]}, args, shape}, registers, params) do
      env = branch_env(params, args, registers)
      finish(body, :erlang.make_tuple(slots, nil), env, [], results, shape)
    end

    # A branch's parameters (its function's or loop body's) and its outer values as they stand:
    # lazy ones are computed only if the branch reads them.
    defp branch_env(params, args, registers),
      do: {params, args |> Enum.map(&peek(&1, registers)) |> List.to_tuple()}

    defp finish(body, registers, env, made, results, shape) do
      {registers, made} = run(body, registers, env, made)
      values = Enum.map(results, &read(&1, registers))
      release(made, List.to_tuple(values))
      {value, []} = rebuild(shape, values)
      value
    end

    # A parameter of the function (a function giving the tensor) or of a loop's body (the tensor).
    defp parameter(%Nx.Tensor{} = state), do: state

    defp parameter(lazy) do
      case lazy.() do
        %Nx.Tensor{data: %Expr{}} = tensor ->
          raise ArgumentError, "cannot pass a tensor expression as argument to defn, got: #{inspect(tensor)}"

        %Nx.Tensor{} = tensor ->
          Nx.devectorize(tensor)
      end
    end

    defp read({:slot, slot}, registers), do: force(elem(registers, slot - 1))
    defp read({:literal, term}, _registers), do: term
    defp read({:list, items}, registers), do: Enum.map(items, &read(&1, registers))

    # (a register as it stands: a lazy value stays a thunk)
    defp peek({:slot, slot}, registers), do: elem(registers, slot - 1)
    defp peek(ref, registers), do: read(ref, registers)

    defp operands(:all, args), do: args
    defp operands(:first_list, [list | _]), do: list
    defp operands(:indices, [tensor, indices | _]), do: [tensor | indices]

    defp unshare(result, held) when held in [nil, []], do: result

    defp unshare(result, held) do
      Composite.traverse(result, fn t ->
        if accel_ref(t) in held,
          do: Accel.Nx.Backend.backend_copy(t, Accel.Nx.Backend, device: :auto),
          else: t
      end)
    end

    # The function's results: each template (its names and vectorized axes as the function
    # returned it) with its value's data.
    defp output(skeleton, refs, registers) do
      {result, []} =
        Composite.traverse(skeleton, refs, fn template, [ref | refs] ->
          {%{template | data: read(ref, registers).data}, refs}
        end)

      result
    end
  end
end
