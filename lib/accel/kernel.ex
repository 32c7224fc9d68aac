defmodule Accel.Kernel do
  @moduledoc """
  Your own kernels, written as Elixir functions, run with Elixir's exact semantics on every backend.

      require Accel
      k = Accel.kernel(fn x -> rem(22 * x * (x + 1), 6_700_417) end)
      Accel.map(1..1_000_000, k)                  # a list, equal to Enum.map(1..1_000_000, fun)

      p = 61
      step = Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, acc -> rem(22 * acc * (acc + 1), p) end) end)
      Accel.map(bin, step, backend: :opencl)      # s64 binary in, s64 binary out

  `Accel.kernel/1` reads the function's code when your code compiles and lowers it once to a typed
  intermediate form; variables it uses from the enclosing scope (`p` above) are the kernel's
  scalar parameters, passed when it runs, so a new value does not make a new kernel. Module
  attributes holding numbers or booleans (`@p` in a function of your module) are constants, as
  Elixir reads them where the function is compiled: the compiler sees their values (a constant
  divisor becomes a multiplication, a known range drops overflow checks). When it runs,
  the kernel is specialised to its inputs' element types and compiled for the device: by the
  system's C compiler for `:cpu` (cached on disk, see below), as OpenCL C for `:opencl` (built
  once per device and cached for the VM's life), as CUDA C++ by NVRTC for `:cuda` (machine code
  for the GPU's architecture, cached on disk like CPU kernels and loaded once per device).

  ## The language

    * integers and floats: `+ - * /`, unary `-`, `div/2`, `rem/2`, `abs/1`, `min/2`, `max/2`,
      `trunc/1`, `round/1`, `floor/1`, `ceil/1`, and `:math` functions (`:math.sqrt/1`,
      `:math.exp/1`, `:math.pow/2`, `:math.pi/0`, ...);
    * comparisons (`== != === !== < <= > >=`), `and`/`or`/`not`, `&&`/`||`/`!`, `is_integer/1`
      and friends;
    * `Bitwise` (`band`, `bor`, `bxor`, `bnot`, `bsl`, `bsr` and their operators);
    * `if`/`unless`, `cond`, `case` with number, boolean, variable and `^pinned` patterns and
      guards; local variables (`y = x * x`);
    * loops: `Enum.reduce(first..last//step, acc, fn i, acc -> ... end)` and
      `for i <- first..last, reduce: acc do acc -> ... end`, over literal, computed or captured
      ranges;
    * calls to kernels defined with `defkernel` (inlined), and module attributes in them.

  Anything else is a `CompileError` naming the construct and its line. A kernel's values must
  each have one type: a branch giving an integer where another gives a float raises
  `ArgumentError` when the kernel is specialised (write `1.0`, or convert with `trunc/1`).

  ## Exact

  `Accel.map(input, kernel)` returns what `Enum.map(input, fun)` returns, for every element:

    * integers are exact: operations whose operands' ranges prove the result fits 64 bits run as
      plain machine arithmetic; the others are checked, and an element whose value would leave
      64 bits (a bignum in Elixir) is recomputed on the BEAM by your original function. A list
      result then holds the exact bignum; an `:s64` binary or tensor result cannot, and raises
      `ArgumentError` naming the element's index;
    * where Elixir raises (`rem(x, 0)`, a float overflow, a `cond` with no true clause, `and` on a
      non-boolean), the element is recomputed on the BEAM too, so the exception is the BEAM's own,
      raised for the first such element;
    * floats are doubles, as in Elixir; `+ - * /` and `sqrt` are correctly rounded IEEE on every
      backend and contraction into fused multiply-adds is disabled, so they match the BEAM bit for
      bit. Other `:math` functions use the device's math library: bit-identical to the BEAM's on
      `:cpu` (the same C library), within the OpenCL specification's error bounds elsewhere;
    * `:f32` inputs are widened to doubles and a float result is rounded to `:f32` once when the
      inputs are `:f32` (IEEE single precision at the store, not after every operation).

  ## A caller that exits

  A kernel call runs on Accel's threads, not the caller's. When the caller exits (killed, or timed
  out by a `Task`), the call is abandoned: on `:cpu` between blocks of elements and inside every
  loop (each asks every 2^16 iterations, at a cost below 1% measured in
  `bench/results/kernel_stop_cost.md`), so even an endless loop frees its cores within
  milliseconds. A device kernel cannot be interrupted, so on OpenCL and CUDA a loop that may run
  more than 512 iterations (by the ranges of its bounds: a literal `1..1000`, or a captured count
  of 16 bits or more) runs a bounded number of iterations per launch, in launches of about 40 ms that each
  resume from the loop's saved state (its index and accumulator, per element): a dead caller
  frees the device within a launch or two, and calls made meanwhile on the device run between
  the launches. This costs 1-4% on PoCL (`bench/results/kernel_stop_cost.md`).

  ## Inputs and outputs

  See `Accel.map/3`: ranges, lists, binaries (`:s64` unless `type:` says otherwise) and tensors;
  several inputs of one length as a tuple. Integer results are `:s64`, float results `:f64` (or
  `:f32`, above), boolean results `:u8` (1 for true) in binaries and tensors.

  ## The kernel cache

  Compiled CPU kernels are shared objects in `config :accel, kernel_cache:` (default: the user
  cache directory, `~/.cache/accel/kernels` on Linux; `ACCEL_KERNEL_CACHE` overrides it), named by
  a hash of the kernel's text, the compiler and its version, the flags and the architecture, written
  atomically and checked against a SHA-256 sum before loading. A second VM finds the kernel
  compiled. `clear_cache/0` empties it. Its code runs inside the VM, so the cache is private:
  Accel creates it with mode 0700 and refuses, with `Accel.Error` `:unsafe_cache` naming it, a
  directory that another user owns or may write into (as ssh refuses such a key directory); a file
  in it that another user could have written is rebuilt, not loaded. Precompiled kernels (below)
  are held to the same rule. The compiler is the first of `$ACCEL_CC`, `$ACCEL_CXX`, `$CC`, `$CXX`
  that is set, or the first of `cc`, `gcc`, `clang`, `c++`, `g++`, `clang++` found (its driver
  compiles the generated text as C, `-x c`); without one, CPU kernels raise `Accel.Error`
  `:no_compiler`.

  ## Precompiled kernels

  A kernel compiled when it first runs needs a C compiler on the machine it runs on. For a
  release, name the input signatures it runs with, and its CPU code is compiled with your project
  instead, into your application's `priv/accel_kernels` (which `mix release` ships; where your
  project has a `priv/` directory, that is where the files land: keep them out of version
  control):

      Accel.kernel(fn x -> rem(22 * x * (x + 1), p) end, precompile: [[:s64], [:s32]])

  Each signature is a list of input types, or `{types, captures}` naming a captured variable's
  kind where it is not an integer (`{[:f64], scale: :float}`). A call whose inputs are binaries,
  lists or tensors of a precompiled signature runs that code, found by a hash of its text, the
  flags and the architecture and checked against its SHA-256 sum: no compiler is asked. Its
  captured integers may be any 64-bit value, so it keeps the overflow checks that a kernel
  specialised, when it runs, to a captured value's magnitude can drop. Other calls (a range input,
  another type) compile when they run, as without the option. A signature the kernel cannot be
  specialised to is a `CompileError`, raised when your project compiles.

  CUDA kernels are cubins in the same directory, named by a hash of the text, NVRTC's version
  and options and the GPU's compute capability. NVRTC (`libnvrtc.so` from the CUDA toolkit) is
  loaded when the first `:cuda` kernel is compiled, and runs on a dirty CPU scheduler; without it,
  `:cuda` kernels raise `Accel.Error` `:no_compiler` (the rest of `:cuda` works without it). A GPU
  newer than NVRTC gets PTX for the newest architecture NVRTC knows, which the driver compiles.
  """

  alias Accel.Kernel.Lower

  defstruct [:name, :arity, :ir, :captures, :values, :fun, :id, precompiled: [], app: nil]

  @type t :: %__MODULE__{
          name: String.t(),
          arity: pos_integer(),
          ir: term(),
          captures: [atom()],
          values: [term()],
          fun: function(),
          id: binary(),
          precompiled: [{list(), list()}],
          app: atom() | nil
        }

  @doc false
  def __build__(fun, caller, opts) do
    if not Keyword.keyword?(opts) or Keyword.keys(opts) -- [:precompile] != [] do
      compile_error(caller, "Accel.kernel/2 takes one option, precompile:, got: #{Macro.to_string(opts)}")
    end

    {ir, arity, captures, name} = lower(fun, caller)
    precompile = Accel.Kernel.Precompile.signatures!(opts[:precompile] || [], arity, captures, caller)
    id = :crypto.hash(:sha256, :erlang.term_to_binary({ir, arity})) |> binary_part(0, 16)
    app = Accel.Kernel.Precompile.build!(ir, precompile, name, caller)

    quote do
      %Accel.Kernel{
        name: unquote(name),
        arity: unquote(arity),
        ir: unquote(Macro.escape(ir)),
        captures: unquote(Enum.map(captures, &elem(&1, 0))),
        values: unquote(Enum.map(captures, &elem(&1, 1))),
        fun: unquote(fun),
        id: unquote(id),
        precompiled: unquote(Macro.escape(precompile)),
        app: unquote(app)
      }
    end
  end

  defp lower({:&, _, [{:/, _, [{{:., _, [module, name]}, _, []}, arity]}]}, caller) do
    module = Macro.expand(module, caller)

    kernel =
      if Code.ensure_compiled(module) == {:module, module} and
           function_exported?(module, :__accel_kernel__, 1),
         do: module.__accel_kernel__({name, arity})

    if kernel == nil,
      do: compile_error(caller, "Accel.kernel: #{inspect(module)}.#{name}/#{arity} is not a defkernel")

    {^arity, ir} = kernel
    {ir, arity, [], "#{inspect(module)}.#{name}/#{arity}"}
  end

  defp lower(fun, caller) do
    {ir, arity, captures} = Lower.lower_fn(fun, caller)
    line = with {:fn, meta, _} <- fun, do: meta[:line]
    {ir, arity, captures, "fn at #{Path.relative_to_cwd(caller.file)}:#{line || caller.line}"}
  end

  @doc false
  def compile_error(caller, description),
    do: raise(CompileError, file: caller.file, line: caller.line, description: description)

  @doc """
  Makes the module's `defkernel` available:

      defmodule MyKernels do
        use Accel.Kernel

        defkernel step(x, p), do: rem(22 * x * (x + 1), p)
        defkernel ten_steps(x, p), do: Enum.reduce(1..10, x, fn _, acc -> step(acc, p) end)
      end

      Accel.map(data, Accel.kernel(fn x -> MyKernels.ten_steps(x, 61) end))
      Accel.map(data, Accel.kernel(&MyKernels.ten_steps/2) ...)  # both inputs mapped

  Each `defkernel` is also a plain function (`MyKernels.step(3, 61)`), and is lowered when the
  module compiles: a construct outside the kernel language fails the module's compilation.
  """
  defmacro __using__(_opts) do
    quote do
      import Accel.Kernel, only: [defkernel: 2]
      @before_compile Accel.Kernel
    end
  end

  @doc "Defines a kernel function (see `__using__/1`)."
  defmacro defkernel(head, do: body) do
    {name, meta, params} = head
    params = params || []
    kernels = Module.get_attribute(__CALLER__.module, :accel_kernels) || %{}
    {ir, arity} = Lower.lower_def(params, body, meta, __CALLER__, kernels)
    # Recorded now, while the module's body expands, so that the kernels after this one see it.
    Module.put_attribute(__CALLER__.module, :accel_kernels, Map.put(kernels, {name, arity}, {arity, ir}))

    quote do
      @accel_resolved Map.put(
                        Module.get_attribute(__MODULE__, :accel_resolved) || %{},
                        {unquote(name), unquote(arity)},
                        {unquote(arity), Accel.Kernel.Lower.resolve(unquote(Macro.escape(ir)), __MODULE__)}
                      )
      def unquote(head), do: unquote(body)
    end
  end

  @doc false
  defmacro __before_compile__(env) do
    kernels = Module.get_attribute(env.module, :accel_resolved) || %{}

    quote do
      @doc false
      def __accel_kernel__(name_arity), do: Map.get(unquote(Macro.escape(kernels)), name_arity)
    end
  end

  @doc """
  The text a kernel is compiled from for inputs of `types` (binaries or tensors of these element
  types; default `:s64` for each input), with its captured values' kinds: one text for every
  backend (C++ for `:cpu`, OpenCL C, CUDA C++), after the headers it needs. For reading when a
  kernel is slower than you expect; `Accel.map/3` compiles it for you.

      iex> k = Accel.kernel(fn x -> x * 2 + 1 end)
      iex> Accel.Kernel.source(k) =~ "accel_user"
      true
  """
  @spec source(t(), [atom()] | nil) :: String.t()
  def source(%__MODULE__{} = kernel, types \\ nil) do
    types = types || List.duplicate(:s64, kernel.arity)

    if not is_list(types) or length(types) != kernel.arity or
         not Enum.all?(types, &(&1 in Accel.Kernel.Inputs.types())) do
      raise ArgumentError,
            "kernel #{kernel.name} takes #{kernel.arity} input(s): give as many types of :s64, :f64, :f32, " <>
              ":s32 and :u8, got: #{inspect(types, limit: 5)}"
    end

    Accel.Kernel.Map.compiled(kernel, types).source
  end

  @doc """
  An expert kernel written in OpenCL C, for what the Elixir subset cannot say; run it with
  `Accel.map/3` on `:opencl` (see `Accel.Kernel.Source` for its parameters and launch). It runs
  unchecked, as a NIF does: a write past a buffer can end the VM (see `Accel.Kernel.Source`).

      saxpy =
        Accel.Kernel.opencl(\"""
        __kernel void saxpy(__global float* out, __global const float* x,
                            __global const float* y, ulong n, float a) {
          ulong i = get_global_id(0);
          if (i < n) out[i] = a * x[i] + y[i];
        }
        \""", "saxpy", inputs: [:f32, :f32], output: :f32, scalars: [:f32])

      Accel.map({xs, ys}, saxpy, scalars: [2.5])   # binaries, tensors or lists of :f32

  ## Options

  #{Accel.Options.docs(Accel.Kernel.Source.options())}
  """
  @spec opencl(String.t(), String.t(), keyword()) :: Accel.Kernel.Source.t()
  def opencl(source, name, opts), do: Accel.Kernel.Source.new(:opencl, source, name, opts)

  @doc """
  An expert kernel written in CUDA C++, compiled by NVRTC; run it with `Accel.map/3` on `:cuda`.
  The kernel must be `extern "C"` (its name is what Accel looks up); see `Accel.Kernel.Source`.

      saxpy =
        Accel.Kernel.cuda(\"""
        extern "C" __global__ void saxpy(float* out, const float* x, const float* y,
                                         unsigned long long n, float a) {
          for (unsigned long long i = blockIdx.x * 256ULL + threadIdx.x; i < n; i += 256ULL * gridDim.x)
            out[i] = a * x[i] + y[i];
        }
        \""", "saxpy", inputs: [:f32, :f32], output: :f32, scalars: [:f32])

  Options as for `opencl/3`.
  """
  @spec cuda(String.t(), String.t(), keyword()) :: Accel.Kernel.Source.t()
  def cuda(source, name, opts), do: Accel.Kernel.Source.new(:cuda, source, name, opts)

  # For Accel.Stream and Accel.Flow, which take a function of a chunk: binary chunks hold the
  # elements of the caller's `type:` option (:s64 by default).
  @doc false
  def chunk_function(%__MODULE__{} = kernel, opts) do
    type = if is_list(opts), do: Keyword.get(opts, :type) || :s64, else: :s64
    &Accel.map(&1, kernel, type: type)
  end

  @doc """
  Removes every compiled kernel from the cache (see "The kernel cache"); kernels loaded in
  running VMs stay loaded. Returns the number of files removed.
  """
  @spec clear_cache() :: non_neg_integer()
  def clear_cache do
    dir = Accel.Kernel.Native.cache_dir()

    case File.ls(dir) do
      {:ok, files} -> Enum.count(files, &(File.rm(Path.join(dir, &1)) == :ok))
      {:error, _} -> 0
    end
  end
end
