defmodule Accel.NIF do
  # Private: the NIF stubs. Every function here is replaced by c_src/nif/accel_nif.cpp at load time;
  # the public API (Accel, Accel.Crossing) validates options before calling in. A function with a
  # last argument `_ref` may queue its work on a device: call it through Accel.Job.call/1.
  @moduledoc false
  @on_load :load
  # The compiler loads each module as soon as it is compiled, which runs load/0: these must be
  # compiled first, or a fresh build logs an UndefinedFunctionError from it.
  require Accel.BlasEnv
  require Accel.Config
  require Accel.Options

  def load do
    priv = :code.priv_dir(:accel)
    choose_blas_core(priv)

    with {:ok, threads} <- Accel.Config.fetch(:cpu_threads),
         {:ok, queue_limit} <- Accel.Config.fetch(:device_queue_limit),
         {:ok, staging} <- Accel.Config.fetch(:staged_transfers) do
      # The priv directory also holds the OpenCL plugin, which the NIF loads itself.
      case :erlang.load_nif(:filename.join(priv, ~c"accel_nif"), {threads, priv, queue_limit, staging}) do
        {:error, {:load, text}} ->
          {:error,
           "Accel's runtime did not start (#{text}): the CPU backend could not start " <>
             "#{if threads == 0, do: "one thread per hardware thread", else: "#{threads} threads"}; " <>
             "lower config :accel, cpu_threads"}

        other ->
          other
      end
    end
  end

  # OpenBLAS picks its kernels for the CPU once, as it loads (with the NIF), unless
  # OPENBLAS_CORETYPE names them. A release older than the CPU takes a CPU it does not know for a
  # generic x86-64 one: Debian 12's OpenBLAS 0.3.21 runs a Sapphire Rapids Xeon's products with
  # Prescott's SSE3 kernels, a third of their speed. So, where the user has not set
  # OPENBLAS_CORETYPE, priv/accel_blas_probe (linked to the same OpenBLAS) says which kernels it
  # would pick, and where those are older than the CPU's AVX2 and FMA, Accel sets
  # OPENBLAS_CORETYPE in the process's environment (Accel.BlasEnv) before the NIF loads (see
  # blas_core/2). A probe that cannot run changes nothing. What Accel named, and what OpenBLAS
  # had picked, stay in the persistent term {Accel.NIF, :blas_core}.
  defp choose_blas_core(priv) do
    probe = :filename.join(priv, ~c"accel_blas_probe") |> List.to_string()

    with nil <- System.get_env("OPENBLAS_CORETYPE"),
         true <- File.exists?(probe),
         {:ok, cpuinfo} <- File.read("/proc/cpuinfo"),
         {output, 0} <- System.cmd(probe, [], stderr_to_stdout: true),
         picked = String.trim(output),
         core when is_binary(core) <- blas_core(picked, cpuinfo),
         :ok <- Accel.BlasEnv.put(core) do
      :persistent_term.put({__MODULE__, :blas_core}, {picked, core})
    end
  rescue
    _ -> :ok
  end

  # OpenBLAS's x86-64 kernels that use AVX2 and FMA
  @avx2_cores ~w(haswell zen skylakex cooperlake sapphirerapids excavator)

  @doc false
  # The kernels to name in OPENBLAS_CORETYPE, given those OpenBLAS picked and /proc/cpuinfo's
  # text, or nil to keep its pick: on a CPU with AVX2 and FMA where it picked older ones,
  # SkylakeX's where the CPU has AVX-512 (F, BW, DQ, VL), else Haswell's. (On an AVX-512 EPYC,
  # where OpenBLAS's own pick was Cooperlake, Haswell's kernels ran the products at half speed.)
  def blas_core(picked, cpuinfo) do
    flags = cpu_field(cpuinfo, "flags") |> String.split()
    has = &(&1 in flags)

    cond do
      String.downcase(picked) in @avx2_cores or not (has.("avx2") and has.("fma")) -> nil
      Enum.all?(~w(avx512f avx512bw avx512dq avx512vl), has) -> "SkylakeX"
      true -> "Haswell"
    end
  end

  defp cpu_field(cpuinfo, name) do
    case Regex.run(~r/^#{name}\s*:\s*(.*)$/m, cpuinfo) do
      [_, value] -> String.trim(value)
      nil -> ""
    end
  end

  def logistic_map(_input, _p, _mu, _iterations, _as, _backend, _device, _chunk_size, _ref),
    do: :erlang.nif_error(:not_loaded)

  def int64_list(_binary), do: :erlang.nif_error(:not_loaded)
  def int64_binary(_list), do: :erlang.nif_error(:not_loaded)
  def int64_output_count(_input, _as), do: :erlang.nif_error(:not_loaded)
  def host_owned(_binary), do: :erlang.nif_error(:not_loaded)
  def backends, do: :erlang.nif_error(:not_loaded)
  def devices, do: :erlang.nif_error(:not_loaded)
  def devices(_backend), do: :erlang.nif_error(:not_loaded)
  def auto_device, do: :erlang.nif_error(:not_loaded)
  def host_memory, do: :erlang.nif_error(:not_loaded)
  def device_queues, do: :erlang.nif_error(:not_loaded)
  def trim_host_cache, do: :erlang.nif_error(:not_loaded)
  def noop, do: :erlang.nif_error(:not_loaded)
  def fast_list_reader, do: :erlang.nif_error(:not_loaded)
  def noop_dirty_cpu, do: :erlang.nif_error(:not_loaded)
  def noop_dirty_io, do: :erlang.nif_error(:not_loaded)
  def list_round_trip(_list), do: :erlang.nif_error(:not_loaded)
  def range_to_list(_range), do: :erlang.nif_error(:not_loaded)
  def zeros_list(_count), do: :erlang.nif_error(:not_loaded)
  def binary_round_trip(_binary), do: :erlang.nif_error(:not_loaded)

  def tensor_upload(_binary, _type, _backend, _device, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_iota(_type, _count, _backend, _device, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_download(_tensor, _limit, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_free(_ref), do: :erlang.nif_error(:not_loaded)
  def tensor_cast(_tensor, _type, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_reinterpret(_tensor, _type), do: :erlang.nif_error(:not_loaded)
  def tensor_binary(_op, _a, _b, _a_shape, _b_shape, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_compare(_op, _a, _b, _a_shape, _b_shape, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_select(_pred, _a, _b, _pred_shape, _a_shape, _b_shape, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_slice(_tensor, _shape, _start, _length, _step, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_view(_tensor, _shape, _strides, _offset, _ref), do: :erlang.nif_error(:not_loaded)

  def tensor_put_view(_base, _shape, _base_strides, _part, _part_shape, _part_strides, _offset, _ref),
    do: :erlang.nif_error(:not_loaded)

  def tensor_concatenate(_tensors, _shapes, _axis, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_unary(_op, _tensor, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_complex(_op, _a, _b, _a_shape, _b_shape, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_complex_abs(_tensor, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_complex_fn(_op, _tensor, _variant, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_reduce(_op, _tensor, _outer, _len, _inner, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_transpose(_tensor, _rows, _cols, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_matmul(_a, _b, _batch, _m, _k, _n, _transposes, _ref), do: :erlang.nif_error(:not_loaded)

  def tensor_conv_shifted(_input, _kernel, _sizes, _offsets, _out_sizes, _plane_strides, _ref),
    do: :erlang.nif_error(:not_loaded)

  def tensor_gather(_t, _indices, _shape, _in_strides, _batch_strides, _axis_sizes, _axis_strides, _ref),
    do: :erlang.nif_error(:not_loaded)

  def tensor_scatter(
        _op,
        _target,
        _indices,
        _updates,
        _slice,
        _out_strides,
        _update_strides,
        _counts,
        _sizes,
        _strides,
        _ref
      ),
      do: :erlang.nif_error(:not_loaded)

  def tensor_window(_op, _t, _identity_bits, _geometry, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_sort(_t, _rows, _len, _direction, _what, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_scan(_op, _t, _outer, _len, _inner, _reverse, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_decompose(_op, _t, _dims, _full, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_solve(_a, _b, _dims, _flags, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_fft(_t, _dims, _inverse, _eps, _out_type, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_window_scatter(_op, _t, _source, _init_bits, _geometry, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_logistic_map(_tensor, _p, _mu, _iterations, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_transfer(_tensor, _backend, _device, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_memory(_backend, _device), do: :erlang.nif_error(:not_loaded)
  def fenced_devices, do: :erlang.nif_error(:not_loaded)
  def simulate_device_fault(_backend, _device, _kind), do: :erlang.nif_error(:not_loaded)
  def tensor_take_pressure(_threshold), do: :erlang.nif_error(:not_loaded)
  def tensor_list_bytes(_list, _type), do: :erlang.nif_error(:not_loaded)
  def tensor_nested_list(_binary, _type, _shape), do: :erlang.nif_error(:not_loaded)
  def kernel_load(_path, _entry), do: :erlang.nif_error(:not_loaded)
  def cuda_kernel_compiler, do: :erlang.nif_error(:not_loaded)
  def cuda_kernel_code(_source, _arch, _entry), do: :erlang.nif_error(:not_loaded)

  # Call plans (c_src/nif/call_plans.hpp), for Accel.Nx.Compiler.Plan
  def plan_cell, do: :erlang.nif_error(:not_loaded)
  def plan_record_start(_cell), do: :erlang.nif_error(:not_loaded)
  def plan_record_finish(_recording, _params, _outputs, _signature, _meta), do: :erlang.nif_error(:not_loaded)
  def plan_record_stop(_recording), do: :erlang.nif_error(:not_loaded)
  def plan_replay(_cell, _params, _signature), do: :erlang.nif_error(:not_loaded)

  def tensor_source_kernel(_kernel, _inputs, _n, _scalars, _backend, _device, _ref),
    do: :erlang.nif_error(:not_loaded)

  def map_source(_kernel, _binaries, _n, _scalars, _backend, _device, _ref),
    do: :erlang.nif_error(:not_loaded)
end
