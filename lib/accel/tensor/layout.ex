defmodule Accel.Tensor.Layout do
  @moduledoc false
  # Accel.Tensor's operations that move elements without computing them: slice/4 and
  # concatenate/2, each one strided copy per input on the device (core/tensor_layout.cpp).

  alias Accel.NIF
  alias Accel.Tensor, as: T
  alias Accel.Tensor.Elementwise

  @slice_options [
    strides: [
      rule: {:custom, __MODULE__, :strides?, "a list of positive integers, one per dimension"},
      default: nil,
      doc: "the step between taken elements along each dimension (default 1)"
    ]
  ]
  @concatenate_options [
    axis: [rule: :integer, default: 0, doc: "the axis to join along (negative counts from the end)"]
  ]

  @doc false
  def slice_options, do: @slice_options
  @doc false
  def concatenate_options, do: @concatenate_options
  @doc false
  def strides?(strides), do: is_list(strides) and Enum.all?(strides, &(is_integer(&1) and &1 > 0))

  def slice(%T{shape: shape} = t, start, lengths, opts) do
    opts = Accel.Options.validate!(opts, @slice_options, "Accel.Tensor.slice/4")
    rank = tuple_size(shape)

    for {what, list} <- [start_indices: start, lengths: lengths],
        not (is_list(list) and length(list) == rank and Enum.all?(list, &(is_integer(&1) and &1 >= 0))) do
      raise ArgumentError,
            "Accel.Tensor.slice/4: #{what} must be a list of #{rank} non-negative integers for shape " <>
              "#{inspect(shape)}, got: #{inspect(list)}"
    end

    strides = opts[:strides] || List.duplicate(1, rank)

    if length(strides) != rank,
      do:
        raise(ArgumentError, "Accel.Tensor.slice/4: strides: needs #{rank} entries, got: #{inspect(strides)}")

    T.new(List.to_tuple(lengths), t.type, fn ref ->
      NIF.tensor_slice(t.ref, Tuple.to_list(shape), start, lengths, strides, ref)
    end)
  end

  def slice(other, _start, _lengths, _opts), do: T.not_a_tensor!("slice/4", other)

  def concatenate([%T{} = first | _] = tensors, opts) do
    opts = Accel.Options.validate!(opts, @concatenate_options, "Accel.Tensor.concatenate/2")

    for t <- tensors, not is_struct(t, T), do: T.not_a_tensor!("concatenate/2", t)

    rank = tuple_size(first.shape)
    axis = opts[:axis]

    unless axis >= -rank and axis < rank,
      do: raise(ArgumentError, "concatenate/2: axis #{axis} out of range for shape #{inspect(first.shape)}")

    axis = if axis < 0, do: axis + rank, else: axis
    type = Elementwise.promote(tensors)
    converted = Enum.map(tensors, &if(&1.type == type, do: &1, else: T.as_type(&1, type)))
    along = Enum.sum(for t <- tensors, tuple_size(t.shape) == rank, do: elem(t.shape, axis))
    shape = put_elem(first.shape, axis, along)

    try do
      T.new(shape, type, fn ref ->
        NIF.tensor_concatenate(
          Enum.map(converted, & &1.ref),
          Enum.map(converted, &Tuple.to_list(&1.shape)),
          axis,
          ref
        )
      end)
    after
      for {c, t} <- Enum.zip(converted, tensors), c != t, do: T.free(c)
    end
  end

  def concatenate(other, _opts),
    do:
      raise(
        ArgumentError,
        "Accel.Tensor.concatenate/2 expects a non-empty list of tensors, got: #{inspect(other, limit: 5)}"
      )

  @doc false
  # A tensor of `shape`, all zeros (or no element at all), of `like`'s type and on its device.
  # Zeros made on the device (one zero repeated by a stride-0 view): a host binary of the whole
  # shape could be larger than the VM can allocate, and the VM's allocator aborts where it cannot
  # serve; the device refuses such a size with Accel.Error :out_of_memory instead.
  def zeros(shape, %T{type: type, device: {backend, index}}) do
    zero =
      T.new({}, type, fn ref ->
        NIF.tensor_upload(:binary.copy(<<0>>, Accel.Tensor.Codec.byte_width(type)), type, backend, index, ref)
      end)

    dims = Tuple.to_list(shape)

    try do
      T.new(shape, type, fn ref -> NIF.tensor_view(zero.ref, dims, Enum.map(dims, fn _ -> 0 end), 0, ref) end)
    after
      T.free(zero)
    end
  end
end
