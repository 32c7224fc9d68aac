defmodule Accel.Test.DocsExamples do
  @moduledoc false
  # The Elixir examples of a Markdown text (test/docs_examples_test.exs runs them).

  # [{line, code}] of the ```elixir blocks not marked as not run.
  def blocks(text) do
    lines = String.split(text, "\n")

    lines
    |> Enum.with_index(1)
    |> Enum.filter(fn {l, _} -> l == "```elixir" end)
    |> Enum.reject(fn {_, n} -> n > 1 and String.starts_with?(Enum.at(lines, n - 2), "<!-- not run:") end)
    |> Enum.map(fn {_, n} ->
      code = lines |> Enum.drop(n) |> Enum.take_while(&(&1 != "```")) |> Enum.join("\n")
      {n + 1, code}
    end)
  end
end
