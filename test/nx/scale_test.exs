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

        # (the CPU backend's own loops: each thread takes a block, vectorised, with a remainder of
        # scalar lanes; a loop that vectorised other code than its scalar form would show here)
        if device == :cpu do
          test "the backend's elementwise math over 2^20 f32: the binary backend's bits" do
            backend = {Accel.Nx.Backend, device: @device}
            ramp = Nx.iota({(1 <<< 20) + 5}, type: :f32) |> Nx.multiply(2.0e-5)
            signed = Nx.subtract(ramp, 10.0)
            positive = Nx.add(ramp, 1.0e-3)

            for {fun, x} <- [
                  exp: signed,
                  tanh: signed,
                  sigmoid: signed,
                  erf: signed,
                  log: positive,
                  sqrt: positive
                ] do
              on_device = Nx.backend_copy(x, backend)
              got = apply(Nx, fun, [on_device])
              assert Nx.to_binary(got) == Nx.to_binary(apply(Nx, fun, [x])), "Nx.#{fun}/1 differs"
              Enum.each([on_device, got], &Nx.backend_deallocate/1)
            end
          end
        end

        test "select over 2^20 elements: masks broadcast over a batch, one-element branches" do
          # (a causal mask broadcast over heads: select(mask, scores, -1.0e9); a ReLU-like
          # select(mask, x, 0.0); one-element branches of each type; a full mask)
          backend = {Accel.Nx.Backend, device: @device}
          on = &if(is_number(&1), do: &1, else: Nx.backend_copy(&1, backend))
          x = Nx.iota({8, 256, 512}, type: :f32) |> Nx.multiply(1.0e-3) |> Nx.sin()
          i = x |> Nx.multiply(1000) |> Nx.as_type(:s32)

          mask =
            Nx.greater_equal(Nx.iota({256, 512}, axis: 0), Nx.iota({256, 512}, axis: 1) |> Nx.quotient(2))

          full = Nx.broadcast(mask, {8, 256, 512})

          for {m, a, b} <- [
                {mask, x, 0.0},
                {mask, 0.0, x},
                {mask, x, -1.0e9},
                {mask, x, Nx.cos(x)},
                {mask, i, Nx.tensor(-7, type: :s32)},
                {mask, Nx.tensor(5, type: :s32), i},
                {full, x, 0.0},
                {full, Nx.as_type(x, :f64), 2.5}
              ] do
            got = Nx.select(Nx.broadcast(on.(m), {8, 256, 512}), on.(a), on.(b))
            assert Nx.to_binary(got) == Nx.to_binary(Nx.select(Nx.broadcast(m, {8, 256, 512}), a, b))
            Nx.backend_deallocate(got)
          end
        end

        test "compiled softmax and layer norm over 4096 rows of 4096 f32 (row kernels)" do
          # each row another ramp, so a kernel that read a neighbour's row (the next row's
          # prefetch on the host, the last row's own) would give other values
          backend = {Accel.Nx.Backend, device: @device}
          x = Nx.iota({4096, 4096}, type: :f32, backend: backend) |> Nx.multiply(1.0e-3) |> Nx.sin()
          x = Nx.add(x, Nx.iota({4096, 1}, type: :f32, backend: backend) |> Nx.multiply(1.0e-3))
          gamma = Nx.iota({4096}, type: :f32, backend: backend) |> Nx.divide(4096) |> Nx.add(0.5)

          softmax = fn x ->
            e = Nx.exp(Nx.subtract(x, Nx.reduce_max(x, axes: [-1], keep_axes: true)))
            Nx.divide(e, Nx.sum(e, axes: [-1], keep_axes: true))
          end

          layer_norm = fn x, gamma ->
            centred = Nx.subtract(x, Nx.mean(x, axes: [-1], keep_axes: true))
            var = centred |> Nx.multiply(centred) |> Nx.mean(axes: [-1], keep_axes: true)
            centred |> Nx.divide(Nx.sqrt(Nx.add(var, 1.0e-5))) |> Nx.multiply(gamma)
          end

          for {f, args} <- [{softmax, [x]}, {layer_norm, [x, gamma]}] do
            jit = &Nx.Defn.jit(f, compiler: Accel.Nx.Compiler, device: @device, build: :wait, fuse: &1)
            fused = apply(jit.(true), args)
            op_by_op = apply(jit.(false), args)
            assert Nx.all_close(fused, op_by_op, rtol: 1.0e-5, atol: 1.0e-6) |> Nx.to_number() == 1
            Enum.each([fused, op_by_op], &Nx.backend_deallocate/1)
          end

          # every row of the softmax sums to 1, the last one too
          sums =
            apply(Nx.Defn.jit(softmax, compiler: Accel.Nx.Compiler, device: @device), [x])
            |> Nx.sum(axes: [1])

          assert Nx.all_close(sums, Nx.broadcast(1.0, {4096}), atol: 1.0e-4) |> Nx.to_number() == 1
          Enum.each([x, gamma, sums], &Nx.backend_deallocate/1)
        end
      end
    end
  end
end
