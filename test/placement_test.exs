defmodule Accel.PlacementTest do
  # Accel.plan/3 and the cost model behind backend: :auto (Accel.Placement): small inputs never
  # leave the CPU, each device measured once and kept on disk per machine, predictions that add
  # up, the choice between the CPU backend and PoCL (about 10x slower here), corrections learnt
  # from calls, reset. Not async: the model is one per VM and its file one per machine.
  use ExUnit.Case, async: false

  import Accel.Test.Devices
  alias Accel.Placement

  setup do
    Placement.reset()
    on_exit(&Placement.reset/0)
  end

  # This machine's calibration file, where it exists (the cache directory may hold other
  # machines' and other versions' files)
  defp store, do: Enum.filter([Placement.Table.store_path()], &File.exists?/1)

  test "small inputs run on the CPU backend, with nothing measured" do
    plan = Accel.plan(1..4095, :logistic_map)
    assert plan.device == cpu()
    assert plan.reason =~ "4095 elements are below 4096"
    assert Placement.calibrations() == %{}
  end

  test "an :auto call goes without planning to the only candidate, or to the CPU when small" do
    gpu = %Accel.Device{backend: :opencl, id: 0, name: "a GPU", type: :gpu}
    assert Placement.small_choice([gpu], 10_000_000) == gpu
    assert Placement.small_choice([gpu, cpu()], 4095) == cpu()
    # what Accel.plan/3 says of the same call
    assert Accel.plan(1..4095, :logistic_map).device == cpu()
    assert Placement.small_choice([gpu, cpu()], 4096) == nil
    assert Placement.small_choice([gpu], 10) == gpu
    assert Placement.small_choice([gpu, %{gpu | id: 1}], 10) == nil
    assert Placement.calibrations() == %{}
  end

  # PoCL: an OpenCL device on the CPU backend's own cores, ~10x slower (a GPU host has none)
  @tag :pocl
  test "the CPU backend over PoCL, from predictions that add up" do
    plan = Accel.plan(1..1_000_000, :logistic_map, devices: [pocl(), cpu()], as: :binary)
    assert plan.device == cpu()
    assert [%{device: first}, %{device: second}] = plan.predictions
    assert {first, second} == {cpu(), pocl()}
    assert plan.reason =~ ":cpu is predicted fastest for 1000000 elements"

    for p <- plan.predictions do
      assert p.seconds == p.latency + p.transfer + p.compute + p.host
      assert p.compute > 0 and p.latency >= 0 and p.transfer >= 0
      # binary out from a range: no list built on the host
      assert p.host == 0.0
    end

    [fast, slow] = plan.predictions
    assert slow.compute > 2 * fast.compute

    # iterations scale compute alone; a list costs the host the same on every device
    none = Accel.plan(1..1_000_000, :logistic_map, devices: [pocl(), cpu()], iterations: 0)
    assert Enum.all?(none.predictions, &(&1.compute == 0.0 and &1.host > 0))
    assert Enum.uniq(Enum.map(none.predictions, & &1.host)) |> length() == 1
    ranged = Accel.plan(1..1_000_000, :logistic_map, devices: [pocl()], as: :binary)
    listed = Accel.plan(Enum.to_list(1..1_000_000), :logistic_map, devices: [pocl()], as: :binary)
    assert hd(listed.predictions).host > 0 and hd(ranged.predictions).host == 0.0
  end

  # A GPU pins the binaries Accel made (its own host memory), not the VM's: their uploads differ.
  test "a binary the VM made is predicted with its own upload cost" do
    owned = Accel.logistic_map(1..1_000_000, iterations: 0, as: :binary, backend: :cpu)
    vm = :binary.copy(owned)
    assert Accel.NIF.host_owned(owned) and Accel.NIF.host_owned(binary_part(owned, 8, 800))
    refute Accel.NIF.host_owned(vm) or Accel.NIF.host_owned(<<1::64>>)

    [from_owned] = Accel.plan(owned, :logistic_map, devices: [cpu()]).predictions
    [from_vm] = Accel.plan(vm, :logistic_map, devices: [cpu()]).predictions
    m = Placement.calibrations()[{:cpu, 0, cpu().name}]
    assert is_float(m.upload_vm) and m.upload_vm >= 0
    assert_in_delta from_owned.transfer, 1_000_000 * (m.upload + m.download) * m.correction, 1.0e-12
    assert_in_delta from_vm.transfer, 1_000_000 * (m.upload_vm + m.download) * m.correction, 1.0e-12
  end

  test "calibrations are kept on disk per machine and survive the VM's table" do
    Accel.plan(1..100_000, :logistic_map, devices: [cpu()])
    before = Placement.calibrations()
    assert %{latency: _, compute: c, correction: 1.0} = before[{:cpu, 0, cpu().name}]
    assert c > 0 and before[:host].decode > 0
    assert [_file] = store()

    # a new VM: the table gone, the file read back, nothing measured again (measurements differ)
    owner = :ets.info(Placement.Table, :owner)
    ref = Process.monitor(owner)
    Process.exit(owner, :kill)
    assert_receive {:DOWN, ^ref, :process, _, :killed}
    assert Placement.calibrations() == before

    Placement.reset()
    assert store() == []
    assert Placement.calibrations() == %{}
  end

  test "a damaged file is ignored and measured again" do
    Accel.plan(1..100_000, :logistic_map, devices: [cpu()])
    [file] = store()

    for damaged <- [
          "not a term",
          :erlang.term_to_binary([{:a, %{}}, 1]),
          :erlang.term_to_binary([{:a, %{}} | :b]),
          # models without the numbers their kind needs: left out, measured again
          :erlang.term_to_binary([
            {{:cpu, 0, cpu().name}, %{latency: 1.0e-4, correction: 1.0}},
            {:host, %{decode: "fast", encode: 1.0e-9}},
            {{{:kernel, 1, [:s64], []}, {:cpu, 0, cpu().name}}, %{per_element: 1.0e-9}}
          ])
        ] do
      File.write!(file, damaged)
      owner = :ets.info(Placement.Table, :owner)
      ref = Process.monitor(owner)
      Process.exit(owner, :kill)
      assert_receive {:DOWN, ^ref, :process, _, :killed}
      assert Placement.calibrations() == %{}
      assert Accel.plan(1..100_000, :logistic_map, devices: [cpu()]).device == cpu()
    end
  end

  test "calls correct the model of the device they ran on" do
    plan = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()])
    [p] = plan.predictions
    key = {:cpu, 0, cpu().name}
    Placement.observe(plan, p.host + 2 * (p.seconds - p.host))
    slower = Placement.calibrations()[key]
    assert slower.correction > 1.0 and slower.observed == 1
    assert hd(Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()]).predictions).seconds > p.seconds

    Placement.observe(plan, p.host + (p.seconds - p.host) / 4)
    assert Placement.calibrations()[key].correction < slower.correction

    # a call too small to judge by teaches nothing
    small = Accel.plan(1..5000, :logistic_map, devices: [cpu()])
    Placement.observe(small, 10.0)
    assert Placement.calibrations()[key].observed == 2
  end

  # An :auto call's plan is remembered (remembered/2): its prediction was made with the correction
  # of its time, and the calls that follow it must not compound what it got wrong.
  test "calls following one plan move the correction to what they show, not past it" do
    Placement.reset()
    plan = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()])
    [p] = plan.predictions
    key = {:cpu, 0, cpu().name}
    assert p.correction == 1.0 and p.latency_correction == 1.0
    # every call takes 1.5x the first prediction: both corrections rise, and the model converges on
    # predicting that, not more
    for _ <- 1..30, do: Placement.observe(plan, p.host + 1.5 * (p.seconds - p.host))
    m = Placement.calibrations()[key]
    assert m.correction > 1.0 and m.latency_correction > 1.0
    [now] = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()]).predictions
    assert_in_delta now.seconds - now.host, 1.5 * (p.seconds - p.host), 0.01 * (p.seconds - p.host)
  end

  # A call's error is shared between the latency and the per-element costs by their parts of its
  # prediction: small calls, mostly latency, must not teach the per-element costs that large calls
  # depend on (with one correction, 60 small cold calls took it to its floor, and a large call was
  # then predicted 10x faster than it ran).
  test "small calls correct the latency, large calls the per-element costs" do
    Placement.reset()
    [p] = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()]).predictions
    # a prediction 90% latency, and one 90% per-element costs, for the same device's model
    shaped = fn latency, rest ->
      %Placement{device: cpu(), predictions: [%{p | seconds: latency + rest, latency: latency, host: 0.0}]}
    end

    small = shaped.(0.9e-3, 0.1e-3)
    for _ <- 1..40, do: Placement.observe(small, 0.5e-3)
    m = Placement.calibrations()[p.model]
    # the small calls' prediction converged on what they took, mostly by the latency
    assert_in_delta 0.9e-3 * m.latency_correction + 0.1e-3 * m.correction, 0.5e-3, 0.02e-3
    assert m.latency_correction < 0.6 and m.correction > 0.85

    large = shaped.(0.1e-3, 0.9e-3)
    for _ <- 1..40, do: Placement.observe(large, 2.0e-3)
    m2 = Placement.calibrations()[p.model]
    assert_in_delta 0.1e-3 * m2.latency_correction + 0.9e-3 * m2.correction, 2.0e-3, 0.05e-3
    assert m2.correction > 1.9 and m2.latency_correction < 1.5 * m.latency_correction

    # and a plan uses both
    [q] = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()]).predictions
    assert q.latency_correction == m2.latency_correction and q.correction == m2.correction
    assert_in_delta q.latency, p.latency * m2.latency_correction, 1.0e-12
  end

  test "a call that moves a correction by a fifth or more makes :auto plan afresh" do
    plan = Accel.plan(1..1_000_000, :logistic_map, devices: [cpu()])
    [p] = plan.predictions
    made = :counters.new(1, [])
    remember = fn -> Placement.remembered(:shape, fn -> :counters.add(made, 1, 1) && plan end) end
    planned = fn -> :counters.get(made, 1) end

    teach = fn slower ->
      Placement.observe(plan, p.host + slower * (p.seconds - p.host))
      Placement.Table.await_learning()
      remember.()
    end

    remember.()
    assert planned.() == 1
    # 1.5x slower moves the correction 1.13x: the plan stays
    teach.(1.5)
    assert planned.() == 1
    teach.(3)
    assert planned.() == 2
    teach.(0.3)
    assert planned.() == 3

    # a correction held at its bound moves no more, however far off the calls are
    for _ <- 1..12, do: teach.(0.001)
    assert Placement.calibrations()[p.model].correction == 0.1
    before = planned.()
    teach.(0.001)
    assert planned.() == before
  end

  @tag :pocl
  test "a kernel has its own model per device, from prefixes of the call's input" do
    require Accel
    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)
    plan = Accel.plan(1..500_000, k, devices: [pocl(), cpu()])
    assert plan.reason =~ "predicted fastest for 500000 elements of this kernel"
    # fastest first, each from its device's own model, and the plan's device the fastest. Which
    # of the two is faster is the machine's to say: both run on the same cores, and on an AVX2
    # host PoCL's kernel (its checked step in 128-bit products) is as fast as the CPU backend's
    assert [%{device: first, compute: fast} = p1, %{device: second, compute: slow} = p2] = plan.predictions
    assert plan.device == first and Enum.sort([first, second]) == Enum.sort([cpu(), pocl()])
    assert p1.seconds <= p2.seconds and fast > 0 and slow > 0

    models =
      for {{{:kernel, id, [:s64], []}, device}, m} <- Placement.calibrations(), id == k.id, do: {device, m}

    assert length(models) == 2 and Enum.all?(models, fn {_, m} -> m.per_element > 0 end)

    # measured once: a second plan predicts from the same models
    again = Accel.plan(1..500_000, k, devices: [pocl(), cpu()])
    assert Enum.map(again.predictions, & &1.seconds) == Enum.map(plan.predictions, & &1.seconds)

    assert Accel.plan(1..100, k).reason =~ "below 4096"
    t = Accel.Tensor.from_list([1, 2], backend: :cpu)
    assert_raise ArgumentError, ~r/runs where its tensors are/, fn -> Accel.plan(t, k) end
    assert Accel.map(1..10_000, k) == Enum.map(1..10_000, &rem(&1 * &1 + 7, 1_000_003))
  end

  # A first call under 2^17 elements gives its model one size to time, all of whose time counts
  # per element: the model is timed again on the first call 4x larger, up to 2^20 elements.
  test "a kernel's model is timed again on a call 4x larger than the one it was timed on" do
    require Accel
    k = Accel.kernel(fn x -> x * 3 + 1 end)

    timed_at = fn ->
      for {{{:kernel, id, _, _}, _}, m} <- Placement.calibrations(), id == k.id, do: m.timed_at
    end

    plan = fn n -> Accel.plan(Accel.logistic_map(1..n, iterations: 0, as: :binary), k, devices: [cpu()]) end

    small = plan.(5000)
    assert timed_at.() == [5000] and hd(small.predictions).latency == 0.0
    # 4x: the same model
    plan.(20_000)
    assert timed_at.() == [5000]
    # larger: timed again, on two prefixes of this call
    [p] = plan.(200_000).predictions
    assert timed_at.() == [200_000]
    assert p.compute == 200_000 * Placement.calibrations()[p.model].per_element
    plan.(800_000)
    assert timed_at.() == [200_000]
    plan.(4_000_000)
    assert timed_at.() == [1_048_576]
    # timed on 2^20 elements: never again, whatever the size
    plan.(2 ** 23)
    assert timed_at.() == [1_048_576]
  end

  # A shared call asks each device's model about sizes other than its own (the throughput at 2^20
  # elements): the models are timed on prefixes of the call's input, whatever the size asked. A
  # call too small to share runs alone.
  @tag :pocl
  test "a small call shared between devices times its models on its own input" do
    require Accel
    k = Accel.kernel(fn x -> x * 5 - 2 end)

    # below 4096 elements, on the CPU backend, as an :auto call: nothing measured
    bin = Accel.logistic_map(1..10, iterations: 0, as: :binary)
    plan = Accel.plan(bin, k, device: [pocl(), cpu()])
    assert plan.device == cpu() and plan.reason =~ "below 4096"
    assert Accel.map(bin, k, device: [pocl(), cpu()]) == Accel.map(bin, k, device: cpu())
    assert Accel.logistic_map(bin, device: [pocl(), cpu()]) == Accel.logistic_map(bin)
    assert Placement.calibrations() == %{}

    for n <- [5000, 70_000] do
      bin = Accel.logistic_map(1..n, iterations: 0, as: :binary)
      want = for <<x::signed-little-64 <- bin>>, into: <<>>, do: <<x * 5 - 2::signed-little-64>>
      assert Accel.map(bin, k, device: [cpu(), pocl()]) == want
      assert Accel.plan(bin, k, device: [cpu(), pocl()]).device != nil
    end
  end

  test "one planned call in 32 runs on the runner-up, where it is predicted within 2x of the best" do
    dev = fn id -> %Accel.Device{backend: :opencl, id: id, name: "d#{id}"} end
    pred = fn id, s, n -> %{device: dev.(id), seconds: s, n: n, host: 0.0, model: {:x, id}} end

    plan = fn second, n ->
      %Placement{device: dev.(0), seconds: 1.0, predictions: [pred.(0, 1.0, n), pred.(1, second, n)]}
    end

    near = plan.(1.5, 1_000_000)
    followed = for _ <- 1..64, do: Placement.remembered(:near, fn -> near end)
    assert Enum.count(followed, &(&1 == near)) == 62
    assert [explored, explored] = Enum.reject(followed, &(&1 == near))
    assert {explored.device, explored.seconds} == {dev.(1), 1.5}
    assert explored.reason =~ "exploring: :opencl device 1 (d1), the runner-up, takes one call in 32"

    # a runner-up predicted 2.5x slower, a call too small to learn from, a single candidate: never
    for p <- [plan.(2.5, 1_000_000), plan.(1.5, 1_000), %{near | predictions: [pred.(0, 1.0, 1_000_000)]}] do
      assert Enum.all?(1..64, fn _ -> Placement.remembered({:never, p}, fn -> p end) == p end)
    end
  end

  # Planning costs ~100 us on a cold core: an :auto call follows the plan its shape made last,
  # made afresh on the first call and every 16 calls after.
  test ":auto calls of one shape plan afresh once in 16 calls, and reset/0 forgets the plans" do
    cpu = cpu()
    far = %{device: cpu, seconds: 1.0, n: 10, host: 0.0, model: :m}

    made = fn shape ->
      %Placement{device: cpu, seconds: 1.0, predictions: [far], reason: "#{inspect(shape)}"}
    end

    plans = fn shape, calls ->
      for _ <- 1..calls do
        Placement.remembered(shape, fn ->
          send(self(), {:planned, shape})
          made.(shape)
        end)
      end
    end

    planned = fn shape ->
      Stream.repeatedly(fn ->
        receive do
          {:planned, ^shape} -> true
        after
          0 -> false
        end
      end)
      |> Enum.take_while(& &1)
      |> length()
    end

    assert Enum.uniq(plans.(:a, 40)) == [made.(:a)]
    assert planned.(:a) == 3
    # another shape has a plan of its own; the first shape's count goes on
    assert plans.(:b, 1) == [made.(:b)]
    assert planned.(:b) == 1
    plans.(:a, 9)
    assert planned.(:a) == 1
    # remembered plans are not calibrations (nor kept on disk)
    assert Placement.calibrations() == %{}
    Placement.reset()
    plans.(:a, 1)
    assert planned.(:a) == 1
  end

  # Sharing a call between devices has its own correction, per set of devices, learnt from the
  # calls that shared: the shared call's time against its prediction.
  @tag :pocl
  test "a device list shares a call only while the calls that shared show that it pays" do
    devices = [cpu(), pocl()]
    huge = 1..100_000_000
    # predicted from the devices' models alone: at 10^8 elements PoCL's share pays for itself
    assert {^devices, pieces, %Placement{predictions: [p]} = plan} =
             Placement.Sharing.split(huge, devices, as: :binary)

    assert length(pieces) > 2 and p.seconds > 0
    assert Placement.calibrations()[p.model] == %{correction: 1.0, observed: 0}

    # a shared call far faster than predicted: a smaller call shares too, and teaches the model
    Placement.observe(plan, p.host + (p.seconds - p.host) / 1000)
    want = Accel.logistic_map(1..1_000_000, backend: :cpu, as: :binary)
    assert Accel.logistic_map(1..1_000_000, device: devices, as: :binary) == want
    assert Placement.calibrations()[p.model].observed == 2

    # shared calls far slower than predicted: the best device alone, the whole call its one piece
    alone =
      Enum.find_value(1..6, fn _ ->
        case Placement.Sharing.split(huge, devices, as: :binary) do
          {_, _, nil} = alone ->
            alone

          {_, _, %Placement{predictions: [q]} = shared} ->
            Placement.observe(shared, q.host + 100 * (q.seconds - q.host))
            Placement.Table.await_learning()
            nil
        end
      end)

    assert alone == {[cpu()], [{0, 100_000_000}], nil}
    assert Accel.logistic_map(1..1_000_000, device: devices, as: :binary) == want
  end

  # Accel.plan/3 with device: :all or a list explains the sharing decision the call then makes.
  @tag :pocl
  test "plans of shared calls say whether the devices share, in what shares, and why" do
    devices = [cpu(), pocl()]
    bin = Accel.logistic_map(1..2_000_000, iterations: 0, as: :binary, backend: :cpu)
    key = {:co_execution, devices |> Enum.map(&{&1.backend, &1.id, &1.name}) |> Enum.sort()}

    teach = fn seconds ->
      prediction = %{model: key, device: devices, n: 2_000_000, seconds: 1.0, host: 0.0}
      for _ <- 1..4, do: Placement.observe(%Placement{device: devices, predictions: [prediction]}, seconds)
      Placement.Table.await_learning()
    end

    # shared calls 1000x slower than predicted (PoCL on the same cores): sharing does not pay (the
    # sharing model is made by the first plan that weighs sharing)
    _ = Accel.plan(bin, :logistic_map, device: devices)
    teach.(1000.0)
    alone = Accel.plan(bin, :logistic_map, device: devices)
    assert alone.device == cpu() and alone.shares == nil

    assert alone.reason =~
             ~r/^:cpu alone: sharing with :opencl device 0 .* is predicted [0-9.]+ s against [0-9.]+ s alone/

    assert Enum.map(alone.predictions, & &1.device) == [cpu(), pocl()]

    # shared calls 1000x faster than predicted: now it pays, and the plan says how it is cut
    teach.(0.001)

    shared = Accel.plan(bin, :logistic_map, device: devices)
    assert shared.device == devices
    assert [%{device: ^devices, model: ^key, seconds: seconds} | singles] = shared.predictions
    assert seconds == shared.seconds and length(singles) == 2
    assert [%{device: c, elements: a}, %{device: o, elements: b}] = shared.shares
    # four fifths in the owned shares (each rounded down), the rest in pieces
    assert {c, o} == {cpu(), pocl()} and a > b and b > 0 and (a + b) in 1_599_998..1_600_000

    assert shared.reason =~
             ~r/^2000000 elements shared: :cpu takes #{a}, :opencl device 0 .* takes #{b}, and \d+ pieces/

    assert shared.reason =~ "learnt from 8 shared calls"

    # the call does what the plan said: it shares, and the shared call is observed
    assert Accel.logistic_map(bin, device: devices) == Accel.logistic_map(bin, backend: :cpu)
    assert Placement.calibrations()[key].observed == 9

    # a kernel's and an operation's plans name the work (the call taught the set of devices what
    # sharing really costs: taught again to pay)
    teach.(0.001)
    require Accel
    k = Accel.kernel(fn x -> rem(x * x + 7, 1_000_003) end)
    assert Accel.plan(bin, k, device: devices).reason =~ "2000000 elements of this kernel shared"
    f32 = binary_part(bin, 0, 8_000_000)
    assert Accel.plan(f32, :tanh, type: :f32, device: devices).reason =~ "2000000 elements of tanh shared"

    assert Accel.plan(Enum.to_list(1..5_000), :logistic_map, device: devices).reason ==
             ":cpu alone: 5000 elements are too few to share"
  end

  test "plans follow the call's own :device and :backend" do
    assert Accel.plan(1..100, :logistic_map, device: :all).reason =~ "100 elements are below 4096"
    assert Accel.plan(1..100_000, :logistic_map, device: cpu()).reason == ":cpu is the only candidate"

    assert_raise ArgumentError, ~r/backend: :cpu, device: nil names where the call runs/, fn ->
      Accel.plan(1..100_000, :logistic_map, backend: :cpu)
    end

    assert_raise ArgumentError, ~r/give option :devices \(to choose among\) or :device, not both/, fn ->
      Accel.plan(1..100_000, :logistic_map, device: :all, devices: [cpu()])
    end
  end

  # Accel.map/3 over a device list: the kernel's own models size the shares; each piece runs as a
  # chunk does, so flagged elements are recomputed on the BEAM and named by their index in the call.
  @tag :pocl
  test "Accel.map shares a call over a device list, with Enum.map's result" do
    require Accel
    devices = [cpu(), pocl()]
    k = Accel.kernel(fn x -> x * x * x end)
    # cubes past 2^63 at both ends: bignums in the list, recomputed on the BEAM
    input = Enum.to_list(-3_000_000..3_000_000//3)
    want = Enum.map(input, &(&1 * &1 * &1))
    assert Accel.map(input, k, device: devices) == want

    # sharing made to pay, whatever the models and the first call said (the kernel's models time
    # the devices, not the BEAM's recomputing of bignums): the next call shares, and is observed
    key = {:co_execution, devices |> Enum.map(&{&1.backend, &1.id, &1.name}) |> Enum.sort()}
    assert %{observed: taught} = Placement.calibrations()[key]
    prediction = %{model: key, device: devices, n: 1_000_000, seconds: 1.0, host: 0.0}
    # shared calls 1000x faster than predicted: the correction at its floor
    teach = fn ->
      for _ <- 1..3, do: Placement.observe(%Placement{device: devices, predictions: [prediction]}, 0.001)
    end

    shares = fn call ->
      teach.()
      assert Placement.calibrations()[key].correction == 0.1
      before = Placement.calibrations()[key].observed
      result = call.()
      # the shared call was observed: it did share
      assert Placement.calibrations()[key].observed == before + 1
      result
    end

    assert shares.(fn -> Accel.map(input, k, device: devices) end) == want
    assert Placement.calibrations()[key].observed == taught + 4

    small = Enum.to_list(-1_000_000..999_999)
    small_bin = for x <- small, into: <<>>, do: <<x::signed-native-64>>
    cubes = for x <- small, into: <<>>, do: <<x * x * x::signed-native-64>>
    assert shares.(fn -> Accel.map(small_bin, k, device: devices) end) == cubes

    # a binary result must fit :s64: an element that does not is named by its index in the call,
    # wherever the piece that holds it starts (here in the tail, past the owned shares)
    big =
      binary_part(small_bin, 0, 1_990_000 * 8) <>
        <<3_000_000::signed-native-64>> <> binary_part(small_bin, 1_990_001 * 8, 9_999 * 8)

    teach.()

    assert_raise ArgumentError, ~r/^element 1990000: kernel .* gives 27000000000000000000,/, fn ->
      Accel.map(big, k, device: devices)
    end

    assert_raise ArgumentError, ~r/as: :tensor needs one device/, fn ->
      Accel.map(input, k, device: devices, as: :tensor)
    end

    t = Accel.Tensor.from_list([1, 2], backend: :cpu)
    assert_raise ArgumentError, ~r/applies to host inputs/, fn -> Accel.map(t, k, device: :all) end
  end

  # A host with two candidates, as a GPU host has: the list :auto chooses from, set to the CPU
  # backend and another device (PoCL where there is one; both real devices; the list is kept per
  # VM).
  @tag :opencl
  test "with two candidates, :auto runs where the plan says and learns from the call" do
    require Accel
    key = {Accel, :co_execution_devices, :auto}
    saved = :persistent_term.get(key, nil)
    other = pocl() || Enum.find(Accel.devices(), &(&1.backend == :opencl))
    :persistent_term.put(key, [other, cpu()])

    try do
      # the plan the call will make (the models are measured here, so it is the same)
      plan = Accel.plan(1..1_000_000, :logistic_map, as: :binary)
      assert length(plan.predictions) == 2
      want = Accel.logistic_map(1..1_000_000, backend: :cpu, as: :binary)
      assert Accel.logistic_map(1..1_000_000, as: :binary) == want
      observed = fn model -> Placement.calibrations()[model].observed end
      [chosen, other] = Enum.map(plan.predictions, & &1.model)
      assert {observed.(chosen), observed.(other)} == {1, 0}

      k = Accel.kernel(fn x -> x * 3 - 1 end)
      plan = Accel.plan(1..200_000, k)
      assert Accel.map(1..200_000, k) == Enum.map(1..200_000, &(&1 * 3 - 1))
      [chosen, other] = Enum.map(plan.predictions, & &1.model)
      assert {observed.(chosen), observed.(other)} == {1, 0}
    after
      if saved, do: :persistent_term.put(key, saved), else: :persistent_term.erase(key)
    end
  end

  test "backend: :auto gives the result of the device it chose" do
    input = Enum.to_list(1..50_000)
    assert Accel.logistic_map(input) == Accel.logistic_map(input, backend: :cpu)
  end

  test "bad plans name what is wrong" do
    assert_raise ArgumentError,
                 ~r/plans :logistic_map calls and Accel.map\/3 with a kernel or an operation.s name \(:\w+, .*\), got: :sum/,
                 fn ->
                   Accel.plan(1..3, :sum)
                 end

    assert_raise ArgumentError, ~r/:devices must be a non-empty list of Accel.Device/, fn ->
      Accel.plan(1..3, :logistic_map, devices: [])
    end

    assert_raise ArgumentError, ~r/unknown option :speed/, fn -> Accel.plan(1..3, :logistic_map, speed: 1) end
    assert_raise ArgumentError, ~r/expected a list of integers/, fn -> Accel.plan(:x, :logistic_map) end

    assert_raise ArgumentError, ~r/tail after 2 elements is 3/, fn ->
      Accel.plan([1, 2 | 3], :logistic_map)
    end

    assert_raise ArgumentError, ~r/range step must be a non-zero integer/, fn ->
      Accel.plan(%Range{first: 1, last: 5, step: 0}, :logistic_map)
    end
  end
end
