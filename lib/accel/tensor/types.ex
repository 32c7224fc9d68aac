defmodule Accel.Tensor.Types do
  @moduledoc false
  # The element-type registry (c_src/kernels/types.h), read when Accel compiles: the native code,
  # Accel.Tensor and Accel.Nx.Storage share one list of types, with each one's size, kind and the
  # type whose kernels compute on it.

  @path Path.expand("../../../c_src/kernels/types.h", __DIR__)
  @external_resource @path

  block =
    case Regex.run(~r/#define ACCEL_TYPES\(X\)((?:[^\n]*\\\n)*[^\n]*)/, File.read!(@path),
           capture: :all_but_first
         ) do
      [block] -> block
      nil -> raise "could not read the type registry in #{@path}"
    end

  types =
    for [_, name, code, bytes, kind, computes_in] <-
          Regex.scan(~r/X\((\w+), (\d+), (\d+), (FLOAT|INT|UINT|COMPLEX), (\w+)\)/, block) do
      %{
        name: String.to_atom(name),
        code: String.to_integer(code),
        bytes: String.to_integer(bytes),
        kind: kind |> String.downcase() |> String.to_atom(),
        computes_in: String.to_atom(computes_in)
      }
    end

  @types types

  # bits per element as Nx counts them: the number in the name (s4: 4, f8_e4m3fn: 8)
  @bits Map.new(types, fn t ->
          [digits] = Regex.run(~r/^[a-z]+(\d+)/, Atom.to_string(t.name), capture: :all_but_first)
          {t.name, String.to_integer(digits)}
        end)

  if length(@types) < 14 or Enum.map(@types, & &1.code) != Enum.to_list(0..(length(@types) - 1)),
    do: raise("the type registry in #{@path} is not a list of codes 0, 1, ...")

  @by_name Map.new(@types, &{&1.name, &1})

  @doc "Every type's name, in code order."
  def names, do: unquote(Enum.map(@types, & &1.name))

  @doc "The types with kernels of their own (every elementwise operation and reduction takes them)."
  def compute, do: unquote(for t <- @types, t.computes_in == t.name and t.kind != :complex, do: t.name)

  @doc "The registry's entry for a type: name, code, bytes, kind (:float, :int, :uint, :complex), computes_in."
  def info(name), do: Map.fetch!(@by_name, name)

  def bytes(name), do: info(name).bytes

  @doc "A type's bits per element as Nx counts them: the number in its name (s4: 4, f8_e4m3fn: 8)."
  def bits(name), do: Map.fetch!(@bits, name)
  def kind(name), do: info(name).kind
  def computes_in(name), do: info(name).computes_in
end
