defmodule Accel.Stream do
  @moduledoc """
  Pipelines that offload chunks of a large or endless input to Accel.

      1..100_000_000
      |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, as: :binary), chunk_size: 1_000_000, emit: :chunks)
      |> Enum.each(&File.write!("out.bin", &1, [:append]))

  Elements are batched into chunks lazily, chunks are dispatched with bounded concurrency and
  back-pressure (`Task.async_stream/3` underneath: a chunk is taken from the input only when there is
  room for it), and results come out chunk by chunk, in order unless `ordered: false`. Memory stays
  bounded by `max_concurrency` chunks however long the input, endless streams included.

  Ranges are split into sub-ranges and binaries into sub-binaries (both without copying or
  materialising anything); other enumerables into lists.
  """

  @default_chunk_size 1_000_000

  @map_options [
    chunk_size: [rule: {:integer, 1, nil}, default: @default_chunk_size, doc: "elements per chunk"],
    max_concurrency: [
      rule: {:integer, 1, nil},
      default: nil,
      default_doc: "`System.schedulers_online/0`",
      doc: "chunks in flight at once"
    ],
    ordered: [rule: :boolean, default: true, doc: "emit results in input order"],
    timeout: [rule: :timeout, default: :infinity, doc: "per chunk, in milliseconds or `:infinity`"],
    on_timeout: [
      rule: {:in, [:exit, :kill_task]},
      default: :exit,
      doc: "`:exit`, or `:kill_task`, which emits `{:exit, :timeout}` for that chunk"
    ],
    emit: [
      rule: {:in, [:elements, :chunks]},
      default: :elements,
      doc:
        "`:elements` emits each element of each result (a list, or a binary of int64s); " <>
          "`:chunks` emits each chunk's result as it is"
    ]
  ]

  @doc """
  Splits `input` into chunks of at most `:chunk_size` elements (default #{@default_chunk_size}),
  lazily: a `Range` into sub-ranges, a binary of int64s into sub-binaries, any other enumerable into
  lists.

      iex> Accel.Stream.chunks(1..10, chunk_size: 4) |> Enum.to_list()
      [1..4, 5..8, 9..10]

      iex> Accel.Stream.chunks(10..1//-3, chunk_size: 3) |> Enum.to_list()
      [10..4//-3, 1..1//-3]

      iex> Accel.Stream.chunks([1, 2, 3], chunk_size: 2) |> Enum.to_list()
      [[1, 2], [3]]
  """
  @spec chunks(Enumerable.t() | binary(), keyword()) :: Enumerable.t()
  def chunks(input, opts \\ []) do
    opts = Accel.Options.validate!(opts, Keyword.take(@map_options, [:chunk_size]), "Accel.Stream.chunks/2")
    do_chunks(input, opts[:chunk_size])
  end

  defp do_chunks(%Range{first: first, step: step} = range, size) do
    count = Range.size(range)

    Stream.unfold(0, fn
      done when done >= count -> nil
      done -> {sub_range(first + done * step, min(size, count - done), step), done + size}
    end)
  end

  defp do_chunks(binary, size) when is_binary(binary) do
    if rem(byte_size(binary), 8) != 0 do
      raise ArgumentError,
            "binary input must hold whole signed 64-bit integers: its size, #{byte_size(binary)} bytes, is not a multiple of 8"
    end

    bytes = size * 8

    Stream.unfold(0, fn
      offset when offset >= byte_size(binary) -> nil
      offset -> {binary_part(binary, offset, min(bytes, byte_size(binary) - offset)), offset + bytes}
    end)
  end

  defp do_chunks(enumerable, size) do
    if Enumerable.impl_for(enumerable) == nil do
      raise ArgumentError, "expected an enumerable or a binary, got: #{inspect(enumerable, limit: 5)}"
    end

    Stream.chunk_every(enumerable, size)
  end

  defp sub_range(first, count, step), do: Range.new(first, first + (count - 1) * step, step)

  @doc """
  Applies `fun` to each chunk of `enumerable` (see `chunks/2`) concurrently, returning a lazy stream
  of results.

  ## Options

  #{Accel.Options.docs(@map_options)}

  `max_concurrency`, `ordered`, `timeout` and `on_timeout` behave as in `Task.async_stream/3`.

      iex> 1..10 |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, p: 61), chunk_size: 3) |> Enum.to_list()
      Accel.logistic_map(1..10, p: 61)
  """
  @spec map_chunks(Enumerable.t() | binary(), (term() -> term()), keyword()) :: Enumerable.t()
  def map_chunks(enumerable, fun, opts \\ [])

  def map_chunks(_enumerable, fun, _opts) when not is_function(fun, 1) do
    raise ArgumentError, "map_chunks/3 expects a 1-arity function, got: #{inspect(fun, limit: 5)}"
  end

  def map_chunks(enumerable, fun, opts) do
    opts = Accel.Options.validate!(opts, @map_options, "Accel.Stream.map_chunks/3")
    emit = opts[:emit]

    enumerable
    |> chunks(chunk_size: opts[:chunk_size])
    |> Task.async_stream(
      fun,
      Keyword.take(opts, [:ordered, :timeout, :on_timeout]) ++
        [max_concurrency: opts[:max_concurrency] || System.schedulers_online()]
    )
    |> emit(emit)
  end

  defp emit(results, :chunks), do: Stream.map(results, &unwrap/1)

  defp emit(results, :elements) do
    Stream.flat_map(results, fn result ->
      case unwrap(result) do
        binary when is_binary(binary) -> for <<x::signed-native-64 <- binary>>, do: x
        {:exit, _} = exit -> [exit]
        other -> other
      end
    end)
  end

  defp unwrap({:ok, result}), do: result
  defp unwrap({:exit, _reason} = exit), do: exit
end
