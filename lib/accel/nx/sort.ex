if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Sort do
    @moduledoc false
    # Accel.Nx.Backend's sort and argsort: the axis moved last (one strided copy, where it is not),
    # each row sorted on the device (blocks by insertion, then merge passes), and the result moved
    # back. Stable, in Nx's order: ascending with NaN last, descending with NaN first, so argsort
    # with `stable: true` or not gives the binary backend's indices.

    alias Accel.Nx.{Fallback, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    def sort(out, t, opts), do: run(:values, :sort, out, t, opts)
    def argsort(out, t, opts), do: run(:indices, :argsort, out, t, opts)

    defp run(what, name, %T{type: out_type} = out, %T{shape: shape, type: type} = t, opts) do
      if Storage.compute?([type, out_type]) do
        rank = tuple_size(shape)
        axis = opts[:axis] || 0
        [a] = Storage.operands!(name, [t])
        a = Storage.cast(a, type)

        result =
          if rank == 0 do
            sorted(a, 1, 1, opts[:direction], what)
          else
            order = Enum.to_list(0..(rank - 1)) |> List.delete(axis) |> Kernel.++([axis])
            len = elem(shape, axis)
            rows = if len == 0, do: 0, else: div(Nx.size(shape), len)
            moved = Storage.permute(a, order)
            back = order |> Enum.with_index() |> Enum.sort() |> Enum.map(&elem(&1, 1))

            moved
            |> sorted(rows, len, opts[:direction], what)
            |> AT.reshape(moved.shape)
            |> Storage.permute(back)
          end

        result = if what == :indices, do: Storage.cast(result, out_type), else: result
        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([t]))
      else
        Fallback.run(name, [out, t, opts])
      end
    end

    defp sorted(%AT{} = a, rows, len, direction, what) do
      type = if what == :indices, do: :s64, else: a.type

      AT.new({rows * len}, type, fn ref ->
        Accel.NIF.tensor_sort(a.ref, rows, len, direction || :asc, what, ref)
      end)
    end
  end
end
