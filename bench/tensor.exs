# Tensor benchmark: matmul through each backend's BLAS (against NumPy, and PyTorch on CUDA, where
# python3 has them), elementwise and sum over 2^25 elements against the device's measured copy
# bandwidth, and a chain of five kernels on resident data versus the same chain through binaries.
# Medians of --runs (default 5) after one warm-up; device work is waited for before a clock stops.
# Writes bench/results/tensor[_TAG].md.   mix run bench/tensor.exs [--runs 5] [--tag NAME] [--quick]
import Bitwise
alias Accel.Tensor, as: T

Code.require_file("support/results.ex", __DIR__)

defmodule TensorBench do
  def median(fun, runs) do
    fun.()
    samples = for _ <- 1..runs, do: elem(:timer.tc(fun), 0) / 1.0e6
    Enum.at(Enum.sort(samples), div(runs, 2))
  end

  # Reading one element waits for everything queued before it on the device.
  def sync(t), do: Accel.Job.call(&Accel.NIF.tensor_download(t.ref, 1, &1))

  def python(code) do
    with exe when is_binary(exe) <- System.find_executable("python3"),
         {out, 0} <- System.cmd(exe, ["-c", code], stderr_to_stdout: true) do
      out |> String.split("\n", trim: true) |> List.last() |> Float.parse() |> then(&elem(&1, 0))
    else
      _ -> nil
    end
  rescue
    _ -> nil
  end
end

{opts, _} = OptionParser.parse!(System.argv(), strict: [runs: :integer, tag: :string, quick: :boolean])
runs = opts[:runs] || 5
sizes = if opts[:quick], do: [256], else: [256, 1024, 2048]
n = if opts[:quick], do: 1 <<< 20, else: 1 <<< 25

backends =
  Enum.filter([:cpu, :opencl, :cuda], fn b ->
    Enum.any?(Accel.backends(), &(&1.name == b and &1.available))
  end)

# The same BLAS libraries called from plain C++ (bench/native/blas_native.cpp), when built.
native_exe = Path.join([Mix.Project.build_path(), "native", "blas_native"])

native =
  if File.exists?(native_exe) do
    {text, 0} = System.cmd(native_exe, [Integer.to_string(runs) | Enum.map(sizes, &Integer.to_string/1)])

    for line <- String.split(text, "\n", trim: true), into: %{} do
      [lib, type, size, seconds] = String.split(line, ",")
      {{lib, String.to_atom(type), String.to_integer(size)}, String.to_float(seconds)}
    end
  else
    %{}
  end

matmul =
  for backend <- backends, type <- [:f32, :f64], size <- sizes do
    a = T.iota({size, size}, type: type, backend: backend) |> T.divide(size * size * 1.0)
    b = T.transpose(a)
    s = TensorBench.median(fn -> a |> T.matmul(b) |> TensorBench.sync() end, runs)
    gflops = 2 * size ** 3 / s / 1.0e9

    numpy =
      if backend == :cpu do
        TensorBench.python("""
        import numpy as np, time
        a = (np.arange(#{size * size}, dtype=np.#{if type == :f32, do: "float32", else: "float64"}) / #{size * size}).reshape(#{size}, #{size}); b = a.T.copy(); a @ b
        t = []
        for _ in range(#{runs}):
            s = time.perf_counter(); a @ b; t.append(time.perf_counter() - s)
        print(sorted(t)[len(t) // 2])
        """)
      end

    torch =
      if backend == :cuda do
        TensorBench.python("""
        import torch
        a = (torch.arange(#{size * size}, dtype=torch.#{if type == :f32, do: "float32", else: "float64"}, device='cuda') / #{size * size}).reshape(#{size}, #{size}); b = a.T.contiguous(); a @ b
        torch.backends.cuda.matmul.allow_tf32 = False
        t = []
        for _ in range(#{runs}):
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            s.record(); a @ b; e.record(); torch.cuda.synchronize(); t.append(s.elapsed_time(e) / 1000)
        print(sorted(t)[len(t) // 2])
        """)
      end

    plain = native[{%{cpu: "openblas", opencl: "clblast"}[backend], type, size}]

    plain_label =
      if plain,
        do:
          "#{%{cpu: "OpenBLAS", opencl: "CLBlast"}[backend]} from C++ #{Float.round(plain * 1000, 3)} ms: #{Float.round(s / plain, 2)}x",
        else: "-"

    ref = numpy || torch

    label =
      cond do
        numpy -> "NumPy #{Float.round(numpy * 1000, 3)} ms: #{Float.round(ref / s, 2)}x"
        torch -> "PyTorch (cuBLAS, events) #{Float.round(torch * 1000, 3)} ms: #{Float.round(ref / s, 2)}x"
        true -> "-"
      end

    IO.puts(
      "matmul #{backend} #{type} #{size}: #{Float.round(s * 1000, 3)} ms, #{Float.round(gflops, 1)} GFLOP/s; #{plain_label}; #{label}"
    )

    "| #{backend} | #{type} | #{size} | #{Float.round(s * 1000, 3)} | #{Float.round(gflops, 1)} | #{plain_label} | #{label} |"
  end

