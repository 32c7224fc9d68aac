# Nx 0.7's eigh and lu: Nx.BinaryBackend's own callbacks against Accel's ports of them (the same
# algorithms in C++, core/tensor_linalg.cpp), side by side in one run: symmetric f64 matrices
# G G^T of n x n, G normal (key n); the binary backend once per size at 32 (it takes tens of
# seconds there), else the median of 3, alternating; each result checked bit for bit against the
# binary backend's. Nx 0.7 only: Nx 0.13 calls blocks whose compositions run on the device.
# Writes bench/results/nx07_linalg.md.
#
#   mix run bench/nx07_linalg.exs
Code.require_file("support/results.ex", __DIR__)

defmodule Nx07LinalgBench do
  alias Accel.Bench.Results

  def main do
    {:ok, _} = Application.ensure_all_started(:nx)
    version = to_string(Application.spec(:nx, :vsn))

    unless Version.match?(version, "< 0.8.0"),
      do: raise("Nx #{version}: eigh and lu are Nx's compositions here, not the binary backend's callbacks")

    device = {Accel.Nx.Backend, device: :cpu, fallback: :raise}

    rows =
      for {op, sizes} <- [eigh: [8, 16, 32], lu: [32, 64, 128]], n <- sizes do
        {g, _} = Nx.Random.normal(Nx.Random.key(n), shape: {n, n}, type: :f64)
        s = Nx.dot(g, [1], g, [1])
        on_device = Nx.backend_copy(s, device)
        fun = if op == :eigh, do: &Nx.LinAlg.eigh/1, else: &Nx.LinAlg.lu/1
        reps = if op == :eigh and n >= 32, do: 1, else: 3

        times =
          for _ <- 1..reps do
            {binary_us, expected} = :timer.tc(fn -> fun.(s) end)

            {accel_us, actual} =
              :timer.tc(fn -> Nx.with_default_backend(device, fn -> fun.(on_device) end) end)

            same = Enum.zip(Tuple.to_list(expected), Tuple.to_list(actual))
            same = Enum.all?(same, fn {e, a} -> Nx.backend_copy(a, Nx.BinaryBackend) == e end)
            unless same, do: raise("#{op} #{n}x#{n}: Accel's result is not the binary backend's")
            {binary_us, accel_us}
          end

        binary = median(Enum.map(times, &elem(&1, 0))) / 1000
        accel = median(Enum.map(times, &elem(&1, 1))) / 1000
        IO.puts("#{op} #{n}x#{n}: binary #{binary} ms, Accel #{accel} ms")
        "| #{op} | #{n} x #{n} | #{fmt(binary)} | #{fmt(accel)} | #{fmt(binary / accel)}x |"
      end

    text = """
    # Nx 0.7's eigh and lu: Nx.BinaryBackend against Accel's ports

    Made by `mix run bench/nx07_linalg.exs` (Nx #{version}): each operation on a symmetric f64
    matrix G G^T, through Nx.BinaryBackend's own callback and through Accel.Nx.Backend on the CPU
    backend (the same algorithm in C++, `fallback: :raise`), side by side, in milliseconds (median
    of 3, alternating; one call each for eigh at 32 x 32); every result equal to the binary
    backend's, bit for bit. Machine: #{System.schedulers_online()} cores.

    | operation | matrix | Nx.BinaryBackend | Accel | speedup |
    |---|---|---:|---:|---:|
    #{Enum.join(rows, "\n")}
    """

    File.write!(Results.path("nx07_linalg.md"), text)
  end

  defp median(values), do: values |> Enum.sort() |> Enum.at(div(length(values), 2))
  defp fmt(x), do: :erlang.float_to_binary(x / 1, decimals: 2)
end

Nx07LinalgBench.main()
