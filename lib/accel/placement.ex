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

  # The parts: Model (calibrations, predictions and their corrections), Sharing (device: :all and
  # lists of devices) and Table (where models and remembered plans are kept, and saved).
  alias Accel.Placement.{Model, Sharing, Table}

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

  defp plan_shape({n, k, form, as}, candidates),
    do: decide(n, candidates, "", &Model.predict(&1, n, k, form, as))

  @doc false
  # What a logistic-map call's prediction depends on: its size, iterations, input and output forms.
  def call_shape(input, opts) do
    n =
      count(input) ||
        raise ArgumentError,
              "expected a proper list, a Range of integers or a binary, got: #{inspect(input, limit: 5)}"

    shape(n, input, opts)
  end

  # (n counted once: a list's count walks it)
  defp shape(n, input, opts) do
    as = Keyword.get(opts, :as) || if(is_binary(input), do: :binary, else: :list)
    {n, Keyword.get(opts, :iterations, 10), Model.form(input), as}
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
          predictions =
          candidates |> Sharing.measure_order() |> Enum.map(predict) |> Enum.sort_by(& &1.seconds)

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
    Table.table()
    key = {:meta, {:plan, shape}}
    count = :ets.update_counter(Table, key, {3, 1}, {key, nil, 0})

    current =
      case :ets.lookup(Table, key) do
        # (none where a correction forgot the plans meanwhile: Model.learn/4)
        [{_, %__MODULE__{} = kept, _}] when rem(count, @replan) != 1 ->
          kept

        _ ->
          if count == 1, do: bound_remembered()
          fresh = plan.()
          :ets.update_element(Table, key, {2, fresh})
          fresh
      end

    explore(current, count)
  end

  # Calls of ever new sizes would each leave a plan: past @remembered_max shapes, all are forgotten.
  defp bound_remembered do
    if :ets.update_counter(Table, {:meta, :shapes}, 1, {{:meta, :shapes}, 0}) > @remembered_max do
      Table.forget_plans()
      :ets.insert(Table, {{:meta, :shapes}, 0})
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
  # Calls below this many elements run on the CPU backend where it is a candidate, unmeasured.
  def small_n, do: @small

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
  # process makes the correction (Model.learn/4), off the caller's path: a correction, and every 10 s
  # the file written, cost the call tens of microseconds on a cold core (a 10^5-element call takes
  # ~600), and one process making every correction means that two calls ending at once cannot
  # undo each other's. calibrations/0 waits for the corrections sent before it (Table.await_learning/0).
  def observe(%__MODULE__{device: device, predictions: [_ | _] = predictions}, seconds) do
    with %{model: key, n: n, seconds: predicted, host: host} = p when n >= @observe_min <-
           Enum.find(predictions, &(&1.device == device)),
         {device_part, observed_part} when device_part > 0 and observed_part > 0 <-
           {predicted - host, seconds - host},
         # none where the table was never made: nothing to correct
         owner when is_pid(owner) <- Process.whereis(Table) do
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
  # The plan for Accel.map/3 with a kernel or an operation's name (Accel.Kernel.Map.plan_host/3):
  # `key` names the kernel (or operation) and its input types, `time.(device, len)` runs it on the
  # call's first `len` elements on `device` and returns the seconds taken, result downloaded. Each
  # device's model of the kernel is two such prefixes (2^17 elements and up to 2^20), timed on
  # first use after a run that compiles it there.
  def plan_kernel(key, n, candidates, time),
    do: decide(n, candidates, work_name(key), &Model.predict_kernel(&1, key, n, n, time))

  @doc false
  # The work a plan's reason names.
  def work_name({:operation, op, _types}), do: " of #{op}"
  def work_name(_kernel), do: " of this kernel"

  @doc """
  Forgets every calibration, in this VM and on disk: the next `:auto` call measures again.
  """
  @spec reset() :: :ok
  def reset do
    Table.table()
    :ets.delete_all_objects(Table)
    _ = File.rm(Table.store_path())
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
    Table.table()
    Table.await_learning()
    Map.new(Table.models())
  end

  @doc false
  def candidates, do: Accel.Devices.co_execution_devices(:auto)

  # ---- predictions ----

  @doc false
  # The plan of a call too small to measure: the CPU backend.
  def small_plan(cpu, n) do
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

  @doc false
  # A device, and seconds, as reasons name them.
  def describe(%Accel.Device{backend: :cpu}), do: ":cpu"
  def describe(%Accel.Device{backend: b, id: id, name: name}), do: "#{inspect(b)} device #{id} (#{name})"

  @doc false
  def fmt(seconds), do: :erlang.float_to_binary(seconds, decimals: 4)
end
