defmodule Accel.Test.ClusterHelper do
  @moduledoc false
  # Functions the cluster tests run on peer nodes (test/support is on their code path).

  def slow_logistic_map(chunk, delay_ms) do
    Process.sleep(delay_ms)
    Accel.logistic_map(chunk, as: :binary)
  end

  def start_distribution! do
    unless Node.alive?() do
      epmd = System.find_executable("epmd") || Path.join([:code.root_dir(), "bin", "epmd"])
      {_, 0} = System.cmd(epmd, ["-daemon"])
      # `epmd -daemon` returns before a new daemon listens: Node.start then fails with
      # econnrefused (seen in CI), so wait until it answers
      wait_for_epmd(100)
      {:ok, _} = Node.start(:"accel_test_#{System.unique_integer([:positive])}@127.0.0.1", :longnames)
    end

    :ok
  end

  defp wait_for_epmd(tries) do
    case :erl_epmd.names(~c"127.0.0.1") do
      {:ok, _} ->
        :ok

      {:error, _} when tries > 0 ->
        Process.sleep(50)
        wait_for_epmd(tries - 1)

      {:error, reason} ->
        raise "epmd did not answer: #{inspect(reason)}"
    end
  end

  # A peer node on this machine with this node's code paths and cookie, Elixir started.
  def start_peer! do
    args =
      [~c"-setcookie", Atom.to_charlist(Node.get_cookie()), ~c"-connect_all", ~c"false"] ++
        Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    name = :"accel_peer_#{System.unique_integer([:positive])}"
    {:ok, peer, node} = :peer.start(%{name: name, host: ~c"127.0.0.1", longnames: true, args: args})
    {:ok, _} = :erpc.call(node, :application, :ensure_all_started, [:elixir])
    {peer, node}
  end
end
