if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.FFT do
    @moduledoc false
    # Accel.Nx.Backend's fft and ifft: core/tensor_fft.cpp over the transformed axis (moved last
    # first, and back after, each a strided copy on the device), in f64 on the host as Nx's binary
    # backend computes them (radix-2 butterflies for a power-of-two length, mixed radices for one
    # of small prime factors, Bluestein's chirp for any other), each result rounded once to the
    # output's complex type, rows shared among the host's threads. Integer, f16 and bf16 input is
    # converted to the real type of the output's first. fft2 and ifft2 are Nx's composition of two
    # of these (Nx.BinaryBackend has no callback of its own for them).

    alias Accel.Nx.Storage
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    @real %{{:c, 64} => {:f, 32}, {:c, 128} => {:f, 64}}

    def transform(%T{type: out_type} = out, %T{shape: shape, type: type} = t, opts, inverse, otherwise) do
      last = tuple_size(shape) - 1
      axis = opts[:axis]

      cond do
        not Map.has_key?(@real, out_type) or not Storage.elements?(type) ->
          otherwise.()

        axis != last ->
          # the axis moved last, transformed, and moved back
          perm = Enum.to_list(0..last) |> List.delete(axis) |> Kernel.++([axis])
          moved = Nx.transpose(t, axes: perm)
          n = opts[:length]

          moved_out = %{
            out
            | shape: moved.shape |> put_elem(last, n),
              names: moved.names
          }

          result = transform(moved_out, moved, Keyword.put(opts, :axis, last), inverse, otherwise)
          back = Enum.map(0..last, fn a -> Enum.find_index(perm, &(&1 == a)) end)
          %{Nx.transpose(result, axes: back) | names: out.names}

        true ->
          [a] = Storage.operands!(if(inverse, do: :ifft, else: :fft), [t])
          a = if elem(type, 0) == :c, do: a, else: Storage.cast(a, Map.fetch!(@real, out_type))
          len = elem(shape, last)
          rows = div(Nx.size(shape), max(len, 1))
          stored = Storage.storage_type(out_type)
          eps = (opts[:eps] || 1.0e-10) / 1

          result =
            AT.new({rows * opts[:length]}, stored, fn ref ->
              Accel.NIF.tensor_fft(a.ref, [rows, len, opts[:length]], inverse, eps, stored, ref)
            end)

          Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([t]))
      end
    end
  end
end
