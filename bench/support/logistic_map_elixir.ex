defmodule LogisticMapElixir do
  # The original experiment's pure-Elixir code: ten Enum.map passes, the step inlined in each.
  def calc(x, p, mu), do: rem(mu * x * (x + 1), p)

  def map10(enum, p, mu) do
    enum
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
    |> Enum.map(&calc(&1, p, mu))
  end

  def async_stream(n, stages, p, mu) do
    size = div(n + stages - 1, stages)

    0..(stages - 1)
    |> Enum.map(fn i -> (i * size + 1)..min((i + 1) * size, n)//1 end)
    |> Task.async_stream(&map10(&1, p, mu), max_concurrency: stages, timeout: :infinity)
    |> Enum.flat_map(fn {:ok, list} -> list end)
  end
end
