# Tests of Nx's own suite that bin/nx-suite does not run on Accel, each with its reason: only tests
# that check something other than Nx's semantics (Nx's own configuration, its Evaluator, a struct
# compared with ==). Keys: test (ExUnit's name of the test), reason, and where it applies (absent:
# everywhere): nx ("0.7" or "0.13"), device (:cpu, :opencl, :cuda or a list), mode (:backend or
# :compiler). The report lists any entry that matched no test.
[
]
