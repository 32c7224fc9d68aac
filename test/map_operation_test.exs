defmodule Accel.MapOperationTest do
  # Accel.map/3 and Accel.plan/3 with the name of one of Accel.Tensor's elementwise operations:
  # the tensor function's own result for every operation of the registry, on every device; host
  # input forms (binaries, lists, ranges made on the device, numbers as scalars); tensors where
  # they are; chunks and shared calls identical to one call; placement by the operation's own
  # models; errors that name what is wrong. Not async: the placement model is one per VM.
  use ExUnit.Case, async: false
  import Bitwise

  import Accel.Test.Devices
  alias Accel.Placement
  alias Accel.Tensor, as: T

  setup do
    Placement.reset()
    on_exit(&Placement.reset/0)
  end

  # Operands every operation takes: no zero divisor, exponents and shifts from 1 to 7, logarithms
  # and roots of positive numbers.
  defp operands(type, n) when type in [:f32, :f64],
    do:
      {encode(for(i <- 0..(n - 1), do: 0.5 + rem(i, 1000) / 7), type),
       encode(for(i <- 0..(n - 1), do: (rem(i, 13) + 1) / 4), type)}

  defp operands(type, n),
    do:
      {encode(for(i <- 0..(n - 1), do: rem(i * 37, 997) + 1), type),
       encode(for(i <- 0..(n - 1), do: rem(i, 7) + 1), type)}

  defp encode(list, type), do: for(x <- list, into: <<>>, do: Accel.Tensor.Codec.encode_one(x, type))

  defp types(:all), do: [:s64, :f32]
  defp types(:int), do: [:s32]
  defp types(:float), do: [:f64]

  # The tensor function's result on `device`, as a binary.
  defp tensor_result(op, family, bins, type, device) do
    tensors = Enum.map(bins, &T.from_binary(&1, type, backend: device.backend, device: device.id))
    args = if family == :unary, do: Enum.take(tensors, 1), else: tensors
    apply(T, op, args) |> T.to_binary()
  end

  test "every operation of the registry gives the tensor function's result, on every device" do
    n = 10_000

    for %{name: op, family: family, types: kinds} <- T.Registry.ops(),
        type <- types(kinds),
        device <- Accel.devices() do
      {a, b} = operands(type, n)
      want = tensor_result(op, family, [a, b], type, device)
      input = if family == :unary, do: a, else: {a, b}
      got = Accel.map(input, op, type: type, device: device)
      assert got == want, "#{op} on #{type} differs on #{device.name}"
      if device.backend == :cpu, do: assert(Accel.map(input, op, type: type) == want)
    end
  end

  test "host input forms: lists, ranges made on the device, numbers as scalars" do
    assert Accel.map({[1, 2, 3], [10, 20, 30]}, :add, backend: :cpu) == [11, 22, 33]
    assert Accel.map({[1.0, 4.0], 2}, :pow) == [1.0, 16.0]
    assert Accel.map({3, [1, 2]}, :subtract) == [2, 1]
    # comparisons give :u8, 1 where true, as Accel.Tensor's do
    assert Accel.map({[1.5, 0.5], 1}, :greater) == [1, 0]

    # a range is generated where the operation runs: no list, no upload
    want = Enum.map(5..100_005//7, &(&1 * 3))
    assert Accel.map({5..100_005//7, 3}, :multiply) == want
    assert Accel.map({5..100_005//7, 3}, :multiply, as: :binary) == encode(want, :s64)
    if pocl(), do: assert(Accel.map({5..100_005//7, 3}, :multiply, device: pocl()) == want)
    assert Accel.map(-3..3, :abs) == [3, 2, 1, 0, 1, 2, 3]
    # iota * step wraps around past 2^63; adding the first element wraps it back, exactly
    wide = -0x8000000000000000..0x7FFFFFFFFFFFFFFF//0x7FFFFFFFFFFFFFFF
    assert Accel.map({wide, 0}, :add) == Enum.to_list(wide)
    assert Accel.map(5..5//(1 <<< 70), :negate) == [-5]

    # s64 wraps, as Accel.Tensor's integers do
    assert Accel.map({[0x7FFFFFFFFFFFFFFF], 1}, :add) == [-0x8000000000000000]

    # binaries of the type given, results binaries unless `as:` says otherwise
    bin = encode([1.0, 2.0, 3.0], :f32)
    assert Accel.map({bin, bin}, :multiply, type: :f32) == encode([1.0, 4.0, 9.0], :f32)
    assert Accel.map({bin, bin}, :multiply, type: :f32, as: :list) == [1.0, 4.0, 9.0]
    t = Accel.map({bin, bin}, :multiply, type: :f32, as: :tensor, backend: :cpu)
    assert %T{shape: {3}, type: :f32, device: {:cpu, 0}} = t
    assert T.to_list(t) == [1.0, 4.0, 9.0]
  end

  test "tensors run where they are, binaries joining them there in their shape" do
    device = pocl() || cpu()
    t = T.from_list([[1, 2], [3, 4]], backend: device.backend, device: device.id)
    out = Accel.map({t, encode([10, 20, 30, 40], :s64)}, :add)
    assert %T{shape: {2, 2}, device: {backend, _}} = out
    assert backend == device.backend
    assert T.to_list(out) == [[11, 22], [33, 44]]
    assert T.to_list(Accel.map(t, :negate)) == [[-1, -2], [-3, -4]]

    assert_raise ArgumentError, ~r/do not apply to tensor inputs/, fn ->
      Accel.map(t, :negate, backend: :cpu)
    end

    assert_raise ArgumentError, ~r/applies to host inputs/, fn -> Accel.map(t, :negate, device: :all) end
    assert_raise ArgumentError, ~r/tensors runs where its tensors are/, fn -> Accel.plan(t, :negate) end
  end

  test "chunks give one call's result" do
    {a, b} = operands(:f32, 100_000)
    want = Accel.map({a, b}, :atan2, type: :f32, backend: :cpu)
    assert Accel.map({a, b}, :atan2, type: :f32, backend: :cpu, chunk_size: 7_777) == want
    list = Enum.to_list(1..50_001)
    assert Accel.map({list, 3}, :remainder, chunk_size: 1000) == Enum.map(list, &rem(&1, 3))
  end

  # The operation's models size the shares, as a kernel's do; a shared call is exact, as every
  # element is computed by the device its piece went to and remainder/2 is exact in IEEE
  # arithmetic (PoCL runs it at about half the CPU backend's speed here: always given a share).
  @tag :pocl
  test "a device list shares an operation at scale, with one device's result" do
    devices = [cpu(), pocl()]
    n = 2_000_000
    {a, _} = operands(:f32, n)
    want = Accel.map({a, 7.5}, :remainder, type: :f32, backend: :cpu)
    assert Accel.map({a, 7.5}, :remainder, type: :f32, device: devices) == want

    # each device's model of the operation is its own, keyed by the operand types
    models =
      for {{{:operation, :remainder, [:f32, :float]}, _device}, _} = m <- Placement.calibrations(), do: m

    assert length(models) == 2

    # sharing made to pay whatever the models said: the next call shares, and is observed
    key = {:co_execution, devices |> Enum.map(&{&1.backend, &1.id, &1.name}) |> Enum.sort()}
    prediction = %{model: key, device: devices, n: n, seconds: 1.0, host: 0.0}
    for _ <- 1..3, do: Placement.observe(%Placement{device: devices, predictions: [prediction]}, 0.001)
    before = Placement.calibrations()[key].observed
    assert Accel.map({a, 7.5}, :remainder, type: :f32, device: devices) == want
    assert Placement.calibrations()[key].observed == before + 1

    ints = Enum.to_list(1..n)

    for _ <- 1..3, do: Placement.observe(%Placement{device: devices, predictions: [prediction]}, 0.001)
    Placement.Table.await_learning()

    assert Accel.map({ints, 1_000}, :quotient, device: devices, as: :binary) ==
             encode(Enum.map(ints, &div(&1, 1_000)), :s64)
  end

  @tag :pocl
  test "plans name the operation, from its models" do
    {a, b} = operands(:f64, 300_000)
    plan = Accel.plan({a, b}, :multiply, type: :f64, devices: [pocl(), cpu()])
    assert plan.device == cpu()
    assert plan.reason =~ ":cpu is predicted fastest for 300000 elements of multiply"
    assert [%{model: {{:operation, :multiply, [:f64, :f64]}, _}} | _] = plan.predictions
    # a number's kind is part of the key: an integer and a float give different result types
    plan = Accel.plan({a, 2}, :multiply, type: :f64, devices: [cpu(), pocl()])
    assert hd(plan.predictions).model |> elem(0) == {:operation, :multiply, [:f64, :integer]}

    small = Accel.plan({[1, 2], [3, 4]}, :add)
    assert small.device == cpu() and small.reason =~ "below 4096"
  end

  test "bad calls name what is wrong" do
    assert_raise ArgumentError, ~r/operation add takes 2 input\(s\), got 1/, fn -> Accel.map([1], :add) end

    assert_raise ArgumentError, ~r/operation exp takes 1 input\(s\), got 2/, fn ->
      Accel.map({[1.0], [1.0]}, :exp)
    end

    assert_raise ArgumentError, ~r/operation add: at least one input must be a list/, fn ->
      Accel.map({1, 2}, :add)
    end

    assert_raise ArgumentError, ~r/input 1 has 1 elements and input 0 has 2/, fn ->
      Accel.map({[1, 2], [1]}, :add)
    end

    assert_raise ArgumentError, ~r/exp\/1 needs a float tensor .* got :s64/, fn -> Accel.map([1, 2], :exp) end

    assert_raise ArgumentError, ~r/input 0: a binary of 3 bytes does not hold whole :f32/, fn ->
      Accel.map(<<1, 2, 3>>, :abs, type: :f32)
    end

    assert_raise ArgumentError,
                 ~r/input 1: expected a list, a Range, a binary or an Accel.Tensor, got: :x/,
                 fn -> Accel.map({[1], :x}, :add) end

    assert_raise ArgumentError, ~r/integer division by zero in Accel.Tensor.quotient\/2/, fn ->
      Accel.map({[1, 2], 0}, :quotient)
    end

    assert_raise ArgumentError,
                 ~r/or the name of an elementwise operation of Accel.Tensor \(.*:add.*\), got: :sum/,
                 fn -> Accel.map([1], :sum) end

    assert_raise ArgumentError, ~r/option :type must be one of/, fn -> Accel.map([1], :abs, type: :f16) end

    assert_raise ArgumentError, ~r/element 1 is 2, but the list starts with a float/, fn ->
      Accel.map([1.0, 2], :abs)
    end
  end
end
