defmodule Accel.Nx.Compiler.Codegen do
  @moduledoc false
  # A fused region (Accel.Nx.Compiler.Fusion) -> one kernel text in the dialect every Accel backend
  # compiles (c_src/kernels/dialect.h): host C++ for the CPU backend, OpenCL C, CUDA C++ for NVRTC,
  # with the entry point and parameters of Accel.Kernel's generated kernels (accel_user: the
  # output, the flag where an operation can raise one, the inputs, n), so it is compiled, cached
  # and launched as they are (Accel.Kernel.Native, core/source_kernel.hpp).
  #
  # Each element's value is computed by the same per-element functions as Accel.Nx.Backend's
  # operations, one at a time (c_src/kernels/tensor.h, from the registry ops.h), so a fused chain
  # gives the values the backend gives op by op: operands converted to the type Nx computed, integers
  # kept in 64 bits (unsigned for u64) and wrapped to their type after every operation, f32 in
  # single precision.
  #
  # Inputs are read at their own indices: an operand of a smaller shape (Nx's broadcasting) is
  # indexed through stride-0 dimensions, never materialised. An iota the region reads is its index
  # expression over the same strides, plus an offset (y0, y1, ...: Fusion's index leaves). A region
  # ending in a reduction loops over the reduced elements for each output element; where there are
  # few output elements the reduced range is split into parts (partial results, reduced again by
  # the backend).

  use Accel.Kernel.Prelude, files: ["dialect.h", "ops.h", "types.h", "tensor.h", "user.h"]

  # a reduction's interleaved accumulators, and the elements computed before they are added (iteration/4)
  @lanes 8
  @block 64
  @prefetch_bytes 64 * 1024
  @prefetch_min_row 1024
  # Operations on types of 32 bits or fewer whose low 32 bits are those of the 64-bit ones (the
  # wrap keeps no more): computed on 32-bit words, the compilers keep 32-bit lanes (vectorised:
  # twice the lanes of 64-bit ones, and rotates for Nx.Random's shift pairs; a GPU's 32-bit
  # integer instructions), where the 64-bit form left each value widened and narrowed again. The
  # same values; Nx.Random's threefry kernel over 2^24 elements: 9.3-9.5 ms against 53 (CPU backend).
  @word_types [:u32, :s32, :u8]
  @word_ops %{add: "+", subtract: "-", multiply: "*", bitwise_and: "&", bitwise_or: "|", bitwise_xor: "^"}
  @c_types %{
    s64: "accel_i64",
    s32: "accel_i32",
    u32: "accel_u32",
    u8: "accel_u8",
    u64: "accel_u64",
    f64: "double",
    f32: "float"
  }
  @type_codes %{
    s64: "ACCEL_S64_TYPE",
    s32: "ACCEL_S32_TYPE",
    u32: "ACCEL_U32_TYPE",
    u8: "ACCEL_U8_TYPE",
    u64: "ACCEL_U64_TYPE"
  }

  @doc "Integer operations whose element functions raise the flag (a zero divisor, a negative exponent)."
  def flagging?(op, type), do: op in [:divide, :quotient, :remainder, :pow] and not float?(type)

  @doc """
  The text for `region`, and what launching it takes: `%{source, key, n, work, input_types,
  input_counts, out_type, flag, parts}` (parts: the reduced range's split, 1 where it is not split).
  """
  def generate(region) do
    flag_ops = for n <- region.nodes, flagging?(n.op, n.type), do: n.op
    flag = flag_ops != []

    {n, parts, loop} =
      case region do
        %{kind: :rows, row_output: true, rows: rows} ->
          {rows, 1, row_statements(region)}

        %{kind: :rows, rows: rows, cols: cols} ->
          {rows * cols, 1, row_statements(region)}

        _ ->
          {lines, result, st} = body(region)
          iteration(region, lines, result, st)
      end

    out_type = kernel_out_type(region)
    source = assemble(region, out_type, flag, loop, row_length(region))
    key = :crypto.hash(:sha256, source) |> Base.encode16(case: :lower) |> binary_part(0, 32)

    input_counts = Enum.map(region.inputs, &Enum.product(Tuple.to_list(&1.shape)))

    %{
      source: source,
      key: key,
      n: n,
      # the launch's element operations (its loops are rows of its inputs): the NIF runs a small
      # one inline rather than on a dirty scheduler
      work: length(region.nodes) * Enum.max([n | input_counts]),
      parts: parts,
      flag: flag,
      flag_ops: flag_ops,
      uses_f64: uses_f64?(region),
      out_type: out_type,
      input_types: Enum.map(region.inputs, & &1.type),
      input_counts: input_counts
    }
  end

  defp uses_f64?(region) do
    types =
      Enum.flat_map(region.nodes, &[&1.type, &1.compute, &1[:reduce][:acc_type]]) ++
        Enum.map(region.inputs ++ region.iotas, & &1.type) ++
        if(region.reduce, do: [region.reduce.acc_type], else: [])

    :f64 in types
  end

  # The output buffer's type: a split f32 sum keeps its parts in f32 (each part summed in f64).
  defp kernel_out_type(%{reduce: nil, out_type: t}), do: t
  defp kernel_out_type(%{reduce: %{out_type: t}}), do: t

  # ---- the body: one named value per node ----

  defp body(region) do
    {lines, values} =
      Enum.reduce(region.nodes, {[], %{}}, fn node, {lines, values} ->
        text = node_text(node, values)
        name = "v#{node.k}"

        {["const #{value_c_type(node)} #{name} = #{text};" | lines],
         Map.put(values, node.k, {name, node.type})}
      end)

    {Enum.reverse(lines), Map.fetch!(values, region.result), values}
  end

  # An operand's text in `type` (the type its consumer computes in).
  defp operand({:node, k}, values, type) do
    {name, from} = Map.fetch!(values, k)
    convert(name, from, type)
  end

  defp operand({:input, j, from}, _values, type), do: convert("x#{j}", from, type)
  defp operand({:iota, j, from}, _values, type), do: convert("y#{j}", from, type)
  defp operand({:const, number, from}, _values, type), do: convert(literal(number, from), from, type)

  defp operand_type({:node, k}, values), do: elem(Map.fetch!(values, k), 1)
  defp operand_type({:input, _, t}, _values), do: t
  defp operand_type({:iota, _, t}, _values), do: t
  defp operand_type({:const, _, t}, _values), do: t

  defp node_text(%{op: :as_type, args: [a]} = node, values), do: operand(a, values, node.type)

  # the bits of a float as an integer of its width, or back (between integers: the wrap, as_type's)
  defp node_text(%{op: :bitcast, args: [a], type: t}, values) do
    from = operand_type(a, values)
    x = operand(a, values, from)

    case {from, t} do
      {from, :f32} when from != :f32 -> "accel_bits_f32((accel_u32)(#{x}))"
      {from, :f64} when from != :f64 -> "accel_bits_f64((accel_u64)(#{x}))"
      {:f32, t} -> wrap("(accel_i64)accel_f32_bits(#{x})", t)
      {:f64, :u64} -> "accel_f64_bits(#{x})"
      {:f64, _s64} -> "(accel_i64)accel_f64_bits(#{x})"
      {_int, t} -> operand(a, values, t)
    end
  end

  # (math: :fast marks the nodes computed by the approximate functions)
  defp node_text(%{op: op, family: :unary, args: [a], type: :u64}, values),
    do: "accel_uint_unary(ACCEL_UNARY_#{op}, #{operand(a, values, :u64)})"

  defp node_text(%{op: op, family: :unary, args: [a], type: t} = node, values) do
    name = if Map.get(node, :fast), do: "#{op}_fast", else: op
    wrap("accel_#{family(t)}_#{name}(#{operand(a, values, t)})", t)
  end

  # x ** 2 in f32 is x * x: x^2 of an f32 is exact in f64, so the product rounds the exact square
  # once, as the backend's f32 pow does (kernels/tensor.h: the product where the exponent is 2,
  # since a GPU's pow(double) may miss the exact square by an ulp), without the branch; the C
  # library's pow costs 14x the product (a layer norm's (x - mean) ** 2: 20.9 ms against 1.5 ms)
  defp node_text(%{op: :pow, family: :binary, args: [a, {:const, two, _}], type: :f32}, values)
       when two in [2, 2.0] do
    x = operand(a, values, :f32)
    "accel_f32_multiply(#{x}, #{x})"
  end

  # A shift by a constant amount within 0..63 (Nx.Random's rotations, once Unroll made them
  # constants) is the C shift, logical for unsigned types (whose values are never negative): the
  # helpers' tests and 64-bit arithmetic shift (none in AVX2) keep a loop from vectorising. A shift
  # of a type in @word_types by less than 32 shifts the 32-bit word (@word_ops' reason).
  defp node_text(%{op: op, family: :binary, args: [a, {:const, n, _}], type: t}, values)
       when op in [:left_shift, :right_shift] and is_integer(n) and n in 0..63 and
              t in [:s64, :s32, :u32, :u8, :u64] do
    x = operand(a, values, t)

    case {op, t} do
      {_, :u64} -> "(#{x} #{if op == :left_shift, do: "<<", else: ">>"} #{n})"
      {:left_shift, t} when t in @word_types and n < 32 -> wrap("(accel_u32)(#{x}) << #{n}", t)
      {:right_shift, t} when t in [:u32, :u8] and n < 32 -> wrap("(accel_u32)(#{x}) >> #{n}", t)
      {:left_shift, _} -> wrap("(accel_i64)((accel_u64)#{x} << #{n})", t)
      {:right_shift, t} when t in [:u32, :u8] -> wrap("(accel_i64)((accel_u64)#{x} >> #{n})", t)
      {:right_shift, _} -> wrap("(#{x} >> #{n})", t)
    end
  end

  defp node_text(%{op: op, family: :binary, args: [a, b], type: t}, values) do
    args = "#{operand(a, values, t)}, #{operand(b, values, t)}"

    cond do
      float?(t) -> "accel_#{family(t)}_#{op}(#{args})"
      t == :u64 -> "accel_uint_binary(ACCEL_BINARY_#{op}, #{args}, &bad)"
      t in @word_types and is_map_key(@word_ops, op) -> wrap(word_op(op, a, b, values, t), t)
      true -> wrap("accel_int_#{op}(#{args}, &bad)", t)
    end
  end

  defp node_text(%{op: op, family: :compare, args: [a, b], compute: c}, values),
    do: "(accel_i32)(ACCEL_COMPARE_BODY_#{op}(#{operand(a, values, c)}, #{operand(b, values, c)}))"

  defp node_text(%{op: :logical_not, args: [a]}, values),
    do: "(accel_i64)(#{operand(a, values, operand_type(a, values))} == 0)"

  defp node_text(%{op: :is_nan, args: [a]}, values) do
    t = operand_type(a, values)
    x = operand(a, values, t)
    if float?(t), do: "(accel_i64)(#{x} != #{x})", else: "(accel_i64)0"
  end

  defp node_text(%{op: :is_infinity, args: [a]}, values) do
    t = operand_type(a, values)
    x = operand(a, values, t)
    # infinity minus itself is NaN, a finite value's difference 0; NaN is excluded first
    if float?(t), do: "(accel_i64)(#{x} == #{x} && (#{x} - #{x}) != (#{x} - #{x}))", else: "(accel_i64)0"
  end

  # A select of floats: accel_f32_blend / accel_f64_blend (kernels/user.h), a blend of the two
  # values' bits, which the compilers vectorise as such (masked softmax's row kernel over
  # 8 x 512 x 512 f32, one thread: 2.41 ms against 2.72 from the conditional).
  defp node_text(%{op: :select, args: [p, a, b], type: t}, values) when t in [:f32, :f64] do
    pt = operand_type(p, values)
    "accel_#{t}_blend(#{operand(p, values, pt)} != 0, #{operand(a, values, t)}, #{operand(b, values, t)})"
  end

  defp node_text(%{op: :select, args: [p, a, b], type: t}, values) do
    pt = operand_type(p, values)
    "(#{operand(p, values, pt)} != 0 ? #{operand(a, values, t)} : #{operand(b, values, t)})"
  end

  defp node_text(%{op: :clip, args: [x, lo, hi], type: t}, values) do
    [x, lo, hi] = Enum.map([x, lo, hi], &operand(&1, values, t))

    cond do
      float?(t) ->
        "accel_#{family(t)}_min(accel_#{family(t)}_max(#{x}, #{lo}), #{hi})"

      t == :u64 ->
        "accel_uint_binary(ACCEL_BINARY_min, accel_uint_binary(ACCEL_BINARY_max, #{x}, #{lo}, &bad), #{hi}, &bad)"

      true ->
        "accel_int_min(accel_int_max(#{x}, #{lo}, &bad), #{hi}, &bad)"
    end
  end

  # (the operations of @word_ops: on 32-bit words)
  defp word_op(op, a, b, values, t),
    do: "(accel_u32)(#{operand(a, values, t)}) #{@word_ops[op]} (accel_u32)(#{operand(b, values, t)})"

  # ---- values and conversions ----

  @doc "Whether an Accel type is a float type."
  def float?(t), do: t in [:f32, :f64]

  defp family(:f32), do: "f32"
  defp family(:f64), do: "f64"
  defp family(:u64), do: "uint"
  defp family(_), do: "int"

  # Integers are held in 64 bits, their value already in their type's range: signed, but for u64,
  # whose values above 2^63 compare, divide, shift and convert as unsigned (tensor.h's uint family).
  defp c_type(t) when t in [:f32, :f64, :u64], do: @c_types[t]
  defp c_type(_), do: "accel_i64"

  # A comparison's 0 or 1 is held in 32 bits, the lanes of the f32 values it selects between and of
  # an iota in 32 bits (narrow_iota?/2) it compares (its consumers convert it as any integer); the
  # other values in their type's C type.
  defp value_c_type(%{family: :compare}), do: "accel_i32"
  defp value_c_type(node), do: c_type(node.type)

  # A 64-bit integer result wrapped into its type (the store's truncation, done after each step).
  defp wrap(text, :s64), do: text
  defp wrap(text, t) when t in [:s32, :u32, :u8], do: "(accel_i64)(#{@c_types[t]})(#{text})"
  defp wrap(text, :u64), do: "(accel_u64)(#{text})"
  defp wrap(text, _float), do: text

  defp convert(text, same, same), do: text

  # u64 from a float: the saturated value's bits (below); to the other integers: the same bits,
  # wrapped (Nx's as_type), as from them (the last clause)
  defp convert(text, from, :u64) when from in [:f32, :f64],
    do: "(accel_u64)accel_#{from}_to_int(#{text}, ACCEL_U64_TYPE)"

  defp convert(text, :u64, to) when to not in [:f32, :f64], do: wrap("(accel_i64)(#{text})", to)

  defp convert(text, from, to) when from in [:f32, :f64] and to in [:f32, :f64],
    do: "(#{@c_types[to]})#{text}"

  defp convert(text, _int, to) when to in [:f32, :f64], do: "(#{@c_types[to]})#{text}"

  # float -> integer: truncates toward zero, saturating at the type's range (as Accel.Tensor.as_type)
  defp convert(text, from, to) when from in [:f32, :f64],
    do: "accel_#{from}_to_int(#{text}, #{@type_codes[to]})"

  defp convert(text, _int, to), do: wrap(text, to)

  defp literal(:nan, t) when t in [:f32, :f64], do: "(#{zero(t)} / #{zero(t)})"
  defp literal(:infinity, t) when t in [:f32, :f64], do: "(#{one(t)} / #{zero(t)})"
  defp literal(:neg_infinity, t) when t in [:f32, :f64], do: "(-#{one(t)} / #{zero(t)})"
  defp literal(v, :f32) when is_number(v), do: "((float)#{float_text(v * 1.0)})"
  defp literal(v, :f64) when is_number(v), do: "(#{float_text(v * 1.0)})"
  # an integer constant as its type holds it (Nx wraps a constant into its type)
  defp literal(v, t) when is_integer(v) do
    case {t, v} do
      {:s32, v} -> <<v::signed-32>> |> then(fn <<w::signed-32>> -> int_literal(w) end)
      {:u32, v} -> int_literal(Bitwise.band(v, 0xFFFFFFFF))
      {:u8, v} -> int_literal(Bitwise.band(v, 255))
      {:u64, v} -> "((accel_u64)#{Bitwise.band(v, 0xFFFFFFFFFFFFFFFF)}UL)"
      {_, v} -> <<v::signed-64>> |> then(fn <<w::signed-64>> -> int_literal(w) end)
    end
  end

  defp int_literal(-0x8000000000000000), do: "ACCEL_I64_MIN"
  defp int_literal(v), do: "((accel_i64)#{v}L)"

  defp zero(:f32), do: "0.0f"
  defp zero(:f64), do: "0.0"
  defp one(:f32), do: "1.0f"
  defp one(:f64), do: "1.0"

  defp float_text(v), do: Float.to_string(v)

  # ---- iteration: elementwise, or a reduction's loop ----

  # Returns {n, parts, the element function's statements after the inputs' indices}.
  defp iteration(%{reduce: nil} = region, lines, {result, _type}, _values) do
    row = row_length(region)

    index = fn strides ->
      pairs = Enum.zip(region.dims, strides)
      if row, do: row_index_text(pairs), else: index_text("i", pairs)
    end

    loads =
      loads(region, &index.(Enum.at(region.inputs, &1).strides)) ++
        iota_loads(region.iotas, index, region.dims)

    col = if row, do: ["const accel_u64 col = i - row * #{row}UL;"], else: []
    n = Enum.product(region.dims)
    {n, 1, col ++ loads ++ lines ++ ["out[i] = (#{@c_types[region.out_type]})#{result};"]}
  end

  defp iteration(%{reduce: red} = region, lines, {value, vtype}, _values) do
    kept = for {d, a} <- Enum.with_index(region.dims), a not in red.axes, do: {d, a}
    reduced = for {d, a} <- Enum.with_index(region.dims), a in red.axes, do: {d, a}
    groups = Enum.product(Enum.map(kept, &elem(&1, 0)))
    size = Enum.product(Enum.map(reduced, &elem(&1, 0)))
    parts = red.parts
    chunk = if parts == 1, do: size, else: div(size + parts - 1, parts)
    acc_type = red.acc_type

    index = fn j ->
      strides = Enum.at(region.inputs, j).strides
      pick = fn dims -> Enum.map(dims, fn {d, a} -> {d, Enum.at(strides, a)} end) end
      "base#{j} + " <> index_text("r", pick.(reduced))
    end

    bases =
      for {input, j} <- Enum.with_index(region.inputs) do
        pairs = Enum.map(kept, fn {d, a} -> {d, Enum.at(input.strides, a)} end)
        "const accel_u64 base#{j} = #{index_text("g", pairs)};"
      end

    head =
      if parts == 1,
        do: ["const accel_u64 g = i;", "const accel_u64 r0 = 0, r1 = #{size}UL;"],
        else: [
          "const accel_u64 g = i / #{parts}UL, p = i % #{parts}UL;",
          "const accel_u64 r0 = p * #{chunk}UL;",
          "const accel_u64 r1 = r0 + #{chunk}UL < #{size}UL ? r0 + #{chunk}UL : #{size}UL;"
        ]

    value = convert(value, vtype, acc_type)

    iotas =
      iota_loads(
        region.iotas,
        fn strides ->
          pick = fn dims -> Enum.map(dims, fn {d, a} -> {d, Enum.at(strides, a)} end) end
          sum_text([index_text("g", pick.(kept)), index_text("r", pick.(reduced))])
        end,
        region.dims
      )

    loop =
      head ++
        bases ++
        reduce_loop(red.op, acc_type, loads(region, index) ++ iotas ++ lines, value, "r", "r0", "r1") ++
        ["out[i] = (#{@c_types[kernel_out_type(region)]})#{convert("acc", acc_type, red.out_type)};"]

    {groups * parts, parts, loop}
  end

  # The statements of a reduction `op` in `acc_type` over `var` from `first` to `last` (excluded):
  # `body` computes the element `value` at `var`; `acc` holds the result after them. Blocks of
  # @block elements, element r into lane r % lanes; the lanes and the tail combine in a fixed order,
  # so a result never depends on threads or parts.
  #   * A sum or product: the block's values first (a loop that vectorises, the element functions
  #     included), then added into @lanes interleaved accumulators (a loop over lanes that
  #     vectorises, where one accumulator is a chain no compiler may reorder: each step's sums go
  #     through a temporary, without which GCC adds each lane's 8 in turn, scalar); then the tail,
  #     then the lanes in order.
  #   * A max or min keeps ACCEL_NX_PICK_LANES (kernels/user.h): @block on the host, 8 on a device
  #     (its registers). Each element is picked into its lane as it is computed (on the host one
  #     flat loop of values and picks that GCC vectorises, with no block of values stored between
  #     them: softmax's row kernel 2.81-2.92 ms against 3.05-3.27); then the tail, then the lanes
  #     in a tree, each pick the lower lane's against the upper's (log2 steps that vectorise, where
  #     a chain of picks stays scalar). Both give what picking the tail and the lanes in turn gives:
  #     the value, of equal ones (signed zeros) the first in that order, and of NaNs the last.
  # `prefetch`: statements run once per block (with `rb` its first element), before its values.
  # Where `body` reads `<var>32` (a row's column in 32 bits, for an iota in 32 bits: narrow_iota?/2,
  # so `last` fits them), it is defined beside `var`, from the block's int counter, so that the
  # compilers keep 32-bit lanes (from `var` they widened each to 64 bits and narrowed it again).
  # `skip`: a row's uniform blocks (uniform_mask/4): {the block's test, its value, the guard}:
  # where the test finds block rb uniform, a max or min picks that value into each lane, and a sum
  # or product whose guard holds (the value is its identity) goes to the next block.
  defp reduce_loop(op, acc_type, body, value, var, first, last, prefetch \\ [], skip \\ nil) do
    pick? = op in [:reduce_max, :reduce_min]
    counter32? = counter32?(body, var)

    block_var =
      ["const accel_u64 #{var} = rb + l;"] ++
        if(counter32?, do: ["const accel_i32 #{var}32 = (accel_i32)rb + l;"], else: [])

    tail_var =
      ["const accel_u64 #{var} = rb;"] ++
        if(counter32?, do: ["const accel_i32 #{var}32 = (accel_i32)rb;"], else: [])

    lanes = if pick?, do: "ACCEL_NX_PICK_LANES", else: @lanes
    type = c_type(acc_type)
    init = initial(op, acc_type)

    [
      "#{type} lanes[#{lanes}];",
      "for (int l = 0; l < #{lanes}; ++l) lanes[l] = #{init};",
      "accel_u64 rb = #{first};",
      "for (; rb + #{@block} <= #{last}; rb += #{@block}) {"
    ] ++
      indent(prefetch, 1) ++
      indent(skip_block(skip, pick?, op, acc_type, lanes), 1) ++
      indent(block_steps(pick?, {op, acc_type, type}, body, value, block_var, lanes), 1) ++
      ["}", "#{type} acc = #{init};", "for (; rb < #{last}; ++rb) {"] ++
      indent(tail_var ++ body ++ [reduce_step(op, acc_type, "acc", value)], 1) ++
      ["}"] ++ combine_lanes(pick?, op, acc_type, lanes)
  end

  defp counter32?(body, var), do: Enum.any?(body, &(&1 =~ ~r/\b#{var}32\b/))

  defp skip_block(nil, _pick?, _op, _acc_type, _lanes), do: []

  defp skip_block({test, u, _guard}, true, op, acc_type, lanes) do
    test.("rb") ++
      [
        "if (uniform) {",
        "  for (int l = 0; l < #{@block}; ++l) #{reduce_step(op, acc_type, "lanes[l % #{lanes}]", u)}",
        "  continue;",
        "}"
      ]
  end

  defp skip_block({test, _u, guard}, false, _op, _acc_type, _lanes),
    do: ["if (#{guard}) {"] ++ indent(test.("rb"), 1) ++ ["  if (uniform) continue;", "}"]

  defp block_steps(true, {op, acc_type, _type}, body, value, block_var, lanes) do
    lane = "lanes[l % #{lanes}]"

    ["for (int l = 0; l < #{@block}; ++l) {"] ++
      indent(block_var ++ body ++ [reduce_step(op, acc_type, lane, value)], 1) ++ ["}"]
  end

  defp block_steps(false, {op, acc_type, type}, body, value, block_var, lanes) do
    ["#{type} block[#{@block}];", "for (int l = 0; l < #{@block}; ++l) {"] ++
      indent(block_var ++ body ++ ["block[l] = #{value};"], 1) ++
      [
        "}",
        "for (int l = 0; l < #{@block}; l += #{lanes}) {",
        "  #{type} t[#{lanes}];",
        "  for (int k = 0; k < #{lanes}; ++k) t[k] = #{reduce_expr(op, acc_type, "lanes[k]", "block[l + k]")};",
        "  for (int k = 0; k < #{lanes}; ++k) lanes[k] = t[k];",
        "}"
      ]
  end

  defp combine_lanes(true, op, acc_type, lanes) do
    [
      "for (int w = #{lanes} / 2; w > 0; w /= 2)",
      "  for (int l = 0; l < w; ++l) #{reduce_step(op, acc_type, "lanes[l]", "lanes[l + w]")}",
      reduce_step(op, acc_type, "acc", "lanes[0]")
    ]
  end

  defp combine_lanes(false, op, acc_type, lanes),
    do: ["for (int l = 0; l < #{lanes}; ++l) #{reduce_step(op, acc_type, "acc", "lanes[l]")}"]

  defp indent(lines, n), do: Enum.map(lines, &(String.duplicate("  ", n) <> &1))

  # ---- row regions (Accel.Nx.Compiler.Fusion's row_region): one work item per row ----

  # The element function's statements for row `g`: inputs constant along the row loaded once,
  # each row node in turn (a reduction: a loop over the row computing the elements it needs; else
  # one value), then the row's outputs in a loop (or its value, for a region ending in a
  # reduction). Work item i is row i (row output), or the row's first element, i = g * cols, the
  # others doing nothing (the host visits only those).
  defp row_statements(region) do
    %{cols: cols, dims: dims, inputs: inputs, nodes: nodes} = region
    outer = Enum.drop(dims, -1)

    # inputs and iotas constant along the row are read once, at row g; the others at each column c
    row_index = fn strides -> index_text("g", Enum.zip(outer, Enum.drop(strides, -1))) end

    col_index = fn strides ->
      sum_text([row_index.(strides), index_text("c", [{cols, List.last(strides)}])])
    end

    along_row? = fn {x, _j} -> List.last(x.strides) == 0 end
    {row_inputs, col_inputs} = inputs |> Enum.with_index() |> Enum.split_with(along_row?)
    {row_iotas, col_iotas} = region.iotas |> Enum.with_index() |> Enum.split_with(along_row?)

    row_loads =
      Enum.map(row_inputs, fn {input, j} -> input_load(input, j, row_index.(input.strides)) end) ++
        Enum.map(row_iotas, fn {leaf, j} -> iota_load(leaf, j, row_index, dims) end)

    col_load = fn j -> input_load(Enum.at(inputs, j), j, col_index.(Enum.at(inputs, j).strides)) end
    col_ids = MapSet.new(for {_, j} <- col_inputs, do: j)
    col_iota_ids = MapSet.new(for {_, j} <- col_iotas, do: j)

    # an iota along the row in 32 bits: its row's part once, plus its weight times the column in
    # 32 bits (c32, which the row's loops define where their statements read it)
    col_iota_load = fn leaf, j ->
      if narrow_iota?(leaf, dims) do
        row = iota_index(leaf, row_index)
        col = if (s = List.last(leaf.strides)) == 1, do: "c32", else: "#{s} * c32"
        "const accel_i32 y#{j} = #{if row == "0", do: col, else: "(accel_i32)(#{row}) + #{col}"};"
      else
        iota_load(leaf, j, col_index, dims)
      end
    end

    by_k = Map.new(nodes, &{&1.k, &1})

    # an operand with one value per row: a constant, an input or iota along it, a row node
    row_operand? = fn
      {:const, _, _} -> true
      {:input, j, _} -> not MapSet.member?(col_ids, j)
      {:iota, j, _} -> not MapSet.member?(col_iota_ids, j)
      {:node, k} -> by_k[k].level == :row
    end

    narrow_col_iota? = fn
      {:iota, j, _} -> MapSet.member?(col_iota_ids, j) and narrow_iota?(Enum.at(region.iotas, j), dims)
      _ -> false
    end

    mask = if cols >= @block, do: uniform_mask(nodes, by_k, row_operand?, narrow_col_iota?)

    # the statements computing col-level `args` at column c: their inputs' loads and col nodes
    # (those `values` holds are given)
    element = fn args, values ->
      ks = needed(args, by_k, values, MapSet.new()) |> Enum.sort()
      operands = args ++ Enum.flat_map(ks, &by_k[&1].args)
      js = Enum.sort(for {:input, j, _} <- operands, j in col_ids, uniq: true, do: j)
      iota_js = Enum.sort(for {:iota, j, _} <- operands, j in col_iota_ids, uniq: true, do: j)

      {lines, values} =
        Enum.reduce(ks, {[], values}, fn k, {lines, values} ->
          node = by_k[k]

          {["const #{value_c_type(node)} v#{k} = #{node_text(node, values)};" | lines],
           Map.put(values, k, {"v#{k}", node.type})}
        end)

      iota_lines = Enum.map(iota_js, &col_iota_load.(Enum.at(region.iotas, &1), &1))
      {Enum.map(js, col_load) ++ iota_lines ++ Enum.reverse(lines), values}
    end

    out_t = @c_types[region.out_type]
    row_nodes = Enum.filter(nodes, &(&1.level == :row))
    {kept, kept_in} = kept(region, row_nodes, by_k)

    {next_row, prefetch} = next_row_prefetch(region, col_inputs)
    first_loop = Enum.find_value(row_nodes, fn node -> node.op == :row_reduce and node.k end)

    # whether the outputs of a uniform block are its value, written without reading the row (so
    # the loop storing the kept value may skip such blocks)
    fill? = mask != nil and not region.row_output and MapSet.member?(mask.set, region.result)

    block_test = fn values ->
      %{iota: {:iota, j, _}} = mask
      uniform_test(by_k[mask.compare], col_iota_load.(Enum.at(region.iotas, j), j), mask.want, values)
    end

    {row_lines, values} =
      row_nodes
      |> Enum.reduce({[], %{}}, fn
        %{op: :row_reduce, reduce: red, args: [sub]} = node, {lines, values} ->
          {body, inner} = element.([sub], values)
          value = operand(sub, inner, red.acc_type)
          name = "v#{node.k}"

          # the value the outputs reuse, stored where they go
          body =
            if node.k == kept_in,
              do: body ++ ["out[g * #{cols}UL + c] = (#{out_t})v#{kept};"],
              else: body

          # (the row's first loop reads it from memory; the later ones fetch the next row's)
          ahead = if node.k == first_loop, do: [], else: prefetch

          # a reduction of a value uniform in the mask's blocks skips them (not the loop storing
          # the kept value, unless the outputs fill them)
          {pre, skip} =
            with {:node, k} <- sub,
                 true <- mask != nil and MapSet.member?(mask.set, k) and (node.k != kept_in or fill?) do
              {u_lines, u_values} = uniform_values(mask, k, by_k, values)
              u = operand(sub, u_values, red.acc_type)
              identity = %{sum: "0", product: "1"}[red.op]
              guard = "skip#{node.k}"
              guard_line = if identity, do: ["const int #{guard} = #{u} == #{identity};"], else: []
              {u_lines ++ guard_line, {block_test.(values), u, guard}}
            else
              _ -> {[], nil}
            end

          loop =
            ["#{c_type(node.type)} #{name};", "{"] ++
              indent(
                pre ++ reduce_loop(red.op, red.acc_type, body, value, "c", "0", "#{cols}UL", ahead, skip),
                1
              ) ++
              ["  #{name} = #{convert("acc", red.acc_type, red.out_type)};", "}"]

          {lines ++ loop, Map.put(values, node.k, {name, node.type})}

        node, {lines, values} ->
          line = "const #{value_c_type(node)} v#{node.k} = #{node_text(node, values)};"
          {lines ++ [line], Map.put(values, node.k, {"v#{node.k}", node.type})}
      end)

    outputs =
      if region.row_output do
        {name, type} = Map.fetch!(values, region.result)
        ["out[g] = (#{out_t})#{convert(name, type, region.out_type)};"]
      else
        {reuse, reuse_values} =
          if kept,
            do:
              {["const #{out_t} v#{kept} = out[g * #{cols}UL + c];"],
               Map.put(values, kept, {"v#{kept}", region.out_type})},
            else: {[], values}

        {body, inner} = element.([{:node, region.result}], reuse_values)
        body = reuse ++ body
        {name, _type} = Map.fetch!(inner, region.result)

        c32 = if counter32?(body, "c"), do: ["const accel_i32 c32 = (accel_i32)c;"], else: []
        element_lines = c32 ++ body ++ ["out[g * #{cols}UL + c] = (#{out_t})#{name};"]

        if fill? do
          {u_lines, u_values} = uniform_values(mask, region.result, by_k, values)
          {u, _type} = Map.fetch!(u_values, region.result)

          u_lines ++
            [
              "for (accel_u64 cb = 0; cb < #{cols}UL; cb += #{@block}) {",
              "  const accel_u64 ce = cb + #{@block} < #{cols}UL ? cb + #{@block} : #{cols}UL;",
              "  if (ce == cb + #{@block}) {"
            ] ++
            indent(block_test.(values).("cb"), 2) ++
            [
              "    if (uniform) {",
              "      for (accel_u64 c = cb; c < ce; ++c) out[g * #{cols}UL + c] = (#{out_t})#{u};",
              "      continue;",
              "    }",
              "  }",
              "  for (accel_u64 c = cb; c < ce; ++c) {"
            ] ++ indent(element_lines, 2) ++ ["  }", "}"]
        else
          ["for (accel_u64 c = 0; c < #{cols}UL; ++c) {"] ++ indent(element_lines, 1) ++ ["}"]
        end
      end

    head =
      if region.row_output,
        do: ["const accel_u64 g = i;"],
        else: ["if (i % #{cols}UL != 0) return 0;", "const accel_u64 g = i / #{cols}UL;"]

    head ++ next_row ++ row_loads ++ row_lines ++ outputs
  end

  # A row's uniform blocks: where a select takes a value constant along the row (a constant, a
  # row's value) in the elements where a comparison of a column's iota with such a value holds (or
  # fails), as a causal mask's select(i >= j, scores, -1.0e9) does, the select and every float
  # operation computed from it and row values alone (the masked softmax's exp(-1.0e9 - max) and
  # its quotient) have one value in those elements. The comparison is monotone along the row (an
  # iota's weight along it is positive), so a block of @block columns whose first and last columns
  # both take that value takes it in every column (its test: uniform_test/4). Such a block's value
  # is computed once per row (uniform_values/4, the same element functions, so the same bits): a
  # max or min picks it into each lane rather than computing the block; a sum skips the block where
  # the value is 0 (a product where it is 1), which adds nothing; and the outputs fill it. The
  # reductions' lanes, order and results are unchanged (a NaN's sign aside, which the C compilers'
  # code gives as it may, as it did before: GCC's kernel computing a causal mask from iotas made
  # 0x7FC00000 in a row's tail where the one reading it from memory made 0xFFC00000). The value is
  # computed in scalar code, the elements in the row's loop, vectorised on the host: the same
  # values where both compute each function alike (the host's f32 functions, swept against the
  # scalar ones; a GPU thread runs the loop scalar; PoCL's, in the property test).
  # %{select: k, branch: its operand taken there, want: the comparison's value there, compare: k,
  # iota: the column's iota, set: the nodes uniform there}, or nil.
  @ordering [:less, :less_equal, :greater, :greater_equal]
  defp uniform_mask(nodes, by_k, row_operand?, narrow_col_iota?) do
    Enum.find_value(nodes, fn
      %{level: :col, op: :select, type: t, args: [{:node, p}, a, b], k: k} when t in [:f32, :f64] ->
        with %{level: :col, family: :compare, op: op, args: args, compute: c} <- by_k[p],
             true <- op in @ordering and not float?(c),
             [iota] <- Enum.filter(args, narrow_col_iota?),
             [_] <- Enum.filter(args, row_operand?),
             {branch, want} <- uniform_branch(row_operand?, a, b) do
          %{
            select: k,
            branch: branch,
            want: want,
            compare: p,
            iota: iota,
            set: uniform_set(nodes, k, by_k, row_operand?)
          }
        else
          _ -> nil
        end

      _ ->
        nil
    end)
  end

  defp uniform_branch(row_operand?, a, b) do
    cond do
      row_operand?.(a) -> {a, true}
      row_operand?.(b) -> {b, false}
      true -> nil
    end
  end

  # the select and the float operations (operands first) whose operands are in the set or row values
  defp uniform_set(nodes, select, by_k, row_operand?) do
    Enum.reduce(nodes, MapSet.new([select]), fn node, set ->
      uniform? =
        node.level == :col and float?(node.type) and
          (node.family in [:unary, :binary] or node.op in [:select, :clip, :as_type]) and
          Enum.all?(node.args, fn
            {:node, k} -> MapSet.member?(set, k) or by_k[k].level == :row
            other -> row_operand?.(other)
          end)

      if uniform?, do: MapSet.put(set, node.k), else: set
    end)
  end

  # {statements, values} computing node k's value in a uniform block (u<k>), from row `values`
  defp uniform_values(mask, k, by_k, values) do
    [{:node, k}]
    |> reached(by_k, &MapSet.member?(mask.set, &1.k), MapSet.new())
    |> Enum.sort()
    |> Enum.reduce({[], values}, fn k, {lines, values} ->
      node = by_k[k]
      text = if k == mask.select, do: operand(mask.branch, values, node.type), else: node_text(node, values)
      {lines ++ ["const #{value_c_type(node)} u#{k} = #{text};"], Map.put(values, k, {"u#{k}", node.type})}
    end)
  end

  # fn start -> statements setting `uniform` where the block of @block columns from `start` is
  # uniform: the comparison at its first and last columns (`iota_line` defines the column's iota
  # from c32).
  defp uniform_test(compare, iota_line, want, values) do
    fn start ->
      ends =
        for offset <- [0, @block - 1] do
          "{ const accel_i32 c32 = (accel_i32)(#{start}) + #{offset}; #{iota_line} ends += #{node_text(compare, values)} != 0; }"
        end

      ["int ends = 0;"] ++ ends ++ ["const int uniform = ends == #{if want, do: 2, else: 0};"]
    end
  end

  # A row region's first loop reads the row from memory, and the loops after it compute over the
  # row in cache: those fetch the next row meanwhile (a software prefetch, ACCEL_NX_PREFETCH in
  # kernels/user.h: the host's, nothing on a device), a cache line of each input per 64 bytes of a
  # block, so that the next row's first loop reads cache, not memory, and the memory's time hides
  # under the computing. For the inputs read along the row in memory order whose next row is
  # elsewhere, where each such row is @prefetch_min_row bytes or more (shorter rows lie next to
  # each other, where the hardware's own prefetch follows them) and they are @prefetch_bytes or
  # less in all (the row, the next and the output's must stay in the core's L2 cache). Measured
  # on the 2-core EPYC, 4096 x 1024 f32, the kernel with and without, 2 threads, 4 alternating
  # runs of medians of 21: softmax (exact exp) 2.90-2.94 ms against 3.54-3.68, layer norm
  # 1.34-1.58 against 1.58-2.00; fetching in the first loop too was slower. Softmax over 2^22 f32
  # in rows of 128: 4.7-5.2 ms against 4.3-4.8 (so none below 1 KiB); of 256: 3.5-3.8 against
  # 3.8-4.3; of 16384: 3.1-3.6 against 3.7-4.6. The last row fetches itself (gn: no pointer past
  # the input).
  # {statements before the row's loops, statements for each block of a later loop}
  defp next_row_prefetch(%{cols: cols, dims: dims}, col_inputs) do
    outer = Enum.drop(dims, -1)
    rows = Enum.product(outer)

    ahead =
      for {input, j} <- col_inputs,
          List.last(input.strides) == 1,
          bytes = Accel.Tensor.Types.bytes(input.type),
          cols * bytes >= @prefetch_min_row,
          (next = index_text("gn", Enum.zip(outer, Enum.drop(input.strides, -1)))) != "0",
          do: {j, next, bytes}

    bytes = Enum.sum(for {_j, _next, b} <- ahead, do: b * cols)

    if ahead == [] or rows < 2 or bytes > @prefetch_bytes do
      {[], []}
    else
      {["const accel_u64 gn = g + 1 < #{rows}UL ? g + 1 : g;"],
       for {j, next, b} <- ahead do
         "for (int p = 0; p < #{@block}; p += #{div(64, b)}) ACCEL_NX_PREFETCH(&in#{j}[#{next} + rb + p]);"
       end}
    end
  end

  # A row region's outputs may need again a value a reduction's loop computed (softmax's
  # exp(x - max), needed by its sum and by the quotient): that loop stores it where the output goes
  # (the row is in cache then), and the outputs read it back instead of computing it again. The
  # value kept: of the output's type, the one needing the most nodes; stored by the last loop that
  # computes it. {its node, that loop's node}, or {nil, nil}.
  defp kept(%{row_output: true}, _row_nodes, _by_k), do: {nil, nil}

  defp kept(region, row_nodes, by_k) do
    out_needs = needed([{:node, region.result}], by_k, %{}, MapSet.new())

    loops =
      for %{op: :row_reduce, args: args, k: k} <- row_nodes, do: {k, needed(args, by_k, %{}, MapSet.new())}

    candidates =
      for k <- out_needs,
          by_k[k].type == region.out_type,
          {loop, needs} <- Enum.reverse(loops),
          MapSet.member?(needs, k),
          uniq: true,
          do: {k, loop}

    # the last loop computing each candidate (loops are in order; the first found in reverse)
    candidates = Enum.uniq_by(candidates, &elem(&1, 0))

    case Enum.max_by(
           candidates,
           fn {k, _} -> {MapSet.size(needed([{:node, k}], by_k, %{}, MapSet.new())), k} end,
           fn -> nil end
         ) do
      nil -> {nil, nil}
      {k, loop} -> {k, loop}
    end
  end

  # The col-level nodes `args` need, through col-level operands (row nodes, and col nodes `given`
  # holds, are already values).
  defp needed(args, by_k, given, seen),
    do: reached(args, by_k, &(&1.level == :col and not Map.has_key?(given, &1.k)), seen)

  # The nodes reached from `args` through operands that are nodes `keep?` takes (those nodes).
  defp reached(args, by_k, keep?, seen) do
    Enum.reduce(args, seen, fn
      {:node, k}, seen ->
        node = by_k[k]

        if not MapSet.member?(seen, k) and keep?.(node),
          do: reached(node.args, by_k, keep?, MapSet.put(seen, k)),
          else: seen

      _other, seen ->
        seen
    end)
  end

  # An elementwise region reading an input or an iota through a broadcast (a bias, a row's
  # maximum) runs row by row on the host: its elements' indices then come from the row, constant
  # along it, and the column, so that the loop over a row vectorises (a division of each element's
  # index by the row length does not). The row length, or nil where every input is read at i
  # itself.
  defp row_length(%{kind: :rows}), do: nil

  defp row_length(%{reduce: nil, dims: [_, _ | _] = dims} = region) do
    last = List.last(dims)
    flat? = fn input -> index_text("i", Enum.zip(dims, input.strides)) == "(i)" end
    if last >= 4 and not Enum.all?(region.inputs ++ region.iotas, flat?), do: last
  end

  defp row_length(_region), do: nil

  # An index over the region's dimensions from `row` (the outer ones) and `col` (the last).
  defp row_index_text(pairs) do
    if index_text("i", pairs) == "(i)" do
      "(i)"
    else
      {outer, [{_d, last}]} = Enum.split(pairs, -1)

      col =
        case last do
          0 -> []
          1 -> ["col"]
          s -> ["col * #{s}UL"]
        end

      row = if (text = index_text("row", outer)) == "0", do: [], else: [text]
      if row ++ col == [], do: "0", else: Enum.join(row ++ col, " + ")
    end
  end

  defp reduce_step(op, t, acc, value), do: "#{acc} = #{reduce_expr(op, t, acc, value)};"

  defp reduce_expr(:sum, t, acc, value), do: combine(:add, t, acc, value)
  defp reduce_expr(:product, t, acc, value), do: combine(:multiply, t, acc, value)

  defp reduce_expr(:reduce_max, t, acc, value),
    do: "accel_#{family(t)}_pick(ACCEL_REDUCE_MAX, #{acc}, #{value})"

  defp reduce_expr(:reduce_min, t, acc, value),
    do: "accel_#{family(t)}_pick(ACCEL_REDUCE_MIN, #{acc}, #{value})"

  # (u64 in C's unsigned arithmetic, which wraps as Nx's does)
  defp combine(op, t, a, b) do
    if float?(t) or t == :u64,
      do: "(#{a} #{if op == :add, do: "+", else: "*"} #{b})",
      else: "accel_int_#{op}(#{a}, #{b}, &bad)"
  end

  defp initial(:sum, t), do: if(float?(t), do: "0", else: "(#{c_type(t)})0")
  defp initial(:product, t), do: if(float?(t), do: "1", else: "(#{c_type(t)})1")
  defp initial(:reduce_max, t) when t in [:f32, :f64], do: literal(:neg_infinity, t)
  defp initial(:reduce_min, t) when t in [:f32, :f64], do: literal(:infinity, t)
  defp initial(:reduce_max, :s64), do: "ACCEL_I64_MIN"
  defp initial(:reduce_min, :s64), do: "((accel_i64)0x7fffffffffffffffL)"
  defp initial(:reduce_max, :s32), do: "((accel_i64)-2147483648L)"
  defp initial(:reduce_min, :s32), do: "((accel_i64)2147483647L)"
  defp initial(:reduce_max, t) when t in [:u32, :u8], do: "((accel_i64)0)"
  defp initial(:reduce_min, :u32), do: "((accel_i64)4294967295L)"
  defp initial(:reduce_min, :u8), do: "((accel_i64)255)"
  defp initial(:reduce_max, :u64), do: "((accel_u64)0)"
  defp initial(:reduce_min, :u64), do: "((accel_u64)0xFFFFFFFFFFFFFFFFUL)"

  defp loads(region, index),
    do: for({input, j} <- Enum.with_index(region.inputs), do: input_load(input, j, index.(j)))

  defp input_load(input, j, index),
    do: "const #{c_type(input.type)} x#{j} = (#{c_type(input.type)})in#{j}[#{index}];"

  # The iotas' values: `index` gives the index text over the region's dimensions for a leaf's
  # strides (its weights), to which the leaf's offset is added.
  defp iota_loads(iotas, index, dims),
    do: for({leaf, j} <- Enum.with_index(iotas), do: iota_load(leaf, j, index, dims))

  # (the index is an accel_u64, converted as the backend's iota converts it: wrapped into an
  # integer type, rounded once to a float one; in 32 bits where every value fits them)
  defp iota_load(%{type: t} = leaf, j, index, dims) do
    value = iota_index(leaf, index)

    cond do
      float?(t) -> "const #{c_type(t)} y#{j} = (#{@c_types[t]})(#{value});"
      narrow_iota?(leaf, dims) -> "const accel_i32 y#{j} = (accel_i32)(#{value});"
      true -> "const #{c_type(t)} y#{j} = #{wrap("(accel_i64)(#{value})", t)};"
    end
  end

  # A leaf's index text: its offset plus `index`'s text for its strides (its weights)
  defp iota_index(%{offset: offset, strides: strides}, index),
    do: sum_text([if(offset == 0, do: "0", else: "#{offset}UL"), index.(strides)])

  # Whether an integer iota's every value over the region's `dims` (its offset plus each
  # dimension's last index times its weight; the weights are never negative) fits its type
  # unwrapped and 31 bits: then held in 32 bits (accel_i32), the same values, which a comparison
  # with another such iota (a causal mask) computes in 32-bit lanes, beside the f32 values it
  # selects, where 64-bit indices took two vectors of lanes for each of theirs (masked softmax's
  # row kernel over 8 x 512 x 512 f32, one thread: 2.72 ms against 3.0-3.2, with the row's
  # column counted in 32 bits too).
  @narrow_max %{s64: 0x7FFFFFFF, s32: 0x7FFFFFFF, u32: 0x7FFFFFFF, u8: 255}
  defp narrow_iota?(%{type: t, offset: offset, strides: strides}, dims) do
    max = @narrow_max[t]
    max != nil and offset + Enum.sum(Enum.zip_with(dims, strides, &((&1 - 1) * &2))) <= max
  end

  # index texts added, "0" where every one is
  defp sum_text(texts) do
    case Enum.reject(texts, &(&1 == "0")) do
      [] -> "0"
      terms -> Enum.join(terms, " + ")
    end
  end

  @doc """
  The C text of sum(c[d] * stride[d]) for the coordinates c of linear index `counter` over
  `pairs` ([{dim, stride}], outermost first): neighbouring dimensions that are laid out together
  (or both broadcast) are merged first, so a contiguous operand is read at `counter` itself.
  """
  def index_text(counter, pairs) do
    merged =
      pairs
      |> Enum.reject(fn {d, _} -> d == 1 end)
      |> List.foldr([], fn
        {d, s}, [{d2, s2} | rest] when s == s2 * d2 -> [{d * d2, s2} | rest]
        pair, acc -> [pair | acc]
      end)

    {terms, _} =
      merged
      |> Enum.with_index()
      |> List.foldr({[], 1}, fn {{d, s}, k}, {terms, inner} ->
        coord =
          case {inner, k} do
            {1, 0} -> counter
            {1, _} -> "#{counter} % #{d}UL"
            {_, 0} -> "#{counter} / #{inner}UL"
            _ -> "(#{counter} / #{inner}UL) % #{d}UL"
          end

        term =
          cond do
            s == 0 -> nil
            s == 1 -> "(#{coord})"
            true -> "(#{coord}) * #{s}UL"
          end

        {if(term, do: [term | terms], else: terms), inner * d}
      end)

    if terms == [], do: "0", else: Enum.join(terms, " + ")
  end

  # ---- the text ----

  defp assemble(region, out_type, flag, statements, row) do
    out_t = @c_types[out_type]

    inputs =
      region.inputs
      |> Enum.with_index()
      |> Enum.map(fn {x, j} -> {"const #{@c_types[x.type]}*", "in#{j}"} end)

    buffers = [{"#{out_t}*", "out"}] ++ if(flag, do: [{"int*", "flag"}], else: []) ++ inputs
    elem_buffers = [{"#{out_t}*", "out"} | inputs]

    # a row-wise region's element function takes its row (i / row length) too
    {index_params, index_args, device_args} =
      if row,
        do: {["accel_u64 i", "accel_u64 row"], ["i", "row"], ["i", "i / #{row}UL"]},
        else: {["accel_u64 i"], ["i"], ["i"]}

    # (the output is a buffer of its own, the inputs only read: restrict lets a host compiler
    # vectorise the loop without checking every input against the output at run time, which
    # GCC gives up past 10 inputs)
    params =
      Enum.join(
        index_params ++ Enum.map(elem_buffers, fn {t, n} -> "ACCEL_GLOBAL #{t} ACCEL_NX_RESTRICT #{n}" end),
        ", "
      )

    buffer_args = Enum.map(elem_buffers, &elem(&1, 1))
    call = Enum.join(index_args ++ buffer_args, ", ")
    device_call = Enum.join(device_args ++ buffer_args, ", ")
    raise_flag = if flag, do: " ACCEL_USER_FLAG(flag)", else: ""

    host_loop =
      case region do
        %{kind: :rows, row_output: false, cols: cols} ->
          # only each row's first element does the row's work
          "  for (accel_u64 i = (begin + #{cols - 1}UL) / #{cols}UL * #{cols}UL; i < end; i += #{cols}UL) " <>
            "any |= accel_nx_at(#{call});"

        _ ->
          loop_text(row, call)
      end

    """
    /* Generated by Accel.Nx.Compiler (lib/accel/nx/compiler/codegen.ex): do not edit. */
    #{@prelude}
    #if defined(__OPENCL_VERSION__)
    #pragma OPENCL FP_CONTRACT OFF
    #define ACCEL_NX_RESTRICT restrict
    #elif defined(__CUDACC__)
    #define ACCEL_NX_RESTRICT __restrict__
    #else
    #define ACCEL_NX_RESTRICT __restrict
    #endif

    ACCEL_USER_ELEMENT int accel_nx_at(#{params}) {
      int bad = 0;
    #{Enum.map_join(statements, "\n", &("  " <> &1))}
      return bad;
    }

    #if defined(__OPENCL_VERSION__)
    __kernel void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "__global #{t} #{n}" end) ++ ["ulong n"], ", ")}) {
      const ulong i = get_global_id(0);
      if (i < n && accel_nx_at(#{device_call}))#{blank(raise_flag)};
    }
    #elif defined(__CUDACC__)
    extern "C" __global__ void accel_user(#{Enum.join(Enum.map(buffers, fn {t, n} -> "#{t} #{n}" end) ++ ["accel_u64 n"], ", ")}) {
      for (accel_u64 i = blockIdx.x * 1ULL * blockDim.x + threadIdx.x; i < n; i += 1ULL * blockDim.x * gridDim.x)
        if (accel_nx_at(#{device_call}))#{blank(raise_flag)};
    }
    #else
    ACCEL_USER_EXTERN ACCEL_USER_HOST void accel_user(void* const* b, const accel_u64* s, accel_u64 begin, accel_u64 end) {
      (void)s;
    #{buffers |> Enum.with_index() |> Enum.map_join("\n", fn {{t, n}, k} -> "  #{t} #{n} = (#{t})b[#{k}];" end)}
      int any = 0;
    #{host_loop}
      if (any)#{blank(raise_flag)};
    }
    #endif
    """
  end

  # The host's loop over its range of elements: row by row for a row-wise region (row_length/1).
  defp loop_text(nil, call), do: "  for (accel_u64 i = begin; i < end; ++i) any |= accel_nx_at(#{call});"

  defp loop_text(row, call) do
    Enum.join(
      [
        "  for (accel_u64 i = begin; i < end;) {",
        "    const accel_u64 row = i / #{row}UL;",
        "    const accel_u64 stop = (row + 1) * #{row}UL < end ? (row + 1) * #{row}UL : end;",
        "    for (; i < stop; ++i) any |= accel_nx_at(#{call});",
        "  }"
      ],
      "\n"
    )
  end

  defp blank(""), do: " {}"
  defp blank(text), do: text
end
