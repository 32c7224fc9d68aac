defmodule Accel.Kernel.Compiler.Text do
  @moduledoc false
  # A kernel's text from the compiler's walks (Accel.Kernel.Compiler.compile/5): the element
  # functions, the host's entry point, and the OpenCL and CUDA kernels around them.
  use Accel.Kernel.Compiler.Values
  use Accel.Kernel.Prelude, files: ["dialect.h", "user.h"]

  @c_types %{s64: "accel_i64", s32: "accel_i32", u8: "accel_u8", f64: "double", f32: "float"}

  def assemble(args, out_type, result, slots, plain, doubles, {lanes, narrow}) do
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

        # lanes' own flags only where some check varies between them
        lane_form and String.contains?(body, "lbad[l]") ->
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

        # one element, or lanes with no flag but the block's
        true ->
          store = if lane_form, do: "ACCEL_LANE out[i + l]", else: "out[i]"

          """
          ACCEL_USER_ELEMENT int #{fun}(#{params}) {
            int bad = 0;
          #{body}
          #{failed}  #{store} = bad ? (#{out_t})#{sentinel} : #{value};
            return bad;
          }
          """
      end
    end

    one = element.(plain, false, "accel_user_at")

    with_doubles = element.(doubles, false, "accel_user_at")

    # the doubles form on the host, and on OpenCL CPU devices with doubles where the kernel has no
    # resumable loops (the doubles walk has none: it takes no state buffer)
    doubles_here =
      if elem(plain, 1).loops == 0,
        do:
          "!defined(__CUDACC__) && (!defined(__OPENCL_VERSION__) || (ACCEL_HAS_F64 && defined(ACCEL_OPENCL_CPU)))",
        else: "!defined(__OPENCL_VERSION__) && !defined(__CUDACC__)"

    single =
      if with_doubles == one,
        do: one,
        else: "#if #{doubles_here}\n#{with_doubles}#else\n#{one}#endif\n"

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
    ACCEL_USER_EXTERN ACCEL_USER_HOST void accel_user(void* const* b, const accel_u64* s, accel_u64 begin, accel_u64 end) {
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
  def resume_words(%{loops: 0}), do: 0
  def resume_words(%{loops: loops}), do: 1 + 2 * loops

  # Each run of straight-line lines becomes one loop over the lanes, which the C++ compiler
  # vectorises as a whole (one loop per statement would be unrolled first, and then not
  # vectorised): the run's uniform scalars and checks go first (they read no lane's value), then
  # its arrays' declarations, then one `ACCEL_LANE { ... }` with every lane statement, in order.
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
      String.starts_with?(line, "const ") or String.starts_with?(line, "bad |= ") -> :uniform
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
end
