defmodule Accel.Bench.Chart do
  @moduledoc false
  # The benchmarks' charts, drawn as SVG by gnuplot (Debian's gnuplot-nox, which
  # `bin/setup --bench` installs) beside the tables they show. Each chart is a small gnuplot script
  # over a data file, both written to a temporary directory; where gnuplot is missing the chart is
  # skipped with a note, and the tables are written all the same.

  @size "900,520"

  @doc """
  Lines over a logarithmic x axis: `series` is `[{name, [{x, y}]}]`, points in any order. Options:
  `:logy` (default true), `:ylabel`, `:xlabel`, `:key` (gnuplot's key position, default "top left"),
  `:hline` (`{y, name}`: a dashed line across the chart at y).
  """
  def lines(path, title, series, opts \\ []) do
    series = Enum.reject(series, fn {_, points} -> points == [] end)

    data =
      series
      |> Enum.map_join("\n\n\n", fn {_name, points} ->
        points |> Enum.sort() |> Enum.map_join("\n", fn {x, y} -> "#{num(x)} #{num(y)}" end)
      end)

    plots =
      series
      |> Enum.with_index()
      |> Enum.map(fn {{name, _}, i} ->
        "DATA index #{i} using 1:2 with linespoints lw 2 pt 7 title \"#{escape(name)}\" noenhanced"
      end)
      |> Kernel.++(
        for {y, name} <- List.wrap(opts[:hline]),
            do: "#{num(y)} with lines dt 2 lc rgb \"gray\" title \"#{escape(name)}\""
      )
      |> Enum.join(", ")

    draw(path, data, """
    set title "#{escape(title)}" noenhanced
    set xlabel "#{escape(Keyword.get(opts, :xlabel, "elements"))}"
    set ylabel "#{escape(Keyword.get(opts, :ylabel, ""))}"
    set logscale x
    #{if Keyword.get(opts, :logy, true), do: "set logscale y", else: "unset logscale y"}
    set format x "10^{%L}"
    set grid
    set key #{Keyword.get(opts, :key, "top left")}
    plot #{plots}
    """)
  end

  @doc """
  Horizontal bars over a logarithmic axis, one per `{label, value}`, top to bottom in the order
  given. `:xlabel` names the axis.
  """
  def bars(path, title, rows, opts \\ []) do
    rows = Enum.reverse(rows)
    {least, most} = rows |> Enum.map(&elem(&1, 1)) |> Enum.min_max()
    {floor, ceiling} = {least / 3, most * 8}

    data =
      rows
      |> Enum.with_index()
      |> Enum.map_join("\n", fn {{label, value}, i} -> "#{i} #{num(value)} \"#{escape(label)}\"" end)

    margin = rows |> Enum.map(&String.length(elem(&1, 0))) |> Enum.max() |> Kernel.*(0.92) |> ceil()

    draw(
      path,
      data,
      """
      set title "#{escape(title)}"
      set xlabel "#{escape(Keyword.get(opts, :xlabel, "seconds"))}"
      set logscale x
      set format x "10^{%L}"
      set grid x
      set ytics nomirror noenhanced
      set yrange [-0.7:#{length(rows) - 0.3}]
      set xrange [#{num(floor)}:#{num(ceiling)}]
      set style fill solid 0.7
      unset key
      set lmargin #{margin}
      plot DATA using (#{num(floor)}):1:(#{num(floor)}):2:($1-0.35):($1+0.35):ytic(3) with boxxyerror lc rgb "#4878a8", \\
           DATA using 2:1:(sprintf(" %.3g", $2)) with labels left noenhanced
      """,
      "1300,#{80 + 22 * length(rows)}"
    )
  end

  defp draw(path, data, script, size \\ @size) do
    case System.find_executable("gnuplot") do
      nil ->
        IO.puts("(no gnuplot: #{path} not drawn; bin/setup --bench installs gnuplot-nox)")

      gnuplot ->
        dir = Path.join(System.tmp_dir!(), "accel-chart-#{System.unique_integer([:positive])}")
        File.mkdir_p!(dir)
        data_path = Path.join(dir, "data.txt")
        File.write!(data_path, data <> "\n")

        full = """
        set terminal svg size #{size} dynamic enhanced font "sans,12" background "white"
        set output "#{Path.expand(path)}"
        DATA = "#{data_path}"
        #{script}
        """

        script_path = Path.join(dir, "chart.gp")
        File.write!(script_path, full)
        {out, status} = System.cmd(gnuplot, [script_path], stderr_to_stdout: true)
        File.rm_rf!(dir)
        if status != 0, do: raise("gnuplot failed drawing #{path}:\n#{out}")
        IO.puts("Wrote #{path}")
    end
  end

  defp num(x) when is_integer(x), do: Integer.to_string(x)
  defp num(x), do: :erlang.float_to_binary(x / 1, [:short])

  defp escape(text), do: String.replace(text, ~s("), ~s(\\"))

  @doc """
  bench/logistic_map.exs's chart from its CSV (`path`): each row's median, pure Elixir and Accel
  alike, as bars.
  """
  def logistic_map(csv_path, svg_path, title) do
    rows =
      for line <- csv_path |> File.read!() |> String.split("\n", trim: true) |> tl(),
          [_, variant, form, process, median] <- [
            Regex.run(~r/^"([^"]*)","([^"]*)","([^"]*)",[^,]+,([^,]+),/, line)
          ],
          do: {"#{variant} (#{form}, #{process})", String.to_float(median)}

    bars(svg_path, title <> " (median seconds)", rows)
  end

  @doc """
  A markdown table (the first under the heading that starts with `heading`) as rows of cells.
  """
  def table(md_path, heading) do
    md_path
    |> File.read!()
    |> String.split("\n")
    |> Enum.drop_while(&(not String.starts_with?(&1, heading)))
    |> Enum.drop_while(&(not String.starts_with?(&1, "|")))
    |> Enum.take_while(&String.starts_with?(&1, "|"))
    |> Enum.map(fn line -> line |> String.trim("|") |> String.split("|") |> Enum.map(&String.trim/1) end)
    |> Enum.reject(fn [first | _] -> String.starts_with?(first, "--") or String.starts_with?(first, ":-") end)
  end

  @doc "bench/speedup.exs's chart from its CSV: each backend and form's speed-up against size."
  def speedup(csv, svg) do
    series =
      csv
      |> File.read!()
      |> String.split("\n", trim: true)
      |> tl()
      |> Enum.map(&String.split(&1, ","))
      |> Enum.group_by(fn [_, b, f | _] -> "#{b}, #{f} in and out" end, fn [n, _, _, t, e] ->
        {String.to_integer(n), String.to_float(e) / String.to_float(t)}
      end)
      |> Enum.sort()

    lines(svg, "Logistic map: speed-up over pure Elixir (Enum.map on a list)", series,
      ylabel: "speed-up (pure Elixir time / Accel time)",
      hline: {1, "as fast as pure Elixir"}
    )
  end

  @doc """
  bench/placement.exs's chart from its markdown (`md_path`): for the logistic map, each fixed
  device's time and `backend: :auto`'s against the CPU backend's, by size, so that where the
  choice crosses from the CPU to a device shows.
  """
  def placement(md_path, svg_path) do
    [header | rows] = table(md_path, "## The logistic map")
    at = fn name -> Enum.find_index(header, &(&1 == name)) end
    cpu = at.("cpu, s")

    devices =
      for {name, i} <- Enum.with_index(header),
          String.ends_with?(name, ", s"),
          name not in [":all, s", "every device, s"],
          do: {String.replace_suffix(name, ", s", ""), i}

    series =
      for {name, i} <- devices do
        points =
          for row <- rows do
            n = row |> Enum.at(at.("elements")) |> String.to_integer()
            {n, number(Enum.at(row, i)) / number(Enum.at(row, cpu))}
          end

        {if(name == ":auto", do: "backend: :auto", else: name), points}
      end

    lines(svg_path, "Logistic map: each device's time over the CPU backend's (below 1: faster)", series,
      ylabel: "time / the CPU backend's time",
      key: "bottom left"
    )
  end

  defp number(text) do
    case Float.parse(text) do
      {x, _} -> x
      :error -> raise ArgumentError, "not a number in a results table: #{inspect(text)}"
    end
  end
end
