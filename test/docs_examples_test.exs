defmodule Accel.DocsExamplesTest do
  # The README's and the guides' Elixir examples (Livebook notebooks included), run: a renamed
  # option or a changed result fails here, not in a newcomer's first session. Each file's blocks
  # run in order in one environment (bindings, aliases and requires carry over); a line
  # `#=> value` asserts the value of the code above it. A block preceded by `<!-- not run: reason -->` is shown only (a mix.exs fragment, a
  # file that is not there).
  use ExUnit.Case, async: false

  @root Path.expand("..", __DIR__)
  @files [
    "README.md"
    | Path.wildcard(Path.join(@root, "guides/*.{md,livemd}")) |> Enum.map(&Path.relative_to(&1, @root))
  ]

  for file <- @files do
    @file_name file
    @external_resource Path.join(@root, file)
    code =
      Enum.map_join(Accel.Test.DocsExamples.blocks(File.read!(Path.join(@root, file))), "\n", &elem(&1, 1))

    # examples that need a backend or Nx run where the suite runs those
    @tag opencl: String.contains?(code, ":opencl"), nx: String.contains?(code, "Nx.")
    test "the examples of #{file} run and give what they show" do
      blocks = Accel.Test.DocsExamples.blocks(File.read!(Path.join(@root, @file_name)))
      if @file_name == "README.md", do: assert(length(blocks) >= 6, "the README's examples were not found")

      Enum.reduce(blocks, {[], env()}, fn {line, code}, state -> run_block(@file_name, line, code, state) end)
    end
  end

  # Runs the block's code piece by piece: each piece ends at a `#=>` line, whose value it must give.
  defp run_block(file, line, code, {binding, env}) do
    {pieces, rest} =
      code
      |> String.split("\n")
      |> Enum.with_index(line)
      |> Enum.reduce({[], []}, fn {l, n}, {pieces, acc} ->
        case String.trim_leading(l) do
          "#=> " <> expected -> {[{Enum.reverse(acc), expected, n} | pieces], []}
          _ -> {pieces, [{l, n} | acc]}
        end
      end)

    pieces = Enum.reverse(pieces) ++ if(rest == [], do: [], else: [{Enum.reverse(rest), nil, nil}])

    Enum.reduce(pieces, {binding, env}, fn {lines, expected, n}, {binding, env} ->
      first = lines |> List.first({"", line}) |> elem(1)
      source = Enum.map_join(lines, "\n", &elem(&1, 0))
      # one top-level expression at a time, as a module's file is compiled before its callers
      exprs =
        case Code.string_to_quoted!(source, file: file, line: first) do
          {:__block__, _, exprs} -> exprs
          expr -> [expr]
        end

      {value, binding, env} =
        Enum.reduce(exprs, {nil, binding, env}, fn expr, {_, binding, env} ->
          Code.eval_quoted_with_env(expr, binding, env)
        end)

      if expected do
        {want, _} = Code.eval_string(expected)

        assert value == want,
               "#{file}:#{n}: the code above gives #{inspect(value)}, the text shows #{expected}"
      end

      {binding, env}
    end)
  end

  defp env, do: Code.env_for_eval(file: "docs")
end
