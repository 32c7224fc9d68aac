defmodule Accel.Kernel.Compiler do
  @moduledoc false
  # A lowered kernel (Accel.Kernel.Lower) specialised to its inputs' element types and its
  # captures' kinds -> one text in the dialect of c_src/kernels/dialect.h and user.h, which every
  # backend compiles. Typing, value ranges and C come out of one walk over the lowered form, whose
  # parts are in compiler/: Values (the values and the state the walk threads), Expr (expressions),
  # Ops (operations), Loops (Enum.reduce over a range, resumable on devices) and Text (the kernel's
  # text around the walks' lines).
  #
  # Exactness: every integer value carries the range it can take. An operation whose result range
  # fits 64 bits is emitted as plain arithmetic; any other goes through a checked helper
  # (kernels/user.h) that raises the element's `bad` flag. Floats are doubles, as in Elixir, and a
  # float result that is not finite raises it too. Where Elixir would raise or give a bignum, the
  # flag is raised; the element's output then holds the sentinel and the caller recomputes it on the
  # BEAM with the original function. Raising a flag where none was needed costs time, never
  # correctness; a missing one would be a wrong answer, so every helper errs toward raising it.
  #
  # Integer captures are specialised by magnitude class (fits 8, 16, 24, 32, 48 or 64 bits, signed):
  # a new value of the same class reuses the compiled kernel, and the class bounds the ranges (a
  # captured modulus p < 2^24 keeps x * (x + 1) of a residue within 64 bits without checks).

  alias Accel.Kernel.Compiler.{Expr, Text, Values}
  alias Accel.Kernel.Magic

  defmodule Compiled do
    @moduledoc false
    # slots: what each 8-byte scalar slot holds, in order: {:cap, k} | {:magic, k, 0..2} |
    # {:range, j, :first | :step}
    # resume_words: 8-byte words of saved state per element that the device form takes (0: its
    # loops are short, and it runs in one launch)
    defstruct [:source, :key, :out_type, :result, :slots, :uses_f64, resume_words: 0]
  end

  @classes [8, 16, 24, 32, 48]

  @doc "The class a captured integer is specialised by: the bits its magnitude needs."
  def bucket(v) when is_integer(v) do
    Enum.find(@classes, 64, fn b -> v >= -Bitwise.bsl(1, b) and v < Bitwise.bsl(1, b) end)
  end

  @doc """
  The least magnitude of a captured integer of class `bits`: bucket/1 gives the smallest class
  that holds it, so it is in none below (-2^b..2^b-1 for the class b below). Class 8 holds 0, and
  class 64 is also what precompiled kernels take for any value: 0 for both.
  """
  def class_floor(bits) do
    case Enum.filter(@classes, &(&1 < bits)) do
      smaller when smaller != [] and bits in @classes -> Bitwise.bsl(1, List.last(smaller))
      _ -> 0
    end
  end

  @doc """
  Specialises `ir` to `args` ([{dtype, :buffer | {:range, bits}}]) and `caps`
  ([{:int, bits} | :float | :bool | :range]). Raises ArgumentError where the types do not agree
  (a branch giving an integer and another a float), naming the line.

  The text holds up to three forms of the body, from one walk each:
    * `accel_user_at`, one element, integers in 64-bit registers: every backend; on OpenCL and
      CUDA its loops that may run long are resumable (emit_resumable/4), and it takes the state
      buffer that `resume_words` sizes;
    * the same with integers that ranges prove below 2^53 held exactly in doubles (a loop's
      accumulator once it settles, and what is computed from it), which vectorises where 64-bit
      multiply-high and division do not: on the host, and on OpenCL CPU devices with doubles
      (PoCL) where the kernel has no resumable loops; not on GPUs, whose double rates differ by
      32x between models;
    * `accel_user_lanes`, ACCEL_LANES elements in lockstep, each statement a loop over the lanes
      that the C++ compiler vectorises, or at least interleaves: the CPU's entry point, for bodies
      whose control flow is the same for every element (branches on element values run the
      one-element form).
  """
  def compile(ir, args, caps, name, opts \\ []) do
    base = %{
      # false: every loop runs to its end in one launch (bench/kernel_stop_cost.exs compares)
      resumable: Keyword.get(opts, :resumable, true),
      lines: [],
      tmp: 0,
      magic: %{},
      inv: %{},
      float: false,
      name: name,
      caps: caps,
      dint: false,
      lanes: false,
      narrow: nil,
      loops: 0,
      in_loop: false,
      # resumable loops: {id, last id inside it, the enclosing one's id or nil}
      nest: [],
      parent: nil,
      binds: %{}
    }

    {v, st} = walk(ir, args, caps, base)
    doubles = walk(ir, args, caps, %{base | dint: true})

    lanes =
      try do
        walk(ir, args, caps, %{base | dint: true, lanes: true})
      catch
        :varying_control -> nil
      end

    narrow = lanes && narrowest(ir, args, caps, %{base | dint: true, lanes: true}, lanes)

    {result, out_type} =
      case v.t do
        :int ->
          {:int, :s64}

        :bool ->
          {:bool, :u8}

        :none ->
          {:int, :s64}

        :float ->
          {:float,
           if(Enum.any?(args, &match?({:f32, _}, &1)) and not Enum.any?(args, &match?({:f64, _}, &1)),
             do: :f32,
             else: :f64
           )}
      end

    walks = Enum.reject([{v, st}, doubles, lanes, narrow && elem(narrow, 1)], &is_nil/1)

    used = fn field ->
      walks |> Enum.flat_map(fn {_, w} -> Map.keys(Map.fetch!(w, field)) end) |> Enum.uniq() |> Enum.sort()
    end

    slots =
      Enum.flat_map(Enum.with_index(caps), fn
        {:range, k} -> [{:cap, k, :first}, {:cap, k, :last}, {:cap, k, :step}]
        {_, k} -> [{:cap, k}]
      end) ++
        Enum.flat_map(used.(:magic), fn k -> [{:magic, k, 0}, {:magic, k, 1}, {:magic, k, 2}] end) ++
        Enum.map(used.(:inv), &{:inv, &1}) ++
        Enum.flat_map(Enum.with_index(args), fn
          {{_, {:range, _}}, j} -> [{:range, j, :first}, {:range, j, :step}]
          _ -> []
        end)

    source = Text.assemble(args, out_type, result, slots, {v, st}, doubles, {lanes, narrow})
    key = :crypto.hash(:sha256, source) |> Base.encode16(case: :lower) |> binary_part(0, 32)
    uses_f64 = st.float or result == :float or Enum.any?(args, fn {t, _} -> t in [:f32, :f64] end)

    %Compiled{
      source: source,
      key: key,
      out_type: out_type,
      result: result,
      slots: slots,
      uses_f64: uses_f64,
      resume_words: Text.resume_words(st)
    }
  end

  defp walk(ir, args, caps, st) do
    {env, st} = Values.bind_inputs(args, caps, st)
    Expr.gen(ir, env, st)
  end

  # Range versioning: the CPU's lanes form specialised to integer inputs within ±2^bits, for the
  # widest bits whose form has the fewest operations that do not vectorise (checked 64-bit
  # arithmetic, multiply-high division); nil when no bound saves one. A block of lanes whose
  # inputs all fit runs it (the logistic map from |x| <= 2^26 needs no check at all).
  @narrow_bits [48, 40, 32, 31, 26, 24, 21, 16, 8]

  defp narrowest(ir, args, caps, st, full) do
    if Enum.any?(args, &match?({t, :buffer} when t in [:s64, :s32], &1)) do
      base = scalar_ops(full)

      @narrow_bits
      |> Enum.map(fn bits ->
        w = walk(ir, args, caps, %{st | narrow: bits})
        {bits, w, scalar_ops(w)}
      end)
      |> Enum.filter(fn {_, _, ops} -> ops < base end)
      |> Enum.min_by(fn {bits, _, ops} -> {ops, -bits} end, fn -> nil end)
      |> case do
        nil -> nil
        {bits, w, _} -> {bits, w}
      end
    end
  end

  defp scalar_ops({_, st}) do
    st.lines
    |> Enum.map(&length(Regex.scan(~r/accel_(add|sub|mul|neg|abs|div|rem|bsl|bsr)\(|_magic\(/, &1)))
    |> Enum.sum()
  end

  @doc "The 8-byte scalar slots for captured `values` and range inputs, as a binary."
  def slots(%Compiled{slots: slots}, values, inputs) do
    for slot <- slots, into: <<>> do
      case slot do
        {:cap, k} -> scalar(Enum.at(values, k))
        {:cap, k, field} -> <<range_field(Enum.at(values, k), field)::signed-native-64>>
        {:magic, k, i} -> <<elem(Magic.signed(Enum.at(values, k)), i)::signed-native-64>>
        {:inv, k} -> <<Values.reciprocal(Enum.at(values, k))::float-native-64>>
        {:range, j, field} -> <<range_field(Enum.at(inputs, j), field)::signed-native-64>>
      end
    end
  end

  defp scalar(v) when is_integer(v), do: <<v::signed-native-64>>
  defp scalar(v) when is_float(v), do: <<v::float-native-64>>
  defp scalar(true), do: <<1::native-64>>
  defp scalar(false), do: <<0::native-64>>

  defp range_field(%Range{first: f}, :first), do: f
  defp range_field(%Range{last: l}, :last), do: l
  defp range_field(%Range{step: s}, :step), do: s
end
