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

  def svg(rows, title) do
    bar_h = 22
    left = 430
    width = 1000
    medians = Enum.map(rows, &Accel.Timing.summarize(&1.samples).median)
    lo = medians |> Enum.min() |> :math.log10() |> Float.floor()
    hi = medians |> Enum.max() |> :math.log10() |> Float.ceil()
    span = max(hi - lo, 1.0)
    x = fn s -> left + (:math.log10(s) - lo) / span * (width - left - 90) end
    height = 60 + length(rows) * bar_h

    bars =
      rows
      |> Enum.zip(medians)
      |> Enum.with_index()
      |> Enum.map_join("\n", fn {{row, m}, i} ->
        y = 40 + i * bar_h
        color = if String.starts_with?(row.name, "Elixir"), do: "#9b59b6", else: "#2e86c1"

        ~s[<text x="#{left - 6}" y="#{y + 15}" text-anchor="end">#{esc(row.name)} (#{esc(row.form)}, #{esc(row.process)})</text>] <>
          ~s[<rect x="#{left}" y="#{y + 3}" width="#{Float.round(x.(m) - left + 1, 1)}" height="#{bar_h - 6}" fill="#{color}"/>] <>
          ~s[<text x="#{Float.round(x.(m) + 4, 1)}" y="#{y + 15}">#{f(m)} s</text>]
      end)

    ticks =
      for e <- trunc(lo)..trunc(hi) do
        tx = Float.round(x.(:math.pow(10, e)), 1)

        ~s[<line x1="#{tx}" y1="34" x2="#{tx}" y2="#{height - 20}" stroke="#ddd"/><text x="#{tx}" y="#{height - 6}" text-anchor="middle">10^#{e} s</text>]
      end

    """
    <svg xmlns="http://www.w3.org/2000/svg" width="#{width}" height="#{height}" font-family="sans-serif" font-size="12">
    <rect width="100%" height="100%" fill="white"/>
    <text x="10" y="20" font-size="15">#{esc(title)} (median seconds, log scale)</text>
    #{Enum.join(ticks, "\n")}
    #{bars}
    </svg>
    """
  end

  def ratio(baseline, median), do: "#{Float.round(baseline / median, 1)}x"
  def f(s) when s >= 1, do: :erlang.float_to_binary(s / 1, decimals: 2)
  def f(s), do: :erlang.float_to_binary(s / 1, decimals: 4)
  defp q(s), do: ~s("#{s}")

  defp esc(s),
    do: s |> String.replace("&", "&amp;") |> String.replace("<", "&lt;") |> String.replace(">", "&gt;")
end
