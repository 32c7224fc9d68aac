defmodule Accel.Placement.Model do
  @moduledoc false
  # The cost model behind Accel.Placement: each device's calibration (the logistic map's terms, a
  # kernel's latency and cost per element, the host's list conversion), the predictions made from
  # them, and the corrections that calls teach them. Models are kept by Accel.Placement.Table.
  alias Accel.Placement.Table

  # the logistic map's calibration sizes: one for latency, one for the bulk rate
  @latency_n 131_072
  @bulk_n 8_388_608
  # a kernel's model times prefixes of the call's input up to this many elements, and the host's
  # list conversion is timed at this size
  @prefix_n 1_048_576
  @calibration_k 10
  # a kernel's first run, which compiles it on the device, is this many elements
  @compile_n 4096
  # an observation moves the correction this far (in log space) towards what it shows
  @learning 0.3

  @doc false
  # The size up to which a kernel's model times prefixes: a smaller call's time is mostly latency.
  def prefix_n, do: @prefix_n

  def predict(device, n, k, form, as) do
    m = model(device)
    host = host_seconds(n, form, as)

    upload =
      case form do
        :range -> 0.0
        # a model kept on disk before upload_vm was measured
        :vm_binary -> Map.get(m, :upload_vm, m.upload)
        _ -> m.upload
      end

    transfer = n * (m.download + upload) * m.correction
    compute = n * k * m.compute * m.correction
    latency = latency(m)

    %{
      model: device_key(device),
      device: device,
      n: n,
      seconds: latency + transfer + compute + host,
      latency: latency,
      transfer: transfer,
      compute: compute,
      host: host,
      correction: m.correction,
      latency_correction: Map.get(m, :latency_correction, 1.0)
    }
  end

  # a model's latency, corrected (models kept on disk before latency_correction have none)
  def latency(m), do: m.latency * Map.get(m, :latency_correction, 1.0)

  # Decoding a list into int64s, and building one: the same on every device.
  # (the host's model measured only where a list is)
  def host_seconds(_n, form, as) when form != :list and as != :list, do: 0.0

  def host_seconds(n, form, as) do
    h = host_model()
    if(form == :list, do: n * h.decode, else: 0.0) + if(as == :list, do: n * h.encode, else: 0.0)
  end

  # :binary for one in Accel's host memory (which a GPU's transfers pin: Accel maps binaries of
  # 2 MiB and more, so a smaller one is not asked about), :vm_binary otherwise
  def form(input) when is_binary(input),
    do: if(byte_size(input) >= 2 * 1024 * 1024 and Accel.NIF.host_owned(input), do: :binary, else: :vm_binary)

  def form(%Range{}), do: :range
  def form(_list), do: :list

  # A kernel's predicted time for n elements on `device`, in a call of `count` elements (whose
  # prefixes `time` runs, where the model is timed).
  def predict_kernel(device, key, n, count, time) do
    model_key = {key, device_key(device)}

    m =
      case Table.lookup(model_key) do
        # timed on prefixes of a call at least a quarter this one's size, or of 2^20 elements
        %{timed_at: at} = m when 4 * at >= count or at >= @prefix_n -> m
        # none yet, or timed on a smaller call, whose time was all latency: timed on this one's
        _ -> tap(calibrate_kernel(min(count, @prefix_n), &time.(device, &1)), &Table.put_model(model_key, &1))
      end

    compute = n * m.per_element * m.correction
    latency = latency(m)

    %{
      model: model_key,
      device: device,
      n: n,
      seconds: latency + compute,
      latency: latency,
      transfer: 0.0,
      compute: compute,
      host: 0.0,
      correction: m.correction,
      latency_correction: Map.get(m, :latency_correction, 1.0)
    }
  end

  # Prefixes of 2^17 and 2^20 elements, as for the logistic map: below that, a CPU call's time is
  # mostly waking threads and mapping fresh pages, and a slope between smaller sizes says little
  # about the kernel. A call of fewer than 2^17 elements has one size to time, all of whose time
  # counts per element: such a model is timed again on the first call 4x larger (`timed_at`,
  # predict_kernel/5), so that latency does not count per element for the calls after it.
  defp calibrate_kernel(large, time) do
    small = min(@latency_n, large)
    _compile = time.(min(@compile_n, large))
    # untimed: a device's first calls at a size run slower (fresh memory is mapped for the output)
    Enum.each(1..2, fn _ -> time.(large) end)
    settle()

    {latency, per} =
      if large > small do
        [t_small, t_large] = fastest(3, [fn -> time.(small) end, fn -> time.(large) end])
        slope = (t_large - t_small) / (large - small)
        # no slope to see (the larger call as fast as the smaller: buffers of 2 MiB and more are
        # reused, smaller ones mapped afresh): at most the larger call's time per element
        per = if slope > 0, do: slope, else: t_large / large
        {max(t_small - per * small, 0.0), per}
      else
        [t] = fastest(3, [fn -> time.(large) end])
        {0.0, t / large}
      end

    %{
      latency: latency,
      per_element: per,
      correction: 1.0,
      latency_correction: 1.0,
      observed: 0,
      timed_at: large
    }
  end

  # ---- models: measured once per device, kept in ETS and on disk ----

  defp model(device), do: measured(device_key(device), fn -> calibrate(device) end)
  def host_model, do: measured(:host, &calibrate_host/0)

  def measured(key, calibrate), do: Table.lookup(key) || tap(calibrate.(), &Table.put_model(key, &1))

  # Calls on the device at two sizes, the fastest of two runs each (a first call pays for the
  # device's first use, which is not the model's to predict): the slopes between the sizes are the
  # per-element costs, so that fixed costs (threads woken, buffers mapped) stay in the latency.
  defp calibrate(device) do
    {small, large} = {@latency_n, @bulk_n}
    bin = Accel.logistic_map(1..large, iterations: 0, as: :binary, backend: :cpu)

    call = fn input, k ->
      timed(fn -> Accel.logistic_map(input, device: device, iterations: k, as: :binary) end)
    end

    _warm = call.(binary_part(bin, 0, 8), @calibration_k).()
    # untimed, as for a kernel's model: the first calls at a size run slower
    Enum.each(1..2, fn _ -> call.(bin, 0).() end)
    settle()
    slope = fn t_small, t_large -> max(t_large - t_small, 0.0) / (large - small) end

    # copies of s64 binaries and ranges at both sizes, and the large copy from a binary the VM made
    # (what that costs more, or less, is its upload's part)
    inputs = [binary_part(bin, 0, small * 8), bin, 1..small, 1..large, :binary.copy(bin)]
    [copy_small, copy_large, range_small, range_large, copy_vm] = fastest(3, Enum.map(inputs, &call.(&1, 0)))

    transfer = slope.(copy_small, copy_large)
    download = min(slope.(range_small, range_large), transfer)

    # iterations enough that computing takes 10 ms at least, well above the machine's noise
    {k, computing} =
      Enum.reduce_while(Stream.iterate(@calibration_k, &(&1 * 10)), nil, fn k, _ ->
        [computing] = fastest(3, [call.(bin, k)])
        computing = computing - copy_large
        if computing >= 0.01 or k >= 10_000, do: {:halt, {k, computing}}, else: {:cont, nil}
      end)

    %{
      latency: max(copy_small - transfer * small, 0.0),
      upload: transfer - download,
      upload_vm: max(transfer - download + (copy_vm - copy_large) / large, 0.0),
      download: download,
      compute: max(computing, 0.0) / (large * k),
      correction: 1.0,
      latency_correction: 1.0,
      observed: 0
    }
  end

  defp calibrate_host do
    n = @prefix_n
    bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
    list = Accel.NIF.int64_list(bin)

    [decode, encode] =
      fastest(2, [timed(fn -> Accel.NIF.int64_binary(list) end), timed(fn -> Accel.NIF.int64_list(bin) end)])

    %{decode: decode / n, encode: encode / n}
  end

  # An OpenCL runtime's threads (PoCL's) stay busy for tens of milliseconds after its calls, and
  # would slow the next device's measurements.
  defp settle, do: Process.sleep(50)

  # The fastest of `runs` runs of each measurement (a function returning seconds), in order. The
  # measurements take turns, so that a spell of noise (this shared machine's host stalls it for
  # tens of milliseconds now and then) weighs on one run of several, not on every run of one.
  defp fastest(runs, measurements) do
    for(_ <- 1..runs, do: Enum.map(measurements, & &1.()))
    |> Enum.zip_with(&Enum.min/1)
  end

  # a function timing `fun`: seconds
  defp timed(fun), do: fn -> fun |> :timer.tc() |> elem(0) |> Kernel./(1.0e6) end

  def device_key(%Accel.Device{backend: b, id: id, name: name}), do: {b, id, name}

  @doc false
  # In the table's process: a call's device took `observed` seconds where its model, as it is now,
  # predicts `latency * latency_correction + scaled * correction`. The two corrections move towards
  # what the call showed, each by its part's share of the prediction (a gradient step in log
  # space): a small call, mostly latency, corrects mostly the latency, and a large one the
  # per-element costs (with one correction for both, many cold small calls would teach large calls
  # a cost per element far below theirs). Where a correction moved
  # by a fifth or more (a call 2x off its prediction moves the whole of it 1.23x), the plans :auto
  # calls remember (Accel.Placement.remembered/2) are forgotten, so that the next calls plan with it.
  def learn(key, observed, latency, scaled) do
    # nil where Accel.Placement.reset/0 ran meanwhile
    with %{correction: correction, observed: calls} = model <- Table.lookup(key) do
      latency_correction = Map.get(model, :latency_correction, 1.0)
      {fixed, varying} = {latency * latency_correction, scaled * correction}
      predicted = fixed + varying

      if predicted > 0 do
        step = @learning * :math.log(observed / predicted)
        corrected = bounded(correction * :math.exp(step * varying / predicted))
        model = %{model | correction: corrected, observed: calls + 1}

        {model, latency_corrected} =
          if latency > 0 do
            latency_corrected = bounded(latency_correction * :math.exp(step * fixed / predicted))
            {Map.put(model, :latency_correction, latency_corrected), latency_corrected}
          else
            {model, latency_correction}
          end

        Table.put_model(key, model, :throttled)

        if moved?(corrected, correction) or moved?(latency_corrected, latency_correction),
          do: Table.forget_plans()
      end
    end
  end

  defp bounded(correction), do: min(max(correction, 0.1), 10.0)
  defp moved?(corrected, correction), do: corrected > 1.2 * correction or corrected < correction / 1.2
end
