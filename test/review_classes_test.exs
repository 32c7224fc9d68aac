defmodule Accel.ReviewClassesTest do
  # The classes of failure a hostile review found (issue: device work off the schedulers), one
  # describe block each; every case asserts the exception and its message. VM-killing cases run in
  # a child VM (test/vm_survival_test.exs); scheduling under device load in device_queue_test.exs.
  use ExUnit.Case, async: false
  import Bitwise
  alias Accel.Tensor, as: T
  alias Accel.Test.ChildVM

  defp cuda_available?, do: Enum.any?(Accel.backends(), &(&1.name == :cuda and &1.available))

  describe "device: :all refuses and validates as the single-device call does" do
    test "an output that can never fit is refused at once, before any chunk exists" do
      assert_raise Accel.Error, ~r/a result of 9007199254740992 bytes would not fit/, fn ->
        Accel.logistic_map(1..(1 <<< 50), device: :all, as: :binary)
      end

      assert_raise Accel.Error, ~r/a list of 1125899906842624 integers would not fit/, fn ->
        Accel.logistic_map(1..(1 <<< 50), device: :all)
      end
    end

    test "bad elements, improper lists and bad options raise in the caller, naming the element" do
      list = Enum.to_list(1..3_000_000) |> List.replace_at(2_500_000, :x)

      assert_raise ArgumentError, "element at index 2500000 is not an integer: :x", fn ->
        Accel.logistic_map(list, device: :all, chunk_size: 100_000)
      end

      assert_raise ArgumentError, ~r/improper list: the tail after 2 elements is 3/, fn ->
        Accel.logistic_map([1, 2 | 3], device: :all)
      end

      assert_raise ArgumentError, "option :chunk_size must be a positive integer, got: 0", fn ->
        Accel.logistic_map(1..10, device: :all, chunk_size: 0)
      end
    end

    test "a backend with no device is named, with the reason" do
      unless cuda_available?() do
        assert_raise ArgumentError, ~r/^backend :cuda is unavailable: /, fn ->
          Accel.logistic_map(1..10, device: :all, backend: :cuda)
        end
      end
    end

    test "results equal the single-device call for lists, ranges and binaries" do
      bin = Accel.logistic_map(1..250_000, iterations: 0, as: :binary)

      for input <- [Enum.to_list(-5_000..5_000), 1..250_000, 250_000..1//-3, bin] do
        assert Accel.logistic_map(input, device: :all, chunk_size: 7_777) ==
                 Accel.logistic_map(input, backend: :cpu)
      end
    end
  end

  describe "zero-size tensors are handled deliberately" do
    test "to_list of a shape with 2^40 empty lists is refused; to_binary is empty" do
      t = T.iota({1 <<< 40, 0}, backend: :cpu)
      assert T.to_binary(t) == <<>>

      assert_raise Accel.Error, ~r/would build 1099511627776 list cells; use to_binary/, fn ->
        T.to_list(t)
      end

      assert T.to_list(T.iota({3, 0}, backend: :cpu)) == [[], [], []]
    end

    test "reductions, transpose and matmul over empty axes" do
      t = T.iota({1 <<< 40, 0}, backend: :cpu)
      assert %T{shape: {0}} = s = T.sum(t, axis: 0)
      assert T.to_list(s) == []
      assert %T{shape: {0, 1_099_511_627_776}} = tt = T.transpose(t)
      assert T.to_binary(tt) == <<>>
      assert T.to_list(T.sum(T.iota({3, 0}, backend: :cpu), axis: 1)) == [0, 0, 0]
      assert T.to_list(T.sum(T.iota({0}, type: :f64, backend: :cpu))) == 0.0

      assert_raise ArgumentError, "max/2 of an empty axis has no value (shape {3, 0})", fn ->
        T.max(T.iota({3, 0}, backend: :cpu), axis: 1)
      end

      a = T.iota({2, 0}, type: :f64, backend: :cpu)
      b = T.iota({0, 3}, type: :f64, backend: :cpu)
      assert T.to_list(T.matmul(a, b)) == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    end

    test "a dimension must be below 2^63" do
      assert_raise ArgumentError, ~r/not a non-negative integer below 2\^63: 18446744073709551616/, fn ->
        T.iota({1 <<< 64, 0}, backend: :cpu)
      end
    end
  end

  describe "async and await" do
    test "awaiting a task twice, or another process's task, raises instead of hanging" do
      task = Accel.async(fn -> Accel.logistic_map([1, 2, 3], p: 61) end)
      assert Accel.await(task) == [28, 25, 37]
      assert_raise ArgumentError, ~r/already awaited/, fn -> Accel.await(task, 1_000) end

      assert_raise ArgumentError, ~r/not started by Accel.async\/1 in this process/, fn ->
        Accel.await(Task.async(fn -> 1 end))
      end
    end
  end

  describe "one option rule for every function" do
    test "devices that do not exist, given by index or forged, are named" do
      assert_raise ArgumentError, "no :cpu device 2000000: the backend has 1 (see Accel.devices/0)", fn ->
        Accel.logistic_map(1..3, backend: :cpu, device: 2_000_000)
      end

      forged = %Accel.Device{backend: :cpu, id: 7}
      assert_raise ArgumentError, ~r/no :cpu device 7/, fn -> Accel.logistic_map(1..3, device: forged) end
      assert_raise ArgumentError, ~r/no :cpu device 7/, fn -> Accel.memory(forged) end
      assert_raise ArgumentError, ~r/no :cpu device 3/, fn -> T.iota({3}, backend: :cpu, device: 3) end
    end

    @tag :opencl
    test "an OpenCL device index out of range is named" do
      assert_raise ArgumentError, ~r/no :opencl device 99: the backend has \d+/, fn ->
        Accel.logistic_map(1..3, backend: :opencl, device: 99)
      end

      assert_raise ArgumentError, ~r/no :opencl device 99/, fn ->
        Accel.memory(%Accel.Device{backend: :opencl, id: 99})
      end

      assert_raise ArgumentError, ~r/no :opencl device 99/, fn ->
        T.iota({3}, backend: :opencl, device: 99)
      end
    end

    test "budgets: too small is refused, too large is no limit" do
      assert_raise ArgumentError, "option :max_bytes must be an integer of at least 16, got: 1", fn ->
        Accel.logistic_map(1..3, max_bytes: 1)
      end

      assert Accel.logistic_map(1..3, p: 61, max_bytes: 1 <<< 70) == [28, 25, 37]
    end

    test "options that are not keyword lists, and duplicated options, are refused by every function" do
      fun = &Accel.logistic_map/1

      calls = [
        {"Accel.logistic_map/2", fn o -> Accel.logistic_map(1..3, o) end, :as, :list},
        {"Accel.Tensor.iota/2", fn o -> T.iota({3}, o) end, :backend, :cpu},
        {"Accel.Tensor.sum/2", fn o -> T.sum(T.iota({3}, backend: :cpu), o) end, :axis, 0},
        {"Accel.Stream.map_chunks/3", fn o -> Accel.Stream.map_chunks(1..3, fun, o) |> Enum.to_list() end,
         :ordered, true},
        {"Accel.Timing.measure/2", fn o -> Accel.Timing.measure(fn -> :ok end, o) end, :runs, 1}
      ]

      for {name, call, key, value} <- calls do
        assert_raise ArgumentError, "#{name} expects options as a keyword list, got: :fast", fn ->
          call.(:fast)
        end

        assert_raise ArgumentError,
                     "option #{inspect(key)} is given twice to #{name}; give each option once",
                     fn ->
                       call.([{key, value}, {key, value}])
                     end
      end
    end

    test "stream options: timeout, on_timeout and ordered" do
      fun = &Accel.logistic_map/1

      for {opts, message} <- [
            {[timeout: -5],
             "option :timeout must be a non-negative number of milliseconds or :infinity, got: -5"},
            {[on_timeout: :foo], "option :on_timeout must be one of :exit, :kill_task, got: :foo"},
            {[ordered: :maybe], "option :ordered must be true or false, got: :maybe"}
          ] do
        assert_raise ArgumentError, message, fn -> Accel.Stream.map_chunks(1..3, fun, opts) end
      end
    end

    test "from_list names the element that does not fit, at every depth" do
      assert_raise ArgumentError, "from_list/2: element at index [0] (1.0e39) does not fit type :f32", fn ->
        T.from_list([1.0e39], type: :f32, backend: :cpu)
      end

      assert_raise ArgumentError,
                   "from_list/2: element at index [1][0] (1180591620717411303424) does not fit type :s64",
                   fn ->
                     T.from_list([[1], [1 <<< 70]], backend: :cpu)
                   end

      big = 1 <<< 2000

      assert_raise ArgumentError, "from_list/2: element at index [1] (#{big}) does not fit type :f64", fn ->
        T.from_list([1.0, big], backend: :cpu)
      end

      assert_raise ArgumentError, ~r/the list at index \[1\] is improper \(its tail is not \[\]\)/, fn ->
        T.from_list([[1, 2], [3 | 4]], backend: :cpu)
      end

      assert_raise ArgumentError, ~r/the list at the top level is improper/, fn -> T.from_list([1 | 2]) end
    end

    test "mix accel.overhead refuses a bad flag instead of using the default" do
      Mix.shell(Mix.Shell.Process)

      assert_raise Mix.Error, "mix accel.overhead: --elements expects a positive integer, got: abc", fn ->
        Mix.Tasks.Accel.Overhead.run(["--elements", "abc"])
      end

      assert_raise Mix.Error, "mix accel.overhead: option :elements must be a positive integer, got: 0", fn ->
        Mix.Tasks.Accel.Overhead.run(["--elements", "0"])
      end
    after
      Mix.shell(Mix.Shell.IO)
    end

    test "a tensor from another node says so, instead of \"(freed)\"" do
      {:ok, t} = ChildVM.run([], {T, :iota, [{3}, [backend: :cpu]]})
      assert inspect(t) =~ ~r/\(on node accel_peer_\d+@127.0.0.1: tensors cannot cross nodes\)/

      assert_raise ArgumentError, ~r/names no tensor of this VM.*cannot be sent to another node/, fn ->
        T.to_list(t)
      end
    end
  end

  describe "options and inputs, one style of message everywhere (second review)" do
    test "an improper list of options is an ArgumentError naming the function" do
      require Accel
      k = Accel.kernel(fn x -> x + 1 end)
      t = T.from_list([1, 2])

      for {function, call} <- [
            {"Accel.logistic_map/2", fn o -> Accel.logistic_map(1..3, o) end},
            {"Accel.map/3", fn o -> Accel.map([1], k, o) end},
            {"Accel.plan/3", fn o -> Accel.plan(1..3, :logistic_map, o) end},
            {"Accel.Tensor.from_list/2", fn o -> T.from_list([1], o) end},
            {"Accel.Tensor.sum/2", fn o -> T.sum(t, o) end},
            {"Accel.Stream.chunks/2", fn o -> Accel.Stream.chunks(1..3, o) end},
            {"Accel.Stream.map_chunks/3", fn o -> Accel.Stream.map_chunks(1..3, & &1, o) end},
            {"Accel.Dispatch.run/5",
             fn o -> Accel.Dispatch.run([1], [:w], fn _, c -> c end, fn _ -> 1 end, o) end}
          ] do
        message = "#{function} expects options as a keyword list, got: [{:a, 1} | :tail]"
        assert_raise ArgumentError, message, fn -> call.([{:a, 1} | :tail]) end
      end
    end

    test "Accel.Stream.chunks of an improper list or a range of step 0" do
      assert_raise ArgumentError, "expected a proper list, got an improper one: [1, 2 | 3]", fn ->
        Accel.Stream.chunks([1, 2 | 3], chunk_size: 1) |> Enum.to_list()
      end

      assert_raise ArgumentError, "expected a range with a non-zero step, got: 1..3//0", fn ->
        Accel.Stream.chunks(%Range{first: 1, last: 3, step: 0}, chunk_size: 1) |> Enum.to_list()
      end
    end

    test "a 0-d tensor's axes" do
      scalar = T.from_binary(<<5::signed-native-64>>, :s64, {})

      assert_raise ArgumentError, "a 0-d tensor (shape {}) has no axes, got axis: 0", fn ->
        T.sum(scalar, axes: [0])
      end
    end

    test "a forged device is refused by the logistic map" do
      assert_raise ArgumentError, ~r/no :cpu device 99: the backend has/, fn ->
        Accel.logistic_map(1..3, device: %Accel.Device{backend: :cpu, id: 99})
      end
    end
  end
end
