defmodule Accel.Placement do
  @small 4096

  @moduledoc """
  Where `backend: :auto` runs a call, and why: a cost model per device, measured on this machine.
  `Accel.plan/3` returns the decision with the predictions behind it; `Accel.logistic_map/2` and
  `Accel.map/3` (host inputs) with `backend: :auto` follow it.

  For a call of `n` elements and `k` iterations, a device is predicted to take

      latency * latency_correction + n * (upload + download + k * compute) * correction
        + host conversion

  where `upload` is left out for a `Range` (devices generate it) and the host conversion (a
  list decoded or built) is the same whatever the device. A binary Accel made (2 MiB and more)
  lives in Accel's own host memory, which a CUDA device pins and copies at the bus's speed; one
  the VM made (read from a file, built in Elixir) goes through pinned staging slots
  (`config :accel, staged_transfers`) or, where staging is off, the pageable way (on an H100
  host, 35 ms for a 268 MB binary -> binary call against 10 ms from Accel's). So `upload` is
  measured for both, and a binary's prediction takes the one that
  applies (`upload_vm` for the VM's). The terms are measured once per
  device, on first use, by calls at two sizes (2^17 and 2^23 elements, binary and range input,
  with and without iterations), as StarPU and Qilin fit a device's time to the input size: the
  slope between the sizes is the cost per element, the rest the latency. The larger size is
  large on purpose: at 2^20 elements (8 MB) data still fits a server's caches and a GPU's
  pageable copies run faster than they do at scale. Each device's first calls at the larger
  size run untimed (a device's first calls at a size map fresh memory and ran 3x slower on a
  16-core host), and each device is timed 50 ms after the last one's calls (an OpenCL runtime's
  threads stay busy a while). Calibrating the CPU backend and one CUDA GPU took 0.8 s on an H100
  host.

  The two corrections start at 1 and follow the ratio of measured to predicted time of the calls
  `:auto` makes (large ones only), so a model that calibration got wrong converges on what the
  calls show. A call's error is shared between them by each part's share of its prediction: calls
  of 40,000 elements, most of whose time is latency (more so cold, after a pause), correct the
  latency, and leave the per-element costs that calls of millions of elements depend on as they
  were. A device that is never chosen would never be corrected, so one planned call in 32
  runs on the runner-up where it is predicted within 2x of the best: where the prediction was
  right, that costs at most 1/32 (3%) of the calls' time. Such a call's `:reason` says so.

  An `:auto` call plans afresh on the first call of its shape (its work, size, input and output
  forms) and once every 16 calls of that shape after, or at once after a call that moved a
  device's correction by a fifth or more; the calls in between follow the plan made last, which costs two
  table operations where planning costs ~100 us on a core back from a pause. `Accel.plan/3` always
  plans afresh.

  A kernel of `Accel.map/3`, and an operation of `Accel.Tensor` given to it by name, has its own
  model per device and input types: the call's first 2^17 and first 2^20 elements (or fewer) timed
  on each device, result downloaded, after runs that compile it there; the slope is its cost per
  element, transfers included. A model is timed again, up to 2^20 elements, on the first call 4x
  larger than the one it was timed on: a call under 2^17 elements gives one size only, all of
  whose time counts per element.

  `device: :all`, and a list of devices, share a call in proportion to the devices'
  predicted throughput while sharing is predicted to beat the best of them alone. Devices sharing
  a call contend for the host's memory and cores (a GPU's pageable copies are the host's memcpy),
  which no single device's model sees, so a set of devices has a correction of its own, learnt
  from its shared calls as above; once it says sharing does not pay, the call runs on the best
  device alone. A call below #{@small} elements runs on the CPU backend where it is one of the
  devices, nothing measured; a call too small to share otherwise runs alone on the device of
  highest throughput.

  Calibrations are kept per machine (its devices and Accel's version) in the kernel cache
  directory (see `Accel.Kernel`), so a new VM does not measure again; `reset/0` forgets them.

  Candidates are the devices `device: :all` would use: every usable device, less OpenCL devices on
  the host's CPU when the CPU backend is there (they share its cores and are slower) and less
  NVIDIA's OpenCL view of a GPU that CUDA drives (the same GPU twice). Inputs below
  #{@small} elements run on the CPU backend without asking: no device trip pays for so little.
  Nothing is logged.

  The fields of a plan:

    * `:device` - the `Accel.Device` chosen (for a shared call, the list of devices sharing it)
    * `:seconds` - its predicted time
    * `:predictions` - for each candidate, fastest first: `%{device:, n:, seconds:, latency:,
      transfer:, compute:, host:, model:, correction:, latency_correction:}` (seconds; `host` is the
      list conversion, the same for every device; `model` names the calibration the prediction came
      from, `correction` is its correction, included in `transfer` and `compute`, and
      `latency_correction` the latency's, included in `latency`); a shared call's own
      prediction comes first, `%{device: [devices], n:, seconds:, host:, latency: 0.0, correction:,
      model: {:co_execution, _}}`
    * `:reason` - one sentence saying why
    * `:shares` - for a shared call, each device's own share, `%{device:, elements:}`, in the
      order of the input (the rest goes in pieces to whichever device is free); else nil

  `Accel.plan/3` with `device: :all` or a list of devices explains the sharing decision: whether
  the devices share the call, in what shares, and the predictions it rests on.
  """

  defstruct [:device, :seconds, :predictions, :reason, shares: nil]

  @type t :: %__MODULE__{
          device: Accel.Device.t() | [Accel.Device.t()],
          seconds: float(),
          predictions: [map()],
          reason: String.t(),
          shares: [%{device: Accel.Device.t(), elements: non_neg_integer()}] | nil
        }

  # the logistic map's calibration sizes: one for latency, one for the bulk rate
  @latency_n 131_072
  @bulk_n 8_388_608
  # a kernel's model times prefixes of the call's input up to this many elements, and the host's
  # list conversion is timed at this size
  @prefix_n 1_048_576
  @calibration_k 10
  # an observation moves the correction this far (in log space) towards what it shows
  @learning 0.3
  # one planned call in this many runs on the runner-up instead, where it is predicted within
  # @explore_within of the best, so that a device's model is corrected by calls even when a bad
  # calibration made it look slower than it is (the cost, where the prediction was right: at most
  # (@explore_within - 1) / @explore_every of the calls' time, 3%)
  @explore_every 32
  @explore_within 2.0
  # calls below this many elements are too short to correct the model with
  @observe_min 32_768
  # an :auto call's plan is made afresh once in this many calls of the same shape (remembered/2),
  # and at most this many shapes' plans are remembered
  @replan 16
  @remembered_max 1024

  @doc """
  The plan for `Accel.logistic_map(input, opts)` with `backend: :auto` (options as there; also
  `devices:`, a list of `Accel.Device` to choose among instead of the default candidates).
  """
  @spec plan(Accel.int64_input(), keyword()) :: t()
  def plan(input, opts \\ []) do
    {candidates, opts} = Keyword.pop(opts, :devices)
    plan_shape(call_shape(input, opts), candidates || candidates())
  end

  defp plan_shape({n, k, form, as}, candidates), do: decide(n, candidates, "", &predict(&1, n, k, form, as))

  # What a logistic-map call's prediction depends on: its size, iterations, input and output forms.
  defp call_shape(input, opts) do
    n =
      count(input) ||
        raise ArgumentError,
              "expected a proper list, a Range of integers or a binary, got: #{inspect(input, limit: 5)}"

    shape(n, input, opts)
  end

  # (n counted once: a list's count walks it)
  defp shape(n, input, opts) do
    as = Keyword.get(opts, :as) || if(is_binary(input), do: :binary, else: :list)
    {n, Keyword.get(opts, :iterations, 10), form(input), as}
  end

  # The plan among `candidates` for n elements: small inputs on the CPU backend without measuring,
  # else the device of least predicted time (`predict.(device)`), `what` naming the work.
  defp decide(n, candidates, what, predict) do
    cond do
      candidates == [] ->
        raise ArgumentError, "no usable device to plan on"

      cpu = small_cpu(candidates, n) ->
        small_plan(cpu, n)

      true ->
        [best | rest] =
          predictions = candidates |> measure_order() |> Enum.map(predict) |> Enum.sort_by(& &1.seconds)

        reason =
          case rest do
            [] ->
              "#{describe(best.device)} is the only candidate"

            [next | _] ->
              "#{describe(best.device)} is predicted fastest for #{n} elements#{what} " <>
                "(#{fmt(best.seconds)} s against #{fmt(next.seconds)} s on #{describe(next.device)})"
          end

        %__MODULE__{device: best.device, seconds: best.seconds, predictions: predictions, reason: reason}
    end
  end

  @doc false
  # The {backend, id} an :auto call runs on, and the plan to report to observe/2 when it ends (nil
  # where there was nothing to choose: one candidate, or a small input on the CPU backend).
  def choose(input, opts) do
    candidates = candidates()

    cond do
      match?([_], candidates) ->
        [only] = candidates
        {{only.backend, only.id}, nil}

      small?(input) and cpu?() ->
        {{:cpu, 0}, nil}

      true ->
        case count(input) do
          # malformed: the call raises its documented error wherever it goes
          nil ->
            {{:auto, -1}, nil}

          n ->
            shape = shape(n, input, opts)
            plan = remembered({:logistic_map, shape}, fn -> plan_shape(shape, candidates) end)
            {{plan.device.backend, plan.device.id}, if(plan.seconds > 0, do: plan)}
        end
    end
  end

  @doc false
  # The plan an :auto call follows, for calls of one shape (`shape`: the work, its size and forms):
  # `plan.()` makes it afresh on the first call of that shape and every @replan calls after, and in
  # between it is remembered, so that what calls teach (observe/2) reaches the decision within
  # @replan calls. Planning costs ~100 us on a core back from a pause (every table and function it
  # touches is out of the caches: 15-20% of a 10^5-element call); a remembered plan, two table
  # operations. Now and then the runner-up's plan instead (explore/2). The plans are not kept on
  # disk, and reset/0 forgets them.
  def remembered(shape, plan) do
    table()
    key = {:meta, {:plan, shape}}
    count = :ets.update_counter(__MODULE__, key, {3, 1}, {key, nil, 0})

    current =
      case :ets.lookup(__MODULE__, key) do
        # (none where a correction forgot the plans meanwhile: learn/4)
        [{_, %__MODULE__{} = kept, _}] when rem(count, @replan) != 1 ->
          kept

        _ ->
          if count == 1, do: bound_remembered()
          fresh = plan.()
          :ets.update_element(__MODULE__, key, {2, fresh})
          fresh
      end

    explore(current, count)
  end

  # Calls of ever new sizes would each leave a plan: past @remembered_max shapes, all are forgotten.
  defp bound_remembered do
    if :ets.update_counter(__MODULE__, {:meta, :shapes}, 1, {{:meta, :shapes}, 0}) > @remembered_max do
      :ets.match_delete(__MODULE__, {{:meta, {:plan, :_}}, :_, :_})
      :ets.insert(__MODULE__, {{:meta, :shapes}, 0})
    end
  end

  # The plan the `count`th call of a shape follows: the runner-up's in one call of @explore_every.
  # Only calls the model learns from (observe/2) explore.
  defp explore(%__MODULE__{predictions: [best, next | _]} = plan, count)
       when best.n >= @observe_min and next.seconds < @explore_within * best.seconds and
              rem(count, @explore_every) == 0 do
    %{
      plan
      | device: next.device,
        seconds: next.seconds,
        reason: "exploring: #{describe(next.device)}, the runner-up, takes one call in #{@explore_every}"
    }
  end

  defp explore(plan, _count), do: plan

  @doc false
  # Whether `input` is too small for any device trip to pay (for device: :all too): never raises,
  # and walks at most that many cells of a list.
  def small?(input) when is_binary(input), do: byte_size(input) < @small * 8
  def small?(input) when is_list(input), do: short_list?(input, @small - 1)
  def small?(input), do: (n = count(input)) != nil and n < @small

  defp short_list?([], _left), do: true
  defp short_list?([_ | rest], left) when left > 0, do: short_list?(rest, left - 1)
  defp short_list?(_, _left), do: false

  @doc false
  # The element count of a well-formed input (a proper list, a range of integers with a non-zero
  # step, a binary), else nil: the call itself then raises the error the documentation gives.
  def count(input) when is_binary(input), do: div(byte_size(input), 8)

  def count(%Range{first: f, last: l, step: s} = r)
      when is_integer(f) and is_integer(l) and is_integer(s) and s != 0,
      do: Range.size(r)

  def count(input) when is_list(input), do: proper_length(input, 0)
  def count(_input), do: nil

  defp proper_length([], n), do: n
  defp proper_length([_ | rest], n), do: proper_length(rest, n + 1)
  defp proper_length(_tail, _n), do: nil

  @doc false
  # Whether the CPU backend is usable: it is a candidate wherever it is.
  def cpu?, do: Enum.any?(candidates(), &(&1.backend == :cpu))

  @doc false
  # Where an :auto call of n elements goes without planning: the only candidate, or the CPU
  # backend for a small call (nil: plan it). What decide/4 would choose, without its table work.
  def small_choice([only], _n), do: only
  def small_choice(candidates, n), do: small_cpu(candidates, n)

  # The CPU backend among `candidates` for a call of n elements too small to measure, else nil.
  defp small_cpu(candidates, n) when n < @small, do: Enum.find(candidates, &(&1.backend == :cpu))
  defp small_cpu(_candidates, _n), do: nil

  @doc false
  # A call the plan chose took `seconds`: the chosen device's correction follows it. The table's
  # process makes the correction (learn/4), off the caller's path: a correction, and every 10 s
  # the file written, cost the call tens of microseconds on a cold core (a 10^5-element call takes
  # ~600), and one process making every correction means that two calls ending at once cannot
  # undo each other's. calibrations/0 waits for the corrections sent before it (await_learning/0).
  def observe(%__MODULE__{device: device, predictions: [_ | _] = predictions}, seconds) do
    with %{model: key, n: n, seconds: predicted, host: host} = p when n >= @observe_min <-
           Enum.find(predictions, &(&1.device == device)),
         {device_part, observed_part} when device_part > 0 and observed_part > 0 <-
           {predicted - host, seconds - host},
         # none where the table was never made: nothing to correct
         owner when is_pid(owner) <- Process.whereis(__MODULE__) do
      latency = Map.get(p, :latency, 0.0)
      # the prediction's two parts without the corrections it was made with (a remembered plan's
      # prediction was made with older ones)
      fixed = latency / Map.get(p, :latency_correction, 1.0)
      scaled = (device_part - latency) / Map.get(p, :correction, 1.0)
      send(owner, {:learn, key, observed_part, fixed, scaled})
    end

    :ok
  end

  def observe(_plan, _seconds), do: :ok

  # In the table's process: a call's device took `observed` seconds where its model, as it is now,
  # predicts `latency * latency_correction + scaled * correction`. The two corrections move towards
  # what the call showed, each by its part's share of the prediction (a gradient step in log
  # space): a small call, mostly latency, corrects mostly the latency, and a large one the
  # per-element costs. With one correction for both, 60 cold calls of 40,000 elements here (the
  # latency 78% of their prediction, each call 0.65x of it) took the correction to its floor, and
  # the model then predicted a 2^23-element call at 3.6 ms that took 31. Where a correction moved
  # by a fifth or more (a call 2x off its prediction moves the whole of it 1.23x), the plans :auto
  # calls remember (remembered/2) are forgotten, so that the next calls plan with it.
  defp learn(key, observed, latency, scaled) do
    # nil where reset/0 ran meanwhile
    with %{correction: correction, observed: calls} = model <- lookup(key) do
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

        put_model(key, model, :throttled)

        if moved?(corrected, correction) or moved?(latency_corrected, latency_correction),
          do: :ets.match_delete(__MODULE__, {{:meta, {:plan, :_}}, :_, :_})
      end
    end
  end

  defp bounded(correction), do: min(max(correction, 0.1), 10.0)
  defp moved?(corrected, correction), do: corrected > 1.2 * correction or corrected < correction / 1.2

  @doc false
  # Runs `fun`, the call `plan` chose, and teaches the model what it took (observe/2; a nil plan
  # teaches nothing).
  def follow(nil, fun), do: fun.()

  def follow(plan, fun) do
    {us, result} = :timer.tc(fun)
    observe(plan, us / 1.0e6)
    result
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

  @doc false
  # The plan for Accel.map/3 with a kernel or an operation's name (Accel.Kernel.Map.plan_host/3):
  # `key` names the kernel (or operation) and its input types, `time.(device, len)` runs it on the
  # call's first `len` elements on `device` and returns the seconds taken, result downloaded. Each
  # device's model of the kernel is two such prefixes (2^17 elements and up to 2^20), timed on
  # first use after a run that compiles it there.
  def plan_kernel(key, n, candidates, time),
    do: decide(n, candidates, work_name(key), &predict_kernel(&1, key, n, n, time))

  defp work_name({:operation, op, _types}), do: " of #{op}"
  defp work_name(_kernel), do: " of this kernel"

  # A kernel's predicted time for n elements on `device`, in a call of `count` elements (whose
  # prefixes `time` runs, where the model is timed).
  defp predict_kernel(device, key, n, count, time) do
    model_key = {key, device_key(device)}

    m =
      case lookup(model_key) do
        # timed on prefixes of a call at least a quarter this one's size, or of 2^20 elements
        %{timed_at: at} = m when 4 * at >= count or at >= @prefix_n -> m
        # none yet, or timed on a smaller call, whose time was all latency: timed on this one's
        _ -> tap(calibrate_kernel(min(count, @prefix_n), &time.(device, &1)), &put_model(model_key, &1))
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
  # mostly waking threads and mapping fresh pages, and the slope said PoCL was as fast as the CPU
  # backend on a kernel where it is 10x slower. A call of fewer than 2^17 elements has one size to
  # time, all of whose time counts per element: such a model is timed again on the first call 4x
  # larger (`timed_at`, predict_kernel/5). Kept as it was, a first call of 10^5 elements had the
  # CPU backend's model predict a 10^6-element call at 6.5 ms that took 2.4, and a GPU's latency
  # (100 us and more) would count per element many times over, for calls of every size after.
  defp calibrate_kernel(large, time) do
    small = min(@latency_n, large)
    _compile = time.(min(@small, large))
    # untimed: a device's first calls at a size run slower (fresh memory mapped for the output;
    # a 16-core host's first 10^7-element calls took 3x the later ones)
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
  # learnt from the calls that shared (observe/2 with the plan returned); where the corrected
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
  # plan_kernel/4): the kernel's own models give the devices' times.
  def split_kernel(key, count, devices, time), do: sharing(kernel_terms(key, count, time), devices)

  @doc false
  # Accel.plan/3 with device: :all or a list: the sharing decision split/3 would make, explained.
  def plan_split(input, devices, opts), do: explain_sharing(logistic_terms(input, opts), devices)

  @doc false
  # plan_split/3 for a kernel of Accel.map/3 or an operation (`key` and `time` as for plan_kernel/4).
  def plan_split_kernel(key, count, devices, time),
    do: explain_sharing(kernel_terms(key, count, time), devices)

  # What a sharing decision weighs, for a logistic-map call or a kernel's: the call's `count`,
  # `device_time.(device, n)` (a device's predicted seconds for n elements, less the host's part),
  # `host` (the same for every device), `predict.(device)` (its prediction for the whole call) and
  # `what` (the work's name in reasons).
  defp logistic_terms(input, opts) do
    {count, k, form, as} = call_shape(input, opts)

    %{
      count: count,
      device_time: fn d, n -> predict(d, n, k, form, as) |> then(&(&1.seconds - &1.host)) end,
      host: host_seconds(count, form, as),
      predict: &predict(&1, count, k, form, as),
      what: ""
    }
  end

  defp kernel_terms(key, count, time) do
    %{
      count: count,
      device_time: fn d, n -> predict_kernel(d, key, n, count, time).seconds end,
      host: 0.0,
      predict: &predict_kernel(&1, key, count, count, time),
      what: work_name(key)
    }
  end

  defp sharing(%{count: count} = terms, devices) do
    case sharing_decision(count, devices, terms.device_time) do
      :small ->
        {[Enum.find(devices, &(&1.backend == :cpu))], [{0, count}], nil}

      %{share?: true} = d ->
        prediction = shared_prediction(d, terms)
        plan = %__MODULE__{device: d.devices, seconds: prediction.seconds, predictions: [prediction]}
        {d.devices, d.pieces, plan}

      d ->
        {[d.best], [{0, count}], nil}
    end
  end

  # The shared call's own prediction, the one observe/2 corrects the set of devices by.
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
    at = max(count, @prefix_n)
    rates = for d <- devices, do: {d, at / max(device_time.(d, at), 1.0e-9)}

    case pieces(count, rates) do
      # too few elements to share, or one device kept: alone, on the device of highest rate. (Not
      # the one predicted fastest at this size: a model's latency comes from 2^17 elements, where
      # the CPU backend's output is mapped afresh, and made PoCL look faster for 5,000 elements.)
      {[best], pieces} ->
        %{share?: false, devices: [best], pieces: pieces, best: best, rates: rates}

      {kept, pieces} ->
        {best, alone} = kept |> Enum.map(&{&1, device_time.(&1, count)}) |> Enum.min_by(&elem(&1, 1))
        key = {:co_execution, kept |> Enum.map(&device_key/1) |> Enum.sort()}
        m = measured(key, fn -> %{correction: 1.0, observed: 0} end)
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

        %__MODULE__{
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
        %__MODULE__{
          device: d.best,
          seconds: alone.seconds,
          predictions: predictions,
          reason:
            "#{describe(d.best)} alone: sharing with #{others} is predicted #{fmt(host + d.shared)} s " <>
              "against #{fmt(alone.seconds)} s alone for #{count} elements#{what}" <> learnt(d.model)
        }

      length(devices) == 1 ->
        %__MODULE__{
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

        %__MODULE__{
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

  # The CPU backend is measured first: an OpenCL runtime's threads stay busy after its calls (PoCL's,
  # and NVIDIA's: on the H100 host the CPU backend measured after NVIDIA's OpenCL came out 2.8x
  # slower than it is), and the settling pause before each device does not always cover it.
  defp measure_order(devices), do: Enum.sort_by(devices, &(&1.backend != :cpu))

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

  @doc """
  Forgets every calibration, in this VM and on disk: the next `:auto` call measures again.
  """
  @spec reset() :: :ok
  def reset do
    table()
    :ets.delete_all_objects(__MODULE__)
    _ = File.rm(store_path())
    :ok
  end

  @doc """
  The calibrations this VM holds, by device (`{backend, id, name}`) and `:host`: seconds of
  latency, seconds per element to upload (from Accel's memory, and `upload_vm` from a binary the
  VM made), download and compute one iteration, the corrections
  learnt from calls (`correction` for the per-element costs, `latency_correction`), and how many
  calls taught them; also each kernel's models, by kernel and
  device, and the sharing corrections, by `{:co_execution, devices}`.
  """
  @spec calibrations() :: %{optional(term()) => map()}
  def calibrations do
    table()
    await_learning()
    Map.new(models())
  end

  @doc false
  # Returns once the table's process has made the corrections sent to it before (a message from
  # one process to another arrives in the order sent).
  def await_learning do
    with owner when is_pid(owner) <- Process.whereis(__MODULE__) do
      ref = Process.monitor(owner)
      send(owner, {:settle, self(), ref})

      receive do
        {^ref, :settled} -> Process.demonitor(ref, [:flush])
        {:DOWN, ^ref, :process, _, _} -> :ok
      end
    end
  end

  # {:meta, _} keys: counters and remembered plans, which are not calibrations
  defp models, do: Enum.reject(:ets.tab2list(__MODULE__), &match?({:meta, _}, elem(&1, 0)))

  @doc false
  def candidates, do: Accel.co_execution_devices(:auto)

  # ---- predictions ----

  defp small_plan(cpu, n) do
    prediction = %{
      model: nil,
      device: cpu,
      n: n,
      seconds: 0.0,
      latency: 0.0,
      transfer: 0.0,
      compute: 0.0,
      host: 0.0
    }

    %__MODULE__{
      device: cpu,
      seconds: 0.0,
      predictions: [prediction],
      reason: "#{n} elements are below #{@small}: the CPU backend, since no device trip pays for so few"
    }
  end

  defp predict(device, n, k, form, as) do
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
  defp latency(m), do: m.latency * Map.get(m, :latency_correction, 1.0)

  # Decoding a list into int64s, and building one: the same on every device.
  # (the host's model measured only where a list is)
  defp host_seconds(_n, form, as) when form != :list and as != :list, do: 0.0

  defp host_seconds(n, form, as) do
    h = host_model()
    if(form == :list, do: n * h.decode, else: 0.0) + if(as == :list, do: n * h.encode, else: 0.0)
  end

  # :binary for one in Accel's host memory (which a GPU's transfers pin: Accel maps binaries of
  # 2 MiB and more, so a smaller one is not asked about), :vm_binary otherwise
  defp form(input) when is_binary(input),
    do: if(byte_size(input) >= 2 * 1024 * 1024 and Accel.NIF.host_owned(input), do: :binary, else: :vm_binary)

  defp form(%Range{}), do: :range
  defp form(_list), do: :list

  # ---- models: measured once per device, kept in ETS and on disk ----

  defp model(device), do: measured(device_key(device), fn -> calibrate(device) end)
  defp host_model, do: measured(:host, &calibrate_host/0)

  defp measured(key, calibrate), do: lookup(key) || tap(calibrate.(), &put_model(key, &1))

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

  # An OpenCL runtime's threads (PoCL's here) stay busy for tens of milliseconds after its calls,
  # and would slow the next device's measurements: the CPU backend's compute cost came out half
  # PoCL's, not a tenth, in one calibration of twelve.
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

  defp device_key(%Accel.Device{backend: b, id: id, name: name}), do: {b, id, name}

  defp lookup(key) do
    table()

    case :ets.lookup(__MODULE__, key) do
      [{^key, model}] -> model
      [] -> nil
    end
  end

  # A calibration is saved at once; what calls teach, at most every 10 s (a large call each
  # would otherwise write the file each).
  defp put_model(key, model, save \\ :now) do
    :ets.insert(__MODULE__, {key, model})
    now = System.monotonic_time(:millisecond)

    case :ets.lookup(__MODULE__, {:meta, :saved_at}) do
      [{_, at}] when save == :throttled and now - at < 10_000 ->
        :ok

      _ ->
        :ets.insert(__MODULE__, {{:meta, :saved_at}, now})
        save()
    end
  end

  # The table lives in a process of its own, started on first use, so that it outlives callers; the
  # process (registered under this module's name) also makes the corrections calls send (observe/2).
  defp table do
    if :ets.whereis(__MODULE__) == :undefined do
      parent = self()

      {pid, ref} =
        spawn_monitor(fn ->
          if own_table() do
            load()
            send(parent, {__MODULE__, :ready})
            serve()
          else
            # another process made it first
            send(parent, {__MODULE__, :ready})
          end
        end)

      receive do
        {__MODULE__, :ready} -> Process.demonitor(ref, [:flush])
        {:DOWN, ^ref, :process, ^pid, reason} -> exit(reason)
      end
    end

    :ok
  end

  defp own_table do
    :ets.new(__MODULE__, [:named_table, :public, :set, read_concurrency: true])
    Process.register(self(), __MODULE__)
  rescue
    ArgumentError -> false
  end

  defp serve do
    receive do
      {:learn, key, observed, latency, scaled} ->
        # a correction is never worth the table: whatever fails (the file not written) is dropped
        try do
          learn(key, observed, latency, scaled)
        rescue
          _ -> :ok
        end

      {:settle, from, ref} ->
        send(from, {ref, :settled})
    end

    serve()
  end

  # ---- persistence: one file per machine (its devices and Accel's version) ----

  defp store_path do
    devices = Enum.map(Accel.devices(), &{&1.backend, &1.id, &1.name, &1.memory, &1.compute_units})
    machine = {devices, :erlang.system_info(:system_architecture), Application.spec(:accel, :vsn)}

    id =
      :crypto.hash(:sha256, :erlang.term_to_binary(machine))
      |> Base.encode16(case: :lower)
      |> binary_part(0, 16)

    Path.join(Accel.Kernel.Native.cache_dir(), "placement-#{id}.etf")
  end

  defp load do
    with {:ok, bytes} <- File.read(store_path()),
         {:ok, entries} <- decode(bytes) do
      :ets.insert(__MODULE__, entries)
    end
  end

  # What save/0 wrote: a list of {key, model}. Anything else is a damaged file, ignored; a model
  # without the numbers its kind needs is left out (measured again), not handed to a call to raise.
  defp decode(bytes) do
    entries = :erlang.binary_to_term(bytes, [:safe])

    if Enum.all?(entries, &match?({_, %{}}, &1)),
      do: {:ok, Enum.filter(entries, &well_formed?/1)},
      else: :error
  rescue
    # not a term, atoms this VM does not know, not a proper list
    _ -> :error
  end

  defp well_formed?({key, model}) do
    needs =
      case key do
        :host -> [:decode, :encode]
        {:co_execution, _devices} -> [:correction, :observed]
        {_work, {_backend, _id, _name}} -> [:latency, :per_element, :correction, :observed]
        {_backend, _id, _name} -> [:latency, :upload, :download, :compute, :correction, :observed]
        _ -> [nil]
      end

    Enum.all?(needs, &Map.has_key?(model, &1)) and Enum.all?(Map.values(model), &is_number/1)
  end

  # Written atomically: a temporary file renamed into place.
  defp save do
    path = store_path()
    tmp = path <> ".#{System.unique_integer([:positive])}"

    with :ok <- File.mkdir_p(Path.dirname(path)),
         :ok <- File.write(tmp, :erlang.term_to_binary(models())),
         do: File.rename(tmp, path)

    _ = File.rm(tmp)
    :ok
  end

  defp describe(%Accel.Device{backend: :cpu}), do: ":cpu"
  defp describe(%Accel.Device{backend: b, id: id, name: name}), do: "#{inspect(b)} device #{id} (#{name})"

  defp fmt(seconds), do: :erlang.float_to_binary(seconds, decimals: 4)
end
