# Accel's OpenCL paths against what a user would write instead: the seed's own OpenCL kernel through
# a plain Erlang OpenCL binding, Debian's erlang-cl (the tonyrog/cl NIF; bin/setup installs it),
# creating buffers, writing, launching and reading on every call, on the same device. The seed's
# kernel as the seed wrote it: ten unrolled `x = mu * x * (x + 1) % p;` steps on `long`, an input
# and an output buffer, `p` and `mu` kernel arguments. A second row gives the binding the same loop
# with `p` and `mu` compile-time constants (-D), in place in one buffer: on PoCL that turns the 64-bit
# `%` into a slower library routine, so it is not the peer, only a note on what a constant costs.
# Against them: Accel.logistic_map/2 and the same computation as an Accel user kernel
# (Accel.map/3), both `backend: :opencl`, int64 binary in and out. Sizes 2^16 to 2^25, medians of 5
# rounds (more below 2^22), variants round-robin, results checked equal. The binding's calls run
# with SIGCHLD handled (PoCL runs its linker as a child process and aborts when it cannot wait for
# it; the VM ignores SIGCHLD). Writes bench/results/opencl_peer.md.
#
#   mix run bench/opencl_peer.exs [--runs 5] [--max 25]
require Accel

Code.require_file("support/results.ex", __DIR__)

