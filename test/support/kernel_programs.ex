defmodule Accel.Test.KernelPrograms do
  @moduledoc false
  # PropEr generators of random well-typed kernels in the language of Accel.Kernel (its moduledoc),
  # for test/kernel_property_test.exs: bodies of `fn x, y, f -> ... end` (x, y integers, f a float)
  # with a captured integer p, built from integer and float arithmetic near the 64-bit and float
  # limits, div/rem, Bitwise, comparisons, `and`/`or`/`not`, `if`, `cond`, `case`, local variables
  # and `Enum.reduce` loops. A program is {body AST, whether it calls a :math function other than
  # sqrt (whose results a device's library may round otherwise), p, rows of {x, y, f}}.

  # remote calls: PropEr joins the code path only when the tests start (test_helper.exs)
  alias :proper_types, as: P

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF

  @int_edges [0, 1, -1, 2, -2, 3, 7, -7, 61, 255, 0x7FFFFFFF, -0x80000000, 0xFFFFFFFF, 0x100000000] ++
               [0x1FFFFFFFFFFFFF, 0x20000000000001, 0x3FFFFFFFFFFFFFFF, 0x4000000000000000] ++
               [@max, @max - 1, @min, @min + 1, 3_037_000_499, 3_037_000_500, 6_700_417]
  @float_edges [0.0, 1.0, -1.0, 0.5, -2.5, 1.0e308, -1.0e308, 1.0e-300, 3.0e9, 9.007199254740993e15, 100.0]

  def program do
    P.tuple([
      expr(:int, 4, [:x, :y, :p]),
      P.elements(@int_edges ++ [5, 1000]),
      P.vector(12, P.tuple([int(), int(), float()]))
    ])
  end

  defp int,
    do: P.frequency([{2, P.elements(@int_edges)}, {1, P.integer(-1000, 1000)}, {1, P.integer(@min, @max)}])

  defp float, do: P.frequency([{2, P.elements(@float_edges)}, {2, P.float(-1.0e6, 1.0e6)}])

  # An expression of `type` (:int, :float or :bool) over the integer variables `vars` (and f).
  defp expr(type, 0, vars), do: leaf(type, vars)

  defp expr(:int, depth, vars) do
    sub = fn type -> P.lazy(fn -> expr(type, depth - 1, vars) end) end
    int = sub.(:int)

    P.frequency([
      {3, leaf(:int, vars)},
      {4, P.tuple([P.exactly(:op), P.elements([:+, :-, :*]), int, int])},
      {2,
       P.tuple([P.exactly(:call), P.elements([:div, :rem, :min, :max]), P.exactly([]), P.tuple([int, int])])},
      {1, P.tuple([P.exactly(:call), P.elements([:abs]), P.exactly([]), P.tuple([int])])},
      {1, P.tuple([P.exactly(:op1), P.exactly(:-), int])},
      {2,
       P.tuple([P.exactly(:call), P.elements([:band, :bor, :bxor]), P.exactly([Bitwise]), P.tuple([int, int])])},
      {1, P.tuple([P.exactly(:shift), P.elements([:bsl, :bsr]), int, P.integer(0, 70)])},
      {1, P.tuple([P.exactly(:call), P.elements([:trunc, :round]), P.exactly([]), P.tuple([sub.(:float)])])},
      {2, P.tuple([P.exactly(:if), sub.(:bool), int, int])},
      {1, P.tuple([P.exactly(:cond), sub.(:bool), int, int])},
      {1, P.tuple([P.exactly(:case), int, P.elements([0, 1, -1, 7]), int, int])},
      {1, P.tuple([P.exactly(:let), int, P.lazy(fn -> expr(:int, depth - 1, [:t | vars]) end)])},
      {1,
       P.tuple([
         P.exactly(:loop),
         P.integer(-3, 3),
         P.integer(-3, 12),
         int,
         P.lazy(fn -> expr(:int, depth - 1, [:acc, :i | vars]) end)
       ])}
    ])
  end

  defp expr(:float, depth, vars) do
    sub = fn type -> P.lazy(fn -> expr(type, depth - 1, vars) end) end
    float = sub.(:float)

    P.frequency([
      {3, leaf(:float, vars)},
      {4, P.tuple([P.exactly(:op), P.elements([:+, :-, :*, :/]), float, float])},
      {1, P.tuple([P.exactly(:op), P.exactly(:*), sub.(:int), P.exactly({:lit, 1.0})])},
      {1, P.tuple([P.exactly(:call), P.elements([:min, :max]), P.exactly([]), P.tuple([float, float])])},
      {1, P.tuple([P.exactly(:call), P.elements([:abs]), P.exactly([]), P.tuple([float])])},
      {1,
       P.tuple([P.exactly(:math), P.elements([:sqrt_abs, :exp, :sin, :atan])]) |> then(&P.tuple([&1, float]))},
      {1, P.tuple([P.exactly(:if), sub.(:bool), float, float])}
    ])
  end

  defp expr(:bool, depth, vars) do
    sub = fn type -> P.lazy(fn -> expr(type, depth - 1, vars) end) end

    P.frequency([
      {3, P.tuple([P.exactly(:op), P.elements([:<, :<=, :==, :!=, :>]), sub.(:int), sub.(:int)])},
      {1, P.tuple([P.exactly(:op), P.elements([:<, :==, :>=]), sub.(:float), sub.(:int)])},
      {1, P.tuple([P.exactly(:op), P.elements([:and, :or]), sub.(:bool), sub.(:bool)])},
      {1, P.tuple([P.exactly(:op1), P.exactly(:not), sub.(:bool)])}
    ])
  end

  defp leaf(:int, vars),
    do:
      P.frequency([{3, P.tuple([P.exactly(:var), P.elements(vars)])}, {1, P.tuple([P.exactly(:lit), int()])}])

  defp leaf(:float, _vars),
    do: P.frequency([{3, P.exactly({:var, :f})}, {1, P.tuple([P.exactly(:lit), float()])}])

  defp leaf(:bool, vars),
    do: P.tuple([P.exactly(:op), P.elements([:<, :==]), leaf(:int, vars), leaf(:int, vars)])

  @doc "The program's body as Elixir code (the parameters x, y, f and the capture p are plain variables)."
  def ast({:var, name}), do: Macro.var(name, nil)
  def ast({:lit, v}), do: v
  def ast({:op, op, a, b}), do: {op, [], [ast(a), ast(b)]}
  def ast({:op1, op, a}), do: {op, [], [ast(a)]}
  def ast({:call, fun, [], args}), do: {fun, [], Enum.map(Tuple.to_list(args), &ast/1)}
  def ast({:call, fun, [mod], args}), do: {{:., [], [mod, fun]}, [], Enum.map(Tuple.to_list(args), &ast/1)}
  def ast({:shift, fun, a, k}), do: {{:., [], [Bitwise, fun]}, [], [ast(a), k]}
  def ast({{:math, :sqrt_abs}, a}), do: quote(do: :math.sqrt(abs(unquote(ast(a)))))
  def ast({{:math, fun}, a}), do: {{:., [], [:math, fun]}, [], [ast(a)]}
  def ast({:if, c, a, b}), do: quote(do: if(unquote(ast(c)), do: unquote(ast(a)), else: unquote(ast(b))))

  def ast({:cond, c, a, b}) do
    quote do
      cond do
        unquote(ast(c)) -> unquote(ast(a))
        true -> unquote(ast(b))
      end
    end
  end

  def ast({:case, v, pattern, a, b}) do
    quote do
      case unquote(ast(v)) do
        unquote(pattern) -> unquote(ast(a))
        _ -> unquote(ast(b))
      end
    end
  end

  def ast({:let, value, body}) do
    quote do
      unquote(Macro.var(:t, nil)) = unquote(ast(value))
      unquote(ast(body))
    end
  end

  def ast({:loop, first, last, init, body}) do
    quote do
      Enum.reduce(unquote(first)..unquote(last), unquote(ast(init)), fn unquote(Macro.var(:i, nil)),
                                                                        unquote(Macro.var(:acc, nil)) ->
        unquote(ast(body))
      end)
    end
  end

  @doc "Whether the program calls a :math function whose result a device library may round otherwise."
  def inexact?({{:math, fun}, a}), do: fun != :sqrt_abs or inexact?(a)
  def inexact?(t) when is_tuple(t), do: t |> Tuple.to_list() |> Enum.any?(&inexact?/1)
  def inexact?(_), do: false

  @doc """
  The program as a plain Elixir function of x, y, f with each :math call but sqrt's result moved
  `ulps` units in the last place: what a device library within that many ulps may compute, through
  every operation after it (a trunc, a comparison) as Elixir would compute it.
  """
  def nudged(tree, p, ulps) do
    body = tree |> ast() |> nudge_math(ulps)

    quoted =
      quote do
        unquote(Macro.var(:p, nil)) = unquote(p)

        fn unquote(Macro.var(:x, nil)), unquote(Macro.var(:y, nil)), unquote(Macro.var(:f, nil)) ->
          unquote(body)
        end
      end

    {{fun, _}, _warnings} =
      ExUnit.CaptureIO.with_io(:stderr, fn ->
        Code.eval_quoted(quoted, [], file: "random_kernel.ex", line: 1)
      end)

    fun
  end

  defp nudge_math(ast, ulps) do
    Macro.postwalk(ast, fn
      {{:., _, [:math, fun]}, _, _} = call when fun != :sqrt ->
        quote(do: Accel.Test.KernelPrograms.nudge(unquote(call), unquote(ulps)))

      node ->
        node
    end)
  end

  @doc "`x` moved `ulps` units in its last place (away from zero for positive `ulps`)."
  def nudge(x, ulps) when is_float(x) do
    <<bits::64>> = <<x::float>>
    moved = bits + ulps

    case <<moved::64>> do
      <<y::float>> -> y
      _not_finite -> x
    end
  end

  @doc "The kernel of the program (built as a caller's code would build it), with its capture p."
  def kernel(tree, p) do
    quoted =
      quote do
        require Accel
        unquote(Macro.var(:p, nil)) = unquote(p)

        Accel.kernel(fn unquote(Macro.var(:x, nil)),
                        unquote(Macro.var(:y, nil)),
                        unquote(Macro.var(:f, nil)) ->
          unquote(ast(tree))
        end)
      end

    # (a program need not use every parameter: the compiler's unused-variable warnings are dropped)
    {{kernel, _}, _warnings} =
      ExUnit.CaptureIO.with_io(:stderr, fn ->
        Code.eval_quoted(quoted, [], file: "random_kernel.ex", line: 1)
      end)

    kernel
  end
end
