defmodule Accel.NativeBuildTest do
  # The Mix compiler that drives CMake (mix/compile_cmake.exs): when it configures again. A copied
  # or moved checkout carries a CMakeCache.txt naming the original's directories, which would build
  # the original's code.
  use ExUnit.Case, async: true
  alias Mix.Tasks.Compile.AccelCmake

  defp cache(dir, source, build, werror) do
    File.mkdir_p!(dir)

    File.write!(Path.join(dir, "CMakeCache.txt"), """
    ACCEL_WERROR:BOOL=#{if werror, do: "ON", else: "OFF"}
    CMAKE_CACHEFILE_DIR:INTERNAL=#{build}
    CMAKE_HOME_DIRECTORY:INTERNAL=#{source}
    """)
  end

  @tag :tmp_dir
  test "configures when the cache is missing, made elsewhere, or for another warnings setting", %{
    tmp_dir: tmp
  } do
    build = Path.join(tmp, "native")
    assert AccelCmake.configure_needed(build, "/src/accel", false) == :missing

    cache(build, "/src/accel", build, false)
    assert AccelCmake.configure_needed(build, "/src/accel", false) == nil
    assert AccelCmake.configure_needed(build, "/src/accel", true) == :werror
    assert AccelCmake.configure_needed(build, "/src/accel-copy", false) == :moved

    cache(build, "/src/accel", "/old/_build/test/native", false)
    assert AccelCmake.configure_needed(build, "/src/accel", false) == :moved
  end

  test "this checkout's own build directory is up to date" do
    build = Path.join(Mix.Project.build_path(), "native")

    assert AccelCmake.configure_needed(build, File.cwd!(), System.get_env("CI") in ["true", "1"]) in [
             nil,
             :werror
           ]
  end
end
