defmodule Accel.BenchResultsTest do
  # bin/bench --quick must not replace the committed full-size tables: every benchmark writes
  # through Accel.Bench.Results (bench/support/results.ex), which bin/bench --quick points at
  # bench/results/quick/ (untracked) with ACCEL_BENCH_RESULTS.
  use ExUnit.Case, async: false

  Code.require_file("../bench/support/results.ex", __DIR__)
  alias Accel.Bench.Results

  test "results go to bench/results/, or to the folder ACCEL_BENCH_RESULTS names" do
    dir = Path.join(System.tmp_dir!(), "accel_bench_results_#{System.unique_integer([:positive])}")

    try do
      assert Results.dir() == Path.expand("bench/results")
      System.put_env("ACCEL_BENCH_RESULTS", dir)
      assert Results.path("kernels_1048576.md") == Path.join(dir, "kernels_1048576.md")
      assert File.dir?(dir)
    after
      System.delete_env("ACCEL_BENCH_RESULTS")
      File.rm_rf!(dir)
    end
  end

  test "no benchmark names a results file but through Accel.Bench.Results" do
    scripts = Path.wildcard("bench/*.exs")
    assert length(scripts) > 10

    for script <- scripts do
      code = File.read!(script)
      # a literal path into bench/results/ (Path.expand("results/...", __DIR__), "bench/results/...")
      refute code =~ ~r/"(bench\/)?results[\/"]/, "#{script} writes to bench/results/ directly"

      if code =~ "Results.path(" or code =~ "Results.dir(",
        do: assert(code =~ ~s|Code.require_file("support/results.ex", __DIR__)|, script)
    end

    assert File.read!("bin/bench") =~ ~s|export ACCEL_BENCH_RESULTS="$PWD/bench/results/quick"|
    assert File.read!(".gitignore") =~ "/bench/results/quick/"
  end
end
