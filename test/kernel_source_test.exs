defmodule Accel.KernelSourceTest do
  # Expert kernels (Accel.Kernel.opencl/3, Accel.Kernel.cuda/3): OpenCL C and CUDA C++ written by
  # the user, run by Accel.map/3 through the launch door: every input form, every scalar type,
  # lengths that are no multiple of the launch's block, chunking, and the errors a user makes.
  use ExUnit.Case, async: true
  import Bitwise

  # no contraction into a fused multiply-add (which OpenCL allows by default), so that the result
  # is each operation rounded to f32, as the reference computes it
  @saxpy_cl """
  #pragma OPENCL FP_CONTRACT OFF
  __kernel void saxpy(__global float* out, __global const float* x, __global const float* y,
                      ulong n, float a) {
    ulong i = get_global_id(0);
    if (i < n) out[i] = a * x[i] + y[i];
  }
  """

  # every scalar type, each in its own width: a wrong width or offset changes the sum
  @scalars_cl """
  __kernel void scalars(__global long* out, __global const long* x, ulong n, long k, int m,
                        uchar b, double d, float f) {
    ulong i = get_global_id(0);
    if (i < n) out[i] = x[i] * k + m + b + (long)d + (long)f;
  }
  """

  @saxpy_cu """
  extern "C" __global__ void saxpy(float* out, const float* x, const float* y, unsigned long long n, float a) {
    for (unsigned long long i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; i < n; i += 1ULL * blockDim.x * gridDim.x)
      out[i] = a * x[i] + y[i];
  }
  """

  defp saxpy_cl,
    do: Accel.Kernel.opencl(@saxpy_cl, "saxpy", inputs: [:f32, :f32], output: :f32, scalars: [:f32])

  defp f32(list), do: for(x <- list, into: <<>>, do: <<x::float-native-32>>)

  # a * x + y rounded to f32 as the device does: each operation in f32
  defp saxpy_ref(a, xs, ys) do
    for {x, y} <- Enum.zip(xs, ys) do
      <<p::float-native-32>> = <<a * x::float-native-32>>
      <<r::float-native-32>> = <<p + y::float-native-32>>
      r
    end
  end

  describe "OpenCL C" do
    @describetag :opencl

    test "lists, binaries and tensors in; the output each gives by default" do
      k = saxpy_cl()
      # 1_000_003 elements: no multiple of the launch's 256, so the guard i < n is exercised
      xs = for i <- 1..1_000_003, do: rem(i * 7919, 10_007) / 8.0
      ys = for i <- 1..1_000_003, do: rem(i * 31, 1009) / 4.0
      expected = saxpy_ref(2.5, xs, ys)

      assert Accel.map({xs, ys}, k, scalars: [2.5]) == expected
      assert Accel.map({f32(xs), f32(ys)}, k, scalars: [2.5]) == f32(expected)
      assert Accel.map({f32(xs), f32(ys)}, k, scalars: [2.5], chunk_size: 100_000) == f32(expected)

      tx = Accel.Tensor.from_binary(f32(xs), :f32, backend: :opencl)
      out = Accel.map({tx, Accel.Tensor.from_binary(f32(ys), :f32, backend: :opencl)}, k, scalars: [2.5])
      assert %Accel.Tensor{device: {:opencl, 0}, type: :f32, shape: {1_000_003}} = out
      assert Accel.Tensor.to_binary(out) == f32(expected)
      assert Accel.map({[], []}, k, scalars: [1]) == []
    end

    test "every scalar type is passed in its own width" do
      k =
        Accel.Kernel.opencl(@scalars_cl, "scalars",
          inputs: [:s64],
          output: :s64,
          scalars: [:s64, :s32, :u8, :f64, :f32]
        )

      got = Accel.map([1, -2, 3], k, scalars: [1 <<< 40, -5, 200, 1.5e3, 64])
      assert got == for(x <- [1, -2, 3], do: x * (1 <<< 40) - 5 + 200 + 1500 + 64)
    end

    test "the errors a user makes name what is wrong" do
      k = saxpy_cl()
      one = {[1.0], [1.0]}

      assert_raise ArgumentError, ~r/takes 1 scalar\(s\) \[:f32\], got 0/, fn -> Accel.map(one, k) end

      assert_raise ArgumentError, ~r/scalar 0 is :f32, got: 1.0e300/, fn ->
        Accel.map(one, k, scalars: [1.0e300])
      end

      assert_raise ArgumentError, ~r/scalar 0 is :f32, got: :a/, fn -> Accel.map(one, k, scalars: [:a]) end
      assert_raise ArgumentError, ~r/takes 2 input\(s\), got 1/, fn -> Accel.map([1.0], k, scalars: [1]) end

      # an expert kernel runs on one device of its backend: it is not shared
      for d <- [:all, Accel.devices()] do
        assert_raise ArgumentError, ~r/option :device must be an Accel.Device or a non-negative index/, fn ->
          Accel.map(one, k, scalars: [1.0], device: d)
        end
      end

      assert_raise ArgumentError, ~r/is OpenCL C: it runs on :opencl, not :cpu/, fn ->
        Accel.map(one, k, scalars: [1], backend: :cpu)
      end

      assert_raise ArgumentError,
                   ~r/input 0: an expert kernel takes a list, a binary or an Accel.Tensor/,
                   fn ->
                     Accel.map({1..1, [1.0]}, k, scalars: [1])
                   end

      assert_raise ArgumentError, ~r/input 1: a binary of 3 bytes does not hold whole :f32/, fn ->
        Accel.map({f32([1.0]), <<1, 2, 3>>}, k, scalars: [1])
      end

      assert_raise ArgumentError, ~r/unknown option :type/, fn ->
        Accel.map(one, k, scalars: [1], type: :f32)
      end

      t = Accel.Tensor.from_list([1.0], type: :f64, backend: :opencl)

      assert_raise ArgumentError, ~r/input 0 is :f64, but the kernel was compiled for :f32/, fn ->
        Accel.map({t, t}, k, scalars: [1])
      end

      few =
        Accel.Kernel.opencl("__kernel void few(__global float* out) { out[0] = 1; }", "few",
          inputs: [:f32],
          output: :f32
        )

      assert_raise ArgumentError, ~r/kernel few has 1 parameters, but Accel passes 3/, fn ->
        Accel.map([1.0], few)
      end

      double = String.replace(@saxpy_cl, "float a", "double a")
      wide = Accel.Kernel.opencl(double, "saxpy", inputs: [:f32, :f32], output: :f32, scalars: [:f32])

      assert_raise ArgumentError,
                   ~r/scalar 0 is 4 bytes, which parameter 4 of the OpenCL kernel saxpy is not/,
                   fn ->
                     Accel.map(one, wide, scalars: [1.0])
                   end

      named =
        Accel.Kernel.opencl(@saxpy_cl <> "// axpy", "axpy",
          inputs: [:f32, :f32],
          output: :f32,
          scalars: [:f32]
        )

      assert_raise ArgumentError, ~r/no __kernel named axpy/, fn -> Accel.map(one, named, scalars: [1.0]) end

      broken =
        Accel.Kernel.opencl("__kernel void broken(__global float* out) { out[0] = 1 }", "broken",
          inputs: [:f32],
          output: :f32
        )

      e = assert_raise Accel.Error, fn -> Accel.map([1.0], broken) end
      assert e.reason == :build_failed and e.message =~ "expected ';'"
    end
  end

  test "a kernel's declaration is checked when it is made" do
    opts = [inputs: [:f32], output: :f32]
    assert_raise ArgumentError, ~r/the source must be a string/, fn -> Accel.Kernel.opencl(:x, "x", opts) end

    assert_raise ArgumentError, ~r/name must be a C identifier, got: "1x"/, fn ->
      Accel.Kernel.opencl("1x", "1x", opts)
    end

    assert_raise ArgumentError, ~r/never mentions the kernel saxpy/, fn ->
      Accel.Kernel.cuda("void f()", "saxpy", opts)
    end

    assert_raise ArgumentError,
                 ~r/option :inputs is required: the element type of each input buffer, in order$/,
                 fn ->
                   Accel.Kernel.opencl("x", "x", output: :f32)
                 end

    assert_raise ArgumentError, ~r/option :output is required/, fn ->
      Accel.Kernel.opencl("x", "x", inputs: [:f32])
    end

    assert_raise ArgumentError, ~r/option :inputs must be a list of :s64/, fn ->
      Accel.Kernel.opencl("x", "x", inputs: [:f16], output: :f32)
    end

    assert_raise ArgumentError, ~r/names 1 to 32 input types, got 0/, fn ->
      Accel.Kernel.opencl("x", "x", inputs: [], output: :f32)
    end

    assert_raise ArgumentError, ~r/expects a kernel from Accel.kernel\/1/, fn -> Accel.map([1], :nope) end
  end

  describe "CUDA C++" do
    @describetag :nvrtc

    test "compiled by NVRTC; the kernel must be extern \"C\"" do
      assert {<<0x7F, "ELF", _::binary>>, "sm_90"} = Accel.NIF.cuda_kernel_code(@saxpy_cu, 90, "saxpy")
      mangled = String.replace(@saxpy_cu, ~s(extern "C" ), "")

      assert_raise ArgumentError, ~r/must be declared extern "C" \(its compiled name is _Z/, fn ->
        Accel.NIF.cuda_kernel_code(mangled, 90, "saxpy")
      end

      e = assert_raise Accel.Error, fn -> Accel.NIF.cuda_kernel_code(@saxpy_cu, 90, "axpy") end
      assert e.reason == :build_failed
    end

    @tag :cuda
    test "runs on :cuda over lists, binaries and tensors" do
      k = Accel.Kernel.cuda(@saxpy_cu, "saxpy", inputs: [:f32, :f32], output: :f32, scalars: [:f32])
      xs = for i <- 1..1_000_003, do: rem(i * 7919, 10_007) / 8.0
      ys = for i <- 1..1_000_003, do: rem(i * 31, 1009) / 4.0
      expected = saxpy_ref(2.5, xs, ys)
      assert Accel.map({xs, ys}, k, scalars: [2.5]) == expected
      tx = Accel.Tensor.from_binary(f32(xs), :f32, backend: :cuda)
      out = Accel.map({tx, tx}, k, scalars: [1.0])
      assert Accel.Tensor.to_binary(out) == f32(saxpy_ref(1.0, xs, xs))
    end
  end
end
