# Device tests are tagged by backend and excluded, with the reason printed, where the backend is not
# usable on this machine.
unavailable =
  for %{name: name, available: false, detail: detail} <- Accel.backends() do
    IO.puts("Excluding tests tagged #{inspect(name)}: #{detail}")
    name
  end

ExUnit.start(exclude: unavailable)
