if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler.Fusion do
    @moduledoc false
    # The rewrite Accel.Nx.Compiler applies to a defn expression before Nx.Defn.Evaluator runs it:
    # each region of elementwise operations becomes one node that runs one generated kernel
    # (Accel.Nx.Compiler.Codegen), and everything else stays as it was, to run as the backend's
    # operations (Accel.Nx.Backend).
    #
    # A region grows from a value that must exist (an output, an operand of a node that does not
    # fuse, a value used twice) through the operands it alone uses: elementwise operations of the
    # same shape in the types Accel computes in, with scalar and broadcast constants inlined. What
    # it reads and does not fuse (parameters, dots, values used twice, operands of a smaller shape)
    # are its inputs, read in place through their broadcast strides; an iota it reads (or a slice,
    # squeeze or reshape of one: Nx.Random's counters, a one-hot's or a mask's positions) is
    # computed from each element's own index, never stored. A reduction (sum, product,
    # reduce_max, reduce_min) of such a region ends it: the region's values are never stored.
    #
    # The new node is an Nx `:optional` expression (Nx 0.7) or `:block` (Nx 0.13, where blocks
    # replaced optional operations): the evaluator calls the backend's `accel_fused` (or `block`
    # with an Accel.Nx.Compiler.Fused) with the region's inputs when they are Accel tensors, and
    # otherwise evaluates the original operations (its fallback), so no input can give a different
    # answer. The node keeps the id of the value it computes, so every other reference to that
    # value (a `cond` branch, a `while`'s initial state) reads the fused result.

    alias Accel.Nx.Compiler.{Codegen, Unroll}
    alias Accel.Nx.Storage
    alias Accel.Tensor.Registry
    alias Nx.Defn.{Composite, Expr, Tree}
    alias Nx.Tensor, as: T

    @unary for %{family: :unary, name: n} <- Registry.ops(), do: n
    @binary for %{family: :binary, name: n} <- Registry.ops(), do: n
    @compare for %{family: :compare, name: n} <- Registry.ops(), do: n
    @float_only for %{types: :float, name: n} <- Registry.ops(), do: n
    @int_only for %{types: :int, name: n} <- Registry.ops(), do: n
    @predicates [:logical_not, :is_nan, :is_infinity]
    @reductions [:sum, :product, :reduce_max, :reduce_min]
    # the types generated kernels compute in (Codegen's); others run as the backend's operations
    # (integers are held in 64 bits, wrapped into their type after each step; u64 unsigned)
    @fusable [:f32, :f64, :s64, :s32, :u32, :u8, :u64]
    # the most inputs a region takes (a kernel takes 32 buffers with its output and flag)
    @max_inputs 30
    # below this many output elements a reduction's range is split, so that the device has work
    # for all of its cores
    @parallel_outputs 4096
    @min_part 1024

    @doc """
    The expression with its fused regions as single nodes, and the regions found (for
    Accel.Nx.Compiler.report/3): `{expr, [%{ops, inputs, shape, reduce, kernel}]}`.
    """
    def rewrite(expr, math \\ :exact) do
      # the operations replayed for fallbacks build expressions: numbers they take must become
      # constants, not tensors of the caller's default backend
      key = Nx.Shared.backend_pdict_key()
      previous = Process.put(key, {Expr, []})

      try do
        do_rewrite(expr, math)
      after
        if previous, do: Process.put(key, previous), else: Process.delete(key)
      end
    end

    defp do_rewrite(expr, math) do
      expr = Unroll.expr(expr)
      uses = Composite.reduce(expr, %{}, &count/2)
      # outputs are used by the caller
      uses =
        Composite.reduce(expr, uses, fn %T{data: %Expr{id: id}}, acc -> Map.update(acc, id, 2, &(&1 + 2)) end)

      st = %{uses: uses, memo: %{}, regions: [], math: math}
      {expr, st} = Composite.traverse(expr, st, &rewrite_node/2)
      {expr, Enum.reverse(st.regions)}
    end

    # How many times each node is an operand, counting every scope that can refer to it.
    defp count(%T{data: %Expr{id: id}} = t, uses) do
      seen = Map.has_key?(uses, id)
      uses = Map.update(uses, id, 1, &(&1 + 1))

      if seen do
        uses
      else
        {_, uses} = Tree.apply_args(t, :all, uses, fn arg, acc -> {arg, count(arg, acc)} end)
        uses
      end
    end

    # A constant's id is its value, type and devectorized shape: the same id may stand for its
    # vectorized and its devectorized form, so constants (which have nothing to rewrite) are not
    # memoised by id.
    defp rewrite_node(%T{data: %Expr{op: :constant}} = t, st), do: {t, st}

    defp rewrite_node(%T{data: %Expr{id: id}} = t, st) do
      case st.memo do
        %{^id => done} ->
          {done, st}

        _ ->
          t = transposed_dot(t, st)

          {done, st} =
            case concat_region(t, st) || row_region(t, st) || region(t, st) do
              nil -> rebuild(t, st)
              region -> fuse(t, region, st)
            end

          {done, %{st | memo: Map.put(st.memo, id, done)}}
      end
    end

    # A product whose only use is a transpose that swaps its two operands' free axes (what
    # Nx.Defn.grad makes of a weight's gradient: transpose(dot(dy, [0], x, [0]))) is the product
    # of the operands the other way round, (A B)^T = B^T A^T: the same products, summed by BLAS,
    # without the copy that transposes the result (784 x 256 f32 in an MLP's step).
    defp transposed_dot(
           %T{data: %Expr{op: :transpose, args: [%T{data: %Expr{op: :dot} = dot}, axes]}} = t,
           st
         ) do
      [a, ca, ba, b, cb, bb] = dot.args
      batch = length(ba)
      free_a = tuple_size(a.shape) - length(ca) - batch
      free_b = tuple_size(b.shape) - length(cb) - batch
      ids = fn from, count -> Enum.to_list(from..(from + count - 1)//1) end
      swapped = ids.(0, batch) ++ ids.(batch + free_a, free_b) ++ ids.(batch, free_a)

      if Map.get(st.uses, dot.id) == 1 and axes == swapped and axes != ids.(0, length(axes)) and
           Map.get(t, :vectorized_axes, []) == [],
         do: %{t | data: %{dot | id: t.data.id, args: [b, cb, bb, a, ca, ba]}},
         else: t
    end

    defp transposed_dot(t, _st), do: t

    # An optional operation's call is not a value: only its operands are rewritten (its fallback is
    # a scope of its own).
    defp rebuild(%T{data: %Expr{op: :optional, args: [call, fallback, callback]} = data} = t, st) do
      {call, st} = rebuild(call, st)
      {%{t | data: %{data | args: [call, fallback, callback]}}, st}
    end

    # A while loop's condition and body are fused too (cond branches always are); the bodies of
    # functions given to reduce and friends are not (the backend runs them as a whole).
    defp rebuild(%T{data: %Expr{op: op} = data} = t, st) do
      {args, st} = Tree.apply_args(t, if(op == :while, do: :all, else: :scope), st, &rewrite_node/2)
      {%{t | data: %{data | args: args}}, st}
    end

    ## Regions

    # The region computing `t`, or nil where there is nothing to fuse (a lone operation runs as
    # the backend's operation: it needs no kernel of its own).
    defp region(%T{data: %Expr{op: op, args: [operand, opts]}} = t, st) when op in @reductions do
      with true <- reducible?(t, operand, opts),
           true <- absorbed?(operand, [operand.shape], st) and Map.get(st.uses, operand.data.id) == 1,
           %{} = grown <- grow(operand, operand.shape, st) do
        axes = opts[:axes] || Enum.to_list(0..(tuple_size(operand.shape) - 1)//1)
        outputs = Nx.size(t.shape)
        size = div(Nx.size(operand.shape), max(outputs, 1))

        parts =
          if outputs >= @parallel_outputs or size < 2 * @min_part or op == :product,
            do: 1,
            else: min(div(@parallel_outputs + outputs - 1, outputs), div(size, @min_part))

        out_type = Storage.compute_type(t.type)
        # f32 sums and products accumulate in f64, as the backend's sums do
        acc_type = if op in [:sum, :product] and out_type == :f32, do: :f64, else: out_type

        %{grown | reduce: %{op: op, axes: axes, parts: parts, out_type: out_type, acc_type: acc_type}}
      else
        _ -> nil
      end
    end

    defp region(%T{} = t, st) do
      if elementwise?(t) do
        case grow(t, t.shape, st) do
          %{nodes: [_, _ | _]} = grown ->
            grown

          %{nodes: [node], inputs: inputs} = grown ->
            if lone_kernel?(node, inputs, grown.iotas, t, st), do: grown

          nil ->
            nil
        end
      end
    end

    # A lone operation reading an input through a broadcast (a bias, a row's sum) or with a
    # constant operand (a scale) is a kernel of its own too, since the backend's broadcasting path
    # is slower than a generated kernel's indexing (a scores tensor divided by 8.0: 3.3 ms on the
    # backend over 2^21 f32, against a pass over memory); a small one stays the backend's.
    # With `math: :fast` a lone approximate function is one too (the backend's is exact), and so
    # is one reading an iota (which the backend would write to memory first).
    defp lone_kernel?(node, inputs, iotas, t, st) do
      Enum.any?(inputs, &broadcast?/1) or fast?(node, st.math) or iotas != [] or
        (Nx.size(t.shape) >= @parallel_outputs and Enum.any?(node.args, &match?({:const, _, _}, &1)))
    end

    # The operations `math: :fast` computes approximately (kernels/tensor.h's accel_f32_*_fast:
    # single precision, within 1-2 ulps), in f32 only.
    @fast_ops [:exp, :sigmoid, :tanh]
    defp fast?(%{op: op, type: :f32}, :fast), do: op in @fast_ops
    defp fast?(_node, _math), do: false

    defp broadcast?(%{strides: strides}), do: 0 in strides

    # A reduction that ends a region: of elementwise values, neither side empty.
    defp reducible?(t, operand, opts) do
      reduction_fuses?(t, operand, opts) and elementwise?(operand) and Nx.size(operand.shape) > 0 and
        Nx.size(t.shape) > 0
    end

    # A reduction a kernel computes: in types generated kernels compute in (Nx's integer sums are
    # s64, or u64 for unsigned ones: a count of u8 flags), nothing vectorized, no options but axes.
    defp reduction_fuses?(%T{type: type, vectorized_axes: []}, %T{vectorized_axes: []} = operand, opts),
      do: fusable?(type) and fusable?(operand.type) and Keyword.keys(opts) -- [:axes, :keep_axes] == []

    defp reduction_fuses?(_t, _operand, _opts), do: false

    # The region of elementwise nodes computing `root` over `shape`, or nil when it would take too
    # many inputs.
    defp grow(root, shape, st) do
      case grow_roots([root], shape, [shape], st, MapSet.new()) do
        {[result], acc} -> region_of(acc, elem(result, 1), shape, root.type)
        nil -> nil
      end
    end

    defp region_of(acc, result, shape, type) do
      # a region reads at least one tensor (one of constants alone is Nx's to fold)
      if acc.inputs != [] and length(acc.inputs) <= @max_inputs do
        %{
          nodes: Enum.reverse(acc.nodes),
          result: result,
          inputs: Enum.reverse(acc.inputs),
          iotas: Enum.reverse(acc.iotas),
          dims: Tuple.to_list(shape),
          out_type: Storage.compute_type(type),
          reduce: nil
        }
      end
    end

    # The nodes computing `roots` (values of the `parts` shapes) over the region's `shape`: operands
    # used only by this region's nodes are computed in it, each once (a value several of its nodes
    # read is one named value of the kernel), except those in `shared`. Where a value used more
    # than once turns out to be used outside the region too, the region is grown again with it
    # as an input. nil past @max_grows tries.
    @max_grows 8
    defp grow_roots(roots, shape, parts, st, shared, tries \\ 1) do
      acc = %{
        nodes: [],
        inputs: [],
        input_ids: %{},
        iotas: [],
        iota_ids: %{},
        ids: %{},
        refs: %{},
        k: 0,
        shape: shape,
        parts: parts,
        shared: shared
      }

      {results, acc} = Enum.map_reduce(roots, acc, &add_node(&1, &2, st))
      outside = for {id, refs} <- acc.refs, refs < Map.get(st.uses, id, 0), do: id

      cond do
        outside == [] -> {results, acc}
        tries == @max_grows -> nil
        true -> grow_roots(roots, shape, parts, st, MapSet.union(shared, MapSet.new(outside)), tries + 1)
      end
    end

    defp count_ref(acc, id), do: %{acc | refs: Map.update(acc.refs, id, 1, &(&1 + 1))}

    defp add_node(%T{data: %Expr{id: id}} = t, acc, st) do
      {op, args} = op_and_args(t)

      {operands, acc} =
        args
        |> Enum.map_reduce(acc, fn arg, acc -> operand(arg, acc, st) end)

      node = %{
        k: acc.k,
        op: op,
        family: family(op),
        args: operands,
        type: Storage.compute_type(t.type),
        compute: compare_type(op, args),
        expr: t,
        expr_args: args
      }

      {{:node, acc.k}, %{acc | nodes: [node | acc.nodes], k: acc.k + 1, ids: Map.put(acc.ids, id, acc.k)}}
    end

    defp operand(%T{data: %Expr{op: :constant, args: [number]}} = c, acc, _st)
         when is_number(number) or is_atom(number),
         do: {{:const, number, Storage.compute_type(c.type)}, acc}

    defp operand(%T{} = arg, acc, st) do
      case metadata_inner(arg, st) do
        nil -> region_operand(arg, acc, st)
        inner -> operand(inner, acc, st)
      end
    end

    defp region_operand(%T{data: %Expr{id: id}} = arg, acc, st) do
      cond do
        Map.has_key?(acc.ids, id) ->
          {{:node, acc.ids[id]}, count_ref(acc, id)}

        absorbed?(arg, acc.parts, st, acc.shared) ->
          add_node(arg, if(Map.get(st.uses, id, 0) > 1, do: count_ref(acc, id), else: acc), st)

        leaf = index_leaf(arg) ->
          iota(arg, leaf, acc)

        index_tree?(arg, acc.shape) ->
          case arg do
            %T{data: %Expr{op: :broadcast, args: [inner | _]}} -> operand(inner, acc, st)
            _ -> add_node(arg, acc, st)
          end

        true ->
          input(arg, acc)
      end
    end

    # Metadata used once (stop_grad's, custom_grad's: what differentiation read, before
    # compilation) is its operand's value, as the evaluator takes it: a region reads through it
    # (Nx.Random's draws wrap their bits in it). nil for any other node.
    defp metadata_inner(
           %T{data: %Expr{op: :metadata, args: [%T{} = inner, _meta], id: id}, vectorized_axes: []},
           st
         ),
         do: if(Map.get(st.uses, id) == 1, do: inner)

    defp metadata_inner(_t, _st), do: nil

    defp input(%T{data: %Expr{id: id}} = arg, acc) do
      case acc.input_ids do
        %{^id => j} ->
          {{:input, j, Storage.compute_type(arg.type)}, acc}

        _ ->
          j = length(acc.inputs)

          entry = %{
            type: Storage.compute_type(arg.type),
            shape: arg.shape,
            strides: strides(arg.shape, acc.shape),
            expr: arg
          }

          {{:input, j, entry.type},
           %{acc | inputs: [entry | acc.inputs], input_ids: Map.put(acc.input_ids, id, j)}}
      end
    end

    # An index leaf the region computes (index_leaf/1): {:iota, j, type}, its weights over the
    # region's dimensions as an input's strides.
    defp iota(%T{data: %Expr{id: id}} = arg, {offset, coefs}, acc) do
      type = Storage.compute_type(arg.type)

      case acc.iota_ids do
        %{^id => j} ->
          {{:iota, j, type}, acc}

        _ ->
          j = length(acc.iotas)
          entry = %{type: type, offset: offset, strides: strides(arg.shape, acc.shape, coefs), expr: arg}
          {{:iota, j, type}, %{acc | iotas: [entry | acc.iotas], iota_ids: Map.put(acc.iota_ids, id, j)}}
      end
    end

    # A value whose element at coordinates c is offset + sum(c[d] * coefs[d]) in its own shape:
    # an iota (over the whole shape, or along an axis), or a slice with constant starts, a squeeze
    # or a reshape (of a leaf laid out as its shape) of one; `{offset, coefs}`, or nil. Of a type
    # generated kernels compute in: the index converted to it as the backend's iota converts it
    # (wrapped into an integer type, rounded once to a float one).
    defp index_leaf(%T{type: type, vectorized_axes: []} = t) do
      if fusable?(type), do: leaf(t)
    end

    defp index_leaf(_t), do: nil

    defp leaf(%T{data: %Expr{op: :iota, args: [nil]}, shape: shape}), do: {0, Storage.strides(shape)}

    defp leaf(%T{data: %Expr{op: :iota, args: [axis]}, shape: shape}) when is_integer(axis),
      do: {0, for(d <- 0..(tuple_size(shape) - 1)//1, do: if(d == axis, do: 1, else: 0))}

    defp leaf(%T{data: %Expr{op: :slice, args: [inner, starts, _lengths, steps]}}) do
      with true <- Enum.all?(starts, &is_integer/1),
           {offset, coefs} <- index_leaf(inner) do
        offset = Enum.zip(starts, coefs) |> Enum.reduce(offset, fn {s, c}, acc -> acc + s * c end)
        {offset, Enum.zip_with(coefs, steps, &(&1 * &2))}
      end
    end

    defp leaf(%T{data: %Expr{op: :squeeze, args: [inner, axes]}}) do
      with {offset, coefs} <- index_leaf(inner) do
        {offset, for({c, d} <- Enum.with_index(coefs), d not in axes, do: c)}
      end
    end

    defp leaf(%T{data: %Expr{op: :reshape, args: [inner]}, shape: shape}) do
      with {offset, coefs} <- index_leaf(inner),
           true <- coefs == Storage.strides(inner.shape),
           do: {offset, Storage.strides(shape)},
           else: (_ -> nil)
    end

    defp leaf(_t), do: nil

    # An operand that index leaves and constants alone compute in a few elementwise operations, of
    # a smaller shape than the region's read through Nx's broadcasting (implicit, or a broadcast
    # along the last axes): a causal mask built at {s, s}, `iota(axis: 0) >= iota(axis: 1)`, for
    # the heads' scores. The region computes it for each element from the leaves' indices, as it
    # computes a leaf, rather than read it from memory; stored, it would be the backend's
    # operations (a kernel is placed by a tensor it reads, and it reads none). Computed again in
    # every region that reads it: a few integer operations per element.
    @max_index_nodes 8
    defp index_tree?(%T{shape: shape} = t, region_shape),
      do: broadcasts?(shape, region_shape) and index_nodes(t, 0) != nil

    # (Nx's implicit broadcasting: dimensions aligned at the last, each equal or 1)
    defp broadcasts?(shape, to) do
      pad = tuple_size(to) - tuple_size(shape)

      pad >= 0 and
        Tuple.to_list(shape)
        |> Enum.zip(Enum.drop(Tuple.to_list(to), pad))
        |> Enum.all?(fn {d, e} -> d == e or d == 1 end)
    end

    # The elementwise nodes above `t`'s index leaves and constants, counted from `count`; nil
    # where it reads anything else or holds more than @max_index_nodes.
    defp index_nodes(%T{data: %Expr{op: :constant, args: [number]}}, count)
         when is_number(number) or is_atom(number),
         do: count

    defp index_nodes(%T{data: %Expr{op: :broadcast, args: [inner, shape, axes]}, vectorized_axes: []}, count) do
      pad = tuple_size(shape) - tuple_size(inner.shape)
      if axes == Enum.to_list(pad..(tuple_size(shape) - 1)//1), do: index_nodes(inner, count)
    end

    defp index_nodes(%T{} = t, count) do
      cond do
        index_leaf(t) ->
          count

        count < @max_index_nodes and elementwise?(t) ->
          {_op, args} = op_and_args(t)

          Enum.reduce_while(args, count + 1, fn arg, count ->
            case index_nodes(arg, count) do
              nil -> {:halt, nil}
              count -> {:cont, count}
            end
          end)

        true ->
          nil
      end
    end

    # An operand is computed inside the region when it is an elementwise operation over the
    # region's whole shape (or a part's, in a concatenation's region: `shapes`) that only this
    # region uses (`shared`: the values used more than once found used outside it).
    defp absorbed?(%T{data: %Expr{id: id}} = t, shapes, st, shared \\ MapSet.new()),
      do:
        t.shape in shapes and Map.get(st.uses, id, 0) >= 1 and elementwise?(t) and
          (Map.get(st.uses, id, 0) == 1 or not MapSet.member?(shared, id))

    ## Concatenations

    # A concatenation of elementwise values of one shape, each a block of the output (joined along
    # their first axis, or one after axes of size 1), used by it alone, as one region over
    # {parts, part...}: each element computes the parts' values at its position in its part (the
    # nodes they share once) and keeps its own part's, picked by a {parts, 1, ...} input holding
    # each block's number. Work the parts share (Nx.Random's two threefry halves, both of which
    # read every round) is then one kernel, not a region for each value it holds; each element
    # computes every part's nodes, so at most @max_parts parts.
    @max_parts 4
    defp concat_region(%T{data: %Expr{op: :concatenate, args: [[first | _] = parts, axis]}} = t, st) do
      part = first.shape
      count = length(parts)

      if count in 2..@max_parts and Nx.size(part) > 0 and
           Enum.all?(Enum.take(Tuple.to_list(part), axis), &(&1 == 1)) and
           Enum.all?(parts, &(&1.shape == part and &1.type == t.type and Map.get(st.uses, &1.data.id) == 1)) and
           Enum.all?(parts, &elementwise?/1) do
        shape = List.to_tuple([count | Tuple.to_list(part)])
        ones = List.duplicate(1, tuple_size(part))
        which = Expr.tensor(Nx.iota(List.to_tuple([count | ones]), type: :u8, backend: Nx.BinaryBackend))
        [last | others] = Enum.reverse(parts)
        # (the pick's select takes its test at the test's own shape, which a kernel reads broadcast;
        # Nx.select would want it at the result's: replay_node/2 broadcasts it there)
        out = %{t | shape: shape, names: [nil | t.names], data: nil}

        # the new nodes (each used once) join the uses, the parts read by the pick
        {pick, new} =
          others
          |> Enum.with_index(1)
          |> Enum.reduce({last, []}, fn {value, i}, {rest, new} ->
            test = Nx.equal(which, count - 1 - i)
            pick = Expr.select(out, test, value, rest)
            {pick, [test, pick | new]}
          end)

        st = %{st | uses: Enum.reduce(new, st.uses, &Map.put(&2, &1.data.id, 1))}

        with {[{:node, result}], acc} <-
               grow_roots([pick], shape, [shape, part, which.shape], st, MapSet.new()),
             %{} = region <- region_of(acc, result, shape, t.type) do
          region
        end
      end
    end

    defp concat_region(_t, _st), do: nil

    # The operand's strides over the region's dimensions: Nx broadcasts operands aligned at the
    # last dimension, a dimension of 1 (or a missing one) repeating (stride 0).
    defp strides(shape, region_shape, own \\ nil) do
      own = own || Storage.strides(shape)
      pad = tuple_size(region_shape) - tuple_size(shape)

      List.duplicate(0, pad) ++
        (Tuple.to_list(shape) |> Enum.zip(own) |> Enum.map(fn {d, s} -> if d == 1, do: 0, else: s end))
    end

    ## Row regions

    # Softmax, layer norm, log-softmax: elementwise work over a shape {..., C} around reductions
    # over its last axis whose results it reads along that axis (keep_axes). One kernel runs each
    # row: the row's reductions in turn (each a loop over the row that computes again the
    # elementwise values it needs), then the row's outputs (or, where the region ends in a
    # reduction over that axis, the row's value), so each input is read from memory once and the
    # row stays in cache. Nodes are kept once each, used any number of times: a value used twice
    # within the region is computed again where it is needed rather than stored. A region is a
    # row region when it holds at least one such reduction, its rows are long enough to be worth a
    # loop and there are rows enough for the device's cores, or when it is small (at most
    # @small_rows elements, any number of rows of any length): one launch then does what would be
    # one per reduction and the work around it (a 1 x 8 softmax: three launches), where a call's
    # fixed cost is the whole of its time; otherwise the regions above.
    @min_rows 16
    @small_rows 4096
    @max_row 65_536
    @max_row_nodes 64

    defp row_region(%T{data: %Expr{op: op, args: [operand, opts]}} = t, st) when op in @reductions do
      rank = tuple_size(operand.shape)

      if rank >= 1 and reduction_fuses?(t, operand, opts) and opts[:axes] == [rank - 1] do
        with %{} = region <- row_grow(operand, st, t) do
          %{region | out_type: Storage.compute_type(t.type)}
        end
      end
    end

    defp row_region(%T{shape: shape} = t, st) when tuple_size(shape) >= 1 do
      if elementwise?(t), do: row_grow(t, st, nil)
    end

    defp row_region(_t, _st), do: nil

    # The row region computing `root` (values over the row's whole shape) or, given `reduce` (a
    # reduction of root over the last axis), that reduction; nil where it is not worth one.
    defp row_grow(root, st, reduce) do
      shape = root.shape
      rank = tuple_size(shape)
      cols = elem(shape, rank - 1)
      rows = if cols > 0, do: div(Nx.size(shape), cols), else: 0

      size = rows * cols

      if cols <= @max_row and
           ((cols >= 8 and rows >= @min_rows) or (size > 0 and size <= @small_rows)) do
        acc = %{
          nodes: [],
          inputs: [],
          input_ids: %{},
          iotas: [],
          iota_ids: %{},
          ids: %{},
          k: 0,
          shape: shape,
          row_shape: put_elem(shape, rank - 1, 1),
          reductions: 0
        }

        {result, acc} = if reduce, do: row_node(reduce, :row, acc, st), else: row_node(root, :col, acc, st)

        # (a lone reduction of an input is the backend's own operation)
        if acc.reductions > 0 and length(acc.nodes) >= 2 and acc.inputs != [] and
             length(acc.inputs) <= @max_inputs and length(acc.nodes) <= @max_row_nodes do
          %{
            kind: :rows,
            nodes: Enum.reverse(acc.nodes),
            result: elem(result, 1),
            inputs: Enum.reverse(acc.inputs),
            iotas: Enum.reverse(acc.iotas),
            dims: Tuple.to_list(shape),
            cols: cols,
            rows: rows,
            row_output: reduce != nil,
            out_type: Storage.compute_type(root.type),
            reduce: nil
          }
        end
      end
    end

    # A node of the row region, once per expression (operands first: a node's operands have
    # smaller numbers); `:row` nodes have one value per row, `:col` ones one per element.
    defp row_node(%T{data: %Expr{id: id}} = t, level, acc, st) do
      case acc.ids do
        %{^id => k} ->
          {{:node, k}, acc}

        _ ->
          {node, acc} = row_node_new(t, level, acc, st)
          node = Map.merge(node, %{k: acc.k, level: level, expr: t, type: Storage.compute_type(t.type)})

          {{:node, acc.k}, %{acc | nodes: [node | acc.nodes], k: acc.k + 1, ids: Map.put(acc.ids, id, acc.k)}}
      end
    end

    defp row_node_new(%T{data: %Expr{op: op, args: [operand, opts]}} = t, :row, acc, st)
         when op in @reductions do
      {sub, acc} = row_operand(operand, :col, acc, st)
      out_type = Storage.compute_type(t.type)
      acc_type = if op in [:sum, :product] and out_type == :f32, do: :f64, else: out_type

      {%{
         op: :row_reduce,
         family: :row_reduce,
         args: [sub],
         compute: nil,
         expr_args: [operand, opts],
         reduce: %{op: op, out_type: out_type, acc_type: acc_type}
       }, %{acc | reductions: acc.reductions + 1}}
    end

    defp row_node_new(t, level, acc, st) do
      {op, args} = op_and_args(t)
      {operands, acc} = Enum.map_reduce(args, acc, &row_operand(&1, level, &2, st))
      {%{op: op, family: family(op), args: operands, compute: compare_type(op, args), expr_args: args}, acc}
    end

    defp row_operand(%T{data: %Expr{op: :constant, args: [number]}} = c, _level, acc, _st)
         when is_number(number) or is_atom(number),
         do: {{:const, number, Storage.compute_type(c.type)}, acc}

    defp row_operand(%T{} = arg, level, acc, st) do
      case metadata_inner(arg, st) do
        nil -> row_value(arg, level, acc, st)
        inner -> row_operand(inner, level, acc, st)
      end
    end

    defp row_value(arg, level, acc, st) do
      cond do
        row_reduction?(arg, acc) -> row_node(arg, :row, acc, st)
        level == :col and arg.shape == acc.shape and elementwise?(arg) -> row_node(arg, :col, acc, st)
        arg.shape == acc.row_shape and elementwise?(arg) -> row_node(arg, :row, acc, st)
        leaf = index_leaf(arg) -> iota(arg, leaf, acc)
        level == :col and index_tree?(arg, acc.shape) -> row_index_tree(arg, acc, st)
        true -> input(arg, acc)
      end
    end

    defp row_index_tree(%T{data: %Expr{op: :broadcast, args: [inner | _]}}, acc, st),
      do: row_operand(inner, :col, acc, st)

    defp row_index_tree(t, acc, st), do: row_node(t, :col, acc, st)

    # A reduction over the row's last axis, keeping it, of a value over the row's whole shape.
    defp row_reduction?(%T{data: %Expr{op: op, args: [operand, opts]}} = t, acc) when op in @reductions do
      rank = tuple_size(acc.shape)

      t.shape == acc.row_shape and operand.shape == acc.shape and opts[:axes] == [rank - 1] and
        reduction_fuses?(t, operand, opts)
    end

    defp row_reduction?(_t, _acc), do: false

    ## Which nodes fuse

    # Nx.logical_not is an optional operation (Nx 0.7) or a block (0.13) whose default compares
    # with 0: it fuses as itself.
    defp op_and_args(%T{
           data: %Expr{op: :optional, args: [%T{data: %Expr{op: :logical_not, args: [a]}}, _, _]}
         }),
         do: {:logical_not, [a]}

    defp op_and_args(%T{data: %Expr{op: :block, args: [%{__struct__: Nx.Block.LogicalNot}, [a], _, _]}}),
      do: {:logical_not, [a]}

    defp op_and_args(%T{data: %Expr{op: op, args: args}}), do: {op, args}

    defp elementwise?(%T{type: type, vectorized_axes: []} = t) do
      {op, args} = op_and_args(t)
      operand_types = for %T{type: t} <- args, do: t

      fusable_op?(op, args) and fusable?(type) and Enum.all?(operand_types, &fusable?/1) and
        admits?(op, type, args)
    end

    defp elementwise?(_vectorized), do: false

    # A type generated kernels compute in, in itself (an s16 value would not wrap between two
    # operations in the s32 its backend operations compute in).
    defp fusable?(type), do: Storage.native?(type) and Storage.compute_type(type) in @fusable

    defp fusable_op?(op, _args) when op in @unary or op in @binary or op in @compare, do: true
    defp fusable_op?(op, _args) when op in @predicates, do: true
    defp fusable_op?(op, _args) when op in [:select, :clip, :as_type], do: true
    # (a float's bits as an integer of its width, or back: Nx.Random's uniform floats)
    defp fusable_op?(:bitcast, [_]), do: true
    defp fusable_op?(_op, _args), do: false

    # The registry's float-only operations take float outputs, integer-only ones integers;
    # comparisons are checked in their operands' merged type.
    defp admits?(op, {kind, _}, _args) when op in @float_only, do: kind == :f
    defp admits?(op, _type, [a, b]) when op in @int_only and op in @binary, do: int?(a.type) and int?(b.type)
    defp admits?(op, {kind, _}, _args) when op in @int_only, do: kind in [:s, :u]
    defp admits?(:bitcast, {_, bits}, [%T{type: {_, bits}}]), do: true
    defp admits?(:bitcast, _type, _args), do: false
    defp admits?(_op, _type, _args), do: true

    defp int?({kind, _}), do: kind in [:s, :u]

    defp family(op) when op in @unary, do: :unary
    defp family(op) when op in @binary, do: :binary
    defp family(op) when op in @compare, do: :compare
    defp family(op), do: op

    # Comparisons compute in their operands' merged type (as the backend's do).
    defp compare_type(op, [a, b]) when op in @compare, do: Storage.compute_type(Nx.Type.merge(a.type, b.type))
    defp compare_type(_op, _args), do: nil

    ## The fused node

    defp fuse(%T{data: %Expr{id: id, context: context}} = t, region, st) do
      region = %{region | nodes: Enum.map(region.nodes, &Map.put(&1, :fast, fast?(&1, st.math)))}
      kernel = Codegen.generate(region)
      {inputs, st} = Enum.map_reduce(region.inputs, st, fn input, st -> rewrite_node(input.expr, st) end)
      params = inputs |> Enum.with_index() |> Enum.map(fn {x, pos} -> Expr.parameter(x, pos) end)
      fallback = replay(t, region, params)

      spec = [
        accel:
          Map.take(Map.merge(region, kernel), [
            :source,
            :key,
            :n,
            :work,
            :parts,
            :flag,
            :flag_ops,
            :uses_f64,
            :out_type,
            :input_types,
            :input_counts,
            :reduce
          ])
      ]

      {fused_node(t, id, context, inputs, spec, fallback),
       %{st | regions: [summary(t, region, kernel) | st.regions]}}
    end

    if Accel.Nx.Compiler.Fused.blocks?() do
      defp fused_node(t, id, context, inputs, [accel: spec], fallback) do
        fused = %Accel.Nx.Compiler.Fused{accel: spec, fallback: fallback}
        default = Accel.Nx.Compiler.Fused.default_fun(length(inputs))
        %{t | data: %Expr{id: id, op: :block, args: [fused, inputs, fallback, default], context: context}}
      end
    else
      defp fused_node(t, id, context, inputs, spec, fallback) do
        call = %{t | data: %Expr{id: make_ref(), op: :accel_fused, args: inputs ++ [spec], context: context}}

        %{
          t
          | data: %Expr{id: id, op: :optional, args: [call, fallback, &fallback_function/1], context: context}
        }
      end

      # Nx's evaluator calls the callback only to differentiate, which happens before compilation.
      defp fallback_function(_args), do: raise("Accel.Nx.Compiler: a fused region is not differentiated")
    end

    # The region's operations again, over parameters for its inputs: what the evaluator runs when
    # the inputs are not Accel tensors.
    defp replay(t, region, params) do
      built =
        Enum.reduce(region.nodes, %{}, fn node, built ->
          args = Enum.map(node.args, &replay_arg(&1, built, params, region.iotas))
          Map.put(built, node.k, replay_node(node, args))
        end)

      value = Map.fetch!(built, region.result)

      case t.data do
        _ when is_map_key(region, :kind) ->
          value

        %Expr{op: op, args: [_, opts]} when op in @reductions ->
          apply(Expr, op, [%{t | data: nil}, value, opts])

        # a concatenation's region computes {parts, part...}
        _ ->
          if value.shape == t.shape, do: value, else: Nx.reshape(value, t.shape)
      end
    end

    defp replay_arg({:node, k}, built, _params, _iotas), do: Map.fetch!(built, k)
    defp replay_arg({:input, j, _}, _built, params, _iotas), do: Enum.at(params, j)
    defp replay_arg({:iota, j, _}, _built, _params, iotas), do: Enum.at(iotas, j).expr
    defp replay_arg({:const, number, _}, _built, _params, _iotas), do: number

    defp replay_node(%{op: :row_reduce, reduce: %{op: op}, expr: e, expr_args: [_, opts]}, [arg]),
      do: apply(Expr, op, [%{e | data: nil}, arg, opts])

    defp replay_node(%{op: op, expr: e, expr_args: orig}, args) do
      args = Enum.zip_with(args, orig, fn a, orig -> if is_struct(a, T), do: a, else: orig end)

      case op do
        :logical_not -> Nx.logical_not(hd(args))
        :select -> apply(Expr, :select, [%{e | data: nil}, Nx.broadcast(hd(args), e.shape) | tl(args)])
        op -> apply(Expr, op, [%{e | data: nil} | args])
      end
    end

    defp summary(t, region, kernel) do
      %{
        ops:
          Enum.map(region.nodes, &if(&1.op == :row_reduce, do: &1.reduce.op, else: &1.op)) ++
            if(region.reduce, do: [region.reduce.op], else: []),
        inputs: Enum.map(region.inputs, & &1.shape),
        iotas: Enum.map(region.iotas, & &1.expr.shape),
        shape: t.shape,
        type: t.type,
        kernel: kernel.key,
        source: kernel.source
      }
    end
  end
end
