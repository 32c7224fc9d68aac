defmodule Accel.Test.Properties do
  @moduledoc false
  # The property tests' one runner: PropEr (Debian's erlang-proper 1.2) checks `check` on values of
  # `generator` (`check` returns :ok or {:error, message}; it never raises, as this PropEr cannot
  # report an exception on OTP 24+), ACCEL_PROPER_RUNS of them (default 40) from the seed
  # ACCEL_PROPER_SEED (default a new one). The seed is printed and named in a failure with the
  # command that replays the run: a long search (`ACCEL_PROPER_RUNS=2000`) is a test run, never a
  # benchmark's exit status.

  @doc "Runs the property; :ok, or ExUnit's failure with the shrunk counterexample's message."
  def check!(label, file, generator, check) do
    runs = String.to_integer(System.get_env("ACCEL_PROPER_RUNS", "40"))
    seed = String.to_integer(System.get_env("ACCEL_PROPER_SEED") || "#{:rand.uniform(999_999)}")
    replay = "ACCEL_PROPER_SEED=#{seed} ACCEL_PROPER_RUNS=#{runs} mix test #{Path.relative_to_cwd(file)}"
    IO.puts("#{label}: #{runs} random cases, seed #{seed} (replay: #{replay})")

    property = :proper.forall(generator, fn value -> check.(value) == :ok end)
    :proper_arith.rand_start({seed, seed * 7 + 1, seed * 13 + 2})

    case :proper.quickcheck(property, [{:numtests, runs}, {:on_output, fn _, _ -> :ok end}, :long_result]) do
      true -> :ok
      [counterexample] -> ExUnit.Assertions.flunk("#{check.(counterexample) |> elem(1)}\nreplay: #{replay}")
      other -> ExUnit.Assertions.flunk("PropEr: #{inspect(other)}\nreplay: #{replay}")
    end
  end
end
