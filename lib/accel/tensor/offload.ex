defmodule Accel.Tensor.Offload do
  @moduledoc false
  # Accel.map/3 and Accel.plan/3 with the name of a built-in elementwise operation (a line of the
  # registry, Accel.Tensor.Registry): the inputs become tensors on the chosen device, the
  # Accel.Tensor function of that name runs there, the result comes back in the call's form. The
  # placement, sharing and chunking are Accel.map's own (Accel.Kernel.Map.place_and_run/4), so an
  # operation is placed and co-executed as a user kernel is, by models of its own.

  alias Accel.Kernel.Map, as: KMap
  alias Accel.Tensor, as: T

  @doc "The registry's operation named `op`, or nil."
  def op(op) when is_atom(op), do: Enum.find(T.Registry.ops(), &(&1.name == op))
  def op(_op), do: nil

  def run(input, op, opts) do
    opts = Accel.Options.validate!(opts, KMap.options(), "Accel.map/3")
    {inputs, template} = operands!(input, op, opts[:type])
    KMap.place_and_run(inputs, opts, &chunk(op, template, &1, &2, &3, &4, &5), &model(op, template, &1))
  end

  def plan(input, op, opts) do
    {devices, opts} = Keyword.pop(opts, :devices)
    opts = Accel.Options.validate!(opts, KMap.options(), "Accel.plan/3")
    {inputs, template} = operands!(input, op, opts[:type])
    KMap.plan_host(inputs, &model(op, template, &1), Accel.Devices.plan_scope!(devices, opts))
  end

  # The call's array inputs (normalised as Accel.map's) and its operands' template: `:input` where
  # an array goes, `{:number, x}` where a number stays a number (a scalar, as in Accel.Tensor).
  defp operands!(input, op, type) do
    %{family: family} = op(op)
    arity = if family == :unary, do: 1, else: 2

    operands =
      Accel.Kernel.Inputs.inputs!(input, %{what: "operation", name: op, arity: arity}, fn
        x, _j when is_number(x) -> {:number, x}
        x, j -> Accel.Kernel.Inputs.input!(x, j, type)
      end)

    case Enum.reject(operands, &match?({:number, _}, &1)) do
      [] ->
        raise ArgumentError,
              "operation #{op}: at least one input must be a list, a Range, a binary or an Accel.Tensor, got: " <>
                inspect(input)

      inputs ->
        {inputs, Enum.map(operands, &if(match?({:number, _}, &1), do: &1, else: :input))}
    end
  end

  # One launch: the inputs as tensors on `place` (a tensor input stays where it is; binaries and
  # ranges take its shape, else {n}), the operation, the result in the form `as`. Every tensor the
  # call made is freed before it returns, but a result returned as a tensor. (`offset`, where the
  # chunk starts in the call, names elements in a kernel's errors; an operation's name none.)
  defp chunk(op, template, inputs, n, as, {backend, device}, _offset \\ 0) do
    shape = Enum.find_value(inputs, {n}, &if(&1.kind == :tensor, do: &1.value.shape))
    made = for x <- inputs, x.kind != :tensor, do: tensor(x, shape, backend, device)

    try do
      {tensors, []} =
        Enum.map_reduce(inputs, made, fn
          %{kind: :tensor, value: t}, made -> {t, made}
          _, [t | made] -> {t, made}
        end)

      out = apply(T, op, fill(template, tensors, & &1))

      case as do
        :tensor -> out
        :binary -> T.to_binary(out) |> tap(fn _ -> T.free(out) end)
        :list -> T.to_list(out) |> tap(fn _ -> T.free(out) end)
      end
    after
      Enum.each(made, &T.free/1)
    end
  end

  defp tensor(%{kind: :binary, type: type, value: bin}, shape, backend, device),
    do: T.from_binary(bin, type, shape, backend: backend, device: device)

  # A range is made on the device: iota, scaled and shifted there. Its elements fit :s64 (checked
  # when the input was read), so where iota * step wraps around, adding the first wraps it back.
  # (One element's step may be any integer: it is not used.)
  defp tensor(%{kind: :range, n: n, value: %Range{first: first, step: step}}, shape, backend, device) do
    iota = T.iota(shape, type: :s64, backend: backend, device: device)

    Enum.reduce([multiply: step, add: first], iota, fn
      {:multiply, _}, t when n <= 1 -> t
      {:multiply, 1}, t -> t
      {:add, 0}, t -> t
      {fun, x}, t -> apply(T, fun, [t, x]) |> tap(fn _ -> T.free(t) end)
    end)
  end

  # The operation's models per device are keyed by its name and its operands' types (numbers by
  # kind: they decide the result's type); a model times the call's first `len` elements, binary out.
  defp model(op, template, inputs) do
    types = fill(template, Enum.map(inputs, & &1.type), &if(is_integer(&1), do: :integer, else: :float))
    key = {:operation, op, types}

    {key, KMap.prefix_timer(inputs, &chunk(op, template, &1, &2, :binary, &3))}
  end

  defp fill(template, values, number) do
    {filled, []} =
      Enum.map_reduce(template, values, fn
        {:number, x}, rest -> {number.(x), rest}
        :input, [v | rest] -> {v, rest}
      end)

    filled
  end
end
