if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.Compiler do
    @moduledoc """
    A `Nx.Defn.Compiler` that fuses each chain of elementwise operations in a `defn` (or
    `Nx.Defn.jit/2`) function into one kernel generated for the device, and runs the rest as
    `Accel.Nx.Backend`'s operations.

        Nx.Defn.default_options(compiler: Accel.Nx.Compiler, device: :opencl)

        defn softmax(x) do
          e = Nx.exp(x - Nx.reduce_max(x, axes: [-1], keep_axes: true))
          e / Nx.sum(e, axes: [-1], keep_axes: true)
        end

        Nx.Defn.jit(&softmax/1, compiler: Accel.Nx.Compiler).(t)

    ## What fuses

    A region grows from each value that must be stored (an output, an operand of an operation
    that does not fuse, a value used twice) through the operands only it uses: elementwise
    operations of the same shape whose types Accel computes in (`f32`, `f64`, `s64`, `s32`, `u32`,
    `u8`, `u64`): every unary and binary operation and comparison of `Accel.Tensor`'s registry,
    `logical_not`, `is_nan`, `is_infinity`, `select`, `clip` and `as_type`, with constants inlined
    and operands of smaller shapes read through Nx's broadcasting in place. An iota a region reads (or a slice,
    squeeze or reshape of one: a one-hot's positions, a causal mask's, `Nx.Random`'s counters) is
    computed from each element's index in the kernel, never written to memory, and so is a value
    of a few operations on iotas and constants that a region reads broadcast (a causal mask built
    at `{s, s}` for every head's scores). A `sum`, `product`,
    `reduce_max` or `reduce_min` of a region ends it: the region's values are never stored. A lone
    operation is a kernel of its own where it reads an operand through a broadcast or an iota, or
    (on 4096 elements or more) takes a constant (all faster than the backend's general
    broadcasting), and otherwise runs as the backend's.

    Reductions over the last axis and the elementwise work around them (softmax, layer norm, a
    log-softmax loss) form one *row region*, where there are 16 rows or more of 8 to 65536
    elements, or 4096 elements or fewer in all (a 1 x 8 softmax is one launch): its kernel runs
    each row's reductions in turn, each a loop that computes again the elementwise values it
    needs, then the row's outputs, so the input is read from memory once;
    a value the outputs need again (softmax's `exp(x - max)`) is kept in the output row by the
    loop that computed it. On the host the loops after a row's first fetch the next row into
    cache as they compute (a software prefetch), so that reading memory and computing overlap.

    Each region is one kernel: the system's C compiler for `:cpu`, OpenCL C, CUDA by NVRTC, as
    for `Accel.kernel/1` (cached on disk for `:cpu` and `:cuda`, per device for OpenCL), launched
    like every Accel kernel (on Accel's threads, cancelled when its caller dies). On the CPU a
    region's loop over a row vectorises, the `f32` functions through glibc's vector math
    (libmvec) or, for `exp` and `tanh` on a CPU with FMA, Accel's own `f64` code, their results
    the scalar functions' rounded once as before.

    A transpose of a product that swaps the operands' free axes (`Nx.Defn.grad`'s weight
    gradients) is computed as the product the other way round, `(A B)^T = B^T A^T`, with no copy.

    Everything else (dot, layout, other reductions) runs as `Accel.Nx.Backend`'s operations: what
    the backend computes on the device stays there, and what it falls back for falls back.

    ## A call's steps

    A function without hooks or inner functions (`Nx.reduce/4`'s) is compiled into a list of
    steps: each operation that remains, in order, with where its operands come from and which
    backend runs it worked out once, and its value kept in a slot that a later value reuses once
    it is no longer needed. A tensor a call makes is freed as soon as the last step that reads it
    has run (unless it is returned), so a call holds the tensors live at once, as XLA's buffer
    assignment does, rather than every one it made until it returns: a chain of 20 layout
    operations on 16 MB holds 4 at most with its result, not 20 (their memory goes back to
    Accel's cache for the next step). A call runs the steps (no walk of the expression, no per-node
    bookkeeping): a 1 x 8 -> 4 -> 2 training step took a median 0.8x the time
    `Nx.Defn.Evaluator` takes over the same operations, a 1 x 8 softmax 0.86x. A `while` and a
    `cond` are steps holding steps of their own, compiled once too: a loop's condition and body,
    each clause's predicate and body. A clause computes the values only it reads when it is
    taken, and a value of the function that only branches read is computed once, on the first
    branch's demand, as the evaluator computes them: a branch not taken costs nothing. The
    tensors an iteration makes and does not hand to the next are freed at its end, and the small
    constants (4 KiB or less) of loops and branches are made once, when the function compiles,
    rather than uploaded on every iteration (one the function would return is copied first): a
    1,000-iteration loop with a `cond` over 8 `f32` took 10.9 ms against 15.2 ms on the
    evaluator (one VM, medians of 5). Other functions run as `Nx.Defn.Evaluator` runs them, over the same operations.
    The telemetry event says which (`runner: :plan` or `:evaluator`).

    ## One crossing per call

    Where every operation of a call runs on the CPU backend (inline for small tensors, on a dirty
    CPU scheduler for large ones), the steps' calls into the NIF are recorded on the function's
    second call and later calls replay them in one NIF call, with the new arguments in the places
    the recorded ones had: no Elixir between operations, no trip to a dirty scheduler and back
    per operation (the whole replay runs on one where the recorded calls took 0.5 ms or more),
    each generated kernel's description decoded once, and the tensors made and freed within the
    call kept as buffers with no Erlang term or resource. A replay is taken only for parameters
    of the recorded places, types and shapes (and the same tensor in the same parameters where a
    recorded call was given one tensor twice), and checks every operation's outcome against the
    recording (a kernel's integer division by zero, say): any difference, and any call whose
    parameters are not Accel tensors, runs the steps instead, which give the same bits and raise
    the same errors. A call that reads tensor data back to the host (tensor start indices), runs
    on a device, or falls back to `Nx.BinaryBackend`, is never recorded, nor is a function with a
    `while` or a `cond` (whose data chooses the operations). Measured against
    `jax.jit` (`bench/nx_xla.exs`): the 1 x 8 -> 4 -> 2 training step 27-32 us per call against
    36-37 in two runs (1.15-1.36x; 74 us before the replay kept tensors as buffers), and the
    128 x 784 -> 256 -> 10 step 1.10-1.30 ms against 1.53-1.95 ms when each of its large
    operations went to a dirty scheduler from Elixir (A/B, alternating). A plan keeps none of the
    recorded call's tensors.
    `replay: false` runs the steps on every call.

    Results are the backend's, operation for operation: each element goes through the same
    per-element functions as the backend's kernels, converted to the type Nx computed after every
    step (integers wrap in their type, `f32` computes in single precision); fused `f32` sums
    accumulate in `f64`, as the backend's do, in a fixed order of their own (8 interleaved
    accumulators), so a fused sum may differ from the backend's in the last bits. An integer zero divisor or negative exponent raises
    `ArgumentError`, as in the backend.

    ## Compilation and the cache

    A function is compiled once per input shapes, types and options, when it is first called,
    and kept for the VM's life: later calls run the compiled function. (An anonymous function
    made anew with other captured values is another function, as for every Nx compiler: prefer
    passing such values as arguments.) Each compilation emits the telemetry event
    `[:accel, :nx, :compile]` with `%{duration: native_time}` and `%{regions: report, key: key,
    runner: :plan | :evaluator}` (the regions as `report/3` lists them). Kernel texts are
    compiled once per device; the C compiler's and NVRTC's output is cached on disk (see
    `Accel.Kernel`), so a new VM running the same function skips the compiler. With
    `device: :cpu` a function's regions are built before its first call runs, in groups (one
    per scheduler, side by side), each group compiled as one unit into one shared object: the
    header is read, the compiler started and the object linked once per group, not per region
    (an MLP training step's 14 regions: its first call 1.08 s -> 0.52 s). `report/3` shows what
    a function compiles to. The `compile` event's metadata says `build: :wait` then.

    On the CPU backend, where some of a function's kernels are neither loaded nor cached and its
    fused operations run one by one would write 512 MB or less, with 256 MB or less of
    intermediate tensors live at once beyond the fused function's (each is freed after its last
    use), its first calls need not wait for the compiler (`build: :background`, the default): a
    process builds and loads the kernels while the calls run the function unfused
    (as `fuse: false`), and the calls after run fused (the `compile` event says
    `build: :background`); such builds run one at a time in the VM. The results are the same,
    elementwise bit for bit (sums as "Results" above says of fused and unfused ones; with
    `math: :fast` the first calls compute the exact functions). `[:accel, :nx, :built]` (`%{duration: native_time}`,
    `%{key: key, errors: [message]}`) is emitted when a background build ends; one that fails is
    logged, and the calls stay unfused.

    ## Options

      * `:device` - where inputs are placed and new tensors made, as `Accel.Nx.Backend`'s
        `:device` (default `:auto`);
      * `:math` - `:fast` computes `f32` `exp`, `sigmoid` and `tanh` in fused kernels as
        single-precision approximations, as XLA does: on the CPU backend within 1 ulp of the
        exact result rounded (`exp`, `tanh`) or 2 (`sigmoid`), about 3x faster (vectorised 8
        lanes wide, no call); on OpenCL and CUDA the device's own `f32` functions. A lone such
        operation becomes a kernel of its own. Default `:exact` (Nx.BinaryBackend's bits: the
        `f64` function rounded once);
      * `:fuse` - `false` runs every operation as the backend's (no fused kernels), for
        comparison; default `true`;
      * `:plan` - `false` runs the function as `Nx.Defn.Evaluator` runs it rather than as a list
        of steps (see above), for comparison; default `true`;
      * `:replay` - `false` runs a function's steps on every call rather than replaying their
        recorded calls in one crossing (see above), for comparison; default `true`;
      * `:build` - `:background` (see above) or `:wait` (the first call builds the kernels
        first); default `config :accel, nx_build:` (`Accel.Config`), itself `:background`;
      * `:max_concurrency` - the partitions `Nx.Serving` starts (default 1);
      * `:hooks`, `:garbage_collect` - as for `Nx.Defn.Evaluator`.

    Other options (another compiler's, `Nx.Serving`'s) are ignored, as Nx's compilers ignore
    each other's.
    """

    @behaviour Nx.Defn.Compiler

    require Logger

    alias Accel.Nx.Compiler.Fusion
    alias Nx.Defn.{Composite, Evaluator}

    @evaluator [:hooks, :garbage_collect]

    @doc false
    def __partitions_options__(opts), do: List.duplicate(opts, Keyword.get(opts, :max_concurrency, 1))

    @doc false
    def __to_backend__(opts), do: {Accel.Nx.Backend, backend_options(options!(opts))}

    @doc false
    def __jit__(key, vars, fun, args_list, opts), do: __compile__(key, vars, fun, opts).(args_list)

    @doc false
    def __compile__(key, vars, fun, opts) do
      signature = {key, signature(vars), opts}

      # (the options are checked where a signature compiles: a call that finds it compiled has
      # options that were checked, and Nx.Defn.jit calls this on every call)
      compiled =
        cached(signature, fn ->
          opts = options!(opts)
          backend = {Accel.Nx.Backend, backend_options(opts)}
          start = System.monotonic_time()

          {runner, compiled, peak} = with_backend(backend, fn -> compile(key, vars, fun, backend, opts) end)

          regions = Process.delete({__MODULE__, :regions}) || []
          unfused = fn -> with_backend(backend, fn -> compile(key, vars, fun, backend, unfused(opts)) end) end
          {compiled, build} = build(regions, {compiled, peak}, unfused, key, opts)
          duration = System.monotonic_time() - start
          meta = %{regions: regions, key: key, runner: runner, build: build}
          :telemetry.execute([:accel, :nx, :compile], %{duration: duration}, meta)
          compiled
        end)

      backend = {Accel.Nx.Backend, backend_options(opts)}

      fn args_list ->
        with_backend(backend, fn ->
          Enum.flat_map(args_list, fn args -> compiled.([Enum.map(args, &on_device(&1, backend))]) end)
        end)
      end
    end

    # A function without control flow or hooks runs as a plan (Accel.Nx.Compiler.Plan: its steps
    # worked out once, here); any other as Nx.Defn.Evaluator runs it, and so does every function
    # where the evaluator's :garbage_collect option (a collection after each node) is given.
    defp compile(key, vars, fun, backend, opts) do
      evaluator_opts = Keyword.take(opts, @evaluator)
      expr = rewriter(fun, opts).(vars)

      plan =
        if Keyword.get(opts, :plan, true) and !evaluator_opts[:garbage_collect],
          do: Accel.Nx.Compiler.Plan.compile(expr, backend, Keyword.get(opts, :replay, true)),
          else: :evaluator

      case plan do
        :evaluator -> {:evaluator, Evaluator.__compile__(key, vars, fn _ -> expr end, evaluator_opts), nil}
        {plan, peak} -> {:plan, plan, peak}
      end
    end

    @doc false
    # Nx 0.7's Nx.Defn.stream/2: the evaluator's stream over the rewritten function.
    def __stream__(key, input, acc, vars, fun, [args], opts) do
      opts = options!(opts)
      backend = {Accel.Nx.Backend, backend_options(opts)}
      args = Enum.map(args, &on_device(&1, backend))

      with_backend(backend, fn ->
        apply(Evaluator, :__stream__, [
          key,
          input,
          acc,
          vars,
          rewriter(fun, opts),
          [args],
          Keyword.take(opts, @evaluator)
        ])
      end)
    end

    @doc """
    What `fun` compiles to for arguments like `args` (tensors or templates): one entry per fused
    region, in the order they were found, with its operations, its inputs' shapes, the shapes of
    the iotas it computes in place (`iotas`), its result's shape and type, its kernel's key and
    text.

        iex> report = Accel.Nx.Compiler.report(fn x -> Nx.exp(Nx.multiply(x, 2.0)) |> Nx.add(1.0) end, [Nx.template({4}, :f32)])
        iex> Enum.map(report, & &1.ops)
        [[:multiply, :exp, :add]]
    """
    @spec report(function(), [Nx.Tensor.t()], keyword()) :: [map()]
    def report(fun, args, opts \\ [])

    def report(fun, args, opts) when is_function(fun) and is_list(args) do
      options!(opts)
      # Nx's own tracing (what a compiler is given): defn functions and anonymous ones alike
      expr = apply(Nx.Defn.debug_expr(fun), Enum.map(args, &Nx.to_template/1))
      expr |> Fusion.rewrite(Keyword.get(opts, :math, :exact)) |> elem(1)
    end

    def report(fun, args, _opts) do
      raise ArgumentError,
            "Accel.Nx.Compiler.report/3 expects a function and a list of its arguments (tensors or " <>
              "templates), got: #{inspect(fun, limit: 5)} and #{inspect(args, limit: 5)}"
    end

    ## Options

    defp options!(opts) do
      if not Keyword.keyword?(opts),
        do: raise(ArgumentError, "Accel.Nx.Compiler expects a keyword list of options, got: #{inspect(opts)}")

      # Nx hands a compiler every option given to jit (Nx.Serving adds its own): those of other
      # compilers are ignored, as they ignore Accel's.
      for option <- [:fuse, :plan, :replay] do
        case opts[option] do
          v when is_boolean(v) or v == nil ->
            :ok

          v ->
            raise ArgumentError,
                  "Accel.Nx.Compiler: option #{inspect(option)} must be a boolean, got: #{inspect(v)}"
        end
      end

      for {option, [a, b]} <- [math: [:exact, :fast], build: [:background, :wait]] do
        case opts[option] do
          v when v in [nil, a, b] ->
            :ok

          v ->
            raise ArgumentError,
                  "Accel.Nx.Compiler: option #{inspect(option)} must be #{inspect(a)} or #{inspect(b)}, got: #{inspect(v)}"
        end
      end

      case opts[:max_concurrency] do
        v when (is_integer(v) and v > 0) or v == nil ->
          :ok

        v ->
          raise ArgumentError,
                "Accel.Nx.Compiler: option :max_concurrency must be a positive integer, got: #{inspect(v)}"
      end

      # the backend checks the device
      Accel.Nx.Storage.init(Keyword.take(opts, [:device]))
      # (config :accel, nx_build is :build's default, checked here as the options are)
      Keyword.put_new_lazy(opts, :build, fn -> Accel.Config.get!(:nx_build) end)
    end

    defp backend_options(opts), do: Keyword.take(opts, [:device])

    # The function's parameters as what their templates hold (types, shapes, names, vectorized
    # axes) in their containers: what a compiled function is for (the same tensors in a tuple or in
    # a map with other keys are another function). Tuples rather than templates: the key is hashed
    # on every call, and a template's structs take twice as long (1.5 against 0.8 us, 6 tensors).
    defp signature(vars), do: Enum.map(vars, &Composite.traverse(&1, fn t -> template_key(t) end))

    defp template_key(%Nx.Tensor{type: type, shape: shape, names: names, vectorized_axes: axes}),
      do: {type, shape, names, axes}

    defp template_key(other), do: Nx.to_template(other)

    defp rewriter(fun, opts) do
      if Keyword.get(opts, :fuse, true),
        do: fn vars ->
          {expr, regions} = vars |> fun.() |> Fusion.rewrite(Keyword.get(opts, :math, :exact))
          Process.put({__MODULE__, :regions}, regions)
          expr
        end,
        else: fun
    end

    # Arguments are copied to the device (as EXLA copies them to its client); Accel tensors on it
    # are used in place.
    defp on_device(arg, backend) do
      fn ->
        case arg.() do
          %Nx.Tensor{data: %Accel.Nx.Backend{}} = t -> t
          t -> Nx.backend_copy(t, backend)
        end
      end
    end

    # Whether a first call runs unfused while the compiler builds (80-150 ms for a region here,
    # whatever its size) or waits for it. The unfused operations cost two ways: their passes, each
    # writing a tensor (@unfused_write_bytes bounds them all: about 40-60 ms of passes on the
    # 2-core EPYC), and the fresh memory of the intermediate tensors live at once, which the fused
    # kernels never make (@unfused_peak_bytes bounds the unfused plan's peak less the fused
    # one's, Plan.compile/3: a call frees each tensor after its last reader, and Accel's mapping
    # cache serves the next from it).
    # Fresh memory costs 0.2-2.3 ms a MB on a virtual machine whose host reclaims freed guest
    # memory. First calls there, empty kernel cache, unfused against waiting, 2 runs each: a
    # 5-operation chain on 2^24 f32 (320 MB written, 128 MB at peak) 21-24 ms against 85-120
    # where the process had freed memory (as after making its inputs), 31-170 against 130-164
    # where it had none; a layer norm of 16384 x 1024 (896 MB written) 30-34 against 91-116, and
    # 106-377 against 153-422; of 32768 rows (1.8 GB) 54-70 against 96-142, and 866-1673 against
    # 464-663. (Bounded by the bytes written alone, 256 MB, until the peak was known: the chain
    # waited.)
    @unfused_write_bytes 512 * 1024 * 1024
    @unfused_peak_bytes 256 * 1024 * 1024

    # How a function's fused kernels are built on the CPU backend, and what its calls run until
    # they are (`{compiled function, how}`):
    #   * :background - where some kernel is neither loaded nor in the disk cache, and the
    #     function's fused operations, run one by one, would write @unfused_write_bytes or less,
    #     @unfused_peak_bytes or less of it live at once: the calls run the function unfused (each
    #     operation the backend's, as `fuse: false`) until a process has built and loaded every
    #     kernel, then fused;
    #   * :wait - built before the first run, or (another device) as the run reaches each region.
    # Both build in one shared object per core, each the regions of a group compiled as one unit
    # (Accel.Kernel.Native.build_together/2), the groups side by side. A build that fails before a
    # run is left to the run, which builds each region alone and raises with the compiler's
    # message; a background build that fails is logged, and the calls stay unfused.
    defp build(regions, {fused, fused_peak}, unfused, key, opts) do
      groups = build_groups(regions)

      case host_device?(opts) and groups != [] and
             unfused_meanwhile(regions, groups, {unfused, fused_peak}, opts) do
        false ->
          {fused, :wait}

        nil ->
          if length(regions) > 1 do
            groups
            |> Task.async_stream(&prebuilt/1, ordered: false, timeout: :infinity)
            |> Stream.run()
          end

          {fused, :wait}

        unfused ->
          ready = :atomics.new(1, [])
          {:ok, _} = Task.start(fn -> build_in_background(groups, ready, key) end)
          {fn args -> if :atomics.get(ready, 1) == 1, do: fused.(args), else: unfused.(args) end, :background}
      end
    end

    # The unfused function the first calls run while the kernels build, or nil where they wait:
    # where some kernel is neither loaded nor cached, the unfused operations write
    # @unfused_write_bytes or less, and their intermediates peak at @unfused_peak_bytes or less
    # above the fused function's (an evaluator's, which frees nothing before the end, counted as
    # the bytes written).
    defp unfused_meanwhile(regions, groups, {unfused, fused_peak}, opts) do
      written = unfused_bytes(regions)

      if opts[:build] == :background and written <= @unfused_write_bytes and
           not Enum.all?(groups, &Accel.Kernel.Native.built_together?/1) do
        {_runner, unfused, peak} = unfused.()
        extra = if peak && fused_peak, do: peak - fused_peak, else: written
        if extra <= @unfused_peak_bytes, do: unfused
      end
    end

    # (the bytes the regions' operations write, each as a tensor of the region's type and of its
    # largest shape: a reduction's operations before it have its input's)
    defp unfused_bytes(regions) do
      Enum.reduce(regions, 0, fn %{ops: ops, shape: shape, inputs: inputs, type: {_, bits}}, sum ->
        elements = Enum.max([Nx.size(shape) | Enum.map(inputs, &Nx.size/1)])
        sum + length(ops) * elements * max(div(bits, 8), 1)
      end)
    end

    defp unfused(opts), do: Keyword.put(opts, :fuse, false)

    defp build_in_background(groups, ready, key) do
      start = System.monotonic_time()
      hold_builder_name()

      failed =
        groups
        |> Task.async_stream(&built/1, ordered: false, timeout: :infinity)
        |> Enum.flat_map(fn {:ok, result} -> result end)

      if failed == [], do: :atomics.put(ready, 1, 1)
      measurements = %{duration: System.monotonic_time() - start}
      :telemetry.execute([:accel, :nx, :built], measurements, %{key: key, errors: failed})

      for message <- failed,
          do:
            Logger.error(
              "Accel.Nx.Compiler: a fused kernel failed to build; calls stay unfused:\n" <> message
            )
    end

    # One background build at a time in the VM (each runs a compiler per core): a burst of new
    # functions (a serving's batch sizes, say) would otherwise start a compiler per function and
    # core at once. The builder holds a registered name, which its exit releases, crashed or not;
    # the others wait for it to go, then try again.
    @builder __MODULE__.BackgroundBuilder
    defp hold_builder_name do
      Process.register(self(), @builder)
    rescue
      ArgumentError ->
        ref = Process.monitor(@builder)

        receive do
          {:DOWN, ^ref, _, _, _} -> hold_builder_name()
        end
    end

    # (a group's build: [] or its error's message)
    defp built(members) do
      Accel.Kernel.Native.build_together(members, background: true)
      []
    rescue
      e -> [Exception.message(e)]
    end

    # the regions' kernels, in groups of about equal text (the compiler's work follows it), one per
    # core at most, each one compiler run
    defp build_groups(regions) do
      members = regions |> Enum.map(&{&1.kernel, &1.source}) |> Enum.uniq_by(&elem(&1, 0))
      groups(members, min(System.schedulers_online(), length(members)))
    end

    defp groups(_members, 0), do: []

    defp groups(members, count) do
      members
      |> Enum.sort_by(&(-byte_size(elem(&1, 1))))
      |> Enum.reduce(List.duplicate({0, []}, count), fn {_, source} = member, [{size, group} | rest] ->
        Enum.sort_by([{size + byte_size(source), [member | group]} | rest], &elem(&1, 0))
      end)
      |> Enum.map(&elem(&1, 1))
    end

    # (one build per group of regions; a build that fails leaves each region to its own at the run)
    defp prebuilt(members) do
      Accel.Kernel.Native.build_together(members)
    rescue
      _ -> :left_to_the_run
    end

    # (the device option as the backend reads it: Storage.init's normal form, {backend, index})
    defp host_device?(opts),
      do: match?({:cpu, _}, Accel.Nx.Storage.init(Keyword.take(opts, [:device]))[:device])

    defp with_backend(backend, fun) do
      key = Nx.Shared.backend_pdict_key()
      previous = Process.put(key, backend)

      try do
        fun.()
      after
        if previous, do: Process.put(key, previous), else: Process.delete(key)
      end
    end

    # Compiled functions, kept for the VM's life (as Accel.Kernel's specialisations are).
    # A function whose key is too large to hash (see bounded?/1) compiles on every call, as
    # Nx.Defn.Evaluator does.
    defp cached({key, _templates, opts} = signature, compile) do
      # (the templates are bounded by the arguments' count: only what the caller captured is checked)
      if bounded?({key, opts}), do: persistent(signature, compile), else: compile.()
    end

    defp persistent(signature, compile) do
      key = {__MODULE__, signature}

      case :persistent_term.get(key, nil) do
        nil ->
          compiled = compile.()
          if :persistent_term.get(key, nil) == nil, do: :persistent_term.put(key, compiled)
          compiled

        compiled ->
          compiled
      end
    end

    # The key Nx gives a compiler is the function itself, and an anonymous function's captured
    # values are part of it: hashing them walks them as a tree, which for a captured expression
    # whose subterms are shared (Nx.Defn.Graph runs a stage as `fn _ -> expr end`) is exponential
    # in its depth, and cannot be interrupted. A key of more terms than the budget (a binary
    # counting one term per 4 KiB) is not cached.
    @key_budget 10_000
    defp bounded?(term), do: terms_left(term, @key_budget) >= 0

    defp terms_left(_term, left) when left < 0, do: left
    defp terms_left(tuple, left) when is_tuple(tuple), do: tuple |> Tuple.to_list() |> terms_left(left - 1)
    defp terms_left([head | tail], left), do: terms_left(tail, terms_left(head, left - 1))
    defp terms_left(map, left) when is_map(map), do: map |> Map.to_list() |> terms_left(left - 1)
    defp terms_left(binary, left) when is_binary(binary), do: left - 1 - div(byte_size(binary), 4096)

    defp terms_left(fun, left) when is_function(fun) do
      {:env, env} = Function.info(fun, :env)
      terms_left(env, left - 1)
    end

    defp terms_left(_other, left), do: left - 1

    @doc false
    # Accel.Nx.Backend.accel_fused: a fused region's kernel over its inputs.
    defdelegate run(out, inputs, spec), to: Accel.Nx.Compiler.Launch
  end
end
