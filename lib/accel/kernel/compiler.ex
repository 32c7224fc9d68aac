defmodule Accel.Kernel.Compiler do
  @moduledoc false
  # A lowered kernel (Accel.Kernel.Lower) specialised to its inputs' element types and its
  # captures' kinds -> one text in the dialect of c_src/kernels/dialect.h and user.h, which every
  # backend compiles: typing, value ranges and C in one pass.
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

  alias Accel.Kernel.Magic

  @min -0x8000000000000000
  @max 0x7FFFFFFFFFFFFFFF
  @full {@min, @max}
  use Accel.Kernel.Prelude, files: ["dialect.h", "user.h"]

  @c_types %{s64: "accel_i64", s32: "accel_i32", u8: "accel_u8", f64: "double", f32: "float"}
  @ranges %{s64: @full, s32: {-0x80000000, 0x7FFFFFFF}, u8: {0, 255}}

  defmodule Compiled do
    @moduledoc false
    # slots: what each 8-byte scalar slot holds, in order: {:cap, k} | {:magic, k, 0..2} |
    # {:range, j, :first | :step}
    # resume_words: 8-byte words of saved state per element that the device form takes (0: its
    # loops are short, and it runs in one launch)
    defstruct [:source, :key, :out_type, :result, :slots, :uses_f64, resume_words: 0]
  end

  @doc "The class a captured integer is specialised by: the bits its magnitude needs."
  def bucket(v) when is_integer(v) do
    Enum.find([8, 16, 24, 32, 48], 64, fn b -> v >= -Bitwise.bsl(1, b) and v < Bitwise.bsl(1, b) end)
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
      multiply-high and division do not: on the host only, for now (on PoCL it measured slower
      than 64-bit integers, 1.7 s against 1.5 s for the logistic map, and GPUs' double rates
      differ by 32x between models: to be chosen per device once measured there);
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

    source = assemble(args, out_type, result, slots, {v, st}, doubles, {lanes, narrow})
    key = :crypto.hash(:sha256, source) |> Base.encode16(case: :lower) |> binary_part(0, 32)
    uses_f64 = st.float or result == :float or Enum.any?(args, fn {t, _} -> t in [:f32, :f64] end)

    %Compiled{
      source: source,
      key: key,
      out_type: out_type,
      result: result,
      slots: slots,
      uses_f64: uses_f64,
      resume_words: resume_words(st)
    }
  end

  defp walk(ir, args, caps, st) do
    {env, st} = bind_inputs(args, caps, st)
    gen(ir, env, st)
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
        {:inv, k} -> <<reciprocal(Enum.at(values, k))::float-native-64>>
        {:range, j, field} -> <<range_field(Enum.at(inputs, j), field)::signed-native-64>>
      end
    end
  end

  defp scalar(v) when is_integer(v), do: <<v::signed-native-64>>
  defp scalar(v) when is_float(v), do: <<v::float-native-64>>
  defp scalar(true), do: <<1::native-64>>
  defp scalar(false), do: <<0::native-64>>

  # 1 / d rounded once (d < 2^53 is exact as a double); 0 stands in for 1 / 0, which flags.
  defp reciprocal(0), do: 0.0
  defp reciprocal(d), do: 1.0 / d

  defp range_field(%Range{first: f}, :first), do: f
  defp range_field(%Range{last: l}, :last), do: l
  defp range_field(%Range{step: s}, :step), do: s

  # ---- the text ----

  defp assemble(args, out_type, result, slots, plain, doubles, {lanes, narrow}) do
    out_t = @c_types[out_type]
    in_params = args |> Enum.with_index() |> Enum.reject(&match?({{_, {:range, _}}, _}, &1))
    inputs = Enum.map(in_params, fn {{t, _}, j} -> {"const #{@c_types[t]}*", "in#{j}"} end)
    buffers = [{"#{out_t}*", "out"}, {"int*", "flag"}] ++ inputs
    # what the element functions take: every buffer but the flag, which they return instead
    elem_buffers = [{"#{out_t}*", "out"} | inputs]
    scalars = Enum.with_index(slots, fn _, k -> "s#{k}" end)

    params =
      Enum.join(
        ["accel_u64 i" | Enum.map(elem_buffers, fn {t, n} -> "ACCEL_GLOBAL #{t} #{n}" end)] ++
          Enum.map(scalars, &"accel_u64 #{&1}"),
        ", "
      )

    call_args = Enum.join(["i" | Enum.map(elem_buffers, &elem(&1, 1))] ++ scalars, ", ")

    sentinel =
      case result do
        :int -> "ACCEL_I64_MIN"
        :bool -> "2"
        :float -> "accel_f64_of(0x7ff8000000000001UL)"
      end

    defines =
      slots
      |> Enum.with_index()
      |> Enum.flat_map(fn
        {{:magic, k, i}, slot} -> ["#define ACCEL_MAGIC_#{k}_#{Enum.at(~w(M S A), i)} ((accel_i64)s#{slot})"]
        {{:inv, k}, slot} -> ["#define ACCEL_INV_#{k} accel_f64_of(s#{slot})"]
        {{:range, j, field}, slot} -> ["#define ACCEL_RANGE_#{String.upcase(to_string(field))}_#{j} s#{slot}"]
        _ -> []
      end)
      |> Kernel.++(keep_defines(elem(plain, 1)))
      |> Enum.join("\n")

    element = fn {v, st}, lane_form, fun ->
      lines = Enum.reverse(st.lines)
      body = if(lane_form, do: fuse_lanes(lines), else: lines) |> Enum.map_join("\n", &("  " <> &1))
      value = "(#{out_t})(#{result_text(v)})"
      failed = if v.t == :none, do: "  bad = 1;\n", else: ""

      cond do
        st.loops > 0 ->
          # the device form with resumable loops (see loop/8): returns 1 (flag), 2 (suspended) or 0
          """
          ACCEL_USER_ELEMENT int #{fun}(#{params}, ACCEL_GLOBAL accel_u64* rs, accel_u64 fuel, accel_u64 epoch, int fresh) {
            int bad = 0;
            int susp = 0;
            accel_u64 resume = 0;
            if (!fresh) { /* after a window's first launch, only elements suspended in it run */
              resume = rs[0];
              if ((resume >> 16) != epoch || (resume & 0xFFFFUL) == ACCEL_RESUME_DONE) return 0;
              resume &= 0xFFFFUL;
            }
          #{body}
          #{failed}  out[i] = bad ? (#{out_t})#{sentinel} : #{value};
            if (!fresh) rs[0] = (epoch << 16) | ACCEL_RESUME_DONE;
            return bad;
          }
          """

        lane_form ->
          """
          ACCEL_USER_ELEMENT int #{fun}(#{params}) {
            int bad = 0;
            int lbad[ACCEL_LANES] = {0};
          #{body}
          #{failed}  int any = 0;
            ACCEL_LANE {
              const int b = bad | lbad[l];
              out[i + l] = b ? (#{out_t})#{sentinel} : #{value};
              any |= b;
            }
            return any;
          }
          """

        true ->
          """
          ACCEL_USER_ELEMENT int #{fun}(#{params}) {
            int bad = 0;
          #{body}
          #{failed}  out[i] = bad ? (#{out_t})#{sentinel} : #{value};
            return bad;
          }
          """
      end
    end

    one = element.(plain, false, "accel_user_at")

    with_doubles = element.(doubles, false, "accel_user_at")

    single =
      if with_doubles == one,
        do: one,
        else: "#if !defined(__OPENCL_VERSION__) && !defined(__CUDACC__)\n#{with_doubles}#else\n#{one}#endif\n"

    {narrow_text, lanes_call} =
      case narrow do
        nil ->
          {"", "accel_user_lanes(#{call_args})"}

        {bits, walk} ->
          {"""
           #{element.(walk, true, "accel_user_lanes_narrow")}
           /* whether every lane's integer inputs are within -2^#{bits}..2^#{bits}-1 */
           ACCEL_USER_ELEMENT int accel_user_fits(#{params}) {
             int ok = 1;
             ACCEL_LANE ok &= #{fits(args, bits, "i + l")};
             return ok;
           }
           """,
           "(accel_user_fits(#{call_args}) ? accel_user_lanes_narrow(#{call_args}) : accel_user_lanes(#{call_args}))"}
      end

    lane_text =
      if lanes,
        do:
          "#if !defined(__OPENCL_VERSION__) && !defined(__CUDACC__)\n#{element.(lanes, true, "accel_user_lanes")}#{narrow_text}#endif\n",
        else: ""

    lane_loop =
      if lanes,
        do: "  for (; i + ACCEL_LANES <= end; i += ACCEL_LANES) any |= #{lanes_call};\n",
        else: ""

    """
    /* Generated by Accel.Kernel (lib/accel/kernel/compiler.ex): do not edit. */
    #{@prelude}
    #if defined(__OPENCL_VERSION__)
    #pragma OPENCL FP_CONTRACT OFF
    #endif
    #{defines}

    #{single}
    #{lane_text}
    #{device_entries(plain, buffers, scalars, call_args)}
    #else
    extern "C" ACCEL_USER_HOST void accel_user(void* const* b, const accel_u64* s, accel_u64 begin, accel_u64 end) {
    #{buffers |> Enum.with_index() |> Enum.map_join("\n", fn {{t, n}, k} -> "  #{t} #{n} = (#{t})b[#{k}];" end)}
      accel_stop_now = (const accel_stop*)b[#{length(buffers)}];
    #{scalars |> Enum.with_index() |> Enum.map_join("\n", fn {n, k} -> "  const accel_u64 #{n} = s[#{k}];" end)}
      int any = 0;
      accel_u64 i = begin;
    #{lane_loop}  for (; i < end; ++i) any |= accel_user_at(#{call_args});
      if (any) ACCEL_USER_FLAG(flag);
    }
    #endif
    """
  end

  # The OpenCL and CUDA entry points. A form with resumable loops takes the state buffer `rs`
  # after the flag, whose 8 bytes are followed by the launch's fuel and first element (the header
  # tensor_source_kernel uploads, core/source_kernel.cpp): element `i = base + g` keeps its state
  # at rs + g * words, and the second int of the flag says that some element was suspended.
  defp device_entries({_, %{loops: 0}}, buffers, scalars, call_args) do
    """
    #if defined(__OPENCL_VERSION__)
    __kernel void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "__global #{t} #{n}" end) ++ ["ulong n" | Enum.map(scalars, &"ulong #{&1}")], ", ")}) {
      const ulong i = get_global_id(0);
      if (i < n && accel_user_at(#{call_args})) ACCEL_USER_FLAG(flag);
    }
    #elif defined(__CUDACC__)
    extern "C" __global__ void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "#{t} #{n}" end) ++ ["accel_u64 n" | Enum.map(scalars, &"accel_u64 #{&1}")], ", ")}) {
      for (accel_u64 i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; i < n; i += 1ULL * blockDim.x * gridDim.x)
        if (accel_user_at(#{call_args})) ACCEL_USER_FLAG(flag);
    }
    """
  end

  defp device_entries({_, st}, buffers, scalars, call_args) do
    [out, flag | inputs] = buffers
    buffers = [out, flag, {"accel_u64*", "rs"} | inputs]

    call =
      String.replace_prefix(call_args, "i", "hdr[2] + g") <>
        ", rs + g * #{resume_words(st)}UL, hdr[1], hdr[3] >> 1, "

    """
    #if defined(__OPENCL_VERSION__)
    __kernel void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "__global #{t} #{n}" end) ++ ["ulong n" | Enum.map(scalars, &"ulong #{&1}")], ", ")}) {
      const ulong g = get_global_id(0);
      __global const ulong* hdr = (__global const ulong*)flag;
      if (g < n) {
        /* the first launch's copy has nothing to resume: its loops' bounds are the same for all */
        const int r = (hdr[3] & 1) ? accel_user_at(#{call}1) : accel_user_at(#{call}0);
        if (r & 1) flag[0] = 1;
        if (r & 2) flag[1] = 1;
      }
    }
    #elif defined(__CUDACC__)
    extern "C" __global__ void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "#{t} #{n}" end) ++ ["accel_u64 n" | Enum.map(scalars, &"accel_u64 #{&1}")], ", ")}) {
      const accel_u64* hdr = (const accel_u64*)flag;
      for (accel_u64 g = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; g < n; g += 1ULL * blockDim.x * gridDim.x) {
        const int r = (hdr[3] & 1) ? accel_user_at(#{call}1) : accel_user_at(#{call}0);
        if (r & 1) flag[0] = 1;
        if (r & 2) flag[1] = 1;
      }
    }
    """
  end

  # A loop's value is saved when it ends only where a later loop in the same iteration of the
  # loops around it (or after it, at the top) may be resumed, and would need it.
  defp keep_defines(%{nest: nest}) do
    inner = Map.new(nest, fn {id, last, _} -> {id, last} end)

    for {id, last, parent} <- Enum.reverse(nest) do
      upto = if parent, do: inner[parent], else: :infinity
      keep = Enum.any?(nest, fn {m, _, _} -> m > last and m <= upto end)
      "#define ACCEL_KEEP_#{id}(s)#{if keep, do: " s", else: ""}"
    end
  end

  # Per element: a mark, the window's epoch << 16 | the suspended loop's id + 1 (ACCEL_RESUME_DONE:
  # resumed and finished; another epoch: finished in the window's first launch, which every
  # element runs), then each resumable loop's iteration and accumulator (or, once it ended, its
  # value). Ids stay below ACCEL_RESUME_DONE: kMaxResumeWords (C++) bounds them.
  defp resume_words(%{loops: 0}), do: 0
  defp resume_words(%{loops: loops}), do: 1 + 2 * loops

  # Each run of straight-line lines becomes one loop over the lanes, which the C++ compiler
  # vectorises as a whole (one loop per statement would be unrolled first, and then not
  # vectorised): the run's uniform scalars go first (they read no lane's value), then its arrays'
  # declarations, then one `ACCEL_LANE { ... }` with every lane statement, in order.
  defp fuse_lanes(lines) do
    lines
    |> Enum.chunk_by(&(lane_line(&1) != :other))
    |> Enum.flat_map(fn [first | _] = run ->
      if lane_line(first) == :other do
        run
      else
        groups = Enum.group_by(run, &lane_line/1)
        indent = String.replace(first, ~r/\S.*$/, "")

        statements =
          Enum.map(groups[:lane] || [], &(String.trim(&1) |> String.replace_prefix("ACCEL_LANE ", "")))

        (groups[:uniform] || []) ++
          (groups[:array] || []) ++
          if(statements == [],
            do: [],
            else: ["#{indent}ACCEL_LANE {"] ++ Enum.map(statements, &"#{indent}  #{&1}") ++ ["#{indent}}"]
          )
      end
    end)
  end

  defp lane_line(line) do
    line = String.trim_leading(line)

    cond do
      String.starts_with?(line, "ACCEL_LANE ") -> :lane
      line =~ ~r/^[\w ]+ t\d+\[ACCEL_LANES\];$/ -> :array
      String.starts_with?(line, "const ") -> :uniform
      true -> :other
    end
  end

  # Whether element `at`'s integer inputs are all within the narrowed range -2^bits..2^bits-1
  # (unsigned arithmetic: no overflow for any input).
  defp fits(args, bits, at) do
    limit = Bitwise.bsl(1, bits)

    for(
      {{t, :buffer}, j} <- Enum.with_index(args),
      t in [:s64, :s32],
      do: "(accel_u64)in#{j}[#{at}] + #{limit}UL < #{2 * limit}UL"
    )
    |> Enum.join(" && ")
  end

  defp result_text(%{t: :none}), do: "0"
  defp result_text(%{t: :int} = v), do: it(v)
  defp result_text(v), do: v.c

  # ---- values ----
  # %{t: :int | :float | :bool | :none, c: C text, d: C text of a double, r: {lo, hi} for ints}.
  # An integer has its 64-bit text c, or d, the same integer held exactly in a double (then
  # |value| <= 2^53, and c is nil), or both.

  @d53 0x20000000000000
  @wide 0x4000000000000000

  defp int(c, r), do: %{c: c, d: nil, t: :int, r: clip(r)}
  defp dint(d, r), do: %{c: nil, d: d, t: :int, r: r}
  defp float(c), do: %{c: c, d: nil, t: :float, r: nil}
  defp bool(c), do: %{c: c, d: nil, t: :bool, r: {0, 1}}
  defp none, do: %{c: "0", d: nil, t: :none, r: nil}

  # An integer's text as an int64, and as a double (exact when held as one or within 2^53).
  defp it(%{c: nil, d: d}), do: "((accel_i64)#{d})"
  defp it(%{c: c}), do: c
  defp dt(%{d: nil, c: c}), do: "((double)#{c})"
  defp dt(%{d: d}), do: d

  defp held_d?(v), do: v.d != nil
  defp fits53?({lo, hi}), do: lo >= -@d53 and hi <= @d53

  # In the doubles walks, whether integers `vs` are all exact in doubles and one already is one.
  defp in_doubles?(st, vs), do: st.dint and Enum.any?(vs, &held_d?/1) and Enum.all?(vs, &fits53?(&1.r))

  defp clip({lo, hi}), do: {max(lo, @min), min(hi, @max)}
  defp fits?({lo, hi}), do: lo >= @min and hi <= @max

  defp bind_inputs(args, caps, st) do
    {env, st} =
      caps
      |> Enum.with_index()
      |> Enum.reduce({%{}, st}, fn {kind, k}, {env, st} ->
        slot = slot_index(caps, k)

        case kind do
          {:int, bits} ->
            {c, st} = declare(st, "accel_i64", "(accel_i64)s#{slot}")
            {Map.put(env, {:cap, k}, int(c, bucket_range(bits))), st}

          :float ->
            {c, st} = declare(st, "double", "accel_f64_of(s#{slot})")
            {Map.put(env, {:cap, k}, float(c)), %{st | float: true}}

          :bool ->
            {c, st} = declare(st, "int", "(int)s#{slot}")
            {Map.put(env, {:cap, k}, bool(c)), st}

          :range ->
            {Map.put(env, {:cap_range, k}, Enum.map(0..2, &"(accel_i64)s#{slot + &1}")), st}
        end
      end)

    # Range inputs' slots come after the captures' and the magic numbers'; the magic numbers are
    # only known once the body is lowered, so these read names #defined then (assemble/7).
    at = if st.lanes, do: "(i + l)", else: "i"

    args
    |> Enum.with_index()
    |> Enum.reduce({env, st}, fn {{type, kind}, j}, {env, st} ->
      case kind do
        {:range, bits} ->
          {c, st} =
            declare(
              st,
              "accel_i64",
              "(accel_i64)(ACCEL_RANGE_FIRST_#{j} + #{at} * ACCEL_RANGE_STEP_#{j})",
              true
            )

          {Map.put(env, {:arg, j}, int(c, bucket_range(bits))), st}

        :buffer when type in [:f32, :f64] ->
          {c, st} = declare(st, "double", "(double)in#{j}[#{at}]", true)
          {Map.put(env, {:arg, j}, float(c)), st}

        :buffer when st.narrow != nil and type in [:s64, :s32] ->
          {c, st} = declare(st, "accel_i64", "(accel_i64)in#{j}[#{at}]", true)
          {d, st} = declare(st, "double", "(double)#{c}")
          {Map.put(env, {:arg, j}, %{int(c, bucket_range(st.narrow)) | d: d}), st}

        :buffer ->
          {c, st} = declare(st, "accel_i64", "(accel_i64)in#{j}[#{at}]", true)
          {Map.put(env, {:arg, j}, int(c, @ranges[type])), st}
      end
    end)
  end

  defp slot_index(caps, k),
    do: caps |> Enum.take(k) |> Enum.reduce(0, fn c, n -> n + if(c == :range, do: 3, else: 1) end)

  defp bucket_range(64), do: @full
  defp bucket_range(bits), do: {-Bitwise.bsl(1, bits), Bitwise.bsl(1, bits) - 1}

  # A named value for `expr`. In the lanes walk, a value that differs between elements (an input,
  # or anything computed from one) is an array over the lanes, filled by a loop the C++ compiler
  # vectorises, and its text is `tN[l]`; that suffix is what marks a text as varying. Its checked
  # helpers raise the lane's own flag, lbad[l]; uniform values stay scalars.
  defp declare(st, type, expr, input \\ false) do
    name = "t#{st.tmp}"
    st = %{st | tmp: st.tmp + 1}

    if st.lanes and (input or varying?(expr)) do
      lane = String.replace(expr, "&bad", "&lbad[l]")
      {name <> "[l]", st |> emit("#{type} #{name}[ACCEL_LANES];") |> emit("ACCEL_LANE #{name}[l] = #{lane};")}
    else
      {name, emit(st, "const #{type} #{name} = #{expr};")}
    end
  end

  defp varying?(text), do: String.contains?(text, "[l]")

  # A variable assigned later (a branch's or a loop's value): `ref` and its declaration.
  defp variable(st, type, varying) do
    name = "t#{st.tmp}"
    st = %{st | tmp: st.tmp + 1}

    if st.lanes and varying,
      do: {name <> "[l]", emit(st, "#{type} #{name}[ACCEL_LANES];")},
      else: {name, emit(st, "#{type} #{name};")}
  end

  defp assign(ref, text) do
    if varying?(ref), do: "ACCEL_LANE #{ref} = #{text};", else: "#{ref} = #{text};"
  end

  # `v`'s text in the representation of `target` (a double-held integer, or its own).
  defp text_as(v, %{d: d}) when d != nil, do: dt(v)
  defp text_as(%{t: :int} = v, _target), do: it(v)
  defp text_as(v, _target), do: v.c

  defp emit(st, line), do: %{st | lines: [line | st.lines]}

  # Runs `fun` on an empty list of lines; returns its value and its lines (in order).
  defp nested(st, fun) do
    outer = st.lines
    {v, st} = fun.(%{st | lines: []})
    {v, Enum.reverse(st.lines), %{st | lines: outer}}
  end

  # A value that cannot be computed for the element: its flag is raised. In the lanes walk this
  # is reached only under uniform control, so every lane fails, and the scalar `bad` says so.
  defp fail(st), do: {none(), emit(st, "bad = 1;")}

  defp wrong(line, st, message),
    do: raise(ArgumentError, "kernel #{st.name}#{if line, do: " (line #{line})", else: ""}: " <> message)

  # ---- expressions ----

  defp gen({:lit, v}, _env, st) when is_integer(v) and v >= @min and v <= @max,
    do: {int(int_lit(v), {v, v}), st}

  defp gen({:lit, v}, _env, st) when is_integer(v), do: fail(st)
  defp gen({:lit, v}, _env, st) when is_float(v), do: {float(float_lit(v)), %{st | float: true}}
  defp gen({:lit, true}, _env, st), do: {bool("1"), st}
  defp gen({:lit, false}, _env, st), do: {bool("0"), st}

  defp gen({:lit, nil}, _env, st),
    do: wrong(nil, st, "a value may be nil (an if without else?): a kernel returns numbers or booleans")

  defp gen({:fail}, _env, st), do: fail(st)
  defp gen({:arg, _} = a, env, st), do: {Map.fetch!(env, a), st}
  # (a variable bound in a block stays visible after it: see Accel.Kernel.Lower.block/2)
  defp gen({:var, _} = a, env, st), do: {Map.get_lazy(env, a, fn -> Map.fetch!(st.binds, a) end), st}

  defp gen({:cap, k} = c, env, st) do
    case Map.fetch(env, c) do
      {:ok, v} -> {v, st}
      :error -> wrong(nil, st, "captured value #{k} is a range, used as a number")
    end
  end

  defp gen({:let, id, value, body}, env, st) do
    {v, st} = gen(value, env, st)
    gen(body, Map.put(env, {:var, id}, v), %{st | binds: Map.put(st.binds, {:var, id}, v)})
  end

  defp gen({:op, name, args, line}, env, st) do
    {vs, st} = Enum.map_reduce(args, st, &gen(&1, env, &2))

    if Enum.any?(vs, &(&1.t == :none)) and name not in [:is_integer, :is_float, :is_number, :is_boolean],
      do: {none(), st},
      else: op(name, vs, args, line, st)
  end

  defp gen({:if, c, t, e, line}, env, st) do
    {cv, st} = gen(c, env, st)

    case cv.t do
      :bool -> branch(cv.c, t, e, env, line, st)
      :none -> {none(), st}
      _ -> gen(t, env, st)
    end
  end

  defp gen({:and, a, b, line}, env, st), do: strict(a, b, line, env, st, true)
  defp gen({:or, a, b, line}, env, st), do: strict(a, b, line, env, st, false)

  defp gen({:andalso, a, b}, env, st) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool -> branch(av.c, b, {:lit, false}, env, nil, st)
      :none -> {none(), st}
      _ -> gen(b, env, st)
    end
  end

  defp gen({:orelse, a, b}, env, st) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool -> branch_values(av.c, fn st -> {av, st} end, fn st -> gen(b, env, st) end, nil, st)
      :none -> {none(), st}
      _ -> {av, st}
    end
  end

  defp gen({:reduce, range, init, i_id, acc_id, body, line}, env, st),
    do: loop(range, init, i_id, acc_id, body, line, env, st)

  # `and`/`or`: the left side must be a boolean (BadBooleanError otherwise); the right is
  # evaluated only when needed.
  defp strict(a, b, line, env, st, is_and) do
    {av, st} = gen(a, env, st)

    case av.t do
      :bool ->
        if is_and,
          do: branch_values(av.c, fn st -> gen(b, env, st) end, fn st -> {bool("0"), st} end, line, st),
          else: branch_values(av.c, fn st -> {bool("1"), st} end, fn st -> gen(b, env, st) end, line, st)

      _ ->
        fail(st)
    end
  end

  defp branch(c, t, e, env, line, st),
    do: branch_values(c, fn st -> gen(t, env, st) end, fn st -> gen(e, env, st) end, line, st)

  # A branch on an element's value cannot run in lockstep: the lanes walk gives up, and the CPU
  # runs the one-element form.
  defp branch_values(c, then_fun, else_fun, line, st) do
    if st.lanes and varying?(c), do: throw(:varying_control)
    {tv, t_lines, st} = nested(st, then_fun)
    {ev, e_lines, st} = nested(st, else_fun)
    v = unify(tv, ev, line, st)
    present = Enum.reject([tv, ev], &(&1.t == :none))
    v = if v.t == :int and present != [] and Enum.all?(present, &held_d?/1), do: %{v | d: ""}, else: v
    type = if held_d?(v), do: "double", else: c_type(v.t)
    {ref, st} = variable(st, type, Enum.any?(present, &varying?(text_as(&1, v))))

    st =
      st
      |> emit("if (#{c}) {")
      |> emit_block(t_lines, ref, tv, v)
      |> emit("} else {")
      |> emit_block(e_lines, ref, ev, v)
      |> emit("}")

    {if(held_d?(v), do: %{v | c: nil, d: ref}, else: %{v | c: ref}), st}
  end

  defp emit_block(st, lines, ref, v, target) do
    st = Enum.reduce(lines, st, &emit(&2, "  " <> &1))
    if v.t == :none, do: st, else: emit(st, "  " <> assign(ref, text_as(v, target)))
  end

  defp c_type(:float), do: "double"
  defp c_type(:bool), do: "int"
  defp c_type(_), do: "accel_i64"

  defp unify(%{t: :none}, v, _line, _st), do: v
  defp unify(v, %{t: :none}, _line, _st), do: v
  defp unify(%{t: :int, r: {a, b}}, %{t: :int, r: {c, d}}, _line, _st), do: int("", {min(a, c), max(b, d)})
  defp unify(%{t: t} = v, %{t: t}, _line, _st), do: v

  defp unify(a, b, line, st),
    do:
      wrong(
        line,
        st,
        "one branch gives #{describe(a.t)} and another #{describe(b.t)}; Elixir allows that, a kernel " <>
          "needs one type for its values (write 1.0 for a float, or convert with trunc/1)"
      )

  defp describe(:int), do: "an integer"
  defp describe(:float), do: "a float"
  defp describe(:bool), do: "a boolean"

  # ---- loops: Enum.reduce(first..last//step, init, fn i, acc -> body end) ----
  #
  # The first iteration sees the initial value; later ones what the body gives, whose range
  # settles after it (a remainder), so the first is emitted on its own with its own checks, and
  # later ones keep the accumulator in a double when its settled range is within 2^53 (doubles
  # walks). `res` is the loop's value: the initial one when the range is empty.
  defp loop(range, init, i_id, acc_id, body, line, env, st) do
    {[f, l, s], st} = range_parts(range, env, st, line)
    {iv, st} = gen(init, env, st)

    if Enum.any?([f, l, s], &(&1.t != :int)) or iv.t == :none do
      fail(st)
    else
      [fc, lc, sc] = Enum.map([f, l, s], &it/1)
      if st.lanes and Enum.any?([fc, lc, sc], &varying?/1), do: throw(:varying_control)
      index = int("", {min(elem(f.r, 0), elem(l.r, 0)), max(elem(f.r, 1), elem(l.r, 1))})
      i = "t#{st.tmp}"
      last = "t#{st.tmp + 1}"
      acc = "t#{st.tmp + 2}"
      st = %{st | tmp: st.tmp + 3}
      acc_ref = if st.lanes, do: acc <> "[l]", else: acc

      acc_as = fn
        %{t: :int} = g ->
          if st.dint and fits53?(g.r), do: %{g | c: nil, d: acc_ref}, else: %{g | c: acc_ref, d: nil}

        g ->
          %{g | c: acc_ref, d: nil}
      end

      body_at = fn acc_v, st ->
        env = env |> Map.put({:var, acc_id}, acc_v) |> Map.put({:var, i_id}, %{index | c: i})
        {v, lines, inner} = nested(%{st | in_loop: true}, fn st -> gen(body, env, st) end)
        {v, lines, %{inner | in_loop: st.in_loop}}
      end

      # this loop's id among the resumable ones, numbered in pre-order: those in its body follow it
      id = st.loops
      parent = st.parent
      st = %{st | loops: id + 1, parent: id}
      {first_v, first_lines, st} = body_at.(iv, st)
      check_acc_type(iv, first_v, line, st)
      start = if first_v.t == :none, do: iv, else: first_v
      {later_v, later_lines, acc_v, st} = settle(start, body_at, acc_as, line, st)
      res_v = Enum.reduce([first_v, later_v], iv, &unify(&1, &2, line, st))
      res_v = if res_v.t == :int and held_d?(acc_v) and fits53?(res_v.r), do: %{res_v | d: ""}, else: res_v
      {res, st} = variable(st, if(held_d?(res_v), do: "double", else: c_type(res_v.t)), true)
      acc_type = if held_d?(acc_v), do: "double", else: c_type(acc_v.t)
      acc_decl = if st.lanes, do: "#{acc_type} #{acc}[ACCEL_LANES];", else: "#{acc_type} #{acc};"

      resumable =
        st.resumable and not st.lanes and not st.dint and (st.loops > id + 1 or long_loop?(f.r, l.r, s.r))

      st =
        if resumable,
          do: %{st | parent: parent, nest: [{id, st.loops - 1, parent} | st.nest]},
          else: %{st | loops: id, parent: parent}

      names = %{i: i, last: last, acc: acc, res: res, id: id, inner: st.loops - 1}
      loop_parts = {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v}

      st =
        if resumable,
          do: emit_resumable(st, names, iv, loop_parts),
          else: emit_loop(st, names, iv, loop_parts)

      {if(held_d?(res_v), do: %{res_v | c: nil, d: res}, else: %{res_v | c: res}), st}
    end
  end

  # A loop that runs to its end in one go: the host's, and the devices' short ones.
  defp emit_loop(
         st,
         names,
         iv,
         {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v}
       ) do
    %{i: i, last: last, acc: acc, res: res} = names
    acc_ref = if st.lanes, do: acc <> "[l]", else: acc

    st
    |> emit(assign(res, text_as(iv, res_v)))
    |> emit("if (#{sc} == 0) bad = 1;")
    |> emit("else if (#{sc} > 0 ? #{fc} <= #{lc} : #{fc} >= #{lc}) {")
    |> emit(
      "  const accel_u64 #{last} = (#{sc} > 0 ? (accel_u64)#{lc} - (accel_u64)#{fc} : (accel_u64)#{fc} - (accel_u64)#{lc}) / (#{sc} > 0 ? (accel_u64)#{sc} : (accel_u64)0 - (accel_u64)#{sc});"
    )
    |> emit("  " <> acc_decl)
    |> emit("  {")
    |> emit("    const accel_i64 #{i} = #{fc};")
    |> emit_loop_body(first_lines, acc_ref, first_v, acc_v)
    |> emit("  }")
    |> emit("  for (accel_u64 #{last}k = 1; #{last}k <= #{last}; ++#{last}k) {")
    # an abandoned call stops here (host only; see ACCEL_STOPPED in kernels/user.h)
    |> emit("    if ((#{last}k & 0xFFFFUL) == 0 && ACCEL_STOPPED()) { bad = 1; break; }")
    |> emit("    const accel_i64 #{i} = (accel_i64)((accel_u64)#{fc} + #{last}k * (accel_u64)#{sc});")
    |> emit_loop_body(later_lines, acc_ref, later_v, acc_v)
    |> emit("  }")
    |> emit("  " <> assign(res, text_as(acc_v, res_v)))
    |> emit("}")
  end

  # A device cannot be interrupted, so a loop that may run long runs at most `fuel` iterations
  # (of all loops) per launch, then saves where it is and returns; the next launch resumes it. Per
  # element, rs[0] names the loop that ran out (its id + 1) and each loop has two words: the next
  # iteration and the accumulator while it is under way, then its value once it ended. A resumed
  # element computes again what comes before (the language has no side effects, so it comes out
  # the same): a loop that ended earlier in the same iteration of the loops around it gives its
  # saved value, and loops on the way to the one that ran out start where they were; no fuel is
  # spent until it is reached, so every launch gets at least one iteration further. An element
  # whose flag is raised is not suspended (the flag would be lost): it finishes, its value flagged.
  defp emit_resumable(st, names, iv, parts) do
    {fc, lc, sc, acc_decl, first_lines, first_v, later_lines, later_v, acc_v, res_v} = parts
    %{i: i, last: last, acc: acc, res: res, id: id, inner: inner} = names
    {k, at, val} = {"#{last}k", "rs[#{2 * id + 1}]", "rs[#{2 * id + 2}]"}
    acc_type = c_type(acc_v.t)
    res_type = c_type(res_v.t)

    st
    |> emit(assign(res, text_as(iv, res_v)))
    |> emit("if (resume != 0 && (resume < #{id + 1}UL || resume > #{inner + 1}UL)) {")
    |> emit("  #{res} = #{from_word(res_type, val)};")
    |> emit("} else if (#{sc} == 0) bad = 1;")
    |> emit("else if (#{sc} > 0 ? #{fc} <= #{lc} : #{fc} >= #{lc}) {")
    |> emit(
      "  const accel_u64 #{last} = (#{sc} > 0 ? (accel_u64)#{lc} - (accel_u64)#{fc} : (accel_u64)#{fc} - (accel_u64)#{lc}) / (#{sc} > 0 ? (accel_u64)#{sc} : (accel_u64)0 - (accel_u64)#{sc});"
    )
    |> emit("  " <> String.replace_suffix(acc_decl, ";", " = 0;"))
    |> emit("  accel_u64 #{k} = 0;")
    |> emit("  if (resume != 0) {")
    |> emit("    #{k} = #{at};")
    |> emit("    #{acc} = #{from_word(acc_type, val)};")
    |> emit("    if (resume == #{id + 1}UL) resume = 0;")
    |> emit("  }")
    |> then(fn st ->
      iteration = "(accel_i64)((accel_u64)#{fc} + #{k} * (accel_u64)#{sc})"
      mark = "rs[0] = (epoch << 16) | #{id + 1}UL;"

      if inner == id do
        # innermost: as many iterations as the fuel allows, in a loop as tight as a launch's
        st
        |> emit("  if (#{k} == 0) {")
        |> emit("    if (fuel == 0) { susp = 1; #{mark} }")
        |> emit("    else {")
        |> emit("      --fuel;")
        |> emit("      const accel_i64 #{i} = #{fc};")
        |> emit_loop_body(first_lines, acc, first_v, acc_v, "      ")
        |> emit("      #{k} = 1;")
        |> emit("    }")
        |> emit("  }")
        |> emit("  if (!susp) {")
        |> emit("    const accel_u64 #{last}a = #{last} - #{k} + 1;")
        |> emit("    const accel_u64 #{last}r = #{last}a < fuel ? #{last}a : fuel;")
        |> emit("    fuel -= #{last}r;")
        |> emit("    for (accel_u64 #{last}c = 0; #{last}c < #{last}r; ++#{last}c, ++#{k}) {")
        |> emit("      const accel_i64 #{i} = #{iteration};")
        |> emit_loop_body(later_lines, acc, later_v, acc_v, "      ")
        |> emit("    }")
        |> emit("    if (#{last}r < #{last}a) { susp = 1; #{mark} }")
        |> emit("  }")
      else
        # around other resumable loops: each iteration asks for fuel, unless on the way to resume
        st
        |> emit("  for (; #{k} <= #{last}; ++#{k}) {")
        |> emit("    if (resume == 0) {")
        |> emit("      if (fuel == 0) { susp = 1; #{mark} break; }")
        |> emit("      --fuel;")
        |> emit("    }")
        |> emit("    if (#{k} == 0) {")
        |> emit("      const accel_i64 #{i} = #{fc};")
        |> emit_loop_body(first_lines, acc, first_v, acc_v, "      ")
        |> emit("    } else {")
        |> emit("      const accel_i64 #{i} = #{iteration};")
        |> emit_loop_body(later_lines, acc, later_v, acc_v, "      ")
        |> emit("    }")
        |> emit("  }")
      end
    end)
    |> emit("  if (susp) {")
    |> emit("    #{at} = #{k};")
    |> emit("    #{val} = #{to_word(acc_type, acc)};")
    |> emit("  } else {")
    |> emit("    " <> assign(res, text_as(acc_v, res_v)))
    |> emit("  }")
    |> emit("}")
    |> emit("ACCEL_KEEP_#{id}(if (!susp) #{val} = #{to_word(res_type, res)};)")
    |> emit(if st.in_loop, do: "if (susp) break;", else: "if (susp && !bad) return 2;")
  end

  defp to_word("double", x), do: "accel_f64_bits(#{x})"
  defp to_word(_, x), do: "(accel_u64)#{x}"
  defp from_word("double", w), do: "accel_f64_of(#{w})"
  defp from_word(type, w), do: "(#{type})#{w}"

  # Whether a loop may run more than a few hundred iterations: its trip count's bound from the
  # ranges of its first and last (the span between them) and its step (a step that is not one
  # constant counts as 1: `a..b` steps by +1 or -1). Shorter loops run to their end in one launch,
  # as straight-line code does: resuming costs the launch 5-25% on PoCL
  # (bench/results/kernel_stop_cost.md). `1..n` with a captured n of the 8-bit class (the logistic
  # map's 10 iterations) is short: n within -256..255 bounds it at 258 iterations.
  @short_loop 512
  defp long_loop?({f_lo, f_hi}, {l_lo, l_hi}, step) do
    span = max(max(l_hi - f_lo, f_hi - l_lo), 0)
    by = if match?({s, s} when s != 0, step), do: abs(elem(step, 0)), else: 1
    div(span, by) + 1 > @short_loop
  end

  defp emit_loop_body(st, lines, acc_ref, v, acc_v, indent \\ "    ") do
    st = Enum.reduce(lines, st, &emit(&2, indent <> &1))
    if v.t == :none, do: st, else: emit(st, indent <> assign(acc_ref, text_as(v, acc_v)))
  end

  defp check_acc_type(%{t: a} = init, %{t: b} = body, line, st) when a != b and b != :none,
    do: unify(init, body, line, st)

  defp check_acc_type(_, _, _, _), do: :ok

  # The accumulator for iterations after the first (as `acc_as` holds it): from what the first
  # gives, widened until the body keeps it (twice), else the whole 64-bit range.
  defp settle(first_v, body_at, acc_as, line, st) do
    Enum.reduce_while([1, 2, 3], first_v, fn attempt, guess ->
      guess = if attempt == 3 and guess.t == :int, do: %{guess | r: @full}, else: guess
      acc_v = acc_as.(guess)
      {v, lines, st2} = body_at.(acc_v, st)
      check_acc_type(guess, v, line, st)

      if v.t != :int or within?(v.r, guess.r) or attempt == 3,
        do: {:halt, {v, lines, acc_v, st2}},
        else: {:cont, unify(guess, v, line, st)}
    end)
  end

  defp within?({a, b}, {c, d}), do: a >= c and b <= d

  defp range_parts({:cap_range, k}, env, st, _line) do
    [f, l, s] = Map.fetch!(env, {:cap_range, k})
    {[int(f, @full), int(l, @full), int(s, @full)], st}
  end

  defp range_parts({:range, f, l, s}, env, st, _line) do
    {fv, st} = gen(f, env, st)
    {lv, st} = gen(l, env, st)

    case s do
      nil when fv.t == :int and lv.t == :int ->
        # Elixir 1.14: first..last steps by -1 when first > last.
        {c, st} = declare(st, "accel_i64", "(#{it(fv)} <= #{it(lv)} ? 1 : -1)")
        {[fv, lv, int(c, {-1, 1})], st}

      nil ->
        {[fv, lv, none()], st}

      s ->
        {sv, st} = gen(s, env, st)
        {[fv, lv, sv], st}
    end
  end

  # ---- operations ----

  @float_math Accel.Kernel.Lower.math_functions() |> Keyword.keys()

  defp op(:is_integer, [v], _, _, st), do: {bool(if(v.t == :int, do: "1", else: "0")), st}
  defp op(:is_float, [v], _, _, st), do: {bool(if(v.t == :float, do: "1", else: "0")), st}
  defp op(:is_number, [v], _, _, st), do: {bool(if(v.t in [:int, :float], do: "1", else: "0")), st}
  defp op(:is_boolean, [v], _, _, st), do: {bool(if(v.t == :bool, do: "1", else: "0")), st}

  defp op(name, vs, args, line, st) do
    types = Enum.map(vs, & &1.t)

    cond do
      name in [:==, :!=, :===, :!==, :<, :<=, :>, :>=] -> compare(name, vs, st)
      name == :not -> if types == [:bool], do: declare_v(st, bool("!#{hd(vs).c}")), else: fail(st)
      name == :lnot -> if types == [:bool], do: declare_v(st, bool("!#{hd(vs).c}")), else: {bool("0"), st}
      Enum.member?(types, :bool) -> fail(st)
      true -> numeric(name, vs, args, line, st)
    end
  end

  defp declare_v(st, %{d: d} = v) when d != nil do
    {name, st} = declare(st, "double", d)
    {%{v | d: name}, st}
  end

  defp declare_v(st, v) do
    {c, st} = declare(st, c_type(v.t), v.c)
    {%{v | c: c}, st}
  end

  defp as_double(%{t: :float, c: c}), do: c
  defp as_double(%{t: :int} = v), do: dt(v)

  defp numeric(name, [a, b], _args, _line, st) when name in [:+, :-, :*] do
    if a.t == :int and b.t == :int do
      {x1, x2} = a.r
      {y1, y2} = b.r

      r =
        case name do
          :+ -> {x1 + y1, x2 + y2}
          :- -> {x1 - y2, x2 - y1}
          :* -> Enum.min_max([x1 * y1, x1 * y2, x2 * y1, x2 * y2])
        end

      helper = %{+: "accel_add", -: "accel_sub", *: "accel_mul"}[name]

      cond do
        in_doubles?(st, [a, b]) and fits53?(r) -> declare_v(st, dint("(#{dt(a)} #{name} #{dt(b)})", r))
        fits?(r) -> declare_v(st, int("(accel_i64)((accel_u64)#{it(a)} #{name} (accel_u64)#{it(b)})", r))
        true -> declare_v(st, int("#{helper}(#{it(a)}, #{it(b)}, &bad)", r))
      end
    else
      declare_v(%{st | float: true}, float("accel_fin(#{as_double(a)} #{name} #{as_double(b)}, &bad)"))
    end
  end

  defp numeric(:/, [a, b], _, _, st),
    do: declare_v(%{st | float: true}, float("accel_fin(#{as_double(a)} / #{as_double(b)}, &bad)"))

  defp numeric(:neg, [%{t: :int} = a], _, _, st) do
    {lo, hi} = a.r
    r = {-hi, -lo}

    cond do
      held_d?(a) -> declare_v(st, dint("(-#{a.d})", r))
      fits?(r) -> declare_v(st, int("(-#{it(a)})", r))
      true -> declare_v(st, int("accel_neg(#{it(a)}, &bad)", r))
    end
  end

  defp numeric(:neg, [a], _, _, st), do: declare_v(st, float("(-#{a.c})"))

  defp numeric(:abs, [%{t: :int} = a], _, _, st) do
    {lo, hi} = a.r
    r = if lo >= 0, do: a.r, else: {if(hi >= 0, do: 0, else: -hi), max(-lo, hi)}

    cond do
      held_d?(a) -> declare_v(st, dint("fabs(#{a.d})", r))
      lo > @min -> declare_v(st, int("(#{it(a)} < 0 ? -#{it(a)} : #{it(a)})", r))
      true -> declare_v(st, int("accel_abs(#{it(a)}, &bad)", r))
    end
  end

  defp numeric(:abs, [a], _, _, st), do: declare_v(st, float("fabs(#{a.c})"))

  defp numeric(name, [a, b], [_, divisor], _line, st) when name in [:div, :rem] do
    if a.t != :int or b.t != :int do
      fail(st)
    else
      amax = magnitude(a.r)
      {blo, bhi} = b.r
      bmax = magnitude(b.r)

      r =
        case name do
          :div ->
            bmin = if blo > 0, do: blo, else: if(bhi < 0, do: -bhi, else: 1)
            q = div(amax, max(bmin, 1))
            {-q, q}

          :rem ->
            m = min(amax, max(bmax - 1, 0))
            {if(elem(a.r, 0) >= 0, do: 0, else: -m), if(elem(a.r, 1) <= 0, do: 0, else: m)}
        end

      helper = if name == :div, do: "accel_div", else: "accel_rem"

      cond do
        # held in doubles: the reciprocal of a divisor fixed for the call is computed once, on the host
        st.dint and held_d?(a) and fits53?(b.r) and amax + bmax <= @d53 ->
          {inv, st} = reciprocal_text(divisor, b, st)
          declare_v(st, dint("#{helper}_f(#{a.d}, #{dt(b)}, #{inv}, &bad)", r))

        # 64-bit, in the lanes walks: two rounds of the reciprocal, which vectorise (AVX-512DQ)
        st.lanes and amax <= @wide and fits53?(b.r) ->
          {inv, st} = reciprocal_text(divisor, b, st)
          declare_v(st, int("#{helper}_w(#{it(a)}, #{it(b)}, #{inv}, &bad)", r))

        match?({:lit, d} when is_integer(d) and d not in [0, -1], divisor) ->
          op = if name == :div, do: "/", else: "%"
          declare_v(st, int("(#{it(a)} #{op} #{it(b)})", r))

        match?({:cap, _}, divisor) ->
          {:cap, k} = divisor
          slot = "ACCEL_MAGIC_#{k}"
          st = %{st | magic: Map.put(st.magic, k, true)}
          declare_v(st, int("#{helper}_magic(#{it(a)}, #{it(b)}, #{slot}_M, #{slot}_S, #{slot}_A, &bad)", r))

        true ->
          declare_v(st, int("#{helper}(#{it(a)}, #{it(b)}, &bad)", r))
      end
    end
  end

  defp numeric(name, [a, b], _, line, st) when name in [:min, :max] do
    pick = fn x, y -> "(#{x} #{if name == :min, do: "<=", else: ">="} #{y} ? #{x} : #{y})" end

    cond do
      a.t == :int and b.t == :int ->
        {x1, x2} = a.r
        {y1, y2} = b.r
        r = if name == :min, do: {min(x1, y1), min(x2, y2)}, else: {max(x1, y1), max(x2, y2)}

        if in_doubles?(st, [a, b]),
          do: declare_v(st, dint(pick.(dt(a), dt(b)), r)),
          else: declare_v(st, int(pick.(it(a), it(b)), r))

      a.t == :float and b.t == :float ->
        declare_v(st, float(pick.(a.c, b.c)))

      true ->
        wrong(
          line,
          st,
          "#{name}/2 of an integer and a float gives either type depending on the values; convert one (x * 1.0, trunc/1)"
        )
    end
  end

  defp numeric(name, [%{t: :int} = a], _, _, st) when name in [:trunc, :round, :floor, :ceil], do: {a, st}

  defp numeric(name, [a], _, _, st) when name in [:trunc, :round, :floor, :ceil],
    do: declare_v(st, int("accel_f2i(#{name}(#{a.c}), &bad)", @full))

  defp numeric(name, vs, _, _, st) when name in [:band, :bor, :bxor, :bnot, :bsl, :bsr] do
    if Enum.any?(vs, &(&1.t != :int)), do: fail(st), else: bitwise(name, vs, st)
  end

  defp numeric({:math, f}, vs, _, _, st) when f in @float_math do
    args = Enum.map_join(vs, ", ", &as_double/1)
    declare_v(%{st | float: true}, float("accel_fin(#{f}(#{args}), &bad)"))
  end

  # The double nearest 1 / divisor: a slot filled on the host for a captured divisor, a literal
  # for a literal one, else computed per element.
  defp reciprocal_text({:cap, k}, _b, st), do: {"ACCEL_INV_#{k}", %{st | inv: Map.put(st.inv, k, true)}}
  defp reciprocal_text({:lit, d}, _b, st) when is_integer(d), do: {float_lit(reciprocal(d)), st}
  defp reciprocal_text(_divisor, b, st), do: {"(1.0 / #{dt(b)})", st}

  defp bitwise(:band, [a, b], st) do
    r =
      case {a.r, b.r} do
        {{lo, hi}, _} when lo >= 0 -> {0, if(elem(b.r, 0) >= 0, do: min(hi, elem(b.r, 1)), else: hi)}
        {_, {lo, hi}} when lo >= 0 -> {0, hi}
        _ -> @full
      end

    declare_v(st, int("(#{it(a)} & #{it(b)})", r))
  end

  defp bitwise(name, [a, b], st) when name in [:bor, :bxor] do
    r =
      if elem(a.r, 0) >= 0 and elem(b.r, 0) >= 0,
        do: {0, Bitwise.bsl(1, bit_length(max(elem(a.r, 1), elem(b.r, 1)))) - 1},
        else: @full

    declare_v(st, int("(#{it(a)} #{if name == :bor, do: "|", else: "^"} #{it(b)})", r))
  end

  defp bitwise(:bnot, [a], st) do
    {lo, hi} = a.r
    declare_v(st, int("(~#{it(a)})", {-hi - 1, -lo - 1}))
  end

  defp bitwise(:bsr, [a, b], st) do
    {lo, hi} = a.r
    r = if elem(b.r, 0) >= 0, do: {min(lo, 0), max(hi, 0)}, else: @full
    declare_v(st, int("accel_bsr(#{it(a)}, #{it(b)}, &bad)", r))
  end

  defp bitwise(:bsl, [a, b], st), do: declare_v(st, int("accel_bsl(#{it(a)}, #{it(b)}, &bad)", @full))

  defp bit_length(0), do: 0
  defp bit_length(n), do: n |> Integer.digits(2) |> length()

  defp magnitude({lo, hi}), do: max(abs(lo), abs(hi))

  # Comparisons follow the BEAM's term order: numbers compare by value (an integer and a float
  # exactly), every number is less than every boolean, false < true. An integer held in a double
  # is that integer exactly, so comparing doubles is exact too.
  defp compare(name, [a, b], st) do
    c_op = %{==: "==", !=: "!=", ===: "==", !==: "!=", <: "<", <=: "<=", >: ">", >=: ">="}[name]

    cond do
      name in [:===, :!==] and a.t != b.t ->
        {bool(if(name == :===, do: "0", else: "1")), st}

      a.t == :int and b.t == :int ->
        if in_doubles?(st, [a, b]),
          do: declare_v(st, bool("(#{dt(a)} #{c_op} #{dt(b)})")),
          else: declare_v(st, bool("(#{it(a)} #{c_op} #{it(b)})"))

      a.t == b.t ->
        declare_v(st, bool("(#{a.c} #{c_op} #{b.c})"))

      a.t == :int and b.t == :float ->
        if held_d?(a),
          do: declare_v(st, bool("(#{a.d} #{c_op} #{b.c})")),
          else: declare_v(st, bool("(accel_cmp_if(#{it(a)}, #{b.c}) #{c_op} 0)"))

      a.t == :float and b.t == :int ->
        if held_d?(b),
          do: declare_v(st, bool("(#{a.c} #{c_op} #{b.d})")),
          else: declare_v(st, bool("(0 #{c_op} accel_cmp_if(#{it(b)}, #{a.c}))"))

      true ->
        # a number against a boolean: the number is smaller
        order = if a.t == :bool, do: 1, else: -1
        {bool(if(apply(Kernel, name_to_fun(name), [order, 0]), do: "1", else: "0")), st}
    end
  end

  defp name_to_fun(:===), do: :==
  defp name_to_fun(:!==), do: :!=
  defp name_to_fun(n), do: n

  defp int_lit(@min), do: "ACCEL_I64_MIN"
  defp int_lit(v), do: "((accel_i64)#{v}L)"

  defp float_lit(v), do: "(#{Float.to_string(v)})"
end
