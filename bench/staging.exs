# Staged transfers on and off (config :accel, staged_transfers, read when the NIF loads, so each
# mode runs in a VM of its own, one after the other): on every OpenCL and CUDA device, a binary the
# VM made through the logistic map (binary -> binary), a tensor made from one, and a large
# tensor's download, at the workload's size. Medians; results checked against the CPU backend.
# On a GPU, :auto stages these transfers and :never leaves them to the driver; on a CPU device
# (PoCL) :auto stages nothing, so :always is timed there instead, to show what staging costs where
# it cannot pay. Writes bench/results/staging.md (staging_TAG.md with --tag).
#
#   mix run bench/staging.exs [--runs 9] [--elements 33554432] [--tag TAG]
Code.require_file("support/results.ex", __DIR__)

defmodule StagingBench do
  alias Accel.Bench.Results
  @calls ["VM binary -> binary", "Tensor.from_binary(VM binary)", "Tensor.to_binary"]

  def main(args) do
    {opts, _} =
      OptionParser.parse!(args, strict: [runs: :integer, elements: :integer, tag: :string, mode: :string])

    runs = opts[:runs] || 9
    n = opts[:elements] || 0x2000000

    if mode = opts[:mode] do
      # a child VM: time every device in this mode, print the medians as a term
      Application.put_env(:accel, :staged_transfers, String.to_existing_atom(mode))
      IO.puts("RESULT " <> Base.encode64(:erlang.term_to_binary(measure(n, runs))))
    else
      compare(n, runs, opts[:tag])
    end
  end

  defp compare(n, runs, tag) do
    on = if Enum.any?(Accel.devices(), &(&1.type == :gpu)), do: "auto", else: "always"
    [off, staged] = for mode <- ["never", on], do: child(mode, n, runs)

    rows =
      for {device, calls} <- off, name <- @calls do
        a = calls[name]
        b = staged[device][name]
        "| #{device} | #{name} | #{ms(a)} | #{ms(b)} | #{Float.round(a / b, 2)}x |"
      end

    text = """
    # Staged transfers

    #{n} s64 elements (#{div(n * 8, 1_000_000)} MB each way), median of #{runs} calls after a warm-up,
    each mode in a VM of its own (`staged_transfers` is read when the NIF loads); every result equal
    to the CPU backend's. "staged" is `:#{on}`#{if on == "always", do: " (no GPU here: PoCL, a CPU device, which `:auto` never stages)", else: ""}.

    | device | call | `:never`, ms | staged, ms | speed-up |
    |---|---|---:|---:|---:|
    #{Enum.join(rows, "\n")}
    """

    path = Results.path(if tag, do: "staging_#{tag}.md", else: "staging.md")
    File.write!(path, text)
    IO.puts(text)
  end

  defp child(mode, n, runs) do
    args = ["run", "bench/staging.exs", "--mode", mode, "--elements", "#{n}", "--runs", "#{runs}"]
    {out, status} = System.cmd("mix", args, stderr_to_stdout: true)
    status == 0 || raise "the #{mode} VM failed (exit #{status}):\n#{out}"
    [_, encoded] = Regex.run(~r/RESULT (\S+)/, out)
    encoded |> Base.decode64!() |> :erlang.binary_to_term()
  end

  defp measure(n, runs) do
    alias Accel.Tensor, as: T
    made = Accel.logistic_map(1..n, iterations: 0, as: :binary, backend: :cpu)
    want = Accel.logistic_map(made, backend: :cpu)

    for device <- Accel.devices(), device.backend != :cpu, into: %{} do
      vm = :binary.copy(made)
      resident = T.from_binary(made, :s64, device: device)

      calls = %{
        "VM binary -> binary" => {fn -> Accel.logistic_map(vm, device: device) end, want},
        "Tensor.from_binary(VM binary)" =>
          {fn ->
             vm |> T.from_binary(:s64, device: device) |> tap(&T.to_binary(T.slice(&1, [n - 1], [1])))
           end, nil},
        "Tensor.to_binary" => {fn -> T.to_binary(resident) end, made}
      }

      medians =
        for {name, {call, expected}} <- calls, into: %{} do
          result = call.()
          expected == nil or result == expected or raise "#{name} on #{device.name}: results differ"
          times = for _ <- 1..runs, do: elem(:timer.tc(call), 0)
          {name, Enum.at(Enum.sort(times), div(runs, 2)) / 1000}
        end

      {"#{device.backend}:#{device.id} (#{device.name})", medians}
    end
  end

  defp ms(x), do: :erlang.float_to_binary(x, decimals: 1)
end

StagingBench.main(System.argv())
