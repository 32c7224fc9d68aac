defmodule Accel.Test.NxIntervals do
  @moduledoc false
  # The float oracle of test/nx/compiler_property_test.exs: what Accel promises for a random graph
  # of Accel.Test.NxGraphs (guides/nx.md, "What Accel promises for floats"), as an interval per
  # output element that every conforming result lies in, whatever the rounding of each step within
  # the promise. Each value is carried as [lo, hi] (Elixir floats, f64): arithmetic, square roots
  # and conversions widened by one unit in the last place of the graph's type (they round once),
  # other functions by @function_ulps (the promise), and discontinuous operations (floor, round,
  # sign, comparisons and select, clip) applied to the whole interval: a comparison whose operands'
  # intervals overlap may go either way, and a select then takes the hull of both branches. So a
  # result that differs from Nx.BinaryBackend's only because an ulp crossed a discontinuity (floor
  # of a tanh one ulp below 1.0) is accepted, and one outside every rounding of the promise is not.

  # ulps a function other than + - * / sqrt may be off by, after its own rounding: f32 functions
  # compute in f64 on devices with doubles (within about 1 ulp of f32), f64 functions are the
  # device's C library's (within 1-2 ulp of Erlang's)
  @function_ulps 2
  @eps %{{:f, 32} => :math.pow(2, -23), {:f, 64} => :math.pow(2, -52)}
  # below the least normal, an ulp is absolute
  @tiny %{{:f, 32} => 1.0e-45, {:f, 64} => 5.0e-324}

  @doc """
  Each output element's [lo, hi] for a float case {type, dims, y_shape, tree, reduction, xs, ys}, in
  the output's row-major order.
  """
  def enclose({type, {a, b}, y_shape, tree, reduction, xs, ys}) do
    xv = Enum.map(Enum.take(xs, a * b), &point(round_to(&1, type)))
    yv = Enum.map(Enum.take(ys, y_shape |> Tuple.to_list() |> Enum.product()), &point(round_to(&1, type)))

    values =
      for i <- 0..(a - 1), j <- 0..(b - 1) do
        y = Enum.at(yv, y_index(y_shape, i, j, b))
        node(tree, type, Enum.at(xv, i * b + j), y)
      end

    reduce(values, reduction, {a, b}, type)
  end

  @doc "Whether a float (or :nan, :infinity, :neg_infinity) lies in [lo, hi], with an ulp of slack."
  def inside?(v, {lo, hi}, type) when is_float(v), do: v >= lo - slack(lo, type) and v <= hi + slack(hi, type)
  def inside?(_non_finite, _interval, _type), do: false

  defp slack(x, type), do: abs(x) * @eps[type] + @tiny[type]

  defp y_index({}, _i, _j, _b), do: 0
  defp y_index({_, 1}, i, _j, _b), do: i
  defp y_index({_}, _i, j, _b), do: j
  defp y_index({_, _}, i, j, b), do: i * b + j

  ## The graph (Accel.Test.NxGraphs.node/4's operations, on intervals)

  defp node(:x, _type, x, _y), do: x
  defp node(:y, _type, _x, y), do: y
  defp node({:const, v}, type, _x, _y), do: point(round_to(v, type))

  defp node({:un, op, a}, type, x, y) do
    a = node(a, type, x, y)

    case op do
      :exp_tanh -> a |> monotone(&:math.tanh/1, type) |> monotone(&:math.exp/1, type)
      :sqrt_abs -> a |> abs_of() |> monotone(&:math.sqrt/1, type, 0.0)
      :log1p_abs -> a |> abs_of() |> log1p_either(type)
      :negate -> {-elem(a, 1), -elem(a, 0)}
      :abs -> abs_of(a)
      :tanh -> monotone(a, &:math.tanh/1, type)
      :sigmoid -> monotone(a, &sigmoid/1, type)
      :atan -> monotone(a, &:math.atan/1, type)
      :erf -> monotone(a, &:math.erf/1, type)
      :floor -> exact(a, &Float.floor/1)
      :ceil -> exact(a, &Float.ceil/1)
      :round -> exact(a, &(round(&1) * 1.0))
      :sign -> exact(a, &sign/1)
      :sin -> periodic(a, &:math.sin/1, :math.pi() / 2, type)
      :cos -> periodic(a, &:math.cos/1, 0.0, type)
    end
  end

  defp node({:bin, op, l, r}, type, x, y) do
    {a, b} = {node(l, type, x, y), node(r, type, x, y)}

    case op do
      :add -> widen({elem(a, 0) + elem(b, 0), elem(a, 1) + elem(b, 1)}, type, 1)
      :subtract -> widen({elem(a, 0) - elem(b, 1), elem(a, 1) - elem(b, 0)}, type, 1)
      :multiply -> corners(a, b, &(&1 * &2), type, 1)
      :min -> {min(elem(a, 0), elem(b, 0)), min(elem(a, 1), elem(b, 1))}
      :max -> {max(elem(a, 0), elem(b, 0)), max(elem(a, 1), elem(b, 1))}
      :safe_divide -> corners(a, widen(add_one(abs_of(b)), type, 1), &(&1 / &2), type, 1)
      :atan2 -> atan2(a, b, type)
    end
  end

  defp node({:select, cmp, a, b, c, d}, type, x, y) do
    [a, b, c, d] = Enum.map([a, b, c, d], &node(&1, type, x, y))

    case compare(cmp, a, b) do
      true -> c
      false -> d
      :either -> hull(c, d)
    end
  end

  defp node({:clip, a, lo, hi}, type, x, y) do
    {lo, hi} = {round_to(min(lo, hi), type), round_to(max(lo, hi), type)}
    exact(node(a, type, x, y), &(&1 |> max(lo) |> min(hi)))
  end

  # f32 -> f64 -> f32 is exact; f64 -> f32 -> f64 rounds once to f32
  defp node({:via, to, a}, type, x, y) do
    a = node(a, type, x, y)
    if to == {:f, 32} and type == {:f, 64}, do: widen(a, {:f, 32}, 1), else: a
  end

  defp node({:pred, op, a}, type, x, y) do
    {lo, hi} = node(a, type, x, y)

    case op do
      :logical_not ->
        if(lo == 0.0 and hi == 0.0,
          do: point(1.0),
          else: if(lo <= 0.0 and hi >= 0.0, do: {0.0, 1.0}, else: point(0.0))
        )

      # finite by construction (Accel.Test.NxGraphs)
      _is_nan_or_infinity ->
        point(0.0)
    end
  end

  ## Reductions: the sum's rounding bound grows with its terms' magnitudes

  defp reduce(values, nil, _dims, _type), do: values

  defp reduce(values, {op, axes, _keep}, {_a, b}, type) do
    rows = Enum.chunk_every(values, b)

    groups =
      case axes do
        nil -> [values]
        [0, 1] -> [values]
        [1] -> rows
        [0] -> for j <- 0..(b - 1), do: Enum.map(rows, &Enum.at(&1, j))
      end

    Enum.map(groups, fn group ->
      case op do
        :sum ->
          {lo, hi} = Enum.reduce(group, {0.0, 0.0}, fn {l, h}, {sl, sh} -> {sl + l, sh + h} end)
          magnitude = Enum.reduce(group, 0.0, fn {l, h}, acc -> acc + max(abs(l), abs(h)) end)
          err = (length(group) + 1) * @eps[type] * magnitude + @tiny[type]
          {lo - err, hi + err}

        :reduce_max ->
          {group |> Enum.map(&elem(&1, 0)) |> Enum.max(), group |> Enum.map(&elem(&1, 1)) |> Enum.max()}

        :reduce_min ->
          {group |> Enum.map(&elem(&1, 0)) |> Enum.min(), group |> Enum.map(&elem(&1, 1)) |> Enum.min()}
      end
    end)
  end

  ## Interval helpers

  defp point(v), do: {v, v}
  defp hull({a, b}, {c, d}), do: {min(a, c), max(b, d)}
  defp add_one({lo, hi}), do: {lo + 1.0, hi + 1.0}

  defp widen({lo, hi}, type, ulps), do: {lo - ulps * slack(lo, type), hi + ulps * slack(hi, type)}

  defp abs_of({lo, hi}) when lo >= 0, do: {lo, hi}
  defp abs_of({lo, hi}) when hi <= 0, do: {-hi, -lo}
  defp abs_of({lo, hi}), do: {0.0, max(-lo, hi)}

  # a non-decreasing function, rounding within the promise (`floor` clamps its lower end: sqrt's 0)
  defp monotone({lo, hi}, fun, type, floor \\ nil) do
    {l, h} = widen({fun.(lo), fun.(hi)}, type, @function_ulps)
    {if(floor != nil, do: max(l, floor), else: l), h}
  end

  # a non-decreasing function that does not round (floor, ceil, round, sign, clip)
  defp exact({lo, hi}, fun), do: {fun.(lo), fun.(hi)}

  # without overflow: exp of a large argument raises in Elixir where a device gives infinity
  defp sigmoid(x) when x >= 0, do: 1 / (1 + :math.exp(-x))
  defp sigmoid(x), do: :math.exp(x) / (1 + :math.exp(x))

  # Accel's log1p is the C library's, exact near zero; Nx.BinaryBackend's is log(1 + x), which loses
  # the digits that 1 + x rounds away: the interval holds both
  defp log1p_either(a, type),
    do: hull(monotone(a, &log1p/1, type), monotone(a, &:math.log(1 + &1), type))

  # log(1 + x) without the rounding of 1 + x (Goldberg's form: the rounding of u = 1 + x cancels
  # in x / (u - 1)), within a few ulps
  defp log1p(x) do
    u = 1.0 + x
    if u == 1.0, do: x, else: :math.log(u) * x / (u - 1.0)
  end

  defp sign(x) when x > 0, do: 1.0
  defp sign(x) when x < 0, do: -1.0
  defp sign(x), do: x

  # sin and cos: the ends' values, and 1 or -1 wherever the interval holds a crest or a trough
  # (crests at `peak` + 2k pi, troughs at `peak` + (2k + 1) pi)
  defp periodic({lo, hi}, fun, peak, type) do
    if hi - lo >= 2 * :math.pi() do
      {-1.0, 1.0}
    else
      ends = [fun.(lo), fun.(hi)]
      crest = holds?(lo, hi, peak)
      trough = holds?(lo, hi, peak + :math.pi())
      lo_v = if trough, do: -1.0, else: Enum.min(ends)
      hi_v = if crest, do: 1.0, else: Enum.max(ends)
      widen({lo_v, hi_v}, type, @function_ulps)
    end
  end

  defp holds?(lo, hi, at) do
    k = Float.ceil((lo - at) / (2 * :math.pi()))
    at + k * 2 * :math.pi() <= hi
  end

  # products and quotients of two intervals: the extremes are at the corners
  defp corners({a, b}, {c, d}, fun, type, ulps) do
    values = for x <- [a, b], y <- [c, d], do: fun.(x, y)
    widen({Enum.min(values), Enum.max(values)}, type, ulps)
  end

  # atan2 over a box away from the branch cut (the negative x axis) and the origin: extremes at
  # the corners; otherwise every angle
  defp atan2({a, b}, {c, d}, type) do
    if c <= 0 and a <= 0 and b >= 0,
      do: widen({-:math.pi(), :math.pi()}, type, @function_ulps),
      else: corners({a, b}, {c, d}, &:math.atan2/2, type, @function_ulps)
  end

  # a comparison of two intervals: true, false, or :either where the operands' intervals allow both
  defp compare(op, {a, b}, {c, d}) do
    {surely, maybe} =
      case op do
        :less -> {b < c, a < d}
        :less_equal -> {b <= c, a <= d}
        :greater -> {a > d, b > c}
        :greater_equal -> {a >= d, b >= c}
        :equal -> {a == b and c == d and a == c, a <= d and c <= b}
        :not_equal -> {b < c or d < a, not (a == b and c == d and a == c)}
      end

    cond do
      surely -> true
      maybe -> :either
      true -> false
    end
  end

  # the inputs are tensors of the type: their values rounded to it
  defp round_to(v, {:f, 32}), do: <<v::float-32-native>> |> then(fn <<f::float-32-native>> -> f end)
  defp round_to(v, {:f, 64}), do: v * 1.0
end
