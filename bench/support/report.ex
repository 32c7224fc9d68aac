defmodule Accel.Bench.Report do
  @moduledoc false
  # Writes a benchmark's rows as a Markdown table, a CSV and an SVG bar chart (log-scale medians).
  # A row: %{name, form, process, samples: [seconds], note}; `baseline` is the median the ratios use.

  def markdown(rows, baseline, title) do
    header = """
    ## #{title}

    | variant | in -> out | process | min s | median s | max s | speed-up vs best pure Elixir |
    |---|---|---|---:|---:|---:|---:|
    """

    header <> Enum.map_join(rows, "\n", &md_row(&1, baseline)) <> "\n"
  end

  defp md_row(row, baseline) do
    %{min: min, median: median, max: max} = Accel.Timing.summarize(row.samples)

    "| #{row.name} | #{row.form} | #{row.process} | #{f(min)} | #{f(median)} | #{f(max)} | #{ratio(baseline, median)} |"
  end

  def csv(rows, baseline) do
    lines =
      for row <- rows do
        %{min: min, median: median, max: max} = Accel.Timing.summarize(row.samples)

        Enum.join(
          [
            q(row.name),
            q(row.form),
            q(row.process),
            f(min),
            f(median),
            f(max),
            Float.round(baseline / median, 3)
          ],
          ","
        )
      end

    Enum.join(["variant,form,process,min_s,median_s,max_s,speedup_vs_best_elixir" | lines], "\n") <> "\n"
  end

  def ratio(baseline, median), do: "#{Float.round(baseline / median, 1)}x"
  def f(s) when s >= 1, do: :erlang.float_to_binary(s / 1, decimals: 2)
  def f(s), do: :erlang.float_to_binary(s / 1, decimals: 4)
  defp q(s), do: ~s("#{s}")
end
