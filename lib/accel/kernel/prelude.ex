defmodule Accel.Kernel.Prelude do
  @moduledoc false
  # The headers a generated kernel's text starts with (c_src/kernels/*.h, read when Accel
  # compiles, their #includes of each other removed: the text is one translation unit for every
  # backend's compiler). `use Accel.Kernel.Prelude, files: [...]` sets @prelude to their text, in
  # order, and recompiles the module when one changes.

  @kernels_dir Path.expand("../../../c_src/kernels", __DIR__)

  defmacro __using__(files: files) do
    paths = Enum.map(files, &Path.join(@kernels_dir, &1))

    quote do
      for path <- unquote(paths), do: @external_resource(path)
      @prelude unquote(Enum.map_join(paths, "", &text/1))
    end
  end

  defp text(path), do: path |> File.read!() |> String.replace(~r/#include "kernels\/[^"]*"/, "")
end
