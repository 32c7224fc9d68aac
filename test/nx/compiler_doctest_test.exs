if Code.ensure_loaded?(Nx) do
  # Nx's own doctests of Nx.Defn and Nx.Defn.Kernel with Accel.Nx.Compiler as the default compiler
  # (and Accel.Nx.Backend as the default backend), on the CPU backend and on the first OpenCL device
  # (PoCL here). Exclusions and their reasons: Accel.Test.NxDoctests.
  for {device, module} <- [cpu: Accel.Nx.CompilerDoctestCpuTest, opencl: Accel.Nx.CompilerDoctestOpenCLTest] do
    defmodule module do
      use ExUnit.Case, async: true
      @moduletag opencl: device == :opencl
      import Nx.Defn.Kernel, only: [keyword!: 2, assert_keys: 2]
      @device device

      setup do
        Nx.default_backend({Accel.Nx.Backend, device: @device})
        Nx.Defn.default_options(compiler: Accel.Nx.Compiler, device: @device)
        :ok
      end

      doctest Nx.Defn, except: Accel.Test.NxDoctests.excluded_defn(device)
      doctest Nx.Defn.Kernel, except: Accel.Test.NxDoctests.excluded_defn_kernel(device)
    end
  end
end
