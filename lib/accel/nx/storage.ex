if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Storage do
    @moduledoc false
    # How an Nx tensor lives on an Accel device, for Accel.Nx.Backend: the Accel tensor behind each
    # Nx type, where new tensors go (the backend's `device:` option), the operands of one operation
    # brought to one device, and strided views (transpose, broadcast, reverse, slice) as one copy.
    #
    # Every Nx type of the type registry (c_src/kernels/types.h, Accel.Tensor.Types) is stored as
    # the Accel type of the same name. Types with kernels of their own (f32, f64, s64, s32, u8,
    # u64, u32) compute in themselves; s8, s16 and u16 compute in s32, f16 and bf16 in f32: an
    # operation converts its operands on the device, computes, and wrap/3 converts the result back
    # to its type (integers wrap, f16 rounds to nearest even, bf16 as Nx writes it), so each
    # operation rounds once, as Nx's does. Nx 0.9+'s sub-byte integers (s2, s4, u2, u4) compute in
    # s32 too, stored a byte per element (Nx's bitstrings are unpacked on upload and packed on
    # download), and its 8-bit floats (f8: E5M2, f8_e4m3fn) in f32. Complex types have no kernels:
    # Accel.Nx.Complex computes on their parts with the real ones. A type outside the registry
    # would be stored as its bytes (a u8 vector), every operation on it falling back.

    import Bitwise
    alias Accel.Tensor, as: AT
    alias Accel.Tensor.Types
    alias Nx.Tensor, as: T

    # Nx's {kind, bits} of each registry type (the registry's :f32 is Nx's {:f, 32}), and the type
    # it computes in (nil for complex types): maps built once, read on every operation's path
    @storage Map.new(Types.names(), fn
               :f8_e4m3fn ->
                 {{:f8_e4m3fn, 8}, :f8_e4m3fn}

               name ->
                 [_, kind, bits] = Regex.run(~r/^([a-z]+)(\d+)$/, Atom.to_string(name))
                 {{String.to_atom(kind), String.to_integer(bits)}, name}
             end)
    @compute Map.new(@storage, fn {nx, name} ->
               {nx, if(Types.kind(name) == :complex, do: nil, else: Types.computes_in(name))}
             end)

    # Below this many bytes, `device: :auto` keeps a tensor on the host: a device launch costs more
    # than the host's work on it (see Accel.Nx.Backend's moduledoc).
    @auto_host_bytes 1_048_576

    @doc "The Accel type storing an Nx type (the registry's type of the same name), or :bytes."
    def storage_type(type), do: Map.get(@storage, type, :bytes)

    @doc "The Accel type an Nx type computes in, or nil (complex and byte-stored types)."
    def compute_type(type), do: Map.get(@compute, type)

    @doc "True when every type is one Accel computes in."
    def compute?(types), do: Enum.all?(types, &(compute_type(&1) != nil))

    @doc "True when the Nx type computes in itself (its Accel type has kernels of its own)."
    def native?(type), do: compute_type(type) != nil and compute_type(type) == storage_type(type)

    @doc "True for Nx's real float types (f8 ... f64, bf16, f8_e4m3fn)."
    def float?({kind, _}), do: kind in [:f, :bf, :f8_e4m3fn]

    @doc "True when the Nx type is stored element by element (not as bytes)."
    def elements?(type), do: storage_type(type) != :bytes

    ## Options and placement

    @doc """
    The backend's options, checked: `device:` as Accel's `:device` takes it, and `fallback:`
    (`:host`, the default, or `:raise`), kept only when given.
    """
    def init(opts) do
      unless Keyword.keyword?(opts),
        do: raise(ArgumentError, "Accel.Nx.Backend expects a keyword list of options, got: #{inspect(opts)}")

      Enum.each(opts, fn
        {:device, _} ->
          :ok

        {:fallback, f} when f in [:host, :raise] ->
          :ok

        {:fallback, other} ->
          raise ArgumentError, "Accel.Nx.Backend: fallback: must be :host or :raise, got: #{inspect(other)}"

        {key, _} ->
          raise ArgumentError,
                "Accel.Nx.Backend: unknown option #{inspect(key)}; it takes :device and :fallback"
      end)

      [device: device!(Keyword.get(opts, :device, :auto))] ++ Keyword.take(opts, [:fallback])
    end

    defp device!(:auto), do: :auto
    defp device!(backend) when backend in [:cpu, :opencl, :cuda], do: {backend, -1}
    defp device!(%Accel.Device{backend: b, id: id}), do: {b, id}
    # -1: the backend's first device (what init/1 makes of a backend name; Nx passes options it
    # made back in).
    defp device!({b, id} = d) when b in [:cpu, :opencl, :cuda] and is_integer(id) and id >= -1, do: d

    defp device!(other) do
      raise ArgumentError,
            "Accel.Nx.Backend: device: must be :auto, :cpu, :opencl, :cuda, an Accel.Device or " <>
              "{backend, index}, got: #{inspect(other)}"
    end

    @doc "Where a new tensor of `bytes` goes: {backend, index, placed by :auto?}."
    def place(opts, bytes) do
      # Nx hands creation functions the options as the user wrote them (init/1 not applied).
      case Keyword.fetch!(init(opts), :device) do
        :auto when bytes < @auto_host_bytes -> {:cpu, 0, true}
        :auto -> {:auto, -1, true}
        {backend, index} -> {backend, index, false}
      end
    end

    ## Between Nx and Accel

    @doc """
    An Nx tensor (`out`'s shape, type and names) over an Accel tensor, converted first to `out`'s
    storage type where it was computed in another (an s16 sum in s32, an f16 product in f32).
    """
    def wrap(%AT{} = a, %T{type: type} = out, auto \\ false) do
      a =
        case storage_type(type) do
          :bytes -> a
          stored when stored == a.type -> a
          stored -> AT.as_type(a, stored)
        end

      %{out | data: %Accel.Nx.Backend{tensor: a, auto: auto}}
    end

    @doc "A new tensor over `binary` (the Nx type's native-endian bytes) where the options place it."
    def upload(binary, %T{} = out, opts) do
      {backend, index, auto} = place(opts, div(bit_size(binary), 8))
      upload_on(binary, out, {backend, index}, auto)
    end

    @doc """
    The first `limit` elements of an Accel tensor of Nx type `type` as Nx's binary: a bitstring
    for sub-byte types (their bytes packed, below), else the bytes.
    """
    def download(%AT{} = a, {_, bits}, limit) when bits < 8 and limit > 0 do
      per = div(8, bits)
      n = min(limit, AT.size(a))
      m = div(n + per - 1, per)
      flat = AT.reshape(a, {AT.size(a)})
      flat = if n == AT.size(a), do: flat, else: AT.slice(flat, [0], [n])
      # each value's own bits, zeros after the last, one byte's fields per row
      values = flat |> AT.as_type(:u8) |> AT.bitwise_and((1 <<< bits) - 1)
      values = if m * per == n, do: values, else: AT.concatenate([values, zeros(m * per - n, a.device)])
      rows = AT.reshape(values, {m, per})

      packed =
        0..(per - 1)
        |> Enum.map(&(rows |> AT.slice([0, &1], [m, 1]) |> AT.left_shift(8 - bits * (&1 + 1))))
        |> Enum.reduce(&AT.bitwise_or(&2, &1))

      <<head::bitstring-size(n * bits), _::bitstring>> =
        Accel.Job.call(&Accel.NIF.tensor_download(packed.ref, m, &1))

      head
    end

    def download(%AT{}, {_, bits}, _limit) when bits < 8, do: <<>>

    def download(%AT{} = a, _type, limit), do: Accel.Job.call(&Accel.NIF.tensor_download(a.ref, limit, &1))

    defp zeros(count, device),
      do: AT.from_binary(:binary.copy(<<0>>, count), :u8, {count}, accel_place(device))

    @doc "A new tensor over `binary` on the device {backend, index}."
    def upload_on(binary, %T{type: type, shape: shape} = out, device, auto),
      do: wrap(upload_to(binary, type, shape, device), out, auto)

    # A sub-byte type's bitstring: 8 / bits elements a byte, the first in its highest bits, made a
    # byte per element (signed ones sign-extended) on the device: the bytes uploaded, each field
    # shifted out (a pass per field) and the fields interleaved (a concatenation along a new last
    # axis), the values converted to the type (which wraps). download/3 packs them back likewise.
    defp upload_to(binary, {_, bits} = type, shape, device) when bits < 8 do
      n = Tuple.product(shape)
      per = div(8, bits)
      place = accel_place(device)

      if n == 0 do
        AT.from_binary(<<>>, storage_type(type), shape, place)
      else
        padded = <<binary::bitstring, 0::size(rem(8 - rem(bit_size(binary), 8), 8))>>
        m = byte_size(padded)
        b = AT.from_binary(padded, :u8, {m}, place)

        fields =
          for f <- 0..(per - 1),
              do:
                b
                |> AT.right_shift(8 - bits * (f + 1))
                |> AT.bitwise_and((1 <<< bits) - 1)
                |> AT.reshape({m, 1})

        all = fields |> AT.concatenate(axis: 1) |> AT.reshape({m * per})
        all = if m * per == n, do: all, else: AT.slice(all, [0], [n])
        all |> AT.as_type(storage_type(type)) |> AT.reshape(shape)
      end
    end

    defp upload_to(binary, type, shape, device) do
      case storage_type(type) do
        :bytes ->
          # (a type outside the registry) padded to whole bytes here, cut back to its bits by
          # Accel.Nx.Backend.to_binary/2
          bytes = <<binary::bitstring, 0::size(rem(8 - rem(bit_size(binary), 8), 8))>>
          AT.from_binary(bytes, :u8, {byte_size(bytes)}, accel_place(device))

        t ->
          AT.from_binary(binary, t, shape, accel_place(device))
      end
    end

    @doc "{backend, index} (-1: the backend's first device) as Accel.Tensor's placement options."
    def accel_place({backend, -1}), do: [backend: backend]
    def accel_place({backend, index}), do: [backend: backend, device: index]

    @doc """
    The Accel tensors of Nx tensors, on one device: the first non-:auto operand's (or the largest
    one's when every operand was placed by `:auto`). A tensor of another backend is uploaded there,
    an :auto-placed one moved there; two devices chosen explicitly raise, naming both.
    """
    def operands!(fun, tensors) do
      # (every operation's first step: the common case, Accel tensors placed on one device, in
      # one pass)
      case placed_together(tensors, nil, []) do
        nil -> gather!(fun, tensors)
        same -> same
      end
    end

    defp placed_together([], _device, acc), do: :lists.reverse(acc)

    defp placed_together(
           [%T{data: %Accel.Nx.Backend{tensor: %AT{device: d} = a, auto: false}} | rest],
           device,
           acc
         )
         when device == nil or device == d,
         do: placed_together(rest, d, [a | acc])

    defp placed_together(_tensors, _device, _acc), do: nil

    defp gather!(fun, tensors) do
      accel = for %T{data: %Accel.Nx.Backend{} = d} <- tensors, do: d
      target = target_device(accel)

      Enum.map(tensors, fn
        %T{data: %Accel.Nx.Backend{tensor: a, auto: auto}} ->
          cond do
            a.device == target -> a
            auto -> AT.transfer(a, target)
            true -> raise ArgumentError, two_devices(fun, a.device, target)
          end

        %T{} = t ->
          upload_to(Nx.to_binary(t), t.type, t.shape, target)
      end)
    end

    # No Accel operand (an operation Nx gave this backend for another argument, a slice's start
    # index say): the device new tensors go to, by the default backend's options.
    defp target_device([]) do
      case Nx.default_backend() do
        {Accel.Nx.Backend, opts} ->
          case Keyword.get(opts, :device, :auto) do
            {backend, index} -> {backend, max(index, 0)}
            _auto -> {:cpu, 0}
          end

        _other ->
          {:cpu, 0}
      end
    end

    defp target_device(accel) do
      case Enum.find(accel, &(not &1.auto)) do
        nil -> Enum.max_by(accel, &AT.size(&1.tensor)).tensor.device
        %{tensor: a} -> a.device
      end
    end

    defp two_devices(fun, {b1, i1}, {b2, i2}) do
      "Accel.Nx.Backend.#{fun}: the operands are on two devices, #{b1}:#{i1} and #{b2}:#{i2}; move " <>
        "one with Nx.backend_transfer(tensor, {Accel.Nx.Backend, device: ...})"
    end

    @doc """
    Whether the result of an operation on these Nx tensors may move to another operand's device:
    when one of them was placed by :auto, or none is an Accel tensor (no one chose its device).
    """
    def auto?(tensors), do: auto?(tensors, false)

    defp auto?([], accel_seen), do: not accel_seen
    defp auto?([%T{data: %Accel.Nx.Backend{auto: true}} | _], _accel_seen), do: true
    defp auto?([%T{data: %Accel.Nx.Backend{}} | rest], _accel_seen), do: auto?(rest, true)
    defp auto?([_other | rest], accel_seen), do: auto?(rest, accel_seen)

    @doc """
    The Accel tensor in the type `type` (an Nx type) computes in (a type with none, complex: the type
    it is stored as); the same tensor if it is already.
    """
    def cast(%AT{} = a, type) do
      case compute_type(type) || storage_type(type) do
        t when t == a.type -> a
        t -> AT.as_type(a, t)
      end
    end

    ## Views: one strided copy each

    @doc "Row-major strides, in elements, of a shape."
    def strides(shape) when is_tuple(shape) do
      shape
      |> Tuple.to_list()
      |> List.foldr({[], 1}, fn dim, {acc, stride} -> {[stride | acc], stride * dim} end)
      |> elem(0)
    end

    @doc "The elements offset + sum(c[d] * strides[d]) of `a` for each coordinate c of `shape`."
    def view(%AT{} = a, shape, strides, offset) do
      AT.new(shape, a.type, fn ref ->
        Accel.NIF.tensor_view(a.ref, Tuple.to_list(shape), strides, offset, ref)
      end)
    end

    @doc """
    The view (shape, base_strides) of `base` with `part` written at offset + sum(c[d] *
    part_strides[d]) for each coordinate c of part's shape: one pass over the result.
    """
    def put_view(%AT{} = base, shape, base_strides, %AT{} = part, part_strides, offset) do
      AT.new(shape, base.type, fn ref ->
        Accel.NIF.tensor_put_view(
          base.ref,
          Tuple.to_list(shape),
          base_strides,
          part.ref,
          Tuple.to_list(part.shape),
          part_strides,
          offset,
          ref
        )
      end)
    end

    @doc "The tensor with its axes in `order` (one strided copy), or itself when they are in order."
    def permute(%AT{shape: shape} = a, order) do
      if order == Enum.sort(order) do
        a
      else
        strides = strides(shape)

        view(
          a,
          order |> Enum.map(&elem(shape, &1)) |> List.to_tuple(),
          Enum.map(order, &Enum.at(strides, &1)),
          0
        )
      end
    end

    @doc "The element offset of the coordinates `starts` under `strides`."
    def offset(starts, strides), do: Enum.zip_reduce(starts, strides, 0, fn s, st, acc -> acc + s * st end)

    @doc "A scalar Accel tensor broadcast to `shape` (a stride-0 view)."
    def fill(%AT{} = scalar, shape), do: view(scalar, shape, List.duplicate(0, tuple_size(shape)), 0)
  end
end
