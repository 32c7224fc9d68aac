if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.CompilerPropertyTest do
    # Differential tests of Accel.Nx.Compiler: random well-typed defn graphs (elementwise chains of
    # two operands of broadcast shapes, constants, comparisons and select, clip, conversions, a
    # reduction at the end; integer inputs at their types' limits) compiled by Accel.Nx.Compiler
    # must give
    #   * exactly what Accel.Nx.Backend gives op by op (fuse: false): fused kernels call the
    #     backend's own per-element functions; reductions sum in another order, so floats agree
    #     there within the tolerance below;
    #   * what Nx.Defn.Evaluator gives on Nx.BinaryBackend for integers, exactly; for floats, what
    #     Accel promises (guides/nx.md): each element inside the interval Accel.Test.NxIntervals
    #     computes for it, which holds every result of every rounding the promise allows, through
    #     discontinuous operations too (floor of a tanh an ulp below 1.0 may be 0.0 or 1.0), and which
    #     the binary backend's result must lie in as well (or the oracle is wrong);
    #   * the same error for the same bad input: an integer zero divisor raises ArgumentError in
    #     Accel (the backend's documented choice) where the binary backend raises ArithmeticError.
    # PropEr (Debian's erlang-proper) generates and shrinks the graphs. ACCEL_PROPER_RUNS sets the
    # number of graphs per device (default 40), ACCEL_PROPER_SEED the seed (default: a new one,
    # printed, so that any run can be replayed).
    use ExUnit.Case, async: true

    @moduletag :proper
    @moduletag timeout: :infinity

    # fused float reductions sum in another order than the backend op by op
    @tolerance %{{:f, 32} => 2.0e-5, {:f, 64} => 1.0e-12}

    alias Accel.Test.{NxGraphs, NxIntervals, Properties}

    for device <- Accel.Test.Devices.nx() do
      @tag Accel.Test.Devices.tags(device)
      test "random graphs agree with the backend op by op and with the binary backend on #{device}" do
        device = unquote(device)
        Properties.check!("#{device}", __ENV__.file, NxGraphs.case_gen(), &safe_check(&1, device))
      end
    end

    # Random masks of a row region's columns (Accel.Nx.Compiler.Codegen's uniform blocks): a
    # column's iota compared with a value of the row, a constant selected where the comparison holds
    # or fails, a softmax or a reduction of the row after it. The region computing the mask from
    # iotas (whose masked blocks it computes once per row) must give the bits of the region reading
    # the same mask from memory (which computes every block), a NaN's sign aside.
    for device <- Accel.Test.Devices.nx() do
      @tag Accel.Test.Devices.tags(device)
      test "random masks' uniform blocks give the bits of the mask read from memory on #{device}" do
        device = unquote(device)

        Properties.check!(
          "#{device} masks",
          __ENV__.file,
          mask_case_gen(),
          &safe_mask_check(&1, device)
        )
      end
    end

    # The case a 2,000-graph run once found (seed 809572 on PoCL): floor(tanh(x)) + x at x = 10.0,
    # where tanh(10.0) lies 4e-9 below 1.0, within an ulp of f32's 1.0: a device whose f32 tanh
    # gives the f32 below 1.0 keeps that promise and gives 10.0, the binary backend 11.0.
    test "the float oracle accepts every rounding the promise allows, through a floor" do
      tree = {:bin, :add, {:un, :floor, {:un, :tanh, :x}}, :x}
      c = {{:f, 32}, {1, 1}, {}, tree, nil, [10.0], [0.0]}
      [interval] = NxIntervals.enclose(c)

      assert NxIntervals.inside?(10.0, interval, {:f, 32})
      assert NxIntervals.inside?(11.0, interval, {:f, 32})
      refute NxIntervals.inside?(12.0, interval, {:f, 32})
      refute NxIntervals.inside?(9.9, interval, {:f, 32})
      # and where no ulp reaches the discontinuity, only the value
      [narrow] = NxIntervals.enclose({{:f, 32}, {1, 1}, {}, tree, nil, [0.5], [0.0]})
      assert NxIntervals.inside?(0.5, narrow, {:f, 32})
      refute NxIntervals.inside?(1.5, narrow, {:f, 32})
    end

    # The case seed 542536 found: x * log1p(|sigmoid(x)|) at x = -5.0 in f64, where Accel's log1p
    # (the C library's) is exact and Nx.BinaryBackend's log(1 + x) is 70 ulps off: both kept.
    test "the float oracle holds both an exact log1p and Nx's log(1 + x)" do
      tree = {:bin, :multiply, :x, {:un, :log1p_abs, {:un, :sigmoid, :x}}}
      c = {{:f, 64}, {1, 1}, {}, tree, nil, [-5.0], [0.0]}
      [interval] = NxIntervals.enclose(c)

      result = fn backend ->
        x = Nx.tensor(-5.0, type: :f64, backend: backend)
        x |> Nx.sigmoid() |> Nx.log1p() |> Nx.multiply(x) |> Nx.to_number()
      end

      {accel, binary} = {result.(Accel.Nx.Backend), result.(Nx.BinaryBackend)}
      assert accel != binary
      assert NxIntervals.inside?(accel, interval, {:f, 64})
      assert NxIntervals.inside?(binary, interval, {:f, 64})
      refute NxIntervals.inside?(accel * (1 + 1.0e-12), interval, {:f, 64})
    end

    alias :proper_types, as: P

    # {type, {batch, rows, cols}, comparison, iota first?, the row's value, the constant, the
    # constant on_true?, what follows, data seed}: rows enough for a row region (16 or more), each
    # of a block of 64 columns or more.
    defp mask_case_gen do
      constants = [-1.0e9, :neg_infinity, :infinity, :nan, 0.0, -0.0, 1.0, -2.5, -95.0]

      P.tuple([
        P.elements([{:f, 32}, {:f, 64}]),
        P.tuple([P.integer(1, 3), P.integer(16, 70), P.integer(64, 260)]),
        P.elements([:less, :less_equal, :greater, :greater_equal]),
        P.boolean(),
        P.oneof([
          P.tuple([P.exactly(:row_iota), P.integer(-70, 70)]),
          P.exactly(:row_index),
          P.exactly(:lengths),
          P.tuple([P.exactly(:const), P.integer(-3, 263)])
        ]),
        P.elements(constants),
        P.boolean(),
        P.elements([:softmax, :sum, :product, :reduce_max, :reduce_min]),
        P.integer(1, 1000)
      ])
    end

    defp mask_check({type, shape, op, iota_first?, row, constant, on_true?, tail, seed} = c, device) do
      {batch, rows, cols} = shape
      s = Nx.iota(shape, type: type) |> Nx.multiply(0.37 + seed / 997) |> Nx.sin() |> Nx.multiply(4.0)

      s =
        Nx.put_slice(
          s,
          [0, rem(seed, rows), rem(seed * 7, cols - 1)],
          Nx.tensor([[[:nan, :infinity]]], type: type)
        )

      lengths = Nx.iota({batch, rows, 1}) |> Nx.multiply(seed) |> Nx.remainder(cols + 7) |> Nx.subtract(3)

      mask = fn s, lengths ->
        column = Nx.iota(Nx.shape(s), axis: 2)

        value =
          case row do
            {:row_iota, offset} -> Nx.add(Nx.iota({batch, rows, 1}, axis: 1), offset)
            :row_index -> Nx.iota(Nx.shape(s), axis: 1)
            :lengths -> lengths
            {:const, v} -> v
          end

        if iota_first?, do: apply(Nx, op, [column, value]), else: apply(Nx, op, [value, column])
      end

      body = fn s, m ->
        k = Nx.tensor(constant, type: type)
        masked = if on_true?, do: Nx.select(m, k, s), else: Nx.select(m, s, k)

        case tail do
          :softmax -> softmax(masked)
          reduction -> apply(Nx, reduction, [masked, [axes: [-1]]])
        end
      end

      from_iotas = fn s, lengths -> body.(s, mask.(s, lengths)) end
      from_memory = body
      m = Nx.Defn.jit(mask, compiler: Nx.Defn.Evaluator).(s, lengths)
      opts = [compiler: Accel.Nx.Compiler, device: device]
      sources = Enum.map(Accel.Nx.Compiler.report(from_iotas, [s, lengths], device: device), & &1.source)

      with {:ok, a} <- run(from_iotas, [s, lengths], opts),
           {:ok, b} <- run(from_memory, [s, m], opts) do
        cond do
          not Enum.any?(sources, &(&1 =~ "const int uniform")) ->
            {:error, "no uniform blocks for #{inspect(c)}"}

          not same_bits?(a, b) ->
            {:error, "#{show({:ok, a})} but #{show({:ok, b})} for #{inspect(c)}"}

          true ->
            :ok
        end
      else
        raised -> {:error, "#{show(raised)} for #{inspect(c)}"}
      end
    end

    # Bit for bit but a NaN's sign and payload, which the C compilers' code gives as it may (GCC's
    # kernel computing a causal mask from iotas made 0x7FC00000 in a row's tail where the one
    # reading it from memory made 0xFFC00000, as before uniform blocks): NaN against NaN.
    defp same_bits?(a, b) do
      canonical = &Nx.select(Nx.is_nan(&1), Nx.Constants.nan(&1.type), &1)
      Nx.to_binary(canonical.(a)) == Nx.to_binary(canonical.(b))
    end

    defp softmax(x) do
      e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [-1], keep_axes: true)))
      Nx.divide(e, Nx.sum(e, axes: [-1], keep_axes: true))
    end

    # A check's result, or its exception as the case's error.
    defp safe_check(c, device), do: rescued(c, &check(&1, device), &describe/1)
    defp safe_mask_check(c, device), do: rescued(c, &mask_check(&1, device), &inspect/1)

    defp rescued(c, check, describe) do
      check.(c)
    rescue
      e -> {:error, "raised #{Exception.format(:error, e, __STACKTRACE__)} for #{describe.(c)}"}
    end

    defp check({type, _dims, _y_shape, tree, reduction, _xs, _ys} = c, device) do
      {x, y} = NxGraphs.inputs(c)
      fun = fn x, y -> NxGraphs.build(tree, reduction, type, x, y) end
      fused = run(fun, [x, y], compiler: Accel.Nx.Compiler, device: device)
      op_by_op = run(fun, [x, y], compiler: Accel.Nx.Compiler, device: device, fuse: false)
      binary = run(fun, [x, y], compiler: Nx.Defn.Evaluator)
      exact = elem(type, 0) != :f or reduction == nil

      cond do
        not agree?(fused, op_by_op, exact, type) ->
          {:error, "fused #{show(fused)} but op by op #{show(op_by_op)} for #{describe(c)}"}

        # a graph Nx itself refuses (select's predicate of a shape the values do not broadcast to)
        match?({:raised, _}, fused) ->
          if agree?(fused, binary, true, type),
            do: :ok,
            else: {:error, "fused #{show(fused)} but Nx.BinaryBackend #{show(binary)} for #{describe(c)}"}

        # (the binary backend raises ArithmeticError where Erlang's :math overflows, sigmoid(-712.0)
        # say, and IEEE gives 0.0: there the interval alone judges)
        elem(type, 0) == :f and match?({:raised, %ArithmeticError{}}, binary) ->
          within_promise(c, fused: fused)

        elem(type, 0) == :f ->
          within_promise(c, fused: fused, "Nx.BinaryBackend": binary)

        not agree?(fused, binary, true, type) ->
          {:error, "fused #{show(fused)} but Nx.BinaryBackend #{show(binary)} for #{describe(c)}"}

        true ->
          :ok
      end
    end

    # Every element of each result inside its interval (Accel.Test.NxIntervals).
    defp within_promise({type, _, _, _, _, _, _} = c, results) do
      intervals = NxIntervals.enclose(c)

      Enum.find_value(results, :ok, fn
        {name, {:ok, t}} ->
          values = Nx.to_flat_list(t)

          outside =
            Enum.zip(values, intervals)
            |> Enum.with_index()
            |> Enum.find(fn {{v, i}, _index} -> not NxIntervals.inside?(v, i, type) end)

          cond do
            length(values) != length(intervals) ->
              {:error, "#{name} has #{length(values)} elements, not #{length(intervals)}, for #{describe(c)}"}

            outside ->
              {{v, i}, index} = outside

              {:error,
               "#{name}'s element #{index}, #{inspect(v)}, is outside what Accel promises, #{inspect(i)} " <>
                 "(x there #{inspect(Enum.at(elem(c, 5), index))}), for #{describe(c)}"}

            true ->
              nil
          end

        {name, raised} ->
          {:error, "#{name} #{show(raised)} for #{describe(c)}"}
      end)
    end

    defp run(fun, args, opts) do
      {:ok, Nx.Defn.jit(fun, opts) |> apply(args) |> Nx.backend_copy(Nx.BinaryBackend)}
    rescue
      e -> {:raised, e}
    end

    # Errors: an integer zero divisor is ArgumentError in Accel, ArithmeticError in the binary backend;
    # one between constants only is ArithmeticError everywhere (Nx computes it while tracing, with
    # Erlang's integers: seed 502146 found quotient(0, bitwise_not(255)) in u8)
    defp agree?({:raised, %ArgumentError{}}, {:raised, %ArgumentError{}}, _exact, _type), do: true
    defp agree?({:raised, %ArgumentError{}}, {:raised, %ArithmeticError{}}, _exact, _type), do: true
    defp agree?({:raised, %ArithmeticError{}}, {:raised, %ArithmeticError{}}, _exact, _type), do: true

    defp agree?({:ok, a}, {:ok, b}, true, _type),
      do: Nx.to_binary(a) == Nx.to_binary(b) and a.shape == b.shape

    defp agree?({:ok, a}, {:ok, b}, false, type) do
      tol = Map.fetch!(@tolerance, type)
      # the tolerance scales with the largest value (cancellation leaves absolute errors of that size)
      scale = max(1.0, Nx.to_number(Nx.reduce_max(Nx.abs(b))))

      a.shape == b.shape and a.type == b.type and
        Nx.to_number(Nx.all_close(a, b, rtol: tol, atol: tol * scale, equal_nan: true)) == 1
    end

    defp agree?(_a, _b, _exact, _type), do: false

    defp show({:ok, t}), do: inspect(Nx.to_flat_list(t), limit: 12)
    defp show({:raised, e}), do: "raised #{inspect(e.__struct__)}: #{Exception.message(e)}"

    defp describe({type, dims, y_shape, tree, reduction, xs, ys}) do
      "type #{inspect(type)}, x #{inspect(dims)} #{inspect(xs, limit: 12)}, y #{inspect(y_shape)} " <>
        "#{inspect(ys, limit: 12)}, graph #{inspect(tree, limit: :infinity)}, reduction #{inspect(reduction)}"
    end
  end
end
