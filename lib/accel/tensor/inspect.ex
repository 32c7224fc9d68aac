# How a tensor prints: its type, shape and device, and its first elements (read from the device).
defimpl Inspect, for: Accel.Tensor do
  import Inspect.Algebra

  def inspect(%Accel.Tensor{shape: shape, type: type, device: {backend, index}} = t, _opts) do
    dims = shape |> Tuple.to_list() |> Enum.map_join(&"[#{&1}]")
    head = "#{type}#{dims} #{backend}:#{index}"

    body =
      try do
        limit = 10

        values =
          Accel.Job.call(&Accel.NIF.tensor_download(t.ref, limit, &1)) |> Accel.Tensor.Codec.decode(type)

        more = if Accel.Tensor.size(t) > limit, do: ", ...", else: ""
        "[" <> Enum.map_join(values, ", ", &Kernel.inspect/1) <> more <> "]"
      rescue
        e in ArgumentError ->
          cond do
            Exception.message(e) =~ "was freed" -> "(freed)"
            node(t.ref) != node() -> "(on node #{node(t.ref)}: tensors cannot cross nodes)"
            true -> "(not a tensor of this VM)"
          end
      end

    concat(["#Accel.Tensor<", head, " ", body, ">"])
  end
end
