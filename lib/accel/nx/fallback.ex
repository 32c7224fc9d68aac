if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Fallback do
    @moduledoc false
    # The one way Accel.Nx.Backend runs an operation it has no kernel for (as Torchx and EXLA do):
    # its operands are read to the host, Nx.BinaryBackend computes the result, and the result is
    # uploaded to the operands' device. Every such call emits the telemetry event
    # [:accel, :nx, :fallback] (measurements %{count: 1}, metadata %{operation: name, device:
    # {backend, index}}) and logs at debug level, so a user can count what did not run on the device.
    #
    # `args` is the callback's argument list with its output template(s) first: a tensor, or a
    # tuple of tensors for decompositions. Templates carry only a shape and a type, so they are not
    # read; every other tensor (also inside lists, as concatenate's) is.

    require Logger
    alias Accel.Nx.Storage
    alias Nx.Tensor, as: T

    @doc """
    Runs `name` on Nx.BinaryBackend with `[out | args]` and returns its result on the operands'
    device. Where the binary backend does not export the callback (Nx 0.7's lacks the optional
    ones: logical_not, phase, cumulative_*, top_k, fft2, all_close, the linear algebra), Nx's own
    composition of it runs on the host, as it would for a binary backend tensor.
    """
    def run(name, [out | _] = args) do
      if exports?(Nx.BinaryBackend, name, length(args)) do
        run(name, args, &apply(Nx.BinaryBackend, name, [template(out) | &1]))
      else
        run(name, args, &compose(name, &1))
      end
    end

    @linalg [:cholesky, :qr, :solve, :svd, :determinant, :eigh, :lu, :triangular_solve]

    # Nx's front-end function takes the callback's operands (and its options, as one keyword list).
    defp compose(name, operands) do
      module = if name in @linalg, do: Nx.LinAlg, else: Nx

      unless exports?(module, name, length(operands)) do
        raise ArgumentError,
              "Accel.Nx.Backend cannot compute #{name}: neither Nx.BinaryBackend.#{name} nor #{inspect(module)}.#{name}/#{length(operands)} exists in this Nx"
      end

      apply(module, name, operands)
    end

    defp exports?(module, name, arity),
      do: Code.ensure_loaded?(module) and function_exported?(module, name, arity)

    @doc """
    As run/2, with `fun` computing the result from the operands read to the host (`args` without
    the output template), for operations Nx.BinaryBackend composes of others rather than exports.
    """
    def run(name, [out | args], fun) do
      {device, auto} = device_of(args, out)

      if forbidden?() do
        raise ArgumentError,
              "Accel.Nx.Backend has no #{elem(device, 0)}:#{max(elem(device, 1), 0)} kernel for #{name} on these operands " <>
                "(#{describe(args)}), and fallback: :raise forbids computing it on Nx.BinaryBackend"
      end

      :telemetry.execute([:accel, :nx, :fallback], %{count: 1}, %{operation: name, device: device})

      Logger.debug(fn ->
        "Accel.Nx.Backend: #{name} runs on Nx.BinaryBackend (no #{inspect(device)} kernel)"
      end)

      # Functions the binary backend calls (map/3's, reduce/4's) and its own Nx calls (conv/3) make
      # constants: they must be its tensors too, not the caller's default backend's.
      previous = Nx.default_backend(Nx.BinaryBackend)

      try do
        result = fun.(Enum.map(args, &to_host/1))
        back(result, device, auto)
      after
        Nx.default_backend(previous)
      end
    end

    # fallback: :raise in the default backend's options, or config :accel, nx_fallback: :raise.
    defp forbidden? do
      case Nx.default_backend() do
        {Accel.Nx.Backend, opts} when is_list(opts) ->
          Keyword.get(opts, :fallback, Application.get_env(:accel, :nx_fallback, :host)) == :raise

        _other ->
          Application.get_env(:accel, :nx_fallback, :host) == :raise
      end
    end

    defp describe(args) do
      args
      |> List.flatten()
      |> Enum.flat_map(fn
        %T{shape: shape, type: {k, b}} -> ["#{k}#{b}#{inspect(shape)}"]
        _ -> []
      end)
      |> Enum.join(", ")
    end

    # The device of the first Accel tensor among the arguments; for a creation operation (no
    # tensor, the backend's options last), where those options place a new tensor.
    defp device_of(args, out) do
      case Enum.find_value(args, &first_accel/1) do
        nil -> created_on(List.last(args), out)
        found -> found
      end
    end

    defp created_on(opts, %T{} = out) when is_list(opts) do
      if Keyword.keyword?(opts) do
        {backend, index, auto} = Storage.place(opts, Nx.byte_size(out))
        {{backend, index}, auto}
      else
        {{:cpu, 0}, false}
      end
    end

    defp created_on(_other, _out), do: {{:cpu, 0}, false}

    defp first_accel(%T{data: %Accel.Nx.Backend{tensor: a, auto: auto}}), do: {a.device, auto}
    defp first_accel(list) when is_list(list), do: Enum.find_value(list, &first_accel/1)
    defp first_accel(_), do: nil

    defp template(%T{} = t), do: %{t | data: nil}

    defp template(tuple) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&template/1) |> List.to_tuple()

    defp to_host(%T{data: %Accel.Nx.Backend{}} = t),
      do: Accel.Nx.Backend.backend_copy(t, Nx.BinaryBackend, [])

    defp to_host(list) when is_list(list), do: Enum.map(list, &to_host/1)
    defp to_host(other), do: other

    @doc "BinaryBackend results (a tensor, a tuple or a stream of them) as tensors on `device`."
    def back(%T{data: %Nx.BinaryBackend{state: bin}} = t, device, auto),
      do: Storage.upload_on(bin, t, device, auto)

    def back(%T{} = t, device, auto), do: back(Nx.backend_copy(t, Nx.BinaryBackend), device, auto)

    def back(tuple, device, auto) when is_tuple(tuple),
      do: tuple |> Tuple.to_list() |> Enum.map(&back(&1, device, auto)) |> List.to_tuple()

    def back(enum, device, auto), do: Stream.map(enum, &back(&1, device, auto))
  end
end