# Copy ceilings from plain C++ (memcpy on the host, clEnqueueCopyBuffer on OpenCL) for this many
# elements, when blas_native ran with the full size; else Accel's own same-type conversion.
stream =
  for backend <- backends do
    x = T.iota({n}, type: :f32, backend: backend)
    y = T.add(x, 1.0)
    own_copy = TensorBench.median(fn -> x |> T.as_type(:f32) |> TensorBench.sync() end, runs)
    add = TensorBench.median(fn -> x |> T.add(y) |> TensorBench.sync() end, runs)
    sum = TensorBench.median(fn -> x |> T.sum() |> TensorBench.sync() end, runs)

    {copy, source} =
      case native[{%{cpu: "memcpy", opencl: "clcopy"}[backend], :f32, n}] do
        nil -> {own_copy, "Accel as_type"}
        s -> {s, if(backend == :cpu, do: "memcpy", else: "clEnqueueCopyBuffer")}
      end

    copy_bw = 2 * 4 * n / copy / 1.0e9
    own_bw = 2 * 4 * n / own_copy / 1.0e9
    add_bw = 3 * 4 * n / add / 1.0e9
    sum_bw = 4 * n / sum / 1.0e9

    IO.puts(
      "#{backend}: copy (#{source}) #{Float.round(copy_bw, 1)} GB/s, as_type #{Float.round(own_bw, 1)} GB/s, add #{Float.round(add_bw, 1)} GB/s, sum #{Float.round(sum_bw, 1)} GB/s"
    )

    "| #{backend} | #{source}: #{Float.round(copy_bw, 1)} GB/s | #{Float.round(own_bw, 1)} GB/s (#{Float.round(own_bw / copy_bw, 2)}) | #{Float.round(add * 1000, 3)} ms, #{Float.round(add_bw, 1)} GB/s (#{Float.round(add_bw / copy_bw, 2)}) | #{Float.round(sum * 1000, 3)} ms, #{Float.round(sum_bw, 1)} GB/s (#{Float.round(sum_bw / copy_bw, 2)}) |"
  end

chain =
  for backend <- backends do
    steps = [
      &T.add(&1, 1),
      &T.multiply(&1, 3),
      &Accel.logistic_map(&1, iterations: 1),
      &T.subtract(&1, 7),
      &T.abs/1
    ]

    start = T.iota({n}, backend: backend)

    resident =
      TensorBench.median(fn -> steps |> Enum.reduce(start, fn f, t -> f.(t) end) |> T.to_binary() end, runs)

    through_binaries =
      TensorBench.median(
        fn ->
          Enum.reduce(steps, T.to_binary(start), fn f, bin ->
            bin |> T.from_binary(:s64, {n}, backend: backend) |> f.() |> T.to_binary()
          end)
        end,
        runs
      )

    same =
      Enum.reduce(steps, start, fn f, t -> f.(t) end) |> T.to_binary() ==
        Enum.reduce(steps, T.to_binary(start), fn f, bin ->
          bin |> T.from_binary(:s64, {n}, backend: backend) |> f.() |> T.to_binary()
        end)

    unless same, do: raise("the resident chain and the binary chain disagree on #{backend}")

    IO.puts(
      "chain #{backend}: resident #{Float.round(resident * 1000, 2)} ms, through binaries #{Float.round(through_binaries * 1000, 2)} ms"
    )

    "| #{backend} | #{Float.round(resident * 1000, 2)} | #{Float.round(through_binaries * 1000, 2)} | #{Float.round(through_binaries / resident, 2)}x |"
  end

devices = Accel.devices() |> Enum.map_join("; ", &"#{&1.backend} #{&1.id}: #{&1.name}")

md = """
## Tensor benchmark (#{devices})

Medians of #{runs} runs after a warm-up; each timed call waits for its device work.

### matmul (BLAS: OpenBLAS on :cpu, CLBlast on :opencl, cuBLAS on :cuda)

| backend | type | n | Accel ms | GFLOP/s | same BLAS from plain C++ (Accel's time / its time) | NumPy or PyTorch (its time / Accel's) |
|---|---|---:|---:|---:|---|---|
#{Enum.join(matmul, "\n")}

### Memory-bound kernels over #{n} f32 elements (bytes moved / time; in brackets, the fraction of the copy ceiling)

| backend | copy ceiling (read + write) | Accel as_type, same type (read + write) | add (two reads + a write) | sum (one read) |
|---|---|---|---|---|
#{Enum.join(stream, "\n")}

### A chain of five kernels over #{n} s64 elements (add, multiply, logistic map, subtract, abs)

| backend | resident ms | through binaries ms | resident speed-up |
|---|---:|---:|---:|
#{Enum.join(chain, "\n")}
"""

IO.puts("\n" <> md)
suffix = if(opts[:tag], do: "_#{opts[:tag]}", else: "") <> if(opts[:quick], do: "_quick", else: "")
path = Accel.Bench.Results.path("tensor#{suffix}.md")
File.write!(path, md)
IO.puts("Wrote #{path}")
