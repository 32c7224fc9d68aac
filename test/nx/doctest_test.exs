if Code.ensure_loaded?(Nx) do
  # Nx's own doctests with Accel.Nx.Backend as the default backend (as Torchx's and EXLA's suites
  # run them): one module per device, on the CPU backend and on the first OpenCL device (PoCL
  # here). Exclusions and their reasons: Accel.Test.NxDoctests.
  for {device, module} <- [cpu: Accel.Nx.DoctestCpuTest, opencl: Accel.Nx.DoctestOpenCLTest] do
    defmodule module do
      use ExUnit.Case, async: true
      @moduletag opencl: device == :opencl
      @device device

      setup do
        Nx.default_backend({Accel.Nx.Backend, device: @device})
        :ok
      end

      doctest Nx, except: Accel.Test.NxDoctests.excluded(device)
    end
  end
end
