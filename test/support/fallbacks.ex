if Code.ensure_loaded?(Nx) do
  defmodule Accel.Test.Fallbacks do
    @moduledoc false
    # Counting Accel.Nx.Backend's fallbacks to Nx.BinaryBackend in a test: `setup :count` attaches
    # a telemetry handler that sends the test process each fallback of its own (async tests run
    # beside it); `received/0` drains them and `none!/0` fails the test naming the first.
    import ExUnit.Assertions

    def count(_context) do
      id = {__MODULE__, make_ref()}
      :telemetry.attach(id, [:accel, :nx, :fallback], &__MODULE__.forward/4, self())
      ExUnit.Callbacks.on_exit(fn -> :telemetry.detach(id) end)
      :ok
    end

    @doc false
    def forward(_event, _measurements, meta, test), do: if(self() == test, do: send(test, {:fallback, meta}))

    @doc "The fallbacks this process received since the last call, oldest first."
    def received do
      receive do
        {:fallback, meta} -> [meta | received()]
      after
        0 -> []
      end
    end

    @doc "Fails when any fallback was received."
    def none! do
      case received() do
        [] -> :ok
        [meta | _] -> flunk("fell back to Nx.BinaryBackend: #{inspect(meta)}")
      end
    end
  end
end
