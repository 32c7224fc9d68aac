defmodule Accel.Stream do
  @moduledoc """
  Pipelines that offload chunks of a large or endless input to Accel.

      1..100_000_000
      |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, as: :binary), chunk_size: 1_000_000, emit: :chunks)
      |> Enum.each(&File.write!("out.bin", &1, [:append]))

  Elements are batched into chunks lazily, chunks are dispatched with bounded concurrency and
  back-pressure, and results come out chunk by chunk, in order unless `ordered: false`. A chunk is
  taken from the input only when fewer than `max_concurrency` chunks are running or waiting to be
  emitted, so memory stays bounded by `max_concurrency` chunks however long the input, endless
  streams included, and however slow one chunk is (`Task.async_stream/3` keeps starting chunks
  behind a slow first one when results are ordered, and holds their results).

  Ranges are split into sub-ranges and binaries into sub-binaries (both without copying or
  materialising anything); streams of binaries, such as a file's, into binaries of whole elements;
  other enumerables into lists:

      File.stream!("in.bin", [], 8_000_000)   # any read size: elements split across reads are joined
      |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, as: :binary), emit: :chunks)
      |> Stream.into(File.stream!("out.bin"))
      |> Stream.run()
  """

  @default_chunk_size 1_000_000

  @widths %{s64: 8, f64: 8, s32: 4, f32: 4, u8: 1}

  @chunk_options [
    chunk_size: [rule: {:integer, 1, nil}, default: @default_chunk_size, doc: "elements per chunk"],
    type: [
      rule: {:in, Map.keys(@widths)},
      default: :s64,
      doc:
        "the element type of binary input (a binary, or a stream of binaries such as `File.stream!/3`): " <>
          "its width decides where chunks split"
    ]
  ]

  @map_options @chunk_options ++
                 [
                   max_concurrency: [
                     rule: {:integer, 1, nil},
                     default: nil,
                     default_doc: "`System.schedulers_online/0`",
                     doc: "chunks in flight at once"
                   ],
                   ordered: [rule: :boolean, default: true, doc: "emit results in input order"],
                   timeout: [
                     rule: :timeout,
                     default: :infinity,
                     doc: "per chunk, in milliseconds or `:infinity`"
                   ],
                   on_timeout: [
                     rule: {:in, [:exit, :kill_task]},
                     default: :exit,
                     doc: "`:exit`, or `:kill_task`, which emits `{:exit, :timeout}` for that chunk"
                   ],
                   emit: [
                     rule: {:in, [:elements, :chunks]},
                     default: :elements,
                     doc:
                       "what the stream yields: `:elements`, each element of each chunk's result (a list's " <>
                         "elements, or a binary read as native-endian signed 64-bit integers, which is what " <>
                         "`Accel.logistic_map/2` returns with `as: :binary`); or `:chunks`, each chunk's result " <>
                         "as it is (the choice for results to write to a file, or binaries of other types)"
                   ]
                 ]

  @doc """
  Splits `input` into chunks of at most `:chunk_size` elements (default #{@default_chunk_size}),
  lazily: a `Range` into sub-ranges, a binary into sub-binaries of whole elements, a stream of
  binaries (`File.stream!(path, [], 8_000_000)`) into binaries of whole elements, carrying an
  element split between two of its binaries over to the next chunk, and any other enumerable into
  lists. Binaries hold native-endian elements of `:type` (default `:s64`); one that does not end on
  a whole element raises `ArgumentError` saying how many bytes are left over.

      iex> Accel.Stream.chunks(1..10, chunk_size: 4) |> Enum.to_list()
      [1..4, 5..8, 9..10]

      iex> Accel.Stream.chunks(10..1//-3, chunk_size: 3) |> Enum.to_list()
      [10..4//-3, 1..1//-3]

      iex> Accel.Stream.chunks([1, 2, 3], chunk_size: 2) |> Enum.to_list()
      [[1, 2], [3]]
  """
  @spec chunks(Enumerable.t() | binary(), keyword()) :: Enumerable.t()
  def chunks(input, opts \\ []) do
    opts = Accel.Options.validate!(opts, @chunk_options, "Accel.Stream.chunks/2")
    do_chunks(input, opts[:chunk_size], @widths[opts[:type]], opts[:type])
  end

  defp do_chunks(%Range{step: 0} = range, _size, _width, _type),
    do: raise(ArgumentError, "expected a range with a non-zero step, got: #{inspect(range)}")

  defp do_chunks(%Range{first: first, step: step} = range, size, _width, _type) do
    count = Range.size(range)

    Stream.unfold(0, fn
      done when done >= count -> nil
      done -> {sub_range(first + done * step, min(size, count - done), step), done + size}
    end)
  end

  defp do_chunks(binary, size, width, type) when is_binary(binary) do
    if rem(byte_size(binary), width) != 0 do
      raise ArgumentError,
            "binary input must hold whole #{inspect(type)} elements (#{width} bytes each): its size, " <>
              "#{byte_size(binary)} bytes, is not a multiple of #{width}"
    end

    bytes = size * width

    Stream.unfold(0, fn
      offset when offset >= byte_size(binary) -> nil
      offset -> {binary_part(binary, offset, min(bytes, byte_size(binary) - offset)), offset + bytes}
    end)
  end

  defp do_chunks(enumerable, size, width, type) do
    if is_list(enumerable) and not proper_list?(enumerable) do
      raise ArgumentError, "expected a proper list, got an improper one: #{inspect(enumerable, limit: 5)}"
    end

    if Enumerable.impl_for(enumerable) == nil do
      raise ArgumentError, "expected an enumerable or a binary, got: #{inspect(enumerable, limit: 5)}"
    end

    # The first element decides: binaries are bytes to re-cut into whole elements, anything else
    # is an element of a list chunk.
    Stream.transform(
      enumerable,
      fn -> :start end,
      fn
        piece, :start when is_binary(piece) -> cut([piece], byte_size(piece), 0, size * width)
        piece, {:bytes, buffered, n, index} -> bytes_piece(piece, buffered, n, index, size * width)
        x, :start -> list_piece(x, [], 0, size)
        x, {:list, acc, n} -> list_piece(x, acc, n, size)
      end,
      fn
        :start ->
          {[], :done}

        {:list, [], _} ->
          {[], :done}

        {:list, acc, _} ->
          {[Enum.reverse(acc)], :done}

        {:bytes, _, 0, _} ->
          {[], :done}

        {:bytes, buffered, n, _} when rem(n, width) == 0 ->
          {[IO.iodata_to_binary(buffered)], :done}

        {:bytes, _, n, _} ->
          raise ArgumentError,
                "a stream of binaries ended inside an element: #{rem(n, width)} byte(s) left over, " <>
                  "not a whole #{inspect(type)} element (#{width} bytes)"
      end,
      fn _ -> :ok end
    )
  end

  defp proper_list?([_ | rest]), do: proper_list?(rest)
  defp proper_list?([]), do: true
  defp proper_list?(_tail), do: false

  defp list_piece(x, acc, n, size) when n + 1 == size, do: {[Enum.reverse([x | acc])], {:list, [], 0}}
  defp list_piece(x, acc, n, _size), do: {[], {:list, [x | acc], n + 1}}

  defp bytes_piece(piece, buffered, n, index, chunk_bytes) when is_binary(piece),
    do: cut([buffered, piece], n + byte_size(piece), index + 1, chunk_bytes)

  defp bytes_piece(piece, _buffered, _n, index, _chunk_bytes) do
    raise ArgumentError,
          "a stream of binaries holds a non-binary at index #{index + 1}: #{inspect(piece, limit: 5)}"
  end

  # Whole chunks out of the buffered bytes; the rest (whole elements, and a partial one) waits.
  defp cut(buffered, n, index, chunk_bytes) when n < chunk_bytes, do: {[], {:bytes, buffered, n, index}}

  defp cut(buffered, n, index, chunk_bytes) do
    bin = IO.iodata_to_binary(buffered)
    whole = div(n, chunk_bytes) * chunk_bytes
    chunks = for offset <- 0..(whole - chunk_bytes)//chunk_bytes, do: binary_part(bin, offset, chunk_bytes)
    {chunks, {:bytes, [binary_part(bin, whole, n - whole)], n - whole, index}}
  end

  defp sub_range(first, count, step), do: Range.new(first, first + (count - 1) * step, step)

  @doc """
  Applies `fun` to each chunk of `enumerable` (see `chunks/2`) concurrently, returning a lazy stream
  of results. `fun` may be a kernel from `Accel.kernel/1`: each chunk then goes through
  `Accel.map/3` (binary chunks of the `:type` option).

  ## Options

  #{Accel.Options.docs(@map_options)}

  `ordered`, `timeout` and `on_timeout` behave as in `Task.async_stream/3`; `max_concurrency`
  bounds the chunks running and the results waiting to be emitted together.

      iex> 1..10 |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, p: 61), chunk_size: 3) |> Enum.to_list()
      Accel.logistic_map(1..10, p: 61)
  """
  @spec map_chunks(Enumerable.t() | binary(), (term() -> term()), keyword()) :: Enumerable.t()
  def map_chunks(enumerable, fun, opts \\ [])

  # A kernel (Accel.kernel/1) maps each chunk with Accel.map/3.
  def map_chunks(enumerable, %Accel.Kernel{} = kernel, opts),
    do: map_chunks(enumerable, Accel.Kernel.chunk_function(kernel, opts), opts)

  def map_chunks(_enumerable, fun, _opts) when not is_function(fun, 1) do
    raise ArgumentError, "map_chunks/3 expects a 1-arity function, got: #{inspect(fun, limit: 5)}"
  end

  def map_chunks(enumerable, fun, opts) do
    opts = Accel.Options.validate!(opts, @map_options, "Accel.Stream.map_chunks/3")
    emit = opts[:emit]

    enumerable
    |> chunks(Keyword.take(opts, [:chunk_size, :type]))
    |> Accel.Stream.Window.run(
      fun,
      Keyword.put(opts, :max_concurrency, opts[:max_concurrency] || System.schedulers_online())
    )
    |> emit(emit)
  end

  defp emit(results, :chunks), do: Stream.map(results, &unwrap/1)

  defp emit(results, :elements) do
    Stream.flat_map(results, fn result ->
      case unwrap(result) do
        {:exit, _} = exit -> [exit]
        other -> elements(other, "Accel.Stream.map_chunks/3")
      end
    end)
  end

  # What `emit: :elements` makes of a chunk's result, here and in Accel.Flow: a list as it is, a
  # binary read as native-endian signed 64-bit integers (`as: :binary` results), any other
  # enumerable's elements.
  @doc false
  @spec elements(term(), String.t()) :: list()
  def elements(list, _function) when is_list(list), do: list

  def elements(binary, _function) when is_binary(binary) and rem(byte_size(binary), 8) == 0 do
    for <<x::signed-native-64 <- binary>>, do: x
  end

  def elements(other, function) do
    if Enumerable.impl_for(other) == nil or is_binary(other), do: not_elements!(other, function)
    Enum.to_list(other)
  end

  defp not_elements!(other, function) do
    raise ArgumentError,
          "#{function} with emit: :elements needs each result to be a list (or an enumerable), or a " <>
            "binary of whole signed 64-bit integers; got: #{inspect(other, limit: 5)}"
  end

  # The chunking options, for Accel.Flow's sources.
  @doc false
  def chunk_options, do: @chunk_options

  defp unwrap({:ok, result}), do: result
  defp unwrap({:exit, _reason} = exit), do: exit
end
