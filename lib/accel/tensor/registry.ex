defmodule Accel.Tensor.Registry do
  @moduledoc false
  # The operation registry (c_src/kernels/ops.h), read when Accel compiles: Accel.Tensor defines a
  # function, its spec and its doc for each line, so the native code and the Elixir API cannot
  # disagree about which operations exist or which types they take.

  @path Path.expand("../../../c_src/kernels/ops.h", __DIR__)
  @external_resource @path

  @families [unary: "ACCEL_UNARY_OPS", binary: "ACCEL_BINARY_OPS", compare: "ACCEL_COMPARE_OPS"]

  parse = fn text ->
    for {family, macro} <- @families,
        [block] <- [
          Regex.run(~r/#define #{macro}\(X\)((?:[^\n]*\\\n)*[^\n]*)/, text, capture: :all_but_first)
        ],
        [_, name, types, doc] <- Regex.scan(~r/X\((\w+), (ALL|INT|FLOAT), "((?:[^"\\]|\\.)*)"\)/, block) do
      %{
        name: String.to_atom(name),
        family: family,
        types: String.downcase(types) |> String.to_atom(),
        doc: doc
      }
    end
  end

  @ops parse.(File.read!(@path))
  if length(@ops) < 30, do: raise("could not read the operation registry in #{@path}")

  @doc "Every registered operation: name, family (:unary, :binary, :compare), types (:all, :int, :float), doc."
  def ops, do: @ops
end
