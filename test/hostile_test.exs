defmodule Accel.HostileTest do
  # Bad input at every position of every public function, all in one VM: each must raise the
  # documented exception with a message that says what was wrong, and the VM must survive them all.
  # (BEAM floats cannot be NaN or infinite, so those cannot reach Accel.)
  use ExUnit.Case, async: false
  import Bitwise
  require Accel

  @big 1 <<< 64
  @cpu_device %Accel.Device{backend: :cpu, id: 0}

  defp cases do
    lm = &Accel.logistic_map/2
    odd = binary_part(<<0>> <> :binary.copy(<<1>>, 16), 1, 7)
    deep = Enum.reduce(1..10_000, [1], fn _, acc -> [acc] end)

    [
      # input kind
      {"atom input", fn -> lm.(:foo, []) end, ArgumentError,
       ~r/expected a list of integers, a Range or a binary/},
      {"integer input", fn -> lm.(42, []) end, ArgumentError, ~r/got: 42/},
      {"float input", fn -> lm.(1.0, []) end, ArgumentError, ~r/got: 1.0/},
      {"map input", fn -> lm.(%{a: 1}, []) end, ArgumentError, ~r/got: %\{a: 1\}/},
      {"tuple input", fn -> lm.({1, 2}, []) end, ArgumentError, ~r/got: \{1, 2\}/},
      {"pid input", fn -> lm.(self(), []) end, ArgumentError, ~r/got: #PID/},
      {"reference input", fn -> lm.(make_ref(), []) end, ArgumentError, ~r/got: #Reference/},
      {"function input", fn -> lm.(fn -> 1 end, []) end, ArgumentError, ~r/got: #Function/},
      {"bitstring", fn -> lm.(<<1::3>>, []) end, ArgumentError, ~r/bitstring of 3 bits/},
      {"9-byte binary", fn -> lm.(:binary.copy(<<1>>, 9), []) end, ArgumentError,
       ~r/9 bytes, is not a multiple of 8/},
      {"1-byte binary", fn -> lm.(<<1>>, []) end, ArgumentError, ~r/1 bytes, is not a multiple of 8/},
      {"7-byte sub-binary at an odd offset", fn -> lm.(odd, []) end, ArgumentError, ~r/7 bytes/},
      # list elements
      {"float element", fn -> lm.([1, 2.5], []) end, ArgumentError, ~r/index 1 is not an integer: 2.5/},
      {"atom element", fn -> lm.([1, :a], []) end, ArgumentError, ~r/index 1 is not an integer: :a/},
      {"nested list element", fn -> lm.([[1]], []) end, ArgumentError, ~r/index 0 is not an integer: \[1\]/},
      {"10,000-deep nested list", fn -> lm.(deep, []) end, ArgumentError, ~r/index 0 is not an integer/},
      {"improper list", fn -> lm.([1 | 2], []) end, ArgumentError, ~r/tail after 1 elements is 2/},
      {"long improper list", fn -> lm.([1, 2, 3 | :tail], []) end, ArgumentError,
       ~r/tail after 3 elements is :tail/},
      {"bignum element", fn -> lm.([@big], []) end, ArgumentError,
       ~r/index 0 is outside the signed 64-bit range/},
      {"negative bignum element", fn -> lm.([0, -(1 <<< 63) - 1], []) end, ArgumentError,
       ~r/index 1 is outside/},
      {"string element", fn -> lm.(["1"], []) end, ArgumentError, ~r/index 0 is not an integer: <<"1">>/},
      {"tuple element", fn -> lm.([{1}], []) end, ArgumentError, ~r/index 0 is not an integer: \{1\}/},
      {"nil element", fn -> lm.([nil], []) end, ArgumentError, ~r/index 0 is not an integer: nil/},
      # ranges
      {"range with a bignum end", fn -> lm.(0..@big, []) end, ArgumentError,
       ~r/range bounds must be integers/},
      {"range with a bignum start", fn -> lm.(-@big..0, []) end, ArgumentError,
       ~r/range bounds must be integers/},
      {"range with step 0", fn -> lm.(%Range{first: 1, last: 5, step: 0}, []) end, ArgumentError,
       ~r/non-zero integer/},
      {"range with a float step", fn -> lm.(%Range{first: 1, last: 5, step: 1.5}, []) end, ArgumentError,
       ~r/range step/},
      {"range with an atom bound", fn -> lm.(%Range{first: :a, last: 5, step: 1}, []) end, ArgumentError,
       ~r/range bounds/},
      {"map posing as a range", fn -> lm.(%{__struct__: Range}, []) end, ArgumentError, ~r/range bounds/},
      {"the whole int64 range", fn -> lm.(-(1 <<< 63)..((1 <<< 63) - 1), as: :binary) end, Accel.Error,
       ~r/2\^64 elements is too large/},
      {"range of 2^62 elements", fn -> lm.(1..(1 <<< 62), as: :binary) end, Accel.Error,
       ~r/too large to process/},
      {"range of 2^40 elements as a list", fn -> lm.(1..(1 <<< 40), []) end, Accel.Error,
       ~r/would not fit in memory/},
      {"range of 2^55 elements as a binary", fn -> lm.(1..(1 <<< 55), as: :binary) end, Accel.Error,
       ~r/would not fit in this machine's/},
      # options
      {"p: 0", fn -> lm.([1], p: 0) end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: 0/},
      {"p: -1", fn -> lm.([1], p: -1) end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: -1/},
      {"p: 2^63", fn -> lm.([1], p: 1 <<< 63) end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: 9223372036854775808/},
      {"p: 1.5", fn -> lm.([1], p: 1.5) end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: 1.5/},
      {"p: nil", fn -> lm.([1], p: nil) end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: nil/},
      {"p: \"7\"", fn -> lm.([1], p: "7") end, ArgumentError,
       ~r/option :p must be a positive integer below 2\^63, got: "7"/},
      {"mu: 2^64", fn -> lm.([1], mu: @big) end, ArgumentError,
       ~r/mu must be an integer in the signed 64-bit range/},
      {"mu: :x", fn -> lm.([1], mu: :x) end, ArgumentError,
       ~r/option :mu must be an integer in the signed 64-bit range, got: :x/},
      {"iterations: -1", fn -> lm.([1], iterations: -1) end, ArgumentError,
       ~r/option :iterations must be a non-negative integer below 2\^63, got: -1/},
      {"iterations: 2^63", fn -> lm.([1], iterations: 1 <<< 63) end, ArgumentError,
       ~r/option :iterations must be a non-negative integer below 2\^63, got: 9223372036854775808/},
      {"iterations: 0.5", fn -> lm.([1], iterations: 0.5) end, ArgumentError,
       ~r/option :iterations must be a non-negative integer below 2\^63, got: 0.5/},
      {"unknown option", fn -> lm.([1], foo: 1) end, ArgumentError, ~r/unknown option :foo/},
      {"options not a keyword list", fn -> lm.([1], [:p]) end, ArgumentError,
       ~r/expects options as a keyword list/},
      {"options as a map", fn -> lm.([1], %{p: 1}) end, ArgumentError, ~r/expects options as a keyword list/},
      {"options as an atom", fn -> lm.([1], :nope) end, ArgumentError, ~r/expects options as a keyword list/},
      {"backend: :gpu", fn -> lm.([1], backend: :gpu) end, ArgumentError,
       ~r/option :backend must be one of :auto, :cpu, :opencl, :cuda, got: :gpu/},
      {"backend: \"cpu\"", fn -> lm.([1], backend: "cpu") end, ArgumentError,
       ~r/option :backend must be one of .*, got: "cpu"/},
      {"backend: nil", fn -> lm.([1], backend: nil) end, ArgumentError,
       ~r/option :backend must be one of .*, got: nil/},
      {"as: :tuple", fn -> lm.([1], as: :tuple) end, ArgumentError,
       ~r/option :as must be one of :list, :binary, got: :tuple/},
      {"device: -1", fn -> lm.([1], backend: :cpu, device: -1) end, ArgumentError,
       ~r/option :device must be/},
      {"device: \"0\"", fn -> lm.([1], backend: :cpu, device: "0") end, ArgumentError,
       ~r/option :device must be/},
      {"device index with backend :auto", fn -> lm.([1], device: 0) end, ArgumentError, ~r/needs a :backend/},
      {"CPU device with backend :opencl", fn -> lm.([1], backend: :opencl, device: @cpu_device) end,
       ArgumentError, ~r/is a :cpu device, but :backend is :opencl/},
      {"device: 99", fn -> lm.([1], backend: :cpu, device: 99) end, ArgumentError,
       ~r/no :cpu device 99: the backend has 1/},
      {"device: huge", fn -> lm.([1], backend: :cpu, device: @big) end, ArgumentError,
       ~r/device must be an integer in the signed/},
      {"chunk_size: 0", fn -> lm.([1], chunk_size: 0) end, ArgumentError,
       ~r/option :chunk_size must be a positive integer/},
      {"chunk_size: -5", fn -> lm.([1], chunk_size: -5) end, ArgumentError,
       ~r/chunk_size must be a positive integer, got: -5/},
      {"chunk_size: 1.5", fn -> lm.([1], chunk_size: 1.5) end, ArgumentError,
       ~r/chunk_size must be a positive integer, got: 1.5/},
      {"chunk_size: 2^64", fn -> lm.([1], chunk_size: @big) end, ArgumentError,
       ~r/chunk_size must be an integer in the signed/},
      {"max_bytes: 0", fn -> lm.([1], max_bytes: 0) end, ArgumentError,
       ~r/option :max_bytes must be an integer of at least 16/},
      {"max_bytes: :big", fn -> lm.([1], max_bytes: :big) end, ArgumentError,
       ~r/option :max_bytes must be an integer of at least 16/},
      # crossings
      {"list_round_trip of a range", fn -> Accel.Crossing.list_round_trip(1..2) end, ArgumentError,
       ~r/expected a list/},
      {"list_round_trip of an improper list", fn -> Accel.Crossing.list_round_trip([1 | 2]) end,
       ArgumentError, ~r/improper list/},
      {"list_round_trip of floats", fn -> Accel.Crossing.list_round_trip([1.0]) end, ArgumentError,
       ~r/not an integer: 1.0/},
      {"range_to_list of a list", fn -> Accel.Crossing.range_to_list([1]) end, ArgumentError,
       ~r/expected a Range/},
      {"range_to_list of a bignum range",
       fn -> Accel.Crossing.range_to_list(%Range{first: 1, last: @big, step: 1}) end, ArgumentError,
       ~r/range bounds/},
      {"range_to_list of 2^40 elements", fn -> Accel.Crossing.range_to_list(1..(1 <<< 40)) end, Accel.Error,
       ~r/would not fit/},
      {"binary_round_trip of 1 byte", fn -> Accel.Crossing.binary_round_trip(<<1>>) end, ArgumentError,
       ~r/not a multiple of 8/},
      {"binary_round_trip of an atom", fn -> Accel.Crossing.binary_round_trip(:x) end, ArgumentError,
       ~r/expected a binary/},
      # memory, timing, async
      {"memory(:gpu)", fn -> Accel.memory(:gpu) end, ArgumentError,
       ~r/memory\/1 expects an Accel.Device or a backend name/},
      {"memory(\"cpu\")", fn -> Accel.memory("cpu") end, ArgumentError,
       ~r/memory\/1 expects an Accel.Device or a backend name/},
      {"Timing.measure of an atom", fn -> Accel.Timing.measure(:x) end, ArgumentError,
       ~r/expects a function of no arguments/},
      {"Timing.measure with runs: 0", fn -> Accel.Timing.measure(fn -> :ok end, runs: 0) end, ArgumentError,
       ~r/option :runs must be a positive integer, got: 0/},
      {"Timing.measure with warmup: -1", fn -> Accel.Timing.measure(fn -> :ok end, warmup: -1) end,
       ArgumentError, ~r/option :warmup must be a non-negative integer, got: -1/},
      {"Timing.measure with an unknown option", fn -> Accel.Timing.measure(fn -> :ok end, nope: 1) end,
       ArgumentError, ~r/unknown option :nope for Accel.Timing.measure\/2/},
      {"Crossing.measure with elements: 0", fn -> Accel.Crossing.measure(elements: 0) end, ArgumentError,
       ~r/option :elements must be a positive integer, got: 0/},
      {"Crossing.measure with options as an atom", fn -> Accel.Crossing.measure(:x) end, ArgumentError,
       ~r/expects options as a keyword list/},
      {"await with a bad timeout", fn -> Accel.await(Accel.async(fn -> 1 end), :soon) end, ArgumentError,
       ~r/await\/2 expects a timeout/},
      {"Cluster with timeout: :soon",
       fn -> Accel.Cluster.map_chunks([node()], 1..3, & &1, timeout: :soon) end, ArgumentError,
       ~r/option :timeout must be a number of milliseconds of at least 1, or :infinity, got: :soon/},
      {"async of an atom", fn -> Accel.async(:x) end, ArgumentError, ~r/async\/1 expects a function/},
      {"async of a 1-arity function", fn -> Accel.async(fn x -> x end) end, ArgumentError,
       ~r/async\/1 expects a function/},
      {"await of a pid", fn -> Accel.await(self()) end, ArgumentError, ~r/await\/2 expects a task/},
      # streams, dispatch, cluster
      {"chunks with chunk_size: 0", fn -> Accel.Stream.chunks(1..3, chunk_size: 0) end, ArgumentError,
       ~r/chunk_size/},
      {"chunks of an atom", fn -> Accel.Stream.chunks(:nope) end, ArgumentError,
       ~r/expected an enumerable or a binary/},
      {"chunks of a 3-byte binary", fn -> Accel.Stream.chunks(<<1, 2, 3>>) end, ArgumentError,
       ~r/not a multiple of 8/},
      {"map_chunks with an atom for fun", fn -> Accel.Stream.map_chunks(1..3, :f) end, ArgumentError,
       ~r/expects a 1-arity function/},
      {"map_chunks with emit: :all", fn -> Accel.Stream.map_chunks(1..3, & &1, emit: :all) end, ArgumentError,
       ~r/option :emit/},
      {"map_chunks with an unknown option", fn -> Accel.Stream.map_chunks(1..3, & &1, x: 1) end,
       ArgumentError, ~r/unknown option :x/},
      {"map_chunks with max_concurrency: 0",
       fn -> Accel.Stream.map_chunks(1..3, & &1, max_concurrency: 0) |> Enum.to_list() end, ArgumentError,
       ~r/max_concurrency/},
      {"Dispatch.run with no workers", fn -> Accel.Dispatch.run([1], [], fn x, _ -> x end) end, ArgumentError,
       ~r/non-empty list of workers/},
      {"Dispatch.run with a 1-arity fun", fn -> Accel.Dispatch.run([1], [:a], & &1) end, ArgumentError,
       ~r/2-arity function/},
      {"Cluster with no nodes", fn -> Accel.Cluster.map_chunks([], 1..3, & &1) end, ArgumentError,
       ~r/non-empty list of node names/},
      {"Cluster with a non-list of nodes", fn -> Accel.Cluster.map_chunks(:a@b, 1..3, & &1) end,
       ArgumentError, ~r/list of node names/},
      {"Cluster with a 2-arity fun",
       fn -> Accel.Cluster.map_chunks([node()], 1..3, fn a, b -> {a, b} end) end, ArgumentError,
       ~r/1-arity function or \{module, function, args\}/},
      {"Cluster with window: 0", fn -> Accel.Cluster.map_chunks([node()], 1..3, & &1, window: 0) end,
       ArgumentError, ~r/chunk_size|positive/}
    ] ++ tensor_cases()
  end

  # Tensors: freed ones, ones on another device, sizes whose byte count overflows, forged structs
  # and raw NIF calls with arguments the public API never passes.
  defp tensor_cases do
    alias Accel.Tensor, as: T
    freed = T.iota({4}, backend: :cpu)
    T.free(freed)
    t = T.iota({2, 3}, backend: :cpu)
    forged = %{t | ref: make_ref()}
    nif = Accel.NIF

    [
      {"tensor: use after free", fn -> T.to_list(freed) end, ArgumentError, ~r/was freed/},
      {"tensor: a list where a tensor goes", fn -> T.exp([1.0]) end, ArgumentError,
       ~r/Accel.Tensor.exp\/1 expects an Accel.Tensor, got: \[1.0\]/},
      {"tensor: sum of a number", fn -> T.sum(3) end, ArgumentError, ~r/sum\/2 expects an Accel.Tensor/},
      {"tensor: matmul with a map", fn -> T.matmul(t, %{}) end, ArgumentError,
       ~r/matmul\/2 expects an Accel.Tensor, got: %\{\}/},
      {"tensor: free twice, then add", fn -> T.free(freed) && T.add(freed, 1) end, ArgumentError,
       ~r/was freed/},
      {"tensor: freed operand of matmul",
       fn -> T.matmul(T.reshape(freed, {2, 2}), T.reshape(freed, {2, 2})) end, ArgumentError, ~r/was freed/},
      {"tensor: forged ref", fn -> T.to_binary(forged) end, ArgumentError, ~r/expected an Accel.Tensor/},
      {"tensor: shape overflowing 2^64 elements", fn -> T.iota({1 <<< 40, 1 <<< 40}, backend: :cpu) end,
       ArgumentError, ~r/count must be an integer in the signed 64-bit range|exceed 2\^48 bytes/},
      {"tensor: 2^62 s64 elements", fn -> T.iota({1 <<< 62}, backend: :cpu) end, ArgumentError,
       ~r/would exceed 2\^48 bytes/},
      {"tensor: negative dimension", fn -> T.iota({-1}, backend: :cpu) end, ArgumentError,
       ~r/not a non-negative integer/},
      {"tensor: shape not a tuple", fn -> T.iota([3], backend: :cpu) end, ArgumentError,
       ~r/shape must be a tuple/},
      {"tensor: unknown type", fn -> T.iota({3}, type: :f16, backend: :cpu) end, ArgumentError,
       ~r/type must be one of/},
      {"tensor: binary too short for the shape", fn -> T.from_binary(<<1, 2, 3>>, :s64, {1}) end,
       ArgumentError, ~r/does not hold shape/},
      {"tensor: ragged list", fn -> T.from_list([[1, 2], [3]]) end, ArgumentError,
       ~r/index \[1\] should have 2/},
      {"tensor: non-number element", fn -> T.from_list([1, :a]) end, ArgumentError,
       ~r/index \[1\] is not a number/},
      {"tensor: element out of range for u8", fn -> T.from_list([256], type: :u8) end, ArgumentError,
       ~r/does not fit type :u8/},
      {"tensor: forged struct claiming another device",
       fn -> T.add(t, %{t | device: {:opencl, 0}, ref: make_ref()}) end, ArgumentError,
       ~r/expected an Accel.Tensor/},
      {"tensor: bad axis", fn -> T.sum(t, axis: 2) end, ArgumentError, ~r/axis must be an integer in -2..1/},
      {"tensor: unknown option", fn -> T.sum(t, dims: 1) end, ArgumentError, ~r/unknown option :dims/},
      {"tensor: transfer to nowhere", fn -> T.transfer(t, :gpu) end, ArgumentError, ~r/transfer\/2 expects/},
      {"tensor NIF: reduce layout larger than the tensor",
       fn -> Accel.Job.call(fn ref -> nif.tensor_reduce(:sum, t.ref, 1 <<< 40, 1 <<< 40, 1, ref) end) end,
       ArgumentError, ~r/does not match the tensor.s 6|overflows/},
      {"tensor NIF: transpose of the wrong size",
       fn -> Accel.Job.call(fn ref -> nif.tensor_transpose(t.ref, 100, 100, ref) end) end, ArgumentError,
       ~r/does not match/},
      {"tensor NIF: matmul claiming more elements",
       fn -> Accel.Job.call(fn ref -> nif.tensor_matmul(t.ref, t.ref, 1, 1000, 1000, 1000, 0, ref) end) end,
       ArgumentError, ~r/BLAS|does not match/},
      {"tensor NIF: matmul of a batch whose size overflows",
       fn ->
         Accel.Job.call(fn ref -> nif.tensor_matmul(t.ref, t.ref, 1 <<< 40, 1 <<< 40, 1, 1, 0, ref) end)
       end, ArgumentError, ~r/overflows|does not match/},
      {"tensor NIF: matmul with transposes beyond both operands",
       fn -> Accel.Job.call(fn ref -> nif.tensor_matmul(t.ref, t.ref, 1, 2, 3, 1, 4, ref) end) end,
       ArgumentError, ~r/transposes must be 0 to 3/},
      {"tensor NIF: matmul of transposed integers",
       fn -> Accel.Job.call(fn ref -> nif.tensor_matmul(t.ref, t.ref, 1, 2, 3, 2, 1, ref) end) end,
       ArgumentError, ~r/transposed matmul operands|does not match/},
      {"tensor NIF: shifted conv of integers",
       fn -> Accel.Job.call(&nif.tensor_conv_shifted(t.ref, t.ref, [1, 1, 1, 6], [0], [6], [1], &1)) end,
       ArgumentError, ~r/takes floats or complex numbers on the cpu backend/},
      {"tensor NIF: shifted conv whose kernel position reads past the plane",
       fn ->
         x = T.from_binary(<<0::size(6 * 32)>>, :f32, {6}, backend: :cpu)

         Accel.Job.call(
           &nif.tensor_conv_shifted(x.ref, x.ref, [1, 1, 6, 6], [0, 1 <<< 40, 2, 3, 4, 5], [1], [1], &1)
         )
       end, ArgumentError, ~r/offset 1099511627776 reads past a plane of 6 elements/},
      {"tensor NIF: shifted conv of output positions outside the plane",
       fn ->
         x = T.from_binary(<<0::size(6 * 32)>>, :f32, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_conv_shifted(x.ref, x.ref, [1, 1, 6, 6], [0], [3, 3], [3, 1], &1))
       end, ArgumentError, ~r/output positions leave its plane/},
      {"tensor NIF: shifted conv whose plane strides would wrap around",
       fn ->
         x = T.from_binary(<<0::size(6 * 32)>>, :f32, {6}, backend: :cpu)

         Accel.Job.call(
           &nif.tensor_conv_shifted(x.ref, x.ref, [1, 1, 1, 6], [0], [2, 2], [(1 <<< 64) - 1, 1], &1)
         )
       end, ArgumentError, ~r/output positions leave its plane|a dimension/},
      {"tensor NIF: shifted conv claiming more elements",
       fn ->
         x = T.from_binary(<<0::size(6 * 32)>>, :f32, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_conv_shifted(x.ref, x.ref, [1 <<< 40, 1 <<< 40, 1, 6], [0], [6], [1], &1))
       end, ArgumentError, ~r/overflows|do not match tensors of 6 and 6 elements/},
      {"tensor NIF: shifted conv with more than 64 kernel positions",
       fn ->
         x = T.from_binary(<<0::size(6 * 32)>>, :f32, {6}, backend: :cpu)

         Accel.Job.call(
           &nif.tensor_conv_shifted(x.ref, x.ref, [1, 1, 1, 6], List.duplicate(0, 65), [1], [1], &1)
         )
       end, ArgumentError, ~r/at most 64/},
      {"tensor NIF: negative count",
       fn -> Accel.Job.call(fn ref -> nif.tensor_iota(:s64, -1, :cpu, 0, ref) end) end, ArgumentError,
       ~r/count must be non-negative/},
      {"complex NIF: an unknown operation",
       fn -> Accel.Job.call(&nif.tensor_complex(:pow, t.ref, t.ref, [2, 3], [2, 3], &1)) end, ArgumentError,
       ~r/unknown complex operation: :pow/},
      {"complex NIF: real tensors",
       fn -> Accel.Job.call(&nif.tensor_complex(:multiply, t.ref, t.ref, [2, 3], [2, 3], &1)) end,
       ArgumentError, ~r/complex arithmetic takes :c64 or :c128 tensors, got :s64/},
      {"complex NIF: a number operand",
       fn -> Accel.Job.call(&nif.tensor_complex(:divide, t.ref, 2.0, [2, 3], [], &1)) end, ArgumentError,
       ~r/complex arithmetic takes two tensors/},
      {"complex NIF: a real operand not of the parts' type",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         x = T.from_binary(<<0::size(6 * 64)>>, :f64, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex(:add, z.ref, x.ref, [6], [6], &1))
       end, ArgumentError,
       ~r/complex arithmetic on :c64 takes operands of that type or :f32, got :f64 as operand 2/},
      {"complex NIF: two complex types",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         w = T.from_binary(<<0::size(6 * 128)>>, :c128, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex(:subtract, w.ref, z.ref, [6], [6], &1))
       end, ArgumentError, ~r/on :c128 takes operands of that type or :f64, got :c64 as operand 2/},
      {"complex NIF: an integer made complex",
       fn -> Accel.Job.call(&nif.tensor_complex(:convert, t.ref, t.ref, [2, 3], [2, 3], &1)) end,
       ArgumentError, ~r/a complex conversion takes an :f32 or :f64 tensor, got :s64/},
      {"complex NIF: shapes that do not broadcast",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex(:multiply, z.ref, z.ref, [2, 3], [3, 2], &1))
       end, ArgumentError, ~r/do not broadcast/},
      {"complex NIF: a shape that is not the tensor's",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex(:multiply, z.ref, z.ref, [7], [6], &1))
       end, ArgumentError, ~r/does not match the tensor's 6 elements/},
      {"complex NIF: the magnitude of a real tensor",
       fn -> Accel.Job.call(&nif.tensor_complex_abs(t.ref, &1)) end, ArgumentError,
       ~r/a complex magnitude takes :c64 or :c128 tensors/},
      {"complex NIF: a function of a real tensor",
       fn -> Accel.Job.call(&nif.tensor_complex_fn(:exp, t.ref, 0, &1)) end, ArgumentError,
       ~r/a complex function takes :c64 or :c128 tensors, got :s64/},
      {"complex NIF: an operation that is no complex function",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex_fn(:floor, z.ref, 0, &1))
       end, ArgumentError, ~r/no complex function floor/},
      {"complex NIF: an unknown function",
       fn -> Accel.Job.call(&nif.tensor_complex_fn(:cube, t.ref, 0, &1)) end, ArgumentError,
       ~r/unknown operation: :cube/},
      {"complex NIF: a library variant out of range",
       fn ->
         z = T.from_binary(<<0::size(6 * 64)>>, :c64, {6}, backend: :cpu)
         Accel.Job.call(&nif.tensor_complex_fn(:exp, z.ref, 4, &1))
       end, ArgumentError, ~r/variant is 0..3, got 4/},
      {"complex NIF: a variant that is no integer",
       fn -> Accel.Job.call(&nif.tensor_complex_fn(:exp, t.ref, :signs, &1)) end, ArgumentError,
       ~r/variant is an integer 0..3, got :signs/},
      {"tensor NIF: unknown op", fn -> Accel.Job.call(fn ref -> nif.tensor_unary(:cube, t.ref, ref) end) end,
       ArgumentError, ~r/unknown operation: :cube/},
      {"tensor NIF: bignum scalar",
       fn -> Accel.Job.call(fn ref -> nif.tensor_binary(:add, t.ref, 1 <<< 70, [2, 3], [], ref) end) end,
       ArgumentError, ~r/or a number in the signed 64-bit range/},
      {"int64 NIF: list of a non-binary", fn -> nif.int64_list(:foo) end, ArgumentError,
       ~r/expected a binary, got: :foo/},
      {"int64 NIF: list of 3 bytes", fn -> nif.int64_list(<<1, 2, 3>>) end, ArgumentError,
       ~r/3 bytes, is not a multiple of 8/},
      {"int64 NIF: binary of a bad element", fn -> nif.int64_binary([1, :x]) end, ArgumentError,
       ~r/element at index 1 is not an integer: :x/},
      {"int64 NIF: binary of an improper list", fn -> nif.int64_binary([1 | 2]) end, ArgumentError,
       ~r/improper list/},
      {"int64 NIF: output count of a list", fn -> nif.int64_output_count([1], :list) end, ArgumentError,
       ~r/expected a binary or a Range/},
      {"host_owned NIF with an atom", fn -> nif.host_owned(:x) end, ArgumentError,
       ~r/expected a binary, got: :x/},
      # Accel.map/3 with an operation's name
      {"operation: scalar out of the type's range",
       fn -> Accel.map({<<1::32-native>>, 1 <<< 40}, :add, type: :s32) end, ArgumentError,
       ~r/scalar 1099511627776 is out of range for type :s32/},
      {"operation: bignum scalar", fn -> Accel.map({[1], @big}, :add) end, ArgumentError,
       ~r/in the signed 64-bit range, got: 18446744073709551616/},
      {"operation: improper list", fn -> Accel.map({[1 | 2], [1]}, :add) end, ArgumentError,
       ~r/input 0: improper list/},
      {"operation: nested tuple", fn -> Accel.map({{[1], [2]}, [1]}, :add) end, ArgumentError,
       ~r/input 0: expected a list, a Range, a binary or an Accel.Tensor, got: \{\[1\], \[2\]\}/},
      {"operation: a string for a name", fn -> Accel.map([1], "add") end, ArgumentError,
       ~r/or the name of an elementwise operation of Accel.Tensor .*got: "add"/},
      {"kernel: a range past the signed 64-bit range (came back wrapped around)",
       fn -> Accel.map(((1 <<< 63) - 2)..((1 <<< 63) + 1), Accel.kernel(fn x -> x end), backend: :cpu) end,
       ArgumentError,
       ~r/input 0: 9223372036854775806..9223372036854775809 holds integers outside the signed 64-bit range/},
      {"operation: a range below the signed 64-bit range",
       fn -> Accel.map((-(1 <<< 63) - 1)..0, :negate, backend: :cpu) end, ArgumentError,
       ~r/\(-9223372036854775809 to 0\): a range's elements are :s64/},
      {"operation: a hand-made range of step 0",
       fn -> Accel.map(%Range{first: 1, last: 2, step: 0}, :negate) end, ArgumentError,
       ~r/input 0: a range of integers with a non-zero step, got: 1..2\/\/0/},
      {"operation: a range past 2^48 bytes", fn -> Accel.map(0..(1 <<< 62), :negate, backend: :cpu) end,
       ArgumentError, ~r/would exceed 2\^48 bytes/},
      {"int64 NIF: output count, bad as", fn -> nif.int64_output_count(1..3, :foo) end, ArgumentError,
       ~r/as must be :list or :binary, got: :foo/},
      {"tensor NIF: pid as operand",
       fn -> Accel.Job.call(fn ref -> nif.tensor_binary(:add, self(), t.ref, [], [2, 3], ref) end) end,
       ArgumentError, ~r/expected an Accel.Tensor or a number/},
      {"tensor NIF: shape that lies about the count",
       fn -> Accel.Job.call(fn ref -> nif.tensor_binary(:add, t.ref, t.ref, [7, 7], [2, 3], ref) end) end,
       ArgumentError, ~r/a shape of \{7, 7\} does not match the tensor's 6 elements/},
      {"tensor NIF: shape of a non-integer",
       fn -> Accel.Job.call(fn ref -> nif.tensor_compare(:less, t.ref, 1, [2, :x], [], ref) end) end,
       ArgumentError, ~r/a dimension must be an integer/},
      {"tensor NIF: shape of 65 dimensions",
       fn ->
         Accel.Job.call(fn ref -> nif.tensor_binary(:add, t.ref, 1, List.duplicate(1, 65), [], ref) end)
       end, ArgumentError, ~r/expected a shape \(a list of at most 64/},
      {"tensor NIF: a binary operation's name given to compare",
       fn -> Accel.Job.call(fn ref -> nif.tensor_compare(:add, t.ref, 1, [2, 3], [], ref) end) end,
       ArgumentError, ~r/unknown operation: :add/},
      {"tensor NIF: select on a non-u8 predicate",
       fn -> Accel.Job.call(fn ref -> nif.tensor_select(t.ref, 1, 2, [2, 3], [], [], ref) end) end,
       ArgumentError, ~r/needs a :u8 tensor as its predicate/},
      {"tensor NIF: slice beyond the end",
       fn -> Accel.Job.call(fn ref -> nif.tensor_slice(t.ref, [2, 3], [1, 2], [1, 2], [1, 1], ref) end) end,
       ArgumentError, ~r/axis 1 of size 3 has no 2 elements from 2/},
      {"tensor NIF: slice stride 0",
       fn -> Accel.Job.call(fn ref -> nif.tensor_slice(t.ref, [2, 3], [0, 0], [1, 1], [1, 0], ref) end) end,
       ArgumentError, ~r/strides must be positive/},
      {"tensor NIF: slice of the wrong rank",
       fn -> Accel.Job.call(fn ref -> nif.tensor_slice(t.ref, [2, 3], [0], [1], [1], ref) end) end,
       ArgumentError, ~r/one start, length and stride per dimension/},
      {"tensor NIF: a view reading past the end",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [2, 3], [3, 2], 0, ref) end) end, ArgumentError,
       ~r/a view of shape \{2, 3\} from offset 0 reaches outside the tensor's 6 elements/},
      {"tensor NIF: a view stepping back before the start",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [3], [-1], 1, ref) end) end, ArgumentError,
       ~r/reaches outside the tensor's 6 elements/},
      {"tensor NIF: a view with strides of 2^62 (products past 2^64)",
       fn ->
         Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [4, 4], [1 <<< 62, -(1 <<< 62)], 0, ref) end)
       end, ArgumentError, ~r/reaches outside/},
      {"tensor NIF: a view of a shape past 2^64 elements",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [1 <<< 40, 1 <<< 40], [0, 0], 0, ref) end) end,
       ArgumentError, ~r/the shape/},
      {"tensor NIF: a view stride past 64 bits",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [2], [@big], 0, ref) end) end, ArgumentError,
       ~r/a stride must be an integer in the signed 64-bit range/},
      {"tensor NIF: a view with an improper strides list",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [2], [1 | 2], 0, ref) end) end, ArgumentError,
       ~r/expected strides/},
      {"tensor NIF: a view with one stride too few",
       fn -> Accel.Job.call(fn ref -> nif.tensor_view(t.ref, [2, 3], [3], 0, ref) end) end, ArgumentError,
       ~r/needs one stride per dimension/},
      {"tensor NIF: a put writing past the result",
       fn ->
         Accel.Job.call(fn ref ->
           nif.tensor_put_view(t.ref, [2, 3], [3, 1], t.ref, [2, 3], [3, 1], 1, ref)
         end)
       end, ArgumentError, ~r/a put of shape \{2, 3\} from offset 1 reaches outside the tensor's 6 elements/},
      {"tensor NIF: a put whose part shape lies about its count",
       fn ->
         Accel.Job.call(fn ref -> nif.tensor_put_view(t.ref, [2, 3], [3, 1], t.ref, [7], [1], 0, ref) end)
       end, ArgumentError, ~r/a shape of \{7,\} does not match the part's 6 elements/},
      {"tensor NIF: a put of a part of another type",
       fn ->
         u8 = T.from_list([1], type: :u8, backend: :cpu)
         Accel.Job.call(fn ref -> nif.tensor_put_view(t.ref, [2, 3], [3, 1], u8.ref, [1], [1], 0, ref) end)
       end, ArgumentError, ~r/type/},
      {"tensor NIF: concatenate lists of different lengths",
       fn -> Accel.Job.call(fn ref -> nif.tensor_concatenate([t.ref, t.ref], [[2, 3]], 0, ref) end) end,
       ArgumentError, ~r/lists of at most 4096 tensors and as many shapes/},
      {"tensor NIF: concatenate along a missing axis",
       fn -> Accel.Job.call(fn ref -> nif.tensor_concatenate([t.ref], [[2, 3]], 5, ref) end) end,
       ArgumentError, ~r/axis 5 out of range/},
      {"tensor: slice with a bad option", fn -> T.slice(t, [0, 0], [1, 1], strides: [0, 1]) end,
       ArgumentError, ~r/option :strides must be a list of positive integers/},
      {"tensor: argmax over several axes", fn -> T.argmax(t, axes: [0, 1]) end, ArgumentError,
       ~r/takes one axis/},
      {"tensor: axis and axes together", fn -> T.sum(t, axis: 0, axes: [1]) end, ArgumentError,
       ~r/axis: or axes:, not both/},
      {"tensor: repeated axes", fn -> T.sum(t, axes: [1, -1]) end, ArgumentError, ~r/axes must be distinct/},
      {"tensor: select on a number", fn -> T.select(1, t, t) end, ArgumentError,
       ~r/select\/3 expects an Accel.Tensor/},
      {"tensor: concatenate of nothing", fn -> T.concatenate([]) end, ArgumentError,
       ~r/a non-empty list of tensors/},
      {"tensor list NIF: 100 levels of nesting is declined, not recursed",
       fn -> declined(nif.tensor_list_bytes(Enum.reduce(1..100, [1], fn _, acc -> [acc] end), nil)) end,
       ArgumentError, ~r/declined/},
      {"tensor list NIF: an improper list is declined",
       fn -> declined(nif.tensor_list_bytes([1, 2 | 3], nil)) end, ArgumentError, ~r/declined/},
      {"tensor list: first elements promising a shape no memory holds",
       fn ->
         long = Enum.to_list(1..1_000_000)
         T.from_list([long | List.duplicate([1], 999_999)], backend: :cpu)
       end, ArgumentError, ~r/the list at index \[1\] should have 1000000 elements/},
      {"tensor: an operation on a storage type, which has no kernels of its own",
       fn -> T.negate(T.from_binary(<<1, 0>>, :s16, {1}, backend: :cpu)) end, ArgumentError,
       ~r/Accel.Tensor.negate\/1 has no kernel for :s16 \(a storage type\)/},
      {"tensor: bitcast to a type of another size",
       fn -> T.bitcast(T.from_list([1.0], type: :f32, backend: :cpu), :f64) end, ArgumentError,
       ~r/bitcast\/2 needs a type of the same size: :f32 and :f64 differ/},
      {"tensor NIF: reinterpreting 3 bytes as 2-byte elements",
       fn -> nif.tensor_reinterpret(T.from_list([1, 2, 3], type: :u8, backend: :cpu).ref, :u16) end,
       ArgumentError, ~r/a tensor of 3 :u8 elements is not a whole number of :u16 elements/},
      {"tensor NIF: reinterpreting as no type",
       fn -> nif.tensor_reinterpret(T.iota({2}, backend: :cpu).ref, :f12) end, ArgumentError,
       ~r/type must be one of :f32/},
      {"call plan NIF: a tensor where a plan's cell goes",
       fn -> nif.plan_replay(T.iota({2}, backend: :cpu).ref, [], []) end, ArgumentError,
       ~r/expected a plan cell/},
      {"call plan NIF: a cell where a recording goes",
       fn -> nif.plan_record_finish(nif.plan_cell(), [], [], [], nil) end, ArgumentError,
       ~r/expected a plan recording/},
      {"call plan NIF: an improper list of outputs",
       fn ->
         recording = nif.plan_record_start(nif.plan_cell())

         try do
           nif.plan_record_finish(recording, [], [:a | :b], [], nil)
         after
           nif.plan_record_stop(recording)
         end
       end, ArgumentError, ~r/outputs must be a list/},
      {"tensor: converting a complex tensor to a real type",
       fn -> T.as_type(T.from_binary(<<0::64>>, :c64, {1}, backend: :cpu), :f32) end, ArgumentError,
       ~r/no conversion between :c64 and :f32/},
      {"tensor: argmax with an unknown NaN rank",
       fn -> T.argmax(T.iota({3}, type: :f32, backend: :cpu), nan: :middle) end, ArgumentError, ~r/nan/},
      {"tensor NIF: an argmax policy tuple of the wrong size",
       fn ->
         Accel.Job.call(&nif.tensor_reduce({:argmax, :last}, T.iota({3}, backend: :cpu).ref, 1, 3, 1, &1))
       end, ArgumentError, ~r/unknown reduction/},
      {"tensor NIF: an argmax policy naming no tie-break",
       fn ->
         Accel.Job.call(
           &nif.tensor_reduce({:argmax, :last, :middle}, T.iota({3}, backend: :cpu).ref, 1, 3, 1, &1)
         )
       end, ArgumentError, ~r/tie_break: must be :low or :high/},
      {"tensor: a view of 50 dimensions reaching past the tensor",
       fn ->
         a = T.iota({4}, backend: :cpu)
         shape = [2 | List.duplicate(1, 49)]
         Accel.Job.call(fn ref -> nif.tensor_view(a.ref, shape, [4 | List.duplicate(1, 49)], 0, ref) end)
       end, ArgumentError, ~r/reaches outside the tensor's 4 elements/},
      {"tensor: a view of 100 dimensions, past the 64 a shape may have",
       fn ->
         a = T.iota({4}, backend: :cpu)

         Accel.Job.call(fn ref ->
           nif.tensor_view(a.ref, List.duplicate(1, 100), List.duplicate(0, 100), 0, ref)
         end)
       end, ArgumentError, ~r/a list of at most 64 integers/},
      {"tensor list NIF: a bad type", fn -> nif.tensor_list_bytes([1], :f128) end, ArgumentError,
       ~r/type must be one of/},
      {"tensor list NIF: bytes that do not fill the shape",
       fn -> nif.tensor_nested_list(<<1, 2, 3>>, :s64, [1]) end, ArgumentError,
       ~r/a binary of 3 bytes does not hold 1 :s64 elements/},
      {"tensor list NIF: a shape too large for lists",
       fn -> nif.tensor_nested_list(<<>>, :u8, [1 <<< 30, 1 <<< 30]) end, ArgumentError,
       ~r/more than 2\^40 elements cannot be a list/},
      # gather, scatter, windows and sorts (Accel.Nx.Backend's indexing, pooling and sort kernels)
      {"tensor NIF: a gather reading past the tensor",
       fn -> Accel.Job.call(&nif.tensor_gather(t.ref, t.ref, [2, 4], [0, 1], [1, 0], [2], [3], &1)) end,
       ArgumentError, ~r/gather reaches element 6 of a tensor of 6/},
      {"tensor NIF: a gather reading more index tuples than there are",
       fn -> Accel.Job.call(&nif.tensor_gather(t.ref, t.ref, [7, 3], [0, 1], [1, 0], [2], [3], &1)) end,
       ArgumentError, ~r/gather reads 7 index tuples of 1 from 6 indices/},
      {"tensor NIF: a gather with indices that are not s64",
       fn ->
         f = T.iota({6}, type: :f32, backend: :cpu)
         Accel.Job.call(&nif.tensor_gather(t.ref, f.ref, [2, 3], [0, 1], [1, 0], [2], [3], &1))
       end, ArgumentError, ~r/indices must be :s64/},
      {"tensor NIF: a gather of 7 indexed axes",
       fn ->
         Accel.Job.call(
           &nif.tensor_gather(t.ref, t.ref, [1], [0], [0], List.duplicate(1, 7), List.duplicate(0, 7), &1)
         )
       end, ArgumentError, ~r/between 1 and 6 indexed axes, got 7/},
      {"tensor NIF: a gather with one stride per dimension missing",
       fn -> Accel.Job.call(&nif.tensor_gather(t.ref, t.ref, [2, 3], [0], [1, 0], [2], [3], &1)) end,
       ArgumentError, ~r/gather needs one entry per dimension/},
      {"tensor NIF: a gather index outside its axis",
       fn ->
         big = T.from_list([0, 5], backend: :cpu)
         Accel.Job.call(&nif.tensor_gather(t.ref, big.ref, [2, 3], [0, 1], [1, 0], [2], [3], &1))
       end, ArgumentError, ~r/an index is out of bounds/},
      {"tensor NIF: a scatter of an unknown kind",
       fn ->
         Accel.Job.call(&nif.tensor_scatter(:mul, t.ref, t.ref, t.ref, [3], [1], [1], {1, 3}, [2], [3], &1))
       end, ArgumentError, ~r/unknown scatter: :mul/},
      {"tensor NIF: a scatter whose updates run past their tensor",
       fn ->
         Accel.Job.call(&nif.tensor_scatter(:put, t.ref, t.ref, t.ref, [3], [1], [1], {2, 4}, [2], [3], &1))
       end, ArgumentError, ~r/the updates reaches element 6 of a tensor of 6/},
      {"tensor NIF: a scatter with counts that are not a pair",
       fn ->
         Accel.Job.call(&nif.tensor_scatter(:add, t.ref, t.ref, t.ref, [3], [1], [1], {1}, [2], [3], &1))
       end, ArgumentError, ~r/expected \{updates, step\}/},
      {"tensor NIF: a window of size 0",
       fn -> Accel.Job.call(&nif.tensor_window(:sum, t.ref, 0, [1, 6, 1, 0, 1, 0, 1], &1)) end, ArgumentError,
       ~r/window sizes, strides and dilations must be positive/},
      {"tensor NIF: a window geometry that is not seven per dimension",
       fn -> Accel.Job.call(&nif.tensor_window(:max, t.ref, 0, [1, 6, 1, 2], &1)) end, ArgumentError,
       ~r/seven numbers per dimension/},
      {"tensor NIF: a window reaching 2^62 away",
       fn -> Accel.Job.call(&nif.tensor_window(:sum, t.ref, 0, [1 <<< 40, 6, 1, 1, 1 <<< 40, 0, 1], &1)) end,
       ArgumentError, ~r/a window reaches too far/},
      {"tensor NIF: a window over more elements than the tensor's",
       fn -> Accel.Job.call(&nif.tensor_window(:sum, t.ref, 0, [1, 7, 1, 7, 1, 0, 1], &1)) end, ArgumentError,
       ~r/more elements than the tensor/},
      {"tensor NIF: a window of 9 dimensions",
       fn ->
         Accel.Job.call(
           &nif.tensor_window(:min, t.ref, 0, List.flatten(List.duplicate([1, 1, 1, 1, 1, 0, 1], 9)), &1)
         )
       end, ArgumentError, ~r/at most 8 dimensions here, got 9/},
      {"tensor NIF: window identity bits past 64",
       fn -> Accel.Job.call(&nif.tensor_window(:max, t.ref, @big, [1, 6, 1, 6, 1, 0, 1], &1)) end,
       ArgumentError, ~r/expected the bits of a value/},
      {"tensor NIF: a window scatter whose source has no element per window",
       fn -> Accel.Job.call(&nif.tensor_window_scatter(:max, t.ref, t.ref, 0, [2, 6, 1, 3, 3, 0, 1], &1)) end,
       ArgumentError, ~r/the source has 6 elements, one per window: 2 windows/},
      {"tensor NIF: a sort whose rows do not make the tensor",
       fn -> Accel.Job.call(&nif.tensor_sort(t.ref, 4, 2, :asc, :values, &1)) end, ArgumentError,
       ~r/4 rows of 2 do not make a tensor of 6/},
      {"tensor NIF: a sort in no direction",
       fn -> Accel.Job.call(&nif.tensor_sort(t.ref, 2, 3, :sideways, :values, &1)) end, ArgumentError,
       ~r/expected :asc or :desc/},
      {"tensor NIF: a sort of a storage type",
       fn ->
         h = T.as_type(T.iota({4}, type: :f32, backend: :cpu), :f16)
         Accel.Job.call(&nif.tensor_sort(h.ref, 1, 4, :asc, :indices, &1))
       end, ArgumentError, ~r/sort/},
      {"tensor NIF: a scan whose shape does not make the tensor",
       fn -> Accel.Job.call(&nif.tensor_scan(:sum, t.ref, 2, 2, 2, false, &1)) end, ArgumentError,
       ~r/2 x 2 x 2 is not a tensor of 6/},
      {"tensor NIF: a scan told to reverse with no boolean",
       fn -> Accel.Job.call(&nif.tensor_scan(:max, t.ref, 1, 6, 1, :maybe, &1)) end, ArgumentError,
       ~r/expected a boolean, got: :maybe/},
      {"tensor NIF: a window scatter of no dimension",
       fn -> Accel.Job.call(&nif.tensor_window_scatter(:max, t.ref, t.ref, 0, [], &1)) end, ArgumentError,
       ~r/at least one dimension/},
      {"tensor NIF: a product over an empty axis",
       fn -> Accel.Job.call(&nif.tensor_reduce(:product, T.iota({0}, backend: :cpu).ref, 1, 0, 1, &1)) end,
       ArgumentError, ~r/a product over an empty axis is 1/},
      # the linear algebra NIFs: plans and tensors that do not agree, and what LAPACK cannot take
      {"linalg NIF: an unknown decomposition",
       fn -> Accel.Job.call(&nif.tensor_decompose(:lu, T.as_type(t, :f64).ref, [1, 2, 3], 0.0, &1)) end,
       ArgumentError, ~r/unknown decomposition: :lu/},
      {"linalg NIF: matrices that do not make the tensor",
       fn -> Accel.Job.call(&nif.tensor_decompose(:qr, T.as_type(t, :f64).ref, [2, 2, 3], 0.0, &1)) end,
       ArgumentError, ~r/matrices of 2 x 2 x 3 does not match a tensor of 6 elements/},
      {"linalg NIF: dimensions that are not three integers",
       fn -> Accel.Job.call(&nif.tensor_decompose(:qr, T.as_type(t, :f64).ref, [6, 1], 0.0, &1)) end,
       ArgumentError, ~r/matrix dimensions: expected a list of 3 integers/},
      {"linalg NIF: a negative eps",
       fn -> Accel.Job.call(&nif.tensor_decompose(:qr, T.as_type(t, :f64).ref, [1, 2, 3], -1.0, &1)) end,
       ArgumentError, ~r/eps: expected a non-negative float/},
      {"linalg NIF: a Cholesky factor of a matrix that is not square",
       fn -> Accel.Job.call(&nif.tensor_decompose(:cholesky, T.as_type(t, :f64).ref, [1, 2, 3], 0.0, &1)) end,
       ArgumentError, ~r/needs square matrices/},
      {"linalg NIF: Nx 0.7's eigh without its iteration count",
       fn ->
         Accel.Job.call(&nif.tensor_decompose(:eigh_nx07, T.as_type(t, :f64).ref, [1, 2, 3], 1.0e-4, &1))
       end, ArgumentError, ~r/matrix dimensions: expected a list of 4 integers/},
      {"linalg NIF: Nx 0.7's eigh asked for 2^62 iterations",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)

         Accel.Job.call(
           &nif.tensor_decompose(:eigh_nx07, a.ref, [1, 2, 2, 4_611_686_018_427_387_904], 1.0e-4, &1)
         )
       end, ArgumentError, ~r/max_iter: at most 1000000 iterations/},
      {"linalg NIF: Nx 0.7's eigh of matrices that are not square",
       fn ->
         Accel.Job.call(&nif.tensor_decompose(:eigh_nx07, T.as_type(t, :f64).ref, [1, 2, 3, 5], 1.0e-4, &1))
       end, ArgumentError, ~r/needs square matrices/},
      {"linalg NIF: Nx 0.7's lu of matrices that are not square",
       fn ->
         Accel.Job.call(&nif.tensor_decompose(:lu_nx07, T.as_type(t, :f64).ref, [1, 2, 3], 1.0e-10, &1))
       end, ArgumentError, ~r/needs square matrices/},
      {"linalg NIF: a decomposition of integers",
       fn -> Accel.Job.call(&nif.tensor_decompose(:qr, t.ref, [1, 2, 3], 0.0, &1)) end, ArgumentError,
       ~r/needs an :f32 or :f64 tensor, got :s64/},
      {"linalg NIF: a solve whose right side does not match the matrix",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)

         Accel.Job.call(
           &nif.tensor_solve(
             a.ref,
             T.as_type(t, :f64).ref,
             [1, 2, 3, 2],
             [true, true, false, false, false],
             &1
           )
         )
       end, ArgumentError, ~r/right side's rows \(3\) must match the matrix size \(2\)/},
      {"linalg NIF: solve flags that are not booleans",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)
         Accel.Job.call(&nif.tensor_solve(a.ref, a.ref, [1, 2, 2, 2], [true, :yes, false, false, false], &1))
       end, ArgumentError, ~r/expected a boolean, got: :yes/},
      {"linalg NIF: solve flags of the old count (no complex flag)",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)
         Accel.Job.call(&nif.tensor_solve(a.ref, a.ref, [1, 2, 2, 2], [true, true, false, false], &1))
       end, ArgumentError, ~r/expected five booleans/},
      # (complex: each element two reals, so 2 x 2 complex matrices need 8 of them)
      {"linalg NIF: complex matrices that do not make the tensor",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)
         Accel.Job.call(&nif.tensor_solve(a.ref, a.ref, [1, 2, 2, 1], [true, true, false, true, true], &1))
       end, ArgumentError, ~r/matrices of 1 x 2 x 4 does not match a tensor of 4 elements/},
      {"linalg NIF: sizes whose product overflows",
       fn ->
         a = T.as_type(T.iota({2, 2}, backend: :cpu), :f64)

         Accel.Job.call(
           &nif.tensor_solve(a.ref, a.ref, [@big, @big, 1, 1], [true, true, false, true, false], &1)
         )
       end, ArgumentError, ~r/count|integer|overflows/},
      {"fft NIF: integers", fn -> Accel.Job.call(&nif.tensor_fft(t.ref, [1, 6, 8], false, 0.0, :c64, &1)) end,
       ArgumentError, ~r/fft needs an :f32, :f64, :c64 or :c128 tensor, got :s64/},
      {"fft NIF: a real result type",
       fn -> Accel.Job.call(&nif.tensor_fft(T.as_type(t, :f64).ref, [1, 6, 8], false, 0.0, :f64, &1)) end,
       ArgumentError, ~r/fft's result is :c64 or :c128/},
      {"fft NIF: rows that do not match the tensor",
       fn -> Accel.Job.call(&nif.tensor_fft(T.as_type(t, :f64).ref, [2, 6, 8], true, 0.0, :c128, &1)) end,
       ArgumentError, ~r/rows of 2 x 6 do not match/},
      {"fft NIF: a length of zero",
       fn -> Accel.Job.call(&nif.tensor_fft(T.as_type(t, :f64).ref, [1, 6, 0], false, 0.0, :c128, &1)) end,
       ArgumentError, ~r/length must be positive/},
      {"fft NIF: a length beyond 2^40",
       fn ->
         Accel.Job.call(
           &nif.tensor_fft(T.as_type(t, :f64).ref, [1, 6, (1 <<< 40) + 1], false, 0.0, :c128, &1)
         )
       end, ArgumentError, ~r/beyond 2\^40/},
      # (a result of 16 TiB: the allocation is refused before any work)
      {"fft NIF: a result beyond memory",
       fn ->
         Accel.Job.call(&nif.tensor_fft(T.as_type(t, :f64).ref, [1, 6, 1 <<< 40], false, 0.0, :c128, &1))
       end, Accel.Error, ~r/could not allocate/},
      {"fft NIF: a negative eps",
       fn -> Accel.Job.call(&nif.tensor_fft(t.ref, [1, 6, 8], false, -1.0, :c64, &1)) end, ArgumentError,
       ~r/eps: expected a non-negative float/},
      # the test hook for device faults refuses before it touches a device
      {"fault NIF: an unknown backend", fn -> nif.simulate_device_fault(:tpu, 0, 1) end, ArgumentError,
       ~r/unknown backend: :tpu/},
      {"fault NIF: a kind other than 1 or 2", fn -> nif.simulate_device_fault(:opencl, 0, 3) end,
       ArgumentError, ~r/kind must be 1 or 2, got: 3/},
      {"fault NIF: a device that does not exist", fn -> nif.simulate_device_fault(:opencl, 99, 1) end,
       ArgumentError, ~r/no :opencl device 99|unavailable/},
      {"fault NIF: the CPU backend", fn -> nif.simulate_device_fault(:cpu, 0, 1) end, ArgumentError,
       ~r/backend :cpu has no device faults to simulate/},
      {"fault NIF: a device index that is not an integer",
       fn -> nif.simulate_device_fault(:opencl, :a, 1) end, ArgumentError, ~r/device/}
    ]
  end

  # The native list decoder declines what it does not take whole; Accel.Tensor then asks the
  # Elixir definition, which words the error.
  defp declined(:error), do: raise(ArgumentError, "declined")
  defp declined(other), do: other

  test "at least 100 distinct bad inputs, each answered with its documented exception" do
    cases = cases()
    assert length(cases) >= 100

    assert cases |> Enum.map(&elem(&1, 0)) |> Enum.uniq() |> length() == length(cases),
           "case names must be distinct"

    failures =
      for {name, fun, exception, pattern} <- cases,
          reason = check(fun, exception, pattern),
          reason != :ok,
          do: "#{name}: #{reason}"

    assert failures == []
    # The VM, the NIF and its backends are still fine.
    assert Accel.logistic_map([1, 2, 3], p: 61) == [28, 25, 37]
    assert Accel.Crossing.list_round_trip([1, 2]) == [1, 2]
  end

  defp check(fun, exception, pattern) do
    fun.()
    "raised nothing"
  rescue
    e ->
      cond do
        e.__struct__ != exception ->
          "raised #{inspect(e.__struct__)}: #{Exception.message(e)}"

        not (Exception.message(e) =~ pattern) ->
          "message #{inspect(Exception.message(e))} does not match #{inspect(pattern)}"

        true ->
          :ok
      end
  end
end
