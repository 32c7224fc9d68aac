defmodule Accel.LogisticMap do
  @moduledoc false
  # Accel.logistic_map/2 on host inputs, its options validated: on one device, shared by several
  # (device: :all or a list), or where backend: :auto chooses.

  alias Accel.Devices

  @doc false
  # Runs a validated call: `as` is its output form.
  def run(input, opts, as) do
    chunk_size = effective_chunk_size(opts)

    cond do
      small_for_all?(input, opts) ->
        logistic_map_on(input, opts, as, chunk_size, {:cpu, 0})

      Devices.sharing?(opts[:device]) ->
        logistic_map_all(input, opts, as)

      opts[:backend] == :auto and opts[:device] == nil ->
        {place, plan} = Accel.Placement.choose(input, iterations: opts[:iterations], as: as)
        Accel.Placement.follow(plan, fn -> logistic_map_on(input, opts, as, chunk_size, place) end)

      true ->
        logistic_map_on(input, opts, as, chunk_size, Devices.target!(opts[:backend], opts[:device]))
    end
  end

  defp logistic_map_on(input, opts, as, chunk_size, {backend, device}) do
    result =
      Accel.Job.call(
        &Accel.NIF.logistic_map(
          input,
          opts[:p],
          opts[:mu],
          opts[:iterations],
          as,
          backend,
          device,
          chunk_size || 0,
          &1
        )
      )

    # A device call returns a binary whatever `as` says: its list is built here, on a dirty CPU
    # scheduler when large, so that the device's thread is free for the next call meanwhile.
    if as == :list and is_binary(result), do: Accel.NIF.int64_list(result), else: result
  end

  # device: :all with an input too small for a device trip to pay runs on the CPU backend: not
  # worth listing the devices either.
  def small_for_all?(input, opts) do
    opts[:device] == :all and opts[:backend] in [:auto, :cpu] and Accel.Placement.small?(input) and
      Accel.Placement.cpu?()
  end

  # The smaller of chunk_size: and what max_bytes: (or the application's) allows for two buffers.
  defp effective_chunk_size(opts) do
    budget = opts[:max_bytes] || Accel.Config.get!(:max_bytes)
    # A budget beyond any buffer is no limit at all (and must not overflow the NIF's int64).
    by_budget = if budget, do: budget |> div(16) |> min(0x4000000000000000)
    [opts[:chunk_size], by_budget] |> Enum.reject(&is_nil/1) |> Enum.min(fn -> nil end)
  end

  # One call split over every usable device (Accel.Devices.co_execution_devices/1). The input is checked exactly
  # as a single-device call checks it, before any device work: a list is decoded once into a
  # binary (a bad element or an improper tail raises naming its index in the whole list), and an
  # output that could never fit is refused. Chunks are sub-binaries or sub-ranges made when a device takes them, so only the
  # chunks in flight and the results exist at once.
  defp logistic_map_all(input, opts, as) do
    case Devices.sharing_devices!(opts[:device], opts[:backend]) do
      # One device: the direct call, which chunks for itself where it must, without the
      # dispatcher's per-chunk calls and the copy that joins their results.
      # (The options are valid already: not validated again, which cost a 10^5-element call on a
      # cold core 9% of its time.)
      [device] ->
        logistic_map_on(input, opts, as, effective_chunk_size(opts), {device.backend, device.id})

      devices ->
        logistic_map_spread(input, opts, as, devices)
    end
  end

  # Several devices: each takes a share sized by the cost model (Accel.Placement.Sharing.split/3), then
  # the tail's pieces go to whichever is free; or the best of them alone, where the model (and
  # what earlier shared calls showed) says sharing would not pay.
  defp logistic_map_spread(input, opts, as, devices) do
    input = if is_list(input), do: Accel.NIF.int64_binary(input), else: input
    _count = Accel.NIF.int64_output_count(input, as)
    # each device's call keeps within the call's memory budget by chunking for itself
    call_opts = Keyword.take(opts, [:p, :mu, :iterations, :chunk_size, :max_bytes])

    case Accel.Placement.Sharing.split(input, devices, iterations: opts[:iterations], as: as) do
      {[device], _all, nil} ->
        Accel.logistic_map(input, [device: device, as: as] ++ call_opts)

      # the shared call's time corrects the model of sharing among these devices
      {devices, pieces, plan} ->
        Accel.Placement.follow(plan, fn -> logistic_map_pieces(input, as, call_opts, devices, pieces) end)
    end
  end

  defp logistic_map_pieces(input, as, call_opts, devices, pieces) do
    results =
      Accel.Placement.Sharing.run_pieces(pieces, devices, fn {offset, n}, device ->
        Accel.logistic_map(chunk_at(input, offset, n), [device: device, as: as] ++ call_opts)
      end)

    if as == :binary, do: IO.iodata_to_binary(results), else: Enum.concat(results)
  end

  defp chunk_at(binary, offset, n) when is_binary(binary), do: binary_part(binary, offset * 8, n * 8)

  defp chunk_at(%Range{first: first, step: step}, offset, n),
    do: Range.new(first + offset * step, first + (offset + n - 1) * step, step)
end
