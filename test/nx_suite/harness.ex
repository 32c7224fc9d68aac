defmodule Accel.Test.NxSuite do
  @moduledoc false
  # bin/nx-suite's harness around Nx's own tests (test/nx_suite/setup.exs, load.exs): which
  # exclusions apply to a run, and the comparison of host copies that load.exs puts in asserts.

  @doc "Whether an exclusion entry applies to this run (absent keys apply everywhere)."
  def applies?(entry, run) do
    version_ok = entry |> Map.get(:nx, :any) |> on_version?(run[:nx])
    device_ok = entry[:device] == nil or run[:device] in List.wrap(entry[:device])
    mode_ok = entry[:mode] in [nil, run[:mode]]
    version_ok and device_ok and mode_ok
  end

  defp on_version?(:any, _nx), do: true
  defp on_version?(line, nx), do: String.starts_with?(nx, line <> ".")

  @comparisons [:==, :!=, :===, :!==]

  @doc """
  The AST with each comparison that decides an `assert`, `refute`, `if` or `unless` comparing host
  copies (load.exs), outside defn bodies (where `==` is Nx's).
  """
  def compare_host_copies({defn, _, _} = ast) when defn in [:defn, :defnp], do: ast

  def compare_host_copies({check, meta, [{op, op_meta, [left, right]} | rest]})
      when check in [:assert, :refute, :if, :unless] and op in @comparisons do
    left = host_call(compare_host_copies(left))
    right = host_call(compare_host_copies(right))
    {check, meta, [{op, op_meta, [left, right]} | compare_host_copies(rest)]}
  end

  # `assert pattern = expr`: the pattern matches the host copy (a variable it repeats, as in
  # `{x, x}`, compares two tensors)
  def compare_host_copies({:assert, meta, [{:=, op_meta, [pattern, expr]} | rest]}),
    do:
      {:assert, meta,
       [{:=, op_meta, [pattern, host_call(compare_host_copies(expr))]} | compare_host_copies(rest)]}

  def compare_host_copies({call, meta, args}),
    do: {compare_host_copies(call), meta, compare_host_copies(args)}

  def compare_host_copies({left, right}), do: {compare_host_copies(left), compare_host_copies(right)}
  def compare_host_copies(list) when is_list(list), do: Enum.map(list, &compare_host_copies/1)
  def compare_host_copies(other), do: other

  defp host_call(ast), do: quote(do: Accel.Test.NxSuite.host(unquote(ast)))

  @doc "A term with each Accel tensor in it (in tuples, lists, maps and structs) copied to the host."
  def host(%Nx.Tensor{data: %Accel.Nx.Backend{}} = t), do: t |> Nx.backend_copy(Nx.BinaryBackend) |> nx_nan()
  def host(%Nx.Tensor{} = t), do: t
  def host(tuple) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> Enum.map(&host/1) |> List.to_tuple()
  def host([head | tail]), do: [host(head) | host(tail)]

  def host(%_{} = struct),
    do: Enum.reduce(Map.from_struct(struct), struct, fn {k, v}, acc -> %{acc | k => host(v)} end)

  def host(%{} = map), do: Map.new(map, fn {k, v} -> {host(k), host(v)} end)
  def host(other), do: other

  # A NaN's sign and payload are not Nx values (Nx reads every NaN as :nan, and writes :nan as one
  # quiet NaN): a host copy writes each NaN as Nx does, so that == compares values.
  defp nx_nan(%Nx.Tensor{type: {kind, _}} = t) when kind in [:f, :bf] do
    if Nx.to_number(Nx.any(Nx.is_nan(Nx.devectorize(t)))) == 1,
      do: Nx.select(Nx.is_nan(t), Nx.tensor(:nan, type: t.type, backend: Nx.BinaryBackend), t),
      else: t
  end

  # (a complex tensor's parts likewise, in its bits: each NaN part as Nx writes :nan, the other
  # part as it is)
  defp nx_nan(%Nx.Tensor{type: {:c, size}, vectorized_axes: []} = t) do
    bits = div(size, 2)
    data = for <<part::bitstring-size(bits) <- Nx.to_binary(t)>>, into: <<>>, do: nx_nan_bits(part, bits)
    data |> Nx.from_binary(t.type, backend: Nx.BinaryBackend) |> Nx.reshape(t.shape, names: t.names)
  end

  defp nx_nan(t), do: t

  defp nx_nan_bits(<<u::32-native>> = part, 32) do
    if Bitwise.band(u, 0x7F800000) == 0x7F800000 and Bitwise.band(u, 0x7FFFFF) != 0,
      do: <<0x7FC00000::32-native>>,
      else: part
  end

  defp nx_nan_bits(<<u::64-native>> = part, 64) do
    if Bitwise.band(u, 0x7FF0000000000000) == 0x7FF0000000000000 and Bitwise.band(u, 0xFFFFFFFFFFFFF) != 0,
      do: <<0x7FF8000000000000::64-native>>,
      else: part
  end
end

defmodule Accel.Test.NxSuite.Counter do
  @moduledoc false
  # An ExUnit formatter for bin/nx-suite: counts each test file's tests (run, passed, failed,
  # excluded, skipped, invalid) and writes them, with the failures' names and the exclusions that
  # matched, to the report file as an Erlang term (test/nx_suite/report.exs reads it).
  use GenServer

  @impl true
  def init(_opts), do: {:ok, %{files: %{}, failures: [], matched: %{}}}

  @impl true
  def handle_cast({:test_finished, %ExUnit.Test{} = test}, state) do
    if path = System.get_env("ACCEL_NX_SUITE_TRACE"),
      do: File.write!(path, "end #{test.module} #{test.name}\n", [:append])

    file = test.tags |> Map.get(:file, "?") |> relative()
    outcome = outcome(test.state)
    counts = Map.get(state.files, file, %{})
    state = %{state | files: Map.put(state.files, file, Map.update(counts, outcome, 1, &(&1 + 1)))}

    state =
      case outcome do
        :failed -> %{state | failures: [{file, to_string(test.name)} | state.failures]}
        :excluded -> %{state | matched: Map.update(state.matched, to_string(test.name), 1, &(&1 + 1))}
        _ -> state
      end

    {:noreply, state}
  end

  def handle_cast({:suite_finished, _times}, state) do
    config = Application.get_env(:accel, :nx_suite, %{})

    if path = config[:report] do
      unmatched = for {name, _} <- config.exclusions, not Map.has_key?(state.matched, name), do: name

      report = %{
        run: config.run,
        files: state.files,
        failures: Enum.sort(state.failures),
        exclusions: config.exclusions,
        # tests excluded per name (a name shared by tests of two modules excludes both)
        matched: Map.take(state.matched, Map.keys(config.exclusions)),
        unmatched: unmatched
      }

      File.mkdir_p!(Path.dirname(path))
      File.write!(path, :erlang.term_to_binary(report))
    end

    {:noreply, state}
  end

  def handle_cast({:test_started, test}, state) do
    if path = System.get_env("ACCEL_NX_SUITE_TRACE"),
      do: File.write!(path, "start #{test.module} #{test.name}\n", [:append])

    {:noreply, state}
  end

  def handle_cast(_event, state), do: {:noreply, state}

  defp outcome(nil), do: :passed
  defp outcome({:failed, _}), do: :failed
  defp outcome({:excluded, _}), do: :excluded
  defp outcome({:skipped, _}), do: :skipped
  defp outcome({:invalid, _}), do: :invalid

  defp relative(file), do: Path.relative_to(file, Path.join(System.fetch_env!("ACCEL_NX_SUITE"), "test"))
end
