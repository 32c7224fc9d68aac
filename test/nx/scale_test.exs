if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.ScaleTest do
    # Accel.Nx.Backend at the sizes users run, on the CPU backend, OpenCL and CUDA. Not async: its 64-128 MB
    # tensors would show in the device memory counts that async tests assert on.
    use ExUnit.Case, async: false
    import Bitwise

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "2^24-element sums, transposes and reversals" do
          backend = {Accel.Nx.Backend, device: @device}
          n = 1 <<< 24
          v = Nx.iota({n}, type: :f32, backend: backend)
          # Every element and every partial sum is an exact integer in f64: the f32 result is the
          # exact sum, rounded once.
          exact = div(n * (n - 1), 2)
          assert_in_delta Nx.to_number(Nx.sum(v)), exact, exact * 1.0e-7

          m = Nx.iota({4096, 4096}, type: :s32, backend: backend)
          row = m |> Nx.transpose() |> Nx.slice([1234, 0], [1, 4096]) |> Nx.reshape({4096})

          assert Nx.to_binary(row) ==
                   Nx.to_binary(Nx.iota({4096}, type: :s32) |> Nx.multiply(4096) |> Nx.add(1234))

          r = Nx.reverse(Nx.iota({n}, type: :s64, backend: backend))
          assert Nx.to_number(r[0]) == n - 1 and Nx.to_number(r[n - 1]) == 0
          assert Nx.to_number(Nx.sum(Nx.add(r, Nx.iota({n}, type: :s64, backend: backend)))) == n * (n - 1)
          Enum.each([v, m, r], &Nx.backend_deallocate/1)
        end
      end
    end
  end
end
