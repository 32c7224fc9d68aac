if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.FallbackConfigTest do
    # `config :accel, nx_fallback: :raise` makes every fallback raise, for every backend the VM
    # uses; a backend's own `fallback:` option wins over it. Not async: it changes the
    # application's environment, which every test reads.
    use ExUnit.Case, async: false

    test "the application's nx_fallback: :raise, and an option overriding it" do
      t = Nx.tensor([1.0, 2.0], backend: {Accel.Nx.Backend, device: :cpu})
      Application.put_env(:accel, :nx_fallback, :raise)

      try do
        assert_raise ArgumentError,
                     ~r/no cpu:0 kernel for reduce .* fallback: :raise forbids/,
                     fn ->
                       Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)
                     end

        Nx.with_default_backend({Accel.Nx.Backend, device: :cpu, fallback: :host}, fn ->
          assert Nx.to_number(Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)) == 2.0
        end)
      after
        Application.delete_env(:accel, :nx_fallback)
      end

      assert Nx.to_number(Nx.reduce(t, 0.0, fn x, acc -> Nx.max(x, acc) end)) == 2.0
    end
  end
end
