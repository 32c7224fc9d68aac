defmodule Accel.Options do
  @moduledoc false
  # One validator for the options of every public function, in the spirit of NimbleOptions: each
  # function declares a schema (each option's rule, default and doc); validate!/3 checks a keyword
  # list against it and returns it with every default filled in; docs/1 renders the same schema as
  # the "## Options" list of the function's @doc, so the docs cannot drift from the checks.
  #
  # Rules: :integer (signed 64-bit), {:integer, min, max | nil}, :boolean, {:in, values},
  # :timeout (milliseconds or :infinity), {:timeout, min} (at least min milliseconds, or
  # :infinity), {:custom, module, function, expected} (function(value) returns true when valid). nil is accepted wherever the default is nil ("not given"); a default
  # computed when the function runs is nil in the schema, described by `default_doc:`.
  #
  # One rule for duplicated options, everywhere: an option given twice is an error. Keyword.get/2
  # would silently take the first and Keyword.put/3 the last; neither is what the caller meant.

  @type schema :: [{atom(), keyword()}]

  @doc false
  @spec validate!(term(), schema(), String.t()) :: keyword()
  def validate!(opts, schema, function) do
    keyword!(opts, function)
    check_each(opts, schema, function, [])
    # (called for every operation of Accel.Tensor: plain list functions, no MapSet or Access)
    for {key, spec} <- schema do
      case :lists.keyfind(key, 1, opts) do
        {^key, value} -> {key, value}
        false -> {key, Keyword.get(spec, :default)}
      end
    end
  end

  defp check_each([], _schema, _function, _seen), do: :ok

  defp check_each([{key, value} | rest], schema, function, seen) do
    spec =
      case :lists.keyfind(key, 1, schema) do
        {^key, spec} -> spec
        false -> nil
      end

    cond do
      spec == nil ->
        known = schema |> Keyword.keys() |> Enum.map_join(", ", &inspect/1)
        raise ArgumentError, "unknown option #{inspect(key)} for #{function}; known options: #{known}"

      key in seen ->
        raise ArgumentError, "option #{inspect(key)} is given twice to #{function}; give each option once"

      is_nil(value) and Keyword.get(spec, :default) == nil ->
        :ok

      not valid?(Keyword.get(spec, :rule), value) ->
        raise ArgumentError,
              "option #{inspect(key)} must be #{expected(Keyword.get(spec, :rule))}, got: #{inspect(value, limit: 5)}"

      true ->
        :ok
    end

    check_each(rest, schema, function, [key | seen])
  end

  @doc "Raises ArgumentError naming `function` unless `opts` is a keyword list (a proper one)."
  def keyword!(opts, function) do
    unless keyword?(opts) do
      raise ArgumentError, "#{function} expects options as a keyword list, got: #{inspect(opts, limit: 5)}"
    end

    opts
  end

  # A proper list of {atom, value} pairs (Enum.all?/2 would raise FunctionClauseError on an
  # improper list's tail).
  defp keyword?([]), do: true
  defp keyword?([{key, _} | rest]) when is_atom(key), do: keyword?(rest)
  defp keyword?(_), do: false

  @doc false
  @spec docs(schema()) :: String.t()
  def docs(schema) do
    Enum.map_join(schema, "\n", fn {key, spec} ->
      default =
        cond do
          text = spec[:default_doc] -> " (default: #{text})"
          spec[:default] == nil -> ""
          true -> " (default: `#{inspect(spec[:default])}`)"
        end

      "  * `#{inspect(key)}` - #{spec[:doc]}#{default}"
    end)
  end

  @doc false
  def valid?(:integer, v), do: is_integer(v) and v >= -0x8000000000000000 and v <= 0x7FFFFFFFFFFFFFFF
  def valid?({:integer, min, max}, v), do: is_integer(v) and v >= min and (max == nil or v <= max)
  def valid?(:boolean, v), do: is_boolean(v)
  def valid?({:in, values}, v), do: v in values
  def valid?(:timeout, v), do: v == :infinity or (is_integer(v) and v >= 0)
  def valid?({:timeout, min}, v), do: v == :infinity or (is_integer(v) and v >= min)
  def valid?({:custom, m, f, _expected}, v), do: apply(m, f, [v])

  @doc false
  # What a value must be, for an option or setting whose default is `default` (nil is then allowed).
  def expected(rule, nil), do: "nil or " <> expected(rule)
  def expected(rule, _default), do: expected(rule)

  @doc false
  def expected(:integer), do: "an integer in the signed 64-bit range"
  def expected({:integer, 1, 0x7FFFFFFFFFFFFFFF}), do: "a positive integer below 2^63"
  def expected({:integer, 0, 0x7FFFFFFFFFFFFFFF}), do: "a non-negative integer below 2^63"
  def expected({:integer, 1, nil}), do: "a positive integer"
  def expected({:integer, 0, nil}), do: "a non-negative integer"
  def expected({:integer, min, nil}), do: "an integer of at least #{min}"
  def expected({:integer, min, max}), do: "an integer in #{min}..#{max}"
  def expected(:boolean), do: "true or false"
  def expected({:in, values}), do: "one of " <> Enum.map_join(values, ", ", &inspect/1)
  def expected(:timeout), do: "a non-negative number of milliseconds or :infinity"
  def expected({:timeout, min}), do: "a number of milliseconds of at least #{min}, or :infinity"
  def expected({:custom, _m, _f, expected}), do: expected
end
