defmodule Accel.Devices do
  @moduledoc false
  # The devices a call's :backend and :device options name: one (target!/2), the devices that
  # share a call (device: :all or a list), and the scope Accel.plan/3 plans over.

  @doc false
  # What Accel.plan/3 plans, from the call's validated options and `devices:`: {:share, devices}
  # for device: :all or a list (the sharing decision the call would make), else {:choose,
  # devices} among which backend: :auto chooses (nil: the default candidates).
  def plan_scope!(devices, opts) do
    case {devices, opts[:backend], opts[:device]} do
      {nil, backend, device} when device == :all or is_list(device) ->
        {:share, sharing_devices!(device, backend)}

      {nil, _backend, %Accel.Device{} = device} ->
        {:choose, [device]}

      {devices, :auto, nil} ->
        {:choose, devices}

      {nil, backend, device} ->
        raise ArgumentError,
              "backend: #{inspect(backend)}, device: #{inspect(device)} names where the call runs: " <>
                "Accel.plan/3 plans backend: :auto, device: :all and lists of devices"

      _ ->
        raise ArgumentError, "give option :devices (to choose among) or :device, not both"
    end
  end

  @doc false
  # The devices `device: :all` (co_execution_devices/1) or a list of devices names, of `backend`
  # (:auto for any); raises where there is none.
  def sharing_devices!(device, backend) do
    devices = if is_list(device), do: devices_option!(device, backend), else: co_execution_devices(backend)

    if devices == [] do
      %{detail: detail} = Enum.find(Accel.backends(), &(&1.name == backend))
      raise ArgumentError, "backend #{inspect(backend)} is unavailable: #{detail}"
    end

    devices
  end

  defp devices_option!(devices, backend) do
    cond do
      Enum.uniq(devices) != devices ->
        raise ArgumentError,
              "option :device lists a device twice: #{inspect(devices -- Enum.uniq(devices), limit: 5)}"

      backend != :auto and Enum.any?(devices, &(&1.backend != backend)) ->
        raise ArgumentError, "option :device lists a device of another backend than #{inspect(backend)}"

      true ->
        devices
    end
  end

  # The devices `device: :all` spreads a call over: every usable device of `backend` (or of every
  # backend for :auto), less OpenCL devices on the host's CPU when the CPU backend takes part (they
  # run on the same cores, several times slower, so they only take cores from it), and less an
  # OpenCL device named as a CUDA device is (NVIDIA's OpenCL driver shows the GPUs CUDA drives: one
  # GPU taken twice only contends with itself), and less devices fenced after a fault (Accel.Error
  # :device_failed, noted by note_failure/1). Devices are discovered once per VM, so the list is
  # kept: asking the NIF costs a dirty scheduler's round trip.
  @doc false
  @fenced {Accel, :fenced_devices}
  def co_execution_devices(backend) do
    case :persistent_term.get(@fenced, []) do
      [] -> usable_devices(backend)
      fenced -> Enum.reject(usable_devices(backend), &({&1.backend, &1.id} in fenced))
    end
  end

  @doc false
  # Device calls' errors pass here (Accel.Job): after a fault, the devices the NIF has fenced are
  # kept where co_execution_devices/1 reads them for every :auto call at the cost of a
  # persistent_term lookup (rewritten only when the set changes). Returns `exception`.
  def note_failure(%Accel.Error{reason: reason} = exception) when reason in [:device_fault, :device_failed] do
    fenced = Accel.NIF.fenced_devices()
    if fenced != :persistent_term.get(@fenced, []), do: :persistent_term.put(@fenced, fenced)
    exception
  end

  def note_failure(exception), do: exception

  # co_execution_devices/1 before fencing (Accel.Error :device_failed), kept.
  defp usable_devices(backend) do
    key = {Accel, :co_execution_devices, backend}

    with nil <- :persistent_term.get(key, nil) do
      devices = Enum.filter(Accel.devices(), &(backend in [:auto, &1.backend]))
      host = Enum.any?(devices, &(&1.backend == :cpu))
      cuda_gpus = for %{backend: :cuda, name: name} <- devices, do: name

      chosen =
        Enum.reject(devices, fn d ->
          # PoCL on the CPU backend's cores; NVIDIA's OpenCL view of a GPU that CUDA drives
          d.backend == :opencl and ((host and d.type == :cpu) or d.name in cuda_gpus)
        end)

      :persistent_term.put(key, chosen)
      chosen
    end
  end

  # {backend, device index or -1 for the backend's default}
  def target!(backend, nil), do: {backend, -1}
  def target!(backend, id) when is_integer(id) and id >= 0 and backend != :auto, do: {backend, id}

  def target!(:auto, id) when is_integer(id) do
    raise ArgumentError, "option :device as an index needs a :backend, got: backend: :auto, device: #{id}"
  end

  def target!(backend, %Accel.Device{backend: device_backend, id: id})
      when backend in [:auto, device_backend],
      do: {device_backend, id}

  def target!(backend, %Accel.Device{backend: device_backend}) do
    raise ArgumentError,
          "option :device is a #{inspect(device_backend)} device, but :backend is #{inspect(backend)}"
  end

  def target!(_backend, other) do
    raise ArgumentError,
          "option :device must be an Accel.Device, a non-negative index or :all, got: #{inspect(other, limit: 5)}"
  end

  @doc false
  # Whether the :device option asks for several devices to share a call.
  def sharing?(device), do: device == :all or is_list(device)

  @doc false
  def device_option?(device),
    do: device in [nil, :all] or Accel.Tensor.device_option?(device) or device_list?(device)

  def device_list?(devices),
    do: is_list(devices) and devices != [] and Enum.all?(devices, &is_struct(&1, Accel.Device))
end
