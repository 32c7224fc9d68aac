defmodule Accel.Placement.Sharing do
  @moduledoc false
  # `device: :all` and lists of devices: whether devices share a call, in what shares, the pieces
  # each runs, and the plan that explains it (Accel.plan/3).
  import Accel.Placement, only: [describe: 1, fmt: 1, small_plan: 2, work_name: 1]
  alias Accel.Placement.Model

  @small Accel.Placement.small_n()

  @doc false
  # How `device: :all` (or a list of devices) splits a call of `count` elements: each device's
  # throughput (elements per second, from the model) sets its share of the first 80%, one piece
  # each; the rest is cut into pieces that whichever device is free takes (work stealing at the
  # tail, so that a misprediction costs a piece, not a share). A device whose share would be
  # below 2% is left out: it would only make the others wait.
  #
  # Sharing must also pay: the devices contend for the host's memory and cores (a GPU's pageable
  # copies are the host's memcpy), which the per-device models do not see. So the time of the
  # shared call (the slowest device's share) has a correction of its own, per set of devices,
  # learnt from the calls that shared (Accel.Placement.observe/2 with the plan returned); where the corrected
  # time is no better than the best device's alone, the call runs on that device alone.
  #
  # Returns {devices, pieces, plan}: the devices kept, [{offset, length}] (the first
  # length(devices) of them theirs), and the plan to observe the shared call with (nil for one
  # device).
  def split(input, devices, opts), do: sharing(logistic_terms(input, opts), devices)

  @doc false
  # How several devices share a call, for the :device option's docs.
  def sharing_doc,
    do:
      "Several devices co-execute the call while that is predicted to beat the best of them alone: " <>
        "each takes a share sized by its measured throughput (`Accel.Placement`), then the last fifth " <>
        "goes in pieces to whichever is free; where sharing does not pay, as the calls that shared " <>
        "show, the best device runs it alone."

  @doc false
  # split/3 for a kernel of Accel.map/3 over `count` elements (`key` and `time` as for
  # Accel.Placement.plan_kernel/4): the kernel's own models give the devices' times.
  def split_kernel(key, count, devices, time), do: sharing(kernel_terms(key, count, time), devices)

  @doc false
  # Accel.plan/3 with device: :all or a list: the sharing decision split/3 would make, explained.
  def plan_split(input, devices, opts), do: explain_sharing(logistic_terms(input, opts), devices)

  @doc false
  # plan_split/3 for a kernel of Accel.map/3 or an operation (`key` and `time` as for
  # Accel.Placement.plan_kernel/4).
  def plan_split_kernel(key, count, devices, time),
    do: explain_sharing(kernel_terms(key, count, time), devices)

  # What a sharing decision weighs, for a logistic-map call or a kernel's: the call's `count`,
  # `device_time.(device, n)` (a device's predicted seconds for n elements, less the host's part),
  # `host` (the same for every device), `predict.(device)` (its prediction for the whole call) and
  # `what` (the work's name in reasons).
  defp logistic_terms(input, opts) do
    {count, k, form, as} = Accel.Placement.call_shape(input, opts)

    %{
      count: count,
      device_time: fn d, n -> Model.predict(d, n, k, form, as) |> then(&(&1.seconds - &1.host)) end,
      host: Model.host_seconds(count, form, as),
      predict: &Model.predict(&1, count, k, form, as),
      what: ""
    }
  end

  defp kernel_terms(key, count, time) do
    %{
      count: count,
      device_time: fn d, n -> Model.predict_kernel(d, key, n, count, time).seconds end,
      host: 0.0,
      predict: &Model.predict_kernel(&1, key, count, count, time),
      what: work_name(key)
    }
  end

  defp sharing(%{count: count} = terms, devices) do
    case sharing_decision(count, devices, terms.device_time) do
      :small ->
        {[Enum.find(devices, &(&1.backend == :cpu))], [{0, count}], nil}

      %{share?: true} = d ->
        prediction = shared_prediction(d, terms)
        plan = %Accel.Placement{device: d.devices, seconds: prediction.seconds, predictions: [prediction]}
        {d.devices, d.pieces, plan}

      d ->
        {[d.best], [{0, count}], nil}
    end
  end

  # The shared call's own prediction, the one Accel.Placement.observe/2 corrects the set of devices by.
  defp shared_prediction(d, %{count: count, host: host}),
    do: %{
      model: d.key,
      device: d.devices,
      n: count,
      seconds: host + d.shared,
      host: host,
      latency: 0.0,
      correction: d.model.correction
    }

  # Whether `devices` share a call of `count` elements, and what that rests on: the devices kept
  # and their pieces (pieces/2), the best of them and its time alone, and the shared call's time
  # with its correction (the slowest device's share, times what shared calls showed).
  # :small where the call is below #{@small} elements and the CPU backend among the devices: it runs
  # there, nothing measured, as an :auto call does.
  defp sharing_decision(count, devices, device_time) do
    if count < @small and Enum.any?(devices, &(&1.backend == :cpu)),
      do: :small,
      else: measured_sharing(count, devices, device_time)
  end

  defp measured_sharing(count, devices, device_time) do
    # each model measured first at this call's size (a kernel's on its input's prefixes), in
    # measure order
    devices |> measure_order() |> Enum.each(&device_time.(&1, count))
    # throughput at this size, or at 2^20 elements for a smaller call (whose rate is all latency)
    at = max(count, Model.prefix_n())
    rates = for d <- devices, do: {d, at / max(device_time.(d, at), 1.0e-9)}

    case pieces(count, rates) do
      # too few elements to share, or one device kept: alone, on the device of highest rate. (Not
      # the one predicted fastest at this size: a model's latency comes from 2^17 elements, where
      # the CPU backend's output is mapped afresh, and made PoCL look faster for 5,000 elements.)
      {[best], pieces} ->
        %{share?: false, devices: [best], pieces: pieces, best: best, rates: rates}

      {kept, pieces} ->
        {best, alone} = kept |> Enum.map(&{&1, device_time.(&1, count)}) |> Enum.min_by(&elem(&1, 1))
        key = {:co_execution, kept |> Enum.map(&Model.device_key/1) |> Enum.sort()}
        m = Model.measured(key, fn -> %{correction: 1.0, observed: 0} end)
        total = kept |> Enum.map(&rate_of(rates, &1)) |> Enum.sum()
        # each device's share of the whole, at its own latency and rate
        shared = kept |> Enum.map(&device_time.(&1, count * rate_of(rates, &1) / total)) |> Enum.max()

        %{
          share?: shared * m.correction < alone,
          devices: kept,
          pieces: pieces,
          best: best,
          alone: alone,
          shared: shared * m.correction,
          key: key,
          model: m,
          rates: rates
        }
    end
  end

  defp explain_sharing(%{count: count} = terms, devices) do
    case sharing_decision(count, devices, terms.device_time) do
      :small -> small_plan(Enum.find(devices, &(&1.backend == :cpu)), count)
      d -> explain_sharing(d, terms, devices)
    end
  end

  defp explain_sharing(d, %{count: count, host: host, what: what} = terms, devices) do
    predictions = devices |> Enum.map(terms.predict) |> Enum.sort_by(& &1.seconds)
    alone = Enum.find(predictions, &(&1.device == d.best))
    others = Enum.map_join(devices -- [d.best], " and ", &describe/1)

    cond do
      d.share? ->
        {owned, tail} = Enum.split(d.pieces, length(d.devices))

        shares = Enum.zip_with(d.devices, owned, fn device, {_, len} -> %{device: device, elements: len} end)

        shared = shared_prediction(d, terms)

        %Accel.Placement{
          device: d.devices,
          seconds: shared.seconds,
          predictions: [shared | predictions],
          shares: shares,
          reason:
            "#{count} elements#{what} shared: " <>
              Enum.map_join(shares, ", ", &"#{describe(&1.device)} takes #{&1.elements}") <>
              ", and #{length(tail)} pieces of the rest go to whichever is free; predicted " <>
              "#{fmt(shared.seconds)} s against #{fmt(alone.seconds)} s on #{describe(d.best)} alone" <>
              learnt(d.model)
        }

      Map.has_key?(d, :shared) ->
        %Accel.Placement{
          device: d.best,
          seconds: alone.seconds,
          predictions: predictions,
          reason:
            "#{describe(d.best)} alone: sharing with #{others} is predicted #{fmt(host + d.shared)} s " <>
              "against #{fmt(alone.seconds)} s alone for #{count} elements#{what}" <> learnt(d.model)
        }

      length(devices) == 1 ->
        %Accel.Placement{
          device: d.best,
          seconds: alone.seconds,
          predictions: predictions,
          reason: "#{describe(d.best)} is the only device"
        }

      true ->
        why =
          if count < @small * length(devices),
            do: "#{count} elements are too few to share",
            else: "#{others} would take under 2% of the work"

        %Accel.Placement{
          device: d.best,
          seconds: alone.seconds,
          predictions: predictions,
          reason: "#{describe(d.best)} alone: #{why}"
        }
    end
  end

  defp learnt(%{observed: 0}), do: ""

  defp learnt(%{observed: n, correction: c}),
    do: " (the shared time corrected by #{Float.round(c, 2)}x, learnt from #{n} shared calls)"

  # The CPU backend is measured first: an OpenCL runtime's threads (PoCL's, NVIDIA's) stay busy
  # after its calls and slow whatever is measured next, and the settling pause before each device
  # does not always cover it.
  @doc false
  def measure_order(devices), do: Enum.sort_by(devices, &(&1.backend != :cpu))

  defp rate_of(rates, device), do: rates |> List.keyfind(device, 0) |> elem(1)

  @doc false
  # The pure part of split/3: rates [{device, elements per second}].
  def pieces(count, rates) do
    total = rates |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    kept = Enum.filter(rates, fn {_, r} -> r >= 0.02 * total end)

    if count < @small * length(kept) do
      # too small to share: all on the fastest
      {best, _} = Enum.max_by(kept, &elem(&1, 1))
      {[best], [{0, count}]}
    else
      share(count, kept)
    end
  end

  defp share(count, kept) do
    kept_total = kept |> Enum.map(&elem(&1, 1)) |> Enum.sum()
    head = div(count * 4, 5)

    {owned, offset} =
      Enum.map_reduce(kept, 0, fn {_, r}, offset ->
        len = trunc(head * r / kept_total)
        {{offset, len}, offset + len}
      end)

    tail = count - offset
    piece = max(div(tail + 4 * length(kept) - 1, 4 * length(kept)), min(@small, max(tail, 1)))
    tail_pieces = for start <- offset..(count - 1)//piece, tail > 0, do: {start, min(piece, count - start)}
    {Enum.map(kept, &elem(&1, 0)), owned ++ tail_pieces}
  end

  @doc false
  # Runs a split's pieces (split/3, split_kernel/4) over its devices: each device its own piece
  # first, then the tail's pieces to whichever is free; `run.({offset, length}, device)` makes a
  # piece's result. The results, in the pieces' order.
  def run_pieces(pieces, devices, run) do
    pieces = List.to_tuple(pieces)

    {results, _stats} =
      Accel.Dispatch.run({tuple_size(pieces), &elem(pieces, &1)}, devices, run, fn _ -> 1 end, owned: true)

    results
  end
end