defmodule OpenCLPeerBench do
  alias Accel.Bench.Results
  @p 6_700_417
  @mu 22
  # the seed's kernel: p and mu arguments, input and output buffers, the ten steps unrolled
  @seed """
  __kernel void calc(__global long* input, __global long* output, long p, long mu) {
    size_t i = get_global_id(0);
    long x = input[i];
  #{String.duplicate("  x = mu * x * (x + 1) % p;\n", 10)}  output[i] = x;
  }
  """
  # the constant form (-D P=... -D MU=...), in place
  @constants """
  __kernel void logistic(__global long* x) {
    const size_t i = get_global_id(0);
    long v = x[i];
    for (int k = 0; k < 10; ++k) v = MU * v * (v + 1) % P;
    x[i] = v;
  }
  """

  def main(args) do
    {opts, _} = OptionParser.parse!(args, strict: [runs: :integer, max: :integer])
    runs = opts[:runs] || 5
    max = opts[:max] || 25
    Code.ensure_loaded(:cl) == {:module, :cl} || raise "erlang-cl is not installed (bin/setup installs it)"
    peer = peer_setup()
    k = Accel.kernel(fn x -> Enum.reduce(1..10, x, fn _, a -> rem(@mu * a * (a + 1), @p) end) end)

    rows =
      for bits <- 16..max//3 do
        n = Bitwise.bsl(1, bits)
        bin = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)

        variants = [
          {"erlang-cl, the seed's kernel", fn -> seed_call(peer, bin) end},
          {"erlang-cl, constants", fn -> constants_call(peer, bin) end},
          {"Accel.logistic_map", fn -> Accel.logistic_map(bin, backend: :opencl) end},
          {"Accel user kernel", fn -> Accel.map(bin, k, backend: :opencl) end}
        ]

        [first | rest] = Enum.map(variants, fn {_, f} -> f.() end)
        Enum.all?(rest, &(&1 == first)) || raise "results differ at 2^#{bits}"

        # small calls are short and the machine noisy: as many rounds as keep each row's time alike
        rounds = runs * Bitwise.bsl(1, max(22 - bits, 0))

        times =
          Enum.reduce(1..rounds, Enum.map(variants, fn _ -> [] end), fn _, acc ->
            Enum.zip_with(variants, acc, fn {_, f}, ts -> [seconds(f) | ts] end)
          end)
          |> Enum.map(&Accel.Timing.summarize(&1).median)

        {bits, rounds, times}
      end

    [_, device] = peer.names

    text = """
    # Accel's OpenCL paths against a plain OpenCL binding

    The seed's OpenCL kernel as the seed wrote it (ten `x = mu * x * (x + 1) % p;` steps, `p` and
    `mu` kernel arguments, an input and an output buffer) through erlang-cl, buffers made, written,
    launched and read per call, against `Accel.logistic_map/2` and the same computation as an Accel
    user kernel, on one OpenCL device (#{device}), int64 binary in and out. A second binding row
    compiles `p` and `mu` in as constants (in place, one buffer): not the peer, but what a constant
    costs on this device. Medians of #{runs} rounds from 2^22 elements up, #{runs} x 2^(22 - k)
    rounds at 2^k below it (small calls are short, and the machine noisy); variants round-robin
    within a round, results equal. Speed relative to the seed's kernel: above 1 is faster than it.

    | elements | rounds | seed's kernel, ms | constants, ms | logistic_map, ms | user kernel, ms | constants vs seed | logistic_map vs seed | user kernel vs seed |
    |---:|---:|---:|---:|---:|---:|---:|---:|---:|
    #{Enum.map_join(rows, "\n", fn {bits, rounds, [s, c, l, u]} -> "| 2^#{bits} | #{rounds} | #{ms(s)} | #{ms(c)} | #{ms(l)} | #{ms(u)} | #{ratio(s, c)} | #{ratio(s, l)} | #{ratio(s, u)} |" end)}
    """

    IO.puts(text)
    File.write!(Results.path("opencl_peer.md"), text)
  end

  # The binding's device: the OpenCL device Accel's :opencl backend uses first (same platform and name).
  defp peer_setup do
    target = Enum.find(Accel.devices(), &(&1.backend == :opencl)) || raise "no OpenCL device"

    with_sigchld(fn ->
      {:ok, platforms} = :cl.get_platform_ids()

      {platform, device} =
        Enum.find_value(platforms, fn pl ->
          {:ok, devices} = :cl.get_device_ids(pl, :all)

          Enum.find_value(devices, fn d ->
            {:ok, name} = :cl.get_device_info(d, :name)
            if to_string(name) |> String.trim_trailing(<<0>>) == target.name, do: {pl, d}
          end)
        end) || raise "erlang-cl does not see #{target.name}"

      {:ok, pname} = :cl.get_platform_info(platform, :name)
      {:ok, context} = :cl.create_context([device])
      {:ok, queue} = :cl.create_queue(context, device, [])
      seed = build(context, device, @seed, ~c"", ~c"calc")
      constants = build(context, device, @constants, ~c"-D P=#{@p}L -D MU=#{@mu}L", ~c"logistic")

      %{
        context: context,
        queue: queue,
        seed: seed,
        constants: constants,
        names: [to_string(pname), target.name]
      }
    end)
  end

  defp build(context, device, source, options, name) do
    {:ok, program} = :cl.create_program_with_source(context, source)
    :ok = :cl.build_program(program, [device], options)
    {:ok, kernel} = :cl.create_kernel(program, name)
    kernel
  end

  # One call as the seed made it: an input buffer written, an output buffer, p and mu set as
  # arguments (erlang-cl takes a scalar argument as its bytes), the kernel, the result read.
  defp seed_call(%{context: c, queue: q, seed: k}, bin) do
    with_sigchld(fn ->
      size = byte_size(bin)
      {:ok, input} = :cl.create_buffer(c, [:read_write], size)
      {:ok, output} = :cl.create_buffer(c, [:read_write], size)
      {:ok, w} = :cl.enqueue_write_buffer(q, input, 0, size, bin, [])
      :ok = :cl.set_kernel_arg(k, 0, input)
      :ok = :cl.set_kernel_arg(k, 1, output)
      :ok = :cl.set_kernel_arg(k, 2, <<@p::signed-native-64>>)
      :ok = :cl.set_kernel_arg(k, 3, <<@mu::signed-native-64>>)
      out = launch_and_read(q, k, output, size, w)
      :cl.release_mem_object(input)
      out
    end)
  end

  # The constant form, in place in one buffer.
  defp constants_call(%{context: c, queue: q, constants: k}, bin) do
    with_sigchld(fn ->
      size = byte_size(bin)
      {:ok, buf} = :cl.create_buffer(c, [:read_write], size)
      {:ok, w} = :cl.enqueue_write_buffer(q, buf, 0, size, bin, [])
      :ok = :cl.set_kernel_arg(k, 0, buf)
      launch_and_read(q, k, buf, size, w)
    end)
  end

  defp launch_and_read(q, k, buf, size, written) do
    {:ok, run} = :cl.enqueue_nd_range_kernel(q, k, [div(size, 8)], [], [written])
    {:ok, r} = :cl.enqueue_read_buffer(q, buf, 0, size, [run])
    {:ok, out} = :cl.wait(r, :infinity)
    Enum.each([written, run, r], &:cl.release_event/1)
    :cl.release_mem_object(buf)
    out
  end

  # (ERTS ignores SIGCHLD by default, so that waitpid fails; :handle installs its handler for the
  # call, which lets PoCL wait for its linker, and :default puts ERTS's ignore back)
  defp with_sigchld(fun) do
    :os.set_signal(:sigchld, :handle)

    try do
      fun.()
    after
      :os.set_signal(:sigchld, :default)
    end
  end

  defp seconds(fun) do
    {us, _} = :timer.tc(fun)
    us / 1.0e6
  end

  defp ms(s), do: :erlang.float_to_binary(s * 1000, decimals: 2)
  defp ratio(peer, ours), do: "#{:erlang.float_to_binary(peer / ours, decimals: 2)}x"
end

OpenCLPeerBench.main(System.argv())
