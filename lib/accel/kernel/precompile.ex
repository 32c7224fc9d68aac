defmodule Accel.Kernel.Precompile do
  @moduledoc false
  # Accel.kernel(fun, precompile: signatures): CPU code compiled when the caller's module compiles,
  # into its application's priv/accel_kernels, so that a release runs those kernels with no C++
  # compiler (Numba's ahead-of-time signatures are the model: the types are declared, since a
  # kernel's input types are otherwise known only when it runs).
  #
  # A signature is the inputs' types and each capture's kind. A captured integer's magnitude is
  # known only when the kernel runs, so a precompiled kernel takes any 64-bit value there
  # ({:int, 64}); at run time a call whose inputs are buffers of a precompiled signature, and whose
  # captures are of its kinds, is specialised to that signature and finds its code in priv.

  alias Accel.Kernel.{Compiler, Native}

  @types [:s64, :f64, :f32, :s32, :u8]
  @kinds %{integer: {:int, 64}, float: :float, boolean: :bool, range: :range}

  @doc "The normalised signatures [{args, caps}] of `precompile:`; a CompileError names what is wrong."
  def signatures!(signatures, arity, captures, caller) do
    if not is_list(signatures),
      do: error(caller, "precompile: takes a list of signatures, got: #{inspect(signatures)}")

    names = Enum.map(captures, &elem(&1, 0))

    Enum.map(signatures, fn
      types when is_list(types) ->
        signature!(types, [], arity, names, caller)

      {types, kinds} when is_list(types) and is_list(kinds) ->
        signature!(types, kinds, arity, names, caller)

      other ->
        error(
          caller,
          "precompile: a signature is a list of input types, or {types, captures}, got: #{inspect(other)}"
        )
    end)
  end

  defp signature!(types, kinds, arity, names, caller) do
    if length(types) != arity or not Enum.all?(types, &(&1 in @types)) do
      error(
        caller,
        "precompile: signature #{inspect(types)} must name #{arity} input type(s) among #{inspect(@types)}"
      )
    end

    for {name, kind} <- kinds do
      cond do
        name not in names ->
          error(
            caller,
            "precompile: the kernel captures no variable #{inspect(name)} (it captures #{inspect(names)})"
          )

        not Map.has_key?(@kinds, kind) ->
          error(
            caller,
            "precompile: capture #{name} is #{inspect(kind)}; kinds are #{inspect(Map.keys(@kinds))}"
          )

        true ->
          :ok
      end
    end

    {Enum.map(types, &{&1, :buffer}), Enum.map(names, &Map.fetch!(@kinds, Keyword.get(kinds, &1, :integer)))}
  end

  @doc """
  Compiles each signature's text into the calling project's priv/accel_kernels: the application
  the kernel belongs to (nil without signatures).
  """
  def build!(_ir, [], _name, _caller), do: nil

  def build!(ir, signatures, name, caller) do
    if not (Code.ensure_loaded?(Mix.Project) and Mix.Project.get() != nil) do
      error(
        caller,
        "precompile: compiles into a Mix project's priv directory; compile this kernel in a Mix project"
      )
    end

    app = Mix.Project.config()[:app]
    dir = Path.join([Mix.Project.app_path(), "priv", "accel_kernels"])

    for {args, caps} <- signatures do
      try do
        Native.precompile(Compiler.compile(ir, args, caps, name).source, dir)
      rescue
        e in [ArgumentError, Accel.Error] ->
          error(caller, "precompile: #{inspect(args)}: " <> Exception.message(e))
      end
    end

    app
  end

  @doc """
  The capture kinds a call runs with: the precompiled signature's, where one matches its
  arguments and its captures' kinds (integers of any magnitude); else the call's own.
  """
  def caps(%Accel.Kernel{precompiled: []}, _args, caps), do: caps

  def caps(%Accel.Kernel{precompiled: signatures}, args, caps) do
    wide =
      Enum.map(caps, fn
        {:int, _} -> {:int, 64}
        kind -> kind
      end)

    if {args, wide} in signatures, do: wide, else: caps
  end

  defp error(caller, description), do: Accel.Kernel.compile_error(caller, description)
end
