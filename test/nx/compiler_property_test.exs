if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.CompilerPropertyTest do
    # Differential tests of Accel.Nx.Compiler: random well-typed defn graphs (elementwise chains of
    # two operands of broadcast shapes, constants, comparisons and select, clip, conversions, a
    # reduction at the end; integer inputs at their types' limits) compiled by Accel.Nx.Compiler
    # must give
    #   * exactly what Accel.Nx.Backend gives op by op (fuse: false): fused kernels call the
    #     backend's own per-element functions; reductions sum in another order, so floats agree
    #     there within the tolerance below;
    #   * what Nx.Defn.Evaluator gives on Nx.BinaryBackend: integers exactly, floats within
    #     @tolerance (the binary backend computes in f64 and rounds, the devices' math libraries
    #     differ by a few ulp);
    #   * the same error for the same bad input: an integer zero divisor raises ArgumentError in
    #     Accel (the backend's documented choice) where the binary backend raises ArithmeticError.
    # PropEr (Debian's erlang-proper) generates and shrinks the graphs. ACCEL_PROPER_RUNS sets the
    # number of graphs per device (CI: 40; bench/nx_properties.exs runs thousands).
    use ExUnit.Case, async: true

    @moduletag :proper
    @moduletag timeout: :infinity

    @tolerance %{{:f, 32} => 2.0e-5, {:f, 64} => 1.0e-12}

    alias Accel.Test.NxGraphs

    for device <- [:cpu, :opencl] do
      @tag opencl: device == :opencl
      test "random graphs agree with the backend op by op and with the binary backend on #{device}" do
        runs = String.to_integer(System.get_env("ACCEL_PROPER_RUNS", "40"))
        device = unquote(device)
        # the property never raises (Debian's PropEr 1.2 cannot report an exception on OTP 24+)
        property = :proper.forall(NxGraphs.case_gen(), fn c -> safe_check(c, device) == :ok end)

        case :proper.quickcheck(property, [{:numtests, runs}, {:on_output, fn _, _ -> :ok end}, :long_result]) do
          true -> :ok
          [counterexample] -> flunk(safe_check(counterexample, device) |> elem(1))
          other -> flunk("PropEr: #{inspect(other)}")
        end
      end
    end

    defp safe_check(c, device) do
      check(c, device)
    rescue
      e -> {:error, "raised #{Exception.format(:error, e, __STACKTRACE__)} for #{describe(c)}"}
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

        not agree?(fused, binary, elem(type, 0) != :f, type) ->
          {:error, "fused #{show(fused)} but Nx.BinaryBackend #{show(binary)} for #{describe(c)}"}

        true ->
          :ok
      end
    end

    defp run(fun, args, opts) do
      {:ok, Nx.Defn.jit(fun, opts) |> apply(args) |> Nx.backend_copy(Nx.BinaryBackend)}
    rescue
      e -> {:raised, e}
    end

    # Errors: an integer zero divisor is ArgumentError in Accel, ArithmeticError in the binary backend.
    defp agree?({:raised, %ArgumentError{}}, {:raised, %ArgumentError{}}, _exact, _type), do: true
    defp agree?({:raised, %ArgumentError{}}, {:raised, %ArithmeticError{}}, _exact, _type), do: true

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
