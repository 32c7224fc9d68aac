defmodule Accel.Job do
  # Private: the caller's half of a device call (c_src/nif/device_jobs.hpp). A NIF that would wait
  # on a device queues its work on Accel's thread for that device and returns at once; the caller
  # then waits here, in `receive`, which holds no scheduler: the VM's dirty IO schedulers stay free
  # for file I/O, and a caller that is killed or times out simply stops waiting (Accel notices and
  # drops or stops its work). When the device's queue is full the caller waits for a place, so a
  # crowd of callers costs each its own mailbox, never an unbounded queue of decoded inputs.
  @moduledoc false

  @doc false
  # `submit` calls a NIF with a fresh reference as its last argument; the NIF returns its result
  # directly (work it ran on the calling scheduler), :accel_queued or :accel_busy.
  @spec call((reference() -> result)) :: result when result: term()
  def call(submit) do
    # The reference is made here, in the function that receives on it, so the VM matches the
    # reply without scanning messages that were already in the mailbox.
    ref = make_ref()

    case submit.(ref) do
      :accel_queued ->
        receive do
          {^ref, {:ok, result}} -> result
          {^ref, {:raise, exception}} -> raise Accel.Devices.note_failure(exception)
        end

      :accel_busy ->
        receive do
          {^ref, :retry} -> call(submit)
        end

      result ->
        result
    end
  end
end
