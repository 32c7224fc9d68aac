# bin/nx-suite gives `mix test` this file alone: it compiles each of Nx's test files (the copy in
# ACCEL_NX_SUITE) as Nx's own suite would, with two changes of the harness, none to what a test
# asserts:
#   * the files compile with Nx.BinaryBackend as the default backend, and every test then runs with
#     Accel's: module attributes made at compile time (`@tensor Nx.tensor(...)`) cannot hold a
#     device tensor (its reference cannot be stored in a module, as with EXLA), and such a tensor
#     meeting Accel's is what a user's mixed program does;
#   * a comparison (==, !=, ===, !==) deciding an assert, refute, if or unless compares host copies
#     of the tensors on each side (Accel.Test.NxSuite.host/1): a device tensor's struct holds a
#     reference, so two equal tensors are never == as structs; their host copies are, exactly when
#     shape, type, names and every byte agree, which is what == compares on the binary backend.
root = System.fetch_env!("ACCEL_NX_SUITE")
# Nx's test support modules (helpers, containers, ProcessBackend) first, as Nx's mix.exs compiles them
support = Path.wildcard(Path.join([root, "test", "support", "*.ex"])) |> Enum.sort()
files = support ++ (Path.wildcard(Path.join([root, "test", "**", "*_test.exs"])) |> Enum.sort())

# Nx's tests read fixtures and guides relative to Nx's root (`mix test` has found this file by now)
File.cd!(root)

Nx.with_default_backend(Nx.BinaryBackend, fn ->
  for file <- files do
    file
    |> File.read!()
    |> Code.string_to_quoted!(file: file, columns: true)
    |> Accel.Test.NxSuite.compare_host_copies()
    |> Code.compile_quoted(file)
  end
end)
