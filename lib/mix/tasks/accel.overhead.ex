defmodule Mix.Tasks.Accel.Overhead do
  @shortdoc "Prints what crossing Accel's NIF costs, per call and per element"
  @moduledoc """
  Prints a Markdown table of NIF crossing costs measured on this machine (see `Accel.Crossing`).

      mix accel.overhead [--elements 1000000] [--runs 5]
  """
  use Mix.Task

  @impl true
  def run(args) do
    {opts, rest, invalid} = OptionParser.parse(args, strict: [elements: :integer, runs: :integer])

    case {invalid, rest} do
      {[], []} ->
        :ok

      {[{flag, nil} | _], _} ->
        Mix.raise("mix accel.overhead: unknown option #{flag}; known: --elements N, --runs N")

      {[{flag, value} | _], _} ->
        Mix.raise("mix accel.overhead: #{flag} expects a positive integer, got: #{value}")

      {[], [arg | _]} ->
        Mix.raise("mix accel.overhead: unexpected argument #{inspect(arg)}")
    end

    Mix.Task.run("app.start")

    rows =
      try do
        Accel.Crossing.measure(opts)
      rescue
        e in ArgumentError -> Mix.raise("mix accel.overhead: #{Exception.message(e)}")
      end

    n = rows |> Enum.find_value(& &1[:elements]) || 0

    Mix.shell().info("""
    | crossing | per call (empty input) | per element (at #{n} elements) |
    |---|---:|---:|
    #{Enum.map_join(rows, "\n", &row/1)}

    Medians of #{Keyword.get(opts, :runs, 5)} samples; per-element costs are net of the per-call cost.
    Inputs of more than 10000 elements run on a dirty CPU scheduler, so their per-call share includes that hop.
    """)
  end

  defp row(%{crossing: name, per_call_ns: call} = r) do
    element = if e = r[:per_element_ns], do: "#{Float.round(e, 2)} ns", else: "-"
    "| #{name} | #{format_ns(call)} | #{element} |"
  end

  defp format_ns(ns) when ns >= 1000, do: "#{Float.round(ns / 1000, 2)} us"
  defp format_ns(ns), do: "#{round(ns)} ns"
end
