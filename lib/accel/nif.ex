defmodule Accel.NIF do
  # Private: the NIF stubs. Every function here is replaced by c_src/nif/accel_nif.cpp at load time;
  # the public API (Accel, Accel.Crossing) validates options before calling in.
  @moduledoc false
  @on_load :load

  def load do
    priv = :code.priv_dir(:accel)
    threads = Application.get_env(:accel, :cpu_threads, 0)
    threads = if is_integer(threads) and threads >= 0, do: threads, else: 0
    # The priv directory also holds the OpenCL plugin, which the NIF loads itself.
    :erlang.load_nif(:filename.join(priv, ~c"accel_nif"), {threads, priv})
  end

  def logistic_map(_input, _p, _mu, _iterations, _as, _backend, _device, _chunk_size),
    do: :erlang.nif_error(:not_loaded)

  def backends, do: :erlang.nif_error(:not_loaded)
  def devices, do: :erlang.nif_error(:not_loaded)
  def auto_device, do: :erlang.nif_error(:not_loaded)
  def host_memory, do: :erlang.nif_error(:not_loaded)
  def trim_host_cache, do: :erlang.nif_error(:not_loaded)
  def noop, do: :erlang.nif_error(:not_loaded)
  def noop_dirty_cpu, do: :erlang.nif_error(:not_loaded)
  def noop_dirty_io, do: :erlang.nif_error(:not_loaded)
  def list_round_trip(_list), do: :erlang.nif_error(:not_loaded)
  def range_to_list(_range), do: :erlang.nif_error(:not_loaded)
  def binary_round_trip(_binary), do: :erlang.nif_error(:not_loaded)

  def tensor_from_binary(_binary, _type, _backend, _device), do: :erlang.nif_error(:not_loaded)
  def tensor_iota(_type, _count, _backend, _device), do: :erlang.nif_error(:not_loaded)
  def tensor_to_binary(_ref, _limit), do: :erlang.nif_error(:not_loaded)
  def tensor_info(_ref), do: :erlang.nif_error(:not_loaded)
  def tensor_free(_ref), do: :erlang.nif_error(:not_loaded)
  def tensor_cast(_ref, _type), do: :erlang.nif_error(:not_loaded)
  def tensor_binary(_op, _a, _b), do: :erlang.nif_error(:not_loaded)
  def tensor_unary(_op, _ref), do: :erlang.nif_error(:not_loaded)
  def tensor_reduce(_op, _ref, _outer, _len, _inner), do: :erlang.nif_error(:not_loaded)
  def tensor_transpose(_ref, _rows, _cols), do: :erlang.nif_error(:not_loaded)
  def tensor_matmul(_a, _b, _m, _k, _n), do: :erlang.nif_error(:not_loaded)
  def tensor_logistic_map(_ref, _p, _mu, _iterations), do: :erlang.nif_error(:not_loaded)
  def tensor_transfer(_ref, _backend, _device), do: :erlang.nif_error(:not_loaded)
  def tensor_memory(_backend, _device), do: :erlang.nif_error(:not_loaded)
  def tensor_take_pressure(_threshold), do: :erlang.nif_error(:not_loaded)
end
