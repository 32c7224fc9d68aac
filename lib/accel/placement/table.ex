defmodule Accel.Placement.Table do
  @moduledoc false
  # Accel.Placement's table: the models (Accel.Placement.Model), the plans :auto calls remember and
  # a few counters, in an ETS table owned by a process of its own (it outlives callers, and makes
  # the corrections calls send it), saved to one file per machine.

  def lookup(key) do
    table()

    case :ets.lookup(__MODULE__, key) do
      [{^key, model}] -> model
      [] -> nil
    end
  end

  # A calibration is saved at once; what calls teach, at most every 10 s (a large call each
  # would otherwise write the file each).
  def put_model(key, model, save \\ :now) do
    :ets.insert(__MODULE__, {key, model})
    now = System.monotonic_time(:millisecond)

    case :ets.lookup(__MODULE__, {:meta, :saved_at}) do
      [{_, at}] when save == :throttled and now - at < 10_000 ->
        :ok

      _ ->
        :ets.insert(__MODULE__, {{:meta, :saved_at}, now})
        save()
    end
  end

  # The table lives in a process of its own, started on first use, so that it outlives callers; the
  # process (registered under this module's name) also makes the corrections calls send
  # (Accel.Placement.observe/2).
  def table do
    if :ets.whereis(__MODULE__) == :undefined do
      parent = self()

      {pid, ref} =
        spawn_monitor(fn ->
          if own_table() do
            load()
            send(parent, {__MODULE__, :ready})
            serve()
          else
            # another process made it first
            send(parent, {__MODULE__, :ready})
          end
        end)

      receive do
        {__MODULE__, :ready} -> Process.demonitor(ref, [:flush])
        {:DOWN, ^ref, :process, ^pid, reason} -> exit(reason)
      end
    end

    :ok
  end

  defp own_table do
    :ets.new(__MODULE__, [:named_table, :public, :set, read_concurrency: true])
    Process.register(self(), __MODULE__)
  rescue
    ArgumentError -> false
  end

  defp serve do
    receive do
      {:learn, key, observed, latency, scaled} ->
        # a correction is never worth the table: whatever fails (the file not written) is dropped
        try do
          Accel.Placement.Model.learn(key, observed, latency, scaled)
        rescue
          _ -> :ok
        end

      {:settle, from, ref} ->
        send(from, {ref, :settled})
    end

    serve()
  end

  @doc false
  # Returns once the table's process has made the corrections sent to it before (a message from
  # one process to another arrives in the order sent).
  def await_learning do
    with owner when is_pid(owner) <- Process.whereis(__MODULE__) do
      ref = Process.monitor(owner)
      send(owner, {:settle, self(), ref})

      receive do
        {^ref, :settled} -> Process.demonitor(ref, [:flush])
        {:DOWN, ^ref, :process, _, _} -> :ok
      end
    end
  end

  # {:meta, _} keys: counters and remembered plans, which are not calibrations
  def models, do: Enum.reject(:ets.tab2list(__MODULE__), &match?({:meta, _}, elem(&1, 0)))

  # ---- persistence: one file per machine (its devices and Accel's version) ----

  def store_path do
    devices = Enum.map(Accel.devices(), &{&1.backend, &1.id, &1.name, &1.memory, &1.compute_units})
    machine = {devices, :erlang.system_info(:system_architecture), Application.spec(:accel, :vsn)}

    id =
      :crypto.hash(:sha256, :erlang.term_to_binary(machine))
      |> Base.encode16(case: :lower)
      |> binary_part(0, 16)

    Path.join(Accel.Kernel.Native.cache_dir(), "placement-#{id}.etf")
  end

  defp load do
    with {:ok, bytes} <- File.read(store_path()),
         {:ok, entries} <- decode(bytes) do
      :ets.insert(__MODULE__, entries)
    end
  end

  # What save/0 wrote: a list of {key, model}. Anything else is a damaged file, ignored; a model
  # without the numbers its kind needs is left out (measured again), not handed to a call to raise.
  defp decode(bytes) do
    entries = :erlang.binary_to_term(bytes, [:safe])

    if Enum.all?(entries, &match?({_, %{}}, &1)),
      do: {:ok, Enum.filter(entries, &well_formed?/1)},
      else: :error
  rescue
    # not a term, atoms this VM does not know, not a proper list
    _ -> :error
  end

  defp well_formed?({key, model}) do
    needs =
      case key do
        :host -> [:decode, :encode]
        {:co_execution, _devices} -> [:correction, :observed]
        {_work, {_backend, _id, _name}} -> [:latency, :per_element, :correction, :observed]
        {_backend, _id, _name} -> [:latency, :upload, :download, :compute, :correction, :observed]
        _ -> [nil]
      end

    Enum.all?(needs, &Map.has_key?(model, &1)) and Enum.all?(Map.values(model), &is_number/1)
  end

  # Written atomically: a temporary file renamed into place.
  def save do
    path = store_path()
    tmp = path <> ".#{System.unique_integer([:positive])}"

    with :ok <- File.mkdir_p(Path.dirname(path)),
         :ok <- File.write(tmp, :erlang.term_to_binary(models())),
         do: File.rename(tmp, path)

    _ = File.rm(tmp)
    :ok
  end

  @doc false
  # Forgets the plans :auto calls remember (Accel.Placement.remembered/2).
  def forget_plans, do: :ets.match_delete(__MODULE__, {{:meta, {:plan, :_}}, :_, :_})
end
