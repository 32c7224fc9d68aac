defmodule Accel.Tensor do
  @moduledoc """
  Data that stays on a device between calls: create it once, run many kernels on it, read the
  result when you need it.

      iex> t = Accel.Tensor.from_list([[1.0, 2.0], [3.0, 4.0]], type: :f32, backend: :cpu)
      iex> t |> Accel.Tensor.multiply(2) |> Accel.Tensor.sum(axis: 1) |> Accel.Tensor.to_list()
      [6.0, 14.0]

      iex> Accel.Tensor.iota({5}, backend: :cpu) |> Accel.Tensor.add(1) |> Accel.logistic_map(iterations: 1) |> Accel.Tensor.to_list()
      [44, 132, 264, 440, 660]

  A tensor is `%Accel.Tensor{shape, type, device, ref}`: `shape` a tuple of dimensions, `type` its
  element type, `device` `{backend, index}` (see `Accel.devices/0`), and `ref` the NIF resource
  that owns the buffer: host memory on `:cpu`, a device buffer on `:opencl` and `:cuda`. Tensors
  are immutable: every operation returns a new one on the same device.

  Types (one registry, `c_src/kernels/types.h`): `:f32`, `:f64`, `:s64`, `:s32`, `:u8`, `:u64` and
  `:u32` have kernels of their own, and every operation takes them. `:s8`, `:s16`, `:u16`, `:f16`,
  `:bf16`, `:c64` and `:c128` are storage types: tensors of them are created, moved (reshape,
  transpose, slice, concatenate...), converted with `as_type/2` (f16 rounds to nearest even, bf16
  keeps the f32 value's high half, as Nx writes it) and read like the others, and computed on
  after a conversion (`Accel.Nx.Backend` does that for Nx, converting back after each operation).
  So are Nx 0.9+'s `:s2`, `:s4`, `:u2` and `:u4` (a byte per element, the value wrapped to its
  width), `:f8` (E5M2: the f16 value's high byte, as Nx writes it) and `:f8_e4m3fn` (Nx's E4M3FN:
  no infinities, saturating at ±448).

  ## Lifetime

  `free/1` releases a tensor's memory at once; using it afterwards raises `ArgumentError`. Without
  it, memory goes when the tensor is garbage-collected. The VM cannot see how large a tensor's
  buffer is, so Accel helps it: after every `:tensor_gc_bytes` (application env, default 256 MiB)
  of new tensors made in the whole VM, every process that made tensors meanwhile collects its
  garbage (so dropped tensors cannot pile up across many processes); and a device allocation that
  fails for lack of memory collects every process's garbage and retries once. A process that drops
  large tensors and then idles should call `free/1`. `reshape/2` shares the buffer: freeing either
  tensor frees both.

  ## Semantics

    * The elementwise operations are generated from one registry (`c_src/kernels/ops.h`), the same
      list the native kernels are dispatched from: #{Enum.map_join(Accel.Tensor.Registry.ops(), ", ", &"`#{&1.name}`")},
      and `logical_not/1`, `select/3`. Binary and comparison operations take two tensors on one
      device, or a tensor and a number; comparisons and logical operations return `:u8` (1 where
      true).
    * Shapes broadcast as in Nx and NumPy: aligned at the end, each dimension equal or 1 (`{2, 1}`
      with `{3}` gives `{2, 3}`). Broadcasting through more than 8 dimensions raises.
    * Mixed types promote as in Nx, once, before the kernel runs:

      | operands | result |
      |---|---|
      | the same type | that type |
      | two integer types of one signedness | the wider |
      | a signed and an unsigned integer type | the signed one if wider, else a signed type twice the unsigned one's width (at most `:s64`) |
      | an integer type and a float type | the float type |
      | `:f32` and `:f64` | `:f64` |
      | a tensor and an integer number | the tensor's type (a number that does not fit it raises) |
      | an integer tensor and a float number | `:f32` |

    * Integers wrap around modulo 2^bits, like C and Nx. `divide/2` and `quotient/2` on integers
      truncate toward zero (`div/2`), `remainder/2` takes the dividend's sign (`rem/2`); a zero
      divisor raises `ArgumentError`, as do a negative integer exponent in `pow/2` and a negative
      shift amount (as in Nx). Shifts by the type's width or more give 0 (or -1, shifting a
      negative number right); unsigned types shift right logically.
    * Operations the registry marks as float-only (`exp/1`, `log/1`, `sqrt/1`, `tanh/1`, `sigmoid/1`)
      raise on integer tensors, and integer-only ones (bitwise, shifts, `quotient/2`) on float
      tensors, naming the function; `as_type/2` converts.
      Float to integer conversion truncates toward zero and saturates; NaN becomes 0.
    * `sum/2` of integers returns `:s64` (`:u64` for unsigned types, as Nx sums them; exact
      modulo 2^64); `mean/2` of integers returns `:f64`.
      `:f32` sums and means accumulate in `:f64` on every backend and are rounded to `:f32` once, so
      a sum of 10^8 elements is within about 1e-7 of the exact sum of its inputs on every backend
      (on an OpenCL device without doubles, compensated `:f32` sums). `min/2` and `max/2` propagate
      NaN.
    * `matmul/2` (and `dot/2` of matrices) runs on the backend's BLAS: OpenBLAS, CLBlast or cuBLAS,
      for `:f32` and `:f64`; integer products run on a kernel of Accel's, exact and wrapping in
      their type.
    * Integer results are identical on every backend. Float results agree within what the backends'
      math libraries and summation orders allow: tests use relative 1e-5 for `:f32` and 1e-12 for
      `:f64`; for sums, means, matmul and dot the same factors times the sum of the magnitudes of
      what is summed (a sum may cancel to nearly zero); `min/2` and `max/2` are exact.
    * Device operations are queued in order and may still run when a function returns; reading a
      result (`to_binary/1`, `to_list/1`, `to_number/1`) waits for them.
    * Zero-size shapes: every dimension is a non-negative integer below 2^63, and a zero anywhere
      gives a tensor with no element. `sum/2` over an empty axis is 0 (`matmul/2` with `k = 0` a
      matrix of zeros); `min/2` and `max/2` over one raise `ArgumentError`; an empty result needs no
      kernel. `to_list/1` refuses a shape whose nested lists could not fit in memory (`{2**40, 0}`).
  """

  import Kernel, except: [abs: 1, min: 2, max: 2, floor: 1, ceil: 1, round: 1]
  import Accel.Tensor.Codec, only: [check_type!: 1, count!: 1, byte_width: 1, flatten!: 1, encode!: 3]
  alias Accel.NIF
  # The parts: Codec (host values <-> bytes), Elementwise (the registry's operations), Layout
  # (views and copies), Reduce (reductions), Offload (an operation by name in Accel.map/3).
  alias Accel.Tensor.{Codec, Elementwise, Layout, Reduce, Registry}

  @enforce_keys [:shape, :type, :device, :ref]
  defstruct [:shape, :type, :device, :ref]

  @type type ::
          :f32
          | :f64
          | :s64
          | :s32
          | :u8
          | :u64
          | :u32
          | :s8
          | :s16
          | :u16
          | :f16
          | :bf16
          | :c64
          | :c128
          | :s2
          | :s4
          | :u2
          | :u4
          | :f8
          | :f8_e4m3fn
  @type shape :: tuple()
  @type t :: %__MODULE__{shape: shape(), type: type(), device: {atom(), non_neg_integer()}, ref: reference()}

  @types Accel.Tensor.Types.names()

  @place_options [
    backend: [rule: {:in, [:auto, :cpu, :opencl, :cuda]}, default: :auto, doc: "where the tensor lives"],
    device: [
      rule: {:custom, __MODULE__, :device_option?, "a non-negative index or an Accel.Device"},
      default: nil,
      doc: "an index into the backend's devices, or an `Accel.Device`; one that does not exist raises"
    ]
  ]
  @list_options [
                  type: [
                    rule: {:in, @types},
                    default: nil,
                    doc: "the element type; `:s64` when every element is an integer, `:f64` otherwise"
                  ]
                ] ++ @place_options
  @iota_options [type: [rule: {:in, Accel.Tensor.Types.compute()}, default: :s64, doc: "the element type"]] ++
                  @place_options

  ## Creation and reading

  @doc """
  A tensor from a (nested) list of numbers. A number that does not fit the type raises
  `ArgumentError` naming its index (an `:f32` element beyond the largest `:f32` too: it would
  otherwise become infinity).

  ## Options

  #{Accel.Options.docs(@list_options)}
  """
  @spec from_list(list(), keyword()) :: t()
  def from_list(list, opts \\ [])

  def from_list(list, opts) when is_list(list) do
    opts = Accel.Options.validate!(opts, @list_options, "Accel.Tensor.from_list/2")

    # Natively when the list is well formed; otherwise the definition below, which says why not.
    {shape, type, bin} =
      case NIF.tensor_list_bytes(list, opts[:type]) do
        {dims, type, bin} ->
          {List.to_tuple(dims), type, bin}

        :error ->
          {shape, flat} = flatten!(list)
          type = opts[:type] || if Enum.all?(flat, &is_integer/1), do: :s64, else: :f64
          {shape, type, encode!(flat, type, shape)}
      end

    from_binary(bin, type, shape, Keyword.delete(opts, :type))
  end

  def from_list(other, _opts), do: raise(ArgumentError, "from_list/2 expects a list, got: #{inspect(other)}")

  @doc """
  A tensor over a binary of native-endian elements of `type`, shaped `shape` (a vector of all of
  them when no shape is given: `from_binary(bin, :f32)`). Sub-byte types (`:s4` ...) take a byte
  per element, wrapped to their width (`<<0xFF>>` is -1 as `:s4`, 15 as `:u4`). The binary is
  copied to the device once;
  on the CPU backend a binary of 64 KiB or more is not copied at all: the tensor shares its bytes
  (neither is ever written), and keeps the binary alive.

  ## Options

  #{Accel.Options.docs(@place_options)}
  """
  @spec from_binary(binary(), type(), shape() | keyword(), keyword()) :: t()
  def from_binary(bin, type, shape_or_opts \\ [], opts \\ [])

  # No shape: a vector of as many elements as the binary holds.
  def from_binary(bin, type, opts, []) when is_binary(bin) and is_list(opts) do
    check_type!(type)

    from_binary(
      bin,
      type,
      {div(byte_size(bin), byte_width(type)) + if(rem(byte_size(bin), byte_width(type)) == 0, do: 0, else: 1)},
      opts
    )
  end

  def from_binary(bin, type, shape, opts) when is_binary(bin) do
    check_type!(type)
    count = count!(shape)
    opts = Accel.Options.validate!(opts, @place_options, "Accel.Tensor.from_binary/4")
    size = byte_size(bin)

    if size != count * byte_width(type) do
      raise ArgumentError,
            "a binary of #{size} bytes does not hold shape #{inspect(shape)} of #{inspect(type)} " <>
              "(#{count * byte_width(type)} bytes)"
    end

    {backend, device} = place(opts)

    case Accel.Tensor.Types.bits(type) do
      # a sub-byte type's bytes are wrapped to its width (0x7F is -1 as :s4): converted from
      # the byte type of its signedness on the device
      bits when bits < 8 ->
        byte = if Accel.Tensor.Types.kind(type) == :int, do: :s8, else: :u8
        bytes = new(shape, byte, fn ref -> NIF.tensor_upload(bin, byte, backend, device, ref) end)

        try do
          as_type(bytes, type)
        after
          free(bytes)
        end

      _ ->
        new(shape, type, fn ref -> NIF.tensor_upload(bin, type, backend, device, ref) end)
    end
  end

  def from_binary(other, _type, _shape, _opts),
    do: raise(ArgumentError, "from_binary/4 expects a binary, got: #{inspect(other)}")

  @doc """
  The integers 0, 1, 2, ... in row-major order, made on the device (nothing is uploaded).

  ## Options

  #{Accel.Options.docs(@iota_options)}
  """
  @spec iota(shape(), keyword()) :: t()
  def iota(shape, opts \\ []) do
    count = count!(shape)
    opts = Accel.Options.validate!(opts, @iota_options, "Accel.Tensor.iota/2")
    type = opts[:type]
    {backend, device} = place(opts)
    new(shape, type, fn ref -> NIF.tensor_iota(type, count, backend, device, ref) end)
  end

  @doc """
  The elements as a binary of native-endian values (waits for pending device work). On the CPU
  backend a result of 64 KiB or more shares the tensor's memory instead of copying it, which then
  lives as long as the binary, past `free/1`.
  """
  @spec to_binary(t()) :: binary()
  def to_binary(%__MODULE__{} = t), do: Accel.Job.call(&NIF.tensor_download(t.ref, size(t), &1))
  def to_binary(other), do: not_a_tensor!("to_binary/1", other)

  @doc """
  The elements as a nested list, shaped like the tensor. A shape whose nested lists could not fit
  in memory (`{2**40, 0}` holds no element, but 2^40 empty lists) raises `Accel.Error`
  `:out_of_memory`: use `to_binary/1`.
  """
  @spec to_list(t()) :: list() | number()
  def to_list(%__MODULE__{shape: shape, type: type} = t) do
    # Cells of every level: d1 + d1*d2 + ... ; the VM aborts rather than fail a heap allocation.
    {cells, _} =
      shape |> Tuple.to_list() |> Enum.reduce({0, 1}, fn d, {sum, prod} -> {sum + prod * d, prod * d} end)

    if cells > 0xFFFFFFFF do
      raise Accel.Error,
        reason: :out_of_memory,
        message: "to_list/1 of shape #{inspect(shape)} would build #{cells} list cells; use to_binary/1"
    end

    NIF.tensor_nested_list(to_binary(t), type, Tuple.to_list(shape))
  end

  def to_list(other), do: not_a_tensor!("to_list/1", other)

  @doc "The only element of a one-element tensor (such as a whole-tensor `sum/2`) as a number."
  @spec to_number(t()) :: number() | :nan | :infinity | :neg_infinity
  def to_number(%__MODULE__{} = t) do
    if size(t) != 1,
      do: raise(ArgumentError, "to_number/1 needs a tensor of one element, got shape #{inspect(t.shape)}")

    t |> to_binary() |> Codec.decode(t.type) |> hd()
  end

  def to_number(other), do: not_a_tensor!("to_number/1", other)

  @doc """
  A copy of `t` on another device: an `Accel.Device`, `{backend, index}` or a backend name (its
  first device). Returns `t` itself when it is already there.
  """
  @spec transfer(t(), Accel.Device.t() | {atom(), non_neg_integer()} | atom()) :: t()
  def transfer(%__MODULE__{} = t, device) do
    {backend, index} =
      case device do
        %Accel.Device{backend: b, id: i} ->
          {b, i}

        {b, i} when is_atom(b) and is_integer(i) and i >= 0 ->
          {b, i}

        b when b in [:cpu, :opencl, :cuda, :auto] ->
          {b, -1}

        other ->
          raise ArgumentError,
                "transfer/2 expects an Accel.Device, {backend, index} or a backend, got: #{inspect(other)}"
      end

    new(t.shape, t.type, fn ref -> NIF.tensor_transfer(t.ref, backend, index, ref) end)
  end

  def transfer(other, _device), do: not_a_tensor!("transfer/2", other)

  @doc """
  Releases the tensor's memory now (or once the last binary sharing it, from `to_binary/1` on the
  CPU backend, is gone). Later use of `t` (or of a reshape of it) raises.
  """
  @spec free(t()) :: :ok
  def free(%__MODULE__{ref: ref}) do
    # :already_freed from a second call: freeing twice is harmless.
    NIF.tensor_free(ref)
    :ok
  end

  def free(other), do: not_a_tensor!("free/1", other)

  @doc "Number of elements."
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{shape: shape}), do: size_of(shape, tuple_size(shape), 1)
  def size(other), do: not_a_tensor!("size/1", other)

  defp size_of(_shape, 0, product), do: product
  defp size_of(shape, i, product), do: size_of(shape, i - 1, product * elem(shape, i - 1))

  @doc "The same elements under another shape of the same size. Shares the buffer."
  @spec reshape(t(), shape()) :: t()
  def reshape(%__MODULE__{shape: shape} = t, shape), do: t

  def reshape(%__MODULE__{} = t, shape) do
    if count!(shape) != size(t),
      do:
        raise(ArgumentError, "cannot reshape #{inspect(t.shape)} (#{size(t)} elements) to #{inspect(shape)}")

    %{t | shape: shape}
  end

  def reshape(other, _shape), do: not_a_tensor!("reshape/2", other)

  @doc "The elements converted to `type` (see the moduledoc for the rules)."
  @spec as_type(t(), type()) :: t()
  def as_type(%__MODULE__{} = t, type) do
    check_type!(type)
    new(t.shape, type, fn ref -> NIF.tensor_cast(t.ref, type, ref) end)
  end

  def as_type(other, _type), do: not_a_tensor!("as_type/2", other)

  @doc """
  The same bytes read as another type of the same size (Nx's `bitcast/2`): no copy, the buffer is
  shared (as `reshape/2` shares it).

      iex> Accel.Tensor.from_list([1.0], type: :f32, backend: :cpu) |> Accel.Tensor.bitcast(:u32) |> Accel.Tensor.to_list()
      [1065353216]
  """
  @spec bitcast(t(), type()) :: t()
  def bitcast(%__MODULE__{} = t, type) do
    check_type!(type)

    if byte_width(type) != byte_width(t.type),
      do:
        raise(
          ArgumentError,
          "bitcast/2 needs a type of the same size: #{inspect(t.type)} and #{inspect(type)} differ"
        )

    wrap(NIF.tensor_reinterpret(t.ref, type), t.shape, type)
  end

  def bitcast(other, _type), do: not_a_tensor!("bitcast/2", other)

  ## Elementwise: one function per line of the operation registry (c_src/kernels/ops.h)

  @reductions [:min, :max]
  for %{name: name, family: family, types: types, doc: doc} <- Registry.ops(), name not in @reductions do
    takes = %{all: "", int: " Integer tensors only.", float: " Float tensors only."}[types]

    case family do
      :unary ->
        @doc "Elementwise #{doc}.#{takes}"
        @spec unquote(name)(t()) :: t()
        def unquote(name)(t), do: Elementwise.unary(unquote(name), t)

      family ->
        out = if family == :compare, do: " As `:u8`: 1 where true, 0 where false.", else: ""

        @doc """
        Elementwise #{doc}.#{takes}#{out} Each of `a` and `b` is a tensor or a number; shapes broadcast
        and types promote (see the module docs).
        """
        @spec unquote(name)(t() | number(), t() | number()) :: t()
        def unquote(name)(a, b), do: Elementwise.binary(unquote(family), unquote(name), a, b)
    end
  end

  @doc "Elementwise logical not, as `:u8`: 1 where `t` is zero, 0 elsewhere."
  @spec logical_not(t()) :: t()
  def logical_not(t), do: equal(t, 0)

  @doc """
  Elementwise choice: `on_true` where `pred` is non-zero, `on_false` elsewhere. `pred` is a tensor
  (of any type; comparisons give `:u8`); `on_true` and `on_false` are tensors or numbers, promoted to
  one type. The three shapes broadcast.
  """
  @spec select(t(), t() | number(), t() | number()) :: t()
  def select(pred, on_true, on_false), do: Elementwise.select(pred, on_true, on_false)

  ## Reductions

  @doc "Sum of all elements, or along `axis:` or `axes:` (negative counts from the end)."
  @spec sum(t(), keyword()) :: t()
  def sum(t, opts \\ []), do: Reduce.reduce(:sum, t, opts)

  @doc """
  Product of all elements, or along `axis:` or `axes:`: integers as `:s64` (`:u64` for unsigned
  types) wrapping modulo 2^64, `:f32` accumulated in `:f64` where the device has doubles.
  """
  @spec product(t(), keyword()) :: t()
  def product(t, opts \\ []), do: Reduce.reduce(:product, t, opts)

  @doc """
  With options (or none): the smallest element, overall or along `axis:` or `axes:`. With a tensor
  or a number: the elementwise smaller of the two (NaN if either is), as the other elementwise
  operations.
  """
  @spec min(t() | number(), keyword() | t() | number()) :: t()
  def min(t, opts_or_other \\ [])
  def min(t, opts) when is_list(opts), do: Reduce.reduce(:min, t, opts)
  def min(a, b), do: Elementwise.binary(:binary, :min, a, b)

  @doc "With options (or none): the largest element, overall or along `axis:` or `axes:`; with a tensor or a number, the elementwise larger (see `min/2`)."
  @spec max(t() | number(), keyword() | t() | number()) :: t()
  def max(t, opts_or_other \\ [])
  def max(t, opts) when is_list(opts), do: Reduce.reduce(:max, t, opts)
  def max(a, b), do: Elementwise.binary(:binary, :max, a, b)

  @doc """
  The index of the smallest element (`:s64`), overall (an index into the flattened tensor) or along
  `axis:`. By default the first of equal elements wins, and the first NaN wins over any number.

  Options: `axis:`; `tie_break:` `:low` (the first of equal elements, the default) or `:high` (the
  last); `nan:` `:first` (the first NaN wins over any number, the default), `:last` (the last NaN
  does) or `:ignored` (any number wins over NaN; the first element where all are NaN).
  """
  @spec argmin(t(), keyword()) :: t()
  def argmin(t, opts \\ []), do: Reduce.reduce(:argmin, t, opts)

  @doc "The index of the largest element (`:s64`), overall or along `axis:`; ties and NaN as `argmin/2`."
  @spec argmax(t(), keyword()) :: t()
  def argmax(t, opts \\ []), do: Reduce.reduce(:argmax, t, opts)

  @doc "Arithmetic mean, overall or along `axis:`; `:f64` for integer tensors."
  @spec mean(t(), keyword()) :: t()
  def mean(t, opts \\ [])

  def mean(%__MODULE__{} = t, opts) do
    # Integers are converted first: their sum wraps modulo 2^64, their mean must not.
    source = if t.type in [:f32, :f64], do: t, else: as_type(t, :f64)
    total = sum(source, opts)
    if source != t, do: free(source)
    count = div(size(t), Kernel.max(size(total), 1))
    swap(total, divide(total, count))
  end

  def mean(other, _opts), do: not_a_tensor!("mean/2", other)

  ## Slices and joins

  @doc """
  The elements `start_indices[d] + k * stride[d]`, `k < lengths[d]`, along each dimension `d`, as a
  tensor of shape `lengths`. A slice that does not fit the tensor raises `ArgumentError` (Nx clamps
  it instead).

  ## Options

  #{Accel.Options.docs(Accel.Tensor.Layout.slice_options())}
  """
  @spec slice(t(), [non_neg_integer()], [non_neg_integer()], keyword()) :: t()
  def slice(t, start_indices, lengths, opts \\ []), do: Layout.slice(t, start_indices, lengths, opts)

  @doc """
  The tensors joined along an axis; their other dimensions must agree, and their types promote as
  the elementwise operations' do.

  ## Options

  #{Accel.Options.docs(Accel.Tensor.Layout.concatenate_options())}
  """
  @spec concatenate([t()], keyword()) :: t()
  def concatenate(tensors, opts \\ []), do: Layout.concatenate(tensors, opts)

  ## Matrices

  @doc "The transpose of a 2-D tensor."
  @spec transpose(t()) :: t()
  def transpose(%__MODULE__{shape: {rows, cols}} = t) do
    if rows * cols == 0,
      do: Layout.zeros({cols, rows}, t),
      else: new({cols, rows}, t.type, fn ref -> NIF.tensor_transpose(t.ref, rows, cols, ref) end)
  end

  def transpose(%__MODULE__{shape: shape}),
    do: raise(ArgumentError, "transpose/1 needs a 2-D tensor, got shape #{inspect(shape)}")

  def transpose(other), do: not_a_tensor!("transpose/1", other)

  @doc "Matrix product of `{m, k}` and `{k, n}` tensors: through the backend's BLAS for floats."
  @spec matmul(t(), t()) :: t()
  def matmul(%__MODULE__{shape: {m, k}} = a, %__MODULE__{shape: {k, n}} = b) do
    # A sum over k = 0 terms is 0: no kernel for an empty product (BLAS would not be asked).
    if m * k * n == 0,
      do: Layout.zeros({m, n}, a),
      else: new({m, n}, a.type, fn ref -> NIF.tensor_matmul(a.ref, b.ref, 1, m, k, n, 0, ref) end)
  end

  def matmul(%__MODULE__{shape: sa}, %__MODULE__{shape: sb}),
    do: raise(ArgumentError, "matmul/2 needs shapes {m, k} and {k, n}, got #{inspect(sa)} and #{inspect(sb)}")

  def matmul(a, b), do: not_a_tensor!("matmul/2", if(is_struct(a, __MODULE__), do: b, else: a))

  @doc """
  Dot product: vectors give a 0-d tensor, a matrix and a vector a vector, two matrices `matmul/2`.
  """
  @spec dot(t(), t()) :: t()
  def dot(%__MODULE__{shape: {k}} = a, %__MODULE__{shape: {k}} = b) do
    product = multiply(a, b)
    swap(product, sum(product))
  end

  def dot(%__MODULE__{shape: {_, _}} = a, %__MODULE__{shape: {_, _}} = b), do: matmul(a, b)

  def dot(%__MODULE__{shape: {m, k}} = a, %__MODULE__{shape: {k}} = b),
    do: a |> matmul(reshape(b, {k, 1})) |> reshape({m})

  def dot(%__MODULE__{shape: {k}} = a, %__MODULE__{shape: {k, n}} = b),
    do: a |> reshape({1, k}) |> matmul(b) |> reshape({n})

  def dot(%__MODULE__{shape: sa}, %__MODULE__{shape: sb}),
    do: raise(ArgumentError, "dot/2 cannot multiply shapes #{inspect(sa)} and #{inspect(sb)}")

  def dot(a, b), do: not_a_tensor!("dot/2", if(is_struct(a, __MODULE__), do: b, else: a))

  ## The logistic map (called by Accel.logistic_map/2)

  @doc false
  def logistic_map(%__MODULE__{} = t, p, mu, iterations),
    do: new(t.shape, t.type, fn ref -> NIF.tensor_logistic_map(t.ref, p, mu, iterations, ref) end)

  ## Internals

  @doc false
  # Also raised by Accel.Tensor.Elementwise and Accel.Tensor.Layout.
  def not_a_tensor!(fun, value),
    do: raise(ArgumentError, "Accel.Tensor.#{fun} expects an Accel.Tensor, got: #{inspect(value, limit: 5)}")

  # An intermediate result is freed as soon as the next one exists: mean/2 and dot/2 would
  # otherwise leave device memory to the garbage collector.
  defp swap(old, new) do
    free(old)
    new
  end

  # One NIF call makes the tensor and says where it is and how many tensor bytes were allocated
  # since the last collection; a second (rare) one claims that collection for this process.
  @doc false
  def new(shape, type, make), do: wrap(allocate(make), shape, type)

  # A tensor term from a NIF ({resource, backend, device, bytes since the last collection}).
  @doc false
  def wrap({ref, backend, device, since_gc}, shape, type) do
    maybe_collect(since_gc)
    %__MODULE__{shape: shape, type: type, device: {backend, device}, ref: ref}
  end

  # Tensors made by NIF calls Elixir did not see one by one (Accel.Nx.Compiler.Plan's replays):
  # the largest count of bytes since the last collection among them.
  @doc false
  def note_made(since_gc), do: maybe_collect(since_gc)

  # A full device: other processes may hold dead tensors their collector has not reached yet.
  # `make` takes the reference Accel.Job.call/1 gives it: device work is queued on the device.
  @doc false
  def allocate(make) do
    Accel.Job.call(make)
  rescue
    e in Accel.Error ->
      if e.reason != :out_of_memory, do: reraise(e, __STACKTRACE__)
      Enum.each(Process.list(), &:erlang.garbage_collect/1)
      Accel.Job.call(make)
  end

  # Once tensor_gc_bytes of tensors were made VM-wide since the last time, every process that made
  # some meanwhile collects its garbage (where dropped tensors wait, their size unseen by the VM's
  # heuristics): this one at once, the others in the background.
  @gc_bytes Accel.Config.default(:tensor_gc_bytes)
  defp maybe_collect(since_gc) do
    # (read for every tensor made: a valid setting taken as it is, anything else checked)
    threshold =
      case Application.get_env(:accel, :tensor_gc_bytes, @gc_bytes) do
        bytes when is_integer(bytes) and bytes >= 1 -> bytes
        _invalid -> Accel.Config.get!(:tensor_gc_bytes)
      end

    if since_gc >= threshold do
      case NIF.tensor_take_pressure(threshold) do
        false -> :ok
        :all -> collect(Process.list())
        makers -> collect(makers)
      end
    end
  end

  defp collect(pids) do
    me = self()
    others = Enum.reject(pids, &(&1 == me))
    # (a process of its own waits for the others' collections: no reply lands in this mailbox)
    if others != [], do: spawn(fn -> Enum.each(others, &:erlang.garbage_collect/1) end)
    :erlang.garbage_collect()
  end

  defp place(opts) do
    backend = opts[:backend]

    case opts[:device] do
      nil ->
        {backend, -1}

      %Accel.Device{backend: b, id: id} when backend in [:auto, b] ->
        {b, id}

      %Accel.Device{} = d ->
        raise ArgumentError, "device #{inspect(d.name)} is not on backend #{inspect(backend)}"

      i when is_integer(i) ->
        {backend, i}
    end
  end

  @doc false
  def device_option?(device), do: (is_integer(device) and device >= 0) or is_struct(device, Accel.Device)
end
