defmodule Accel.Test.NifCalls do
  @moduledoc false
  # Which of the given Accel.NIF functions (`{Accel.NIF, name, arity}`) a function called in the
  # calling process, in order, as `{name, args}`: traced to a process of its own, the patterns set
  # for the call only (other tests trace other functions of their own).
  import ExUnit.Assertions

  def traced(patterns, fun) do
    tracer = spawn_link(fn -> receive(do: (:never -> :ok)) end)
    Enum.each(patterns, &:erlang.trace_pattern(&1, true, [:local]))
    :erlang.trace(self(), true, [:call, {:tracer, tracer}])

    try do
      fun.()
    after
      :erlang.trace(self(), false, [:call])
      Enum.each(patterns, &:erlang.trace_pattern(&1, false, [:local]))
    end

    ref = :erlang.trace_delivered(self())
    assert_receive {:trace_delivered, _, ^ref}
    {:messages, messages} = Process.info(tracer, :messages)
    for {:trace, _, :call, {Accel.NIF, name, args}} <- messages, do: {name, args}
  end
end
