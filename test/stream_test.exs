defmodule Accel.StreamTest do
  use ExUnit.Case, async: true
  alias Accel.Test.Reference

  doctest Accel.Stream
  doctest Accel.Dispatch

  describe "chunks/2" do
    test "chunk boundaries: sizes 1, chunk - 1, chunk, chunk + 1" do
      for chunk <- [1, 2, 7], n <- [0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 2] do
        list = Enum.to_list(1..n//1)
        from_list = Accel.Stream.chunks(list, chunk_size: chunk) |> Enum.to_list()
        from_range = Accel.Stream.chunks(1..n//1, chunk_size: chunk) |> Enum.to_list()
        from_binary = Accel.Stream.chunks(Reference.to_binary(list), chunk_size: chunk) |> Enum.to_list()

        assert Enum.concat(from_list) == list
        assert Enum.flat_map(from_range, &Enum.to_list/1) == list
        assert Enum.flat_map(from_binary, &Reference.from_binary/1) == list
        assert Enum.all?(from_list, &(length(&1) in 1..chunk))
        assert Enum.map(from_range, &Range.size/1) == Enum.map(from_list, &length/1)
        assert length(from_binary) == length(from_list), "chunk #{chunk}, n #{n}"
      end
    end

    test "ranges with steps and binaries are split without materialising" do
      assert Accel.Stream.chunks(100..1//-7, chunk_size: 5) |> Enum.flat_map(&Enum.to_list/1) ==
               Enum.to_list(100..1//-7)

      assert [%Range{}, %Range{}] = Accel.Stream.chunks(1..10, chunk_size: 5) |> Enum.to_list()
      huge = Accel.Stream.chunks(1..1_000_000_000_000, chunk_size: 10) |> Enum.take(2)
      assert huge == [1..10, 11..20]
    end

    test "bad chunk sizes and inputs" do
      assert_raise ArgumentError, "option :chunk_size must be a positive integer, got: 0", fn ->
        Accel.Stream.chunks(1..3, chunk_size: 0)
      end

      assert_raise ArgumentError, ~r/not a multiple of 8/, fn -> Accel.Stream.chunks(<<1, 2, 3>>) end
      assert_raise ArgumentError, ~r/expected an enumerable or a binary/, fn -> Accel.Stream.chunks(:nope) end
    end
  end

  describe "streams of binaries" do
    # A file of int64s read in pieces that split elements: chunks hold whole elements, in order.
    @tag :tmp_dir
    test "File.stream! of int64s, read in any size, gives the direct call's results", %{tmp_dir: dir} do
      path = Path.join(dir, "in.bin")
      input = Accel.logistic_map(-5_000..5_000, iterations: 0, as: :binary)
      File.write!(path, input)
      expected = Accel.logistic_map(input, as: :binary)

      for read <- [1, 7, 8, 1001, 8000, 1_000_000], chunk <- [1, 333, 10_001, 20_000] do
        stream = File.stream!(path, [], read)
        chunks = Accel.Stream.chunks(stream, chunk_size: chunk) |> Enum.to_list()
        assert IO.iodata_to_binary(chunks) == input
        assert Enum.all?(Enum.drop(chunks, -1), &(byte_size(&1) == chunk * 8)), "read #{read}, chunk #{chunk}"

        got =
          stream
          |> Accel.Stream.map_chunks(&Accel.logistic_map(&1, as: :binary), chunk_size: chunk, emit: :chunks)
          |> Enum.to_list()
          |> IO.iodata_to_binary()

        assert got == expected
      end

      assert Accel.Stream.map_chunks(File.stream!(path, [], 1001), &Accel.logistic_map(&1, as: :binary))
             |> Enum.to_list() == Accel.logistic_map(-5_000..5_000)
    end

    test "other element types split at their own width" do
      floats = for x <- 1..10, into: <<>>, do: <<x * 0.5::float-32-native>>
      pieces = [binary_part(floats, 0, 6), binary_part(floats, 6, 30), binary_part(floats, 36, 4)]
      chunks = Accel.Stream.chunks(pieces, chunk_size: 4, type: :f32) |> Enum.to_list()
      assert Enum.map(chunks, &byte_size/1) == [16, 16, 8]
      assert IO.iodata_to_binary(chunks) == floats
    end

    test "a stream that ends inside an element, or mixes binaries with other terms, raises" do
      assert_raise ArgumentError,
                   "a stream of binaries ended inside an element: 3 byte(s) left over, not a whole :s64 element (8 bytes)",
                   fn -> Accel.Stream.chunks([<<0::64>>, <<1, 2, 3>>]) |> Enum.to_list() end

      assert_raise ArgumentError, ~r/a stream of binaries holds a non-binary at index 1: 7/, fn ->
        Accel.Stream.chunks([<<0::64>>, 7]) |> Enum.to_list()
      end

      assert_raise ArgumentError, ~r/whole :s32 elements \(4 bytes each\): its size, 6 bytes/, fn ->
        Accel.Stream.chunks(<<1, 2, 3, 4, 5, 6>>, type: :s32)
      end
    end
  end

  describe "map_chunks/3" do
    test "same results as the direct call, for every chunk size and emit mode" do
      expected = Accel.logistic_map(1..10_007)

      for chunk <- [1, 999, 10_006, 10_007, 10_008] do
        assert Accel.Stream.map_chunks(1..10_007, &Accel.logistic_map/1, chunk_size: chunk) |> Enum.to_list() ==
                 expected

        binaries =
          Accel.Stream.map_chunks(1..10_007, &Accel.logistic_map(&1, as: :binary),
            chunk_size: chunk,
            emit: :chunks
          )

        assert binaries |> Enum.to_list() |> IO.iodata_to_binary() == Reference.to_binary(expected)
      end

      assert Accel.Stream.map_chunks(Enum.to_list(1..10_007), &Accel.logistic_map/1, chunk_size: 100)
             |> Enum.to_list() ==
               expected
    end

    test "binary results are emitted element by element" do
      assert Accel.Stream.map_chunks(1..10, &Accel.logistic_map(&1, as: :binary), chunk_size: 3)
             |> Enum.to_list() ==
               Accel.logistic_map(1..10)
    end

    test "emit: :elements takes any enumerable result, and names a result it cannot split" do
      assert Accel.Stream.map_chunks(1..10, &MapSet.new/1, chunk_size: 5) |> Enum.sort() ==
               Enum.to_list(1..10)

      for bad <- [:oops, <<1, 2, 3>>] do
        assert_raise ArgumentError,
                     ~r/map_chunks\/3 with emit: :elements needs each result.*got: #{inspect(bad)}/,
                     fn ->
                       Accel.Stream.map_chunks(1..10, fn _ -> bad end) |> Enum.to_list()
                     end
      end
    end

    test "keeps order, and ordered: false still yields every result" do
      slow_first = fn [x | _] = chunk ->
        if x == 1, do: Process.sleep(200)
        chunk
      end

      ordered =
        Accel.Stream.map_chunks(Enum.to_list(1..40), slow_first, chunk_size: 10, max_concurrency: 4)
        |> Enum.to_list()

      assert ordered == Enum.to_list(1..40)

      unordered =
        Accel.Stream.map_chunks(Enum.to_list(1..40), slow_first,
          chunk_size: 10,
          max_concurrency: 4,
          ordered: false,
          emit: :chunks
        )
        |> Enum.to_list()

      assert hd(unordered) != Enum.to_list(1..10)
      assert unordered |> Enum.concat() |> Enum.sort() == Enum.to_list(1..40)
    end

    test "back-pressure: an endless stream is pulled only as far as results are consumed" do
      for ordered <- [true, false] do
        # the first chunk stalls: nothing may be read ahead of it beyond max_concurrency chunks
        taken =
          Stream.iterate(1, &(&1 + 1))
          |> Accel.Stream.map_chunks(stalled_first(self(), 300),
            chunk_size: 100,
            max_concurrency: 2,
            ordered: ordered
          )
          |> Enum.take(250)

        if ordered, do: assert(taken == Accel.logistic_map(1..250))
        assert length(taken) == 250

        # 3 chunks were needed; with one place held by a result not yet taken, one more may start
        assert length(started_pids()) in 3..4, "ordered: #{ordered}"
      end
    end

    test "back-pressure: a stalled chunk holds the pipeline at max_concurrency chunks" do
      parent = self()

      # the first chunk stalls until told; the consumer wants everything
      consumer =
        Task.async(fn ->
          Stream.iterate(1, &(&1 + 1))
          |> Accel.Stream.map_chunks(
            fn chunk ->
              send(parent, {:chunk_started, self()})

              if hd(chunk) == 1 do
                send(parent, {:stalled, self()})
                receive(do: (:go -> :ok))
              end

              chunk
            end,
            chunk_size: 10,
            max_concurrency: 3
          )
          |> Enum.take(50)
        end)

      Process.sleep(300)
      assert length(started_pids()) == 3
      # release the stalled chunk (chunks start concurrently: its message may not come first)
      assert_received {:stalled, stalled}
      send(stalled, :go)
      assert Task.await(consumer) == Enum.to_list(1..50)
    end

    test "timeouts behave as in Task.async_stream" do
      slow = fn chunk ->
        Process.sleep(200)
        chunk
      end

      assert [{:exit, :timeout}] =
               Accel.Stream.map_chunks(1..3, slow, timeout: 10, on_timeout: :kill_task, emit: :chunks)
               |> Enum.to_list()

      assert catch_exit(Accel.Stream.map_chunks(1..3, slow, timeout: 10) |> Enum.to_list())
    end

    test "option errors" do
      assert_raise ArgumentError, ~r/unknown option :nope for Accel.Stream.map_chunks\/3/, fn ->
        Accel.Stream.map_chunks(1..3, & &1, nope: 1)
      end

      assert_raise ArgumentError, "option :emit must be one of :elements, :chunks, got: :all", fn ->
        Accel.Stream.map_chunks(1..3, & &1, emit: :all)
      end
    end
  end

  # A chunk function that reports each start and holds the first chunk for `ms`.
  defp stalled_first(parent, ms) do
    fn chunk ->
      send(parent, {:chunk_started, self()})
      if hd(chunk) == 1, do: Process.sleep(ms)
      Accel.logistic_map(chunk)
    end
  end

  defp started_pids do
    Stream.repeatedly(fn -> receive(do: ({:chunk_started, pid} -> pid), after: (0 -> nil)) end)
    |> Enum.take_while(& &1)
  end
end
