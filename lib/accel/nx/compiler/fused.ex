if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler.Fused do
    @moduledoc false
    # A fused region as an Nx 0.13 block (Nx.block/4 replaced optional operations there): the
    # evaluator hands it to the inputs' backend, Accel.Nx.Backend.block/4 runs the region's kernel
    # (`accel`, Accel.Nx.Compiler.Launch's spec), and any other backend calls the default function,
    # which evaluates the region's original operations (`fallback`, an expression over parameters).
    defstruct [:accel, :fallback]

    @doc "Whether this Nx has blocks (0.13) rather than optional expressions (0.7)."
    def blocks?, do: Code.ensure_loaded?(Nx) and function_exported?(Nx, :block, 4)

    @doc "The default function of a block with `n` inputs (Nx calls it with the struct first)."
    def default_fun(n), do: Function.capture(__MODULE__, :default, n + 1)

    # One clause per number of inputs a region may take (Accel.Nx.Compiler.Fusion's @max_inputs).
    for k <- 1..30 do
      inputs = Macro.generate_arguments(k, __MODULE__)

      @doc false
      def default(%__MODULE__{fallback: fallback}, unquote_splicing(inputs)),
        do: evaluate(fallback, [unquote_splicing(inputs)])
    end

    @doc "The expression `fallback` (over parameters) evaluated on `inputs`, as Nx.Defn.Evaluator runs it."
    def evaluate(fallback, inputs) do
      templates = Enum.map(inputs, &Nx.to_template/1)
      params = Enum.map(inputs, &fn -> &1 end)
      [result] = Nx.Defn.Evaluator.__jit__(make_ref(), templates, fn _ -> fallback end, [params], [])
      result
    end
  end
end
