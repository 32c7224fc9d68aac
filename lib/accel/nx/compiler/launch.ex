if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler.Launch do
    @moduledoc false
    # A fused region's kernel (Accel.Nx.Compiler.Codegen) run over its inputs, for
    # Accel.Nx.Backend.accel_fused: the inputs brought to one device as every backend operation's
    # are, the text compiled for that device (cached), one launch through the door every generated
    # kernel takes (Accel.NIF.tensor_source_kernel: Accel's threads, bounded, cancelled when the
    # caller dies), then a split reduction's parts reduced by the backend.

    alias Accel.Kernel.Native
    alias Accel.Nx.Storage
    alias Accel.Tensor, as: AT

    @accel_reduction %{sum: :sum, reduce_max: :max, reduce_min: :min}

    def run(%Nx.Tensor{} = out, inputs, accel: spec) do
      tensors = Storage.operands!(:accel_fused, inputs)

      tensors =
        Enum.zip_with(tensors, spec.input_types, fn a, type ->
          if a.type == type, do: a, else: AT.as_type(a, type)
        end)

      {backend, device} = hd(tensors).device
      kernel = kernel_term(spec, backend, device)
      refs = Enum.map(tensors, & &1.ref)

      {term, flagged} =
        AT.allocate(&Accel.NIF.tensor_source_kernel(kernel, refs, spec.n, <<>>, backend, device, &1))

      result = AT.wrap(term, {spec.n}, spec.out_type)
      if flagged, do: raise(ArgumentError, flag_message(spec))
      Storage.wrap(finish(result, spec, out.shape), out, Storage.auto?(inputs))
    end

    defp kernel_term(spec, backend, device) do
      code =
        case backend do
          :cpu -> Native.library(spec.key, spec.source)
          :cuda -> Native.cuda_code(spec.key, spec.source, device, "accel_user")
          :opencl -> nil
        end

      # (no resumable state, no input overwritten, the launch's work)
      {spec.key, spec.source, spec.uses_f64, code, spec.input_types, spec.out_type, :binary.copy(<<8>>, 0),
       "accel_user", spec.flag, spec.input_counts, 0, nil, spec.work}
    end

    # The kernel's flat result in the output's shape; a split reduction's parts reduced first.
    defp finish(result, %{parts: 1}, shape), do: AT.reshape(result, shape)

    defp finish(result, %{parts: parts, n: n, reduce: %{op: op}}, shape) do
      result
      |> AT.reshape({div(n, parts), parts})
      |> then(&apply(AT, Map.fetch!(@accel_reduction, op), [&1, [axes: [1]]]))
      |> AT.reshape(shape)
    end

    defp flag_message(%{flag_ops: ops}) do
      names = Enum.map_join(Enum.uniq(ops), ", ", &to_string/1)

      cond do
        ops -- [:divide, :quotient, :remainder] == [] ->
          "integer division by zero in a fused #{names} (Accel.Nx.Compiler)"

        ops -- [:pow] == [] ->
          "a negative exponent in a fused pow on integers (whose powers would be fractions); use floats"

        true ->
          "integer division by zero or a negative integer exponent in a fused #{names} (Accel.Nx.Compiler)"
      end
    end
  end
end
