defmodule Accel.Test.DocsExamples do
  @moduledoc false
  # The Elixir examples of a Markdown text (test/docs_examples_test.exs runs them).

  # [{line, code}] of the ```elixir blocks not marked as not run: the last non-blank line before the
  # block starts with `<!-- not run:` (Livebook keeps a blank line after such a comment).
  def blocks(text) do
    lines = String.split(text, "\n")

    lines
    |> Enum.with_index(1)
    |> Enum.filter(fn {l, _} -> l == "```elixir" end)
    |> Enum.reject(fn {_, n} -> lines |> Enum.take(n - 1) |> Enum.reverse() |> not_run?() end)
    |> Enum.map(fn {_, n} ->
      code = lines |> Enum.drop(n) |> Enum.take_while(&(&1 != "```")) |> Enum.join("\n")
      {n + 1, code}
    end)
  end

  defp not_run?(before) do
    case Enum.drop_while(before, &(String.trim(&1) == "")) do
      [line | _] -> String.starts_with?(line, "<!-- not run:")
      [] -> false
    end
  end
end
