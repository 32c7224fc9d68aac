if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.ProgramsTest.Models do
    @moduledoc false
    # Programs as Axon and Scholar write them, in plain Nx and defn: a CNN training step (conv,
    # max-pool, dense, dropout drawn with Nx.Random, softmax cross-entropy, the gradient through
    # Nx.Defn.grad, an Adam update), a transformer block's training step (embedding take,
    # attention with a causal mask, layer norm, GELU), k-means (argmin, indexed_add) and PCA
    # (eigh of a covariance) before k-means.
    import Nx.Defn

    defn cnn_loss(params, x, labels, key) do
      {w1, b1, w2, b2} = params

      h =
        x
        |> Nx.conv(w1, padding: :same)
        |> Nx.add(Nx.reshape(b1, {1, :auto, 1, 1}))
        |> Nx.max(0)
        |> Nx.window_max({1, 1, 2, 2}, strides: [1, 1, 2, 2])

      h = Nx.reshape(h, {Nx.axis_size(h, 0), :auto})
      # dropout, its mask drawn from the key
      {keep, _key} = Nx.Random.uniform(key, shape: Nx.shape(h))
      h = Nx.select(keep > 0.2, h / 0.8, 0.0)
      logits = Nx.dot(h, w2) + b2
      cross_entropy(logits, labels)
    end

    defn cross_entropy(logits, labels) do
      shifted = logits - Nx.reduce_max(logits, axes: [1], keep_axes: true)
      log_probs = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [1], keep_axes: true))
      picked = Nx.take_along_axis(log_probs, Nx.new_axis(labels, 1), axis: 1)
      -Nx.mean(picked)
    end

    # one Adam step: returns the new parameters, moments and the loss
    defn cnn_step(params, m, v, x, labels, key, t) do
      {loss, grads} = value_and_grad(params, &cnn_loss(&1, x, labels, key))
      {params, m, v} = adam(params, grads, m, v, t)
      {params, m, v, loss}
    end

    deftransformp adam(params, grads, m, v, t) do
      lr = 0.01
      {b1, b2, eps} = {0.9, 0.999, 1.0e-8}

      updated =
        [Tuple.to_list(params), Tuple.to_list(grads), Tuple.to_list(m), Tuple.to_list(v)]
        |> Enum.zip_with(fn [p, g, mi, vi] ->
          mi = Nx.add(Nx.multiply(mi, b1), Nx.multiply(g, 1 - b1))
          vi = Nx.add(Nx.multiply(vi, b2), Nx.multiply(Nx.multiply(g, g), 1 - b2))
          mhat = Nx.divide(mi, Nx.subtract(1, Nx.pow(b1, t)))
          vhat = Nx.divide(vi, Nx.subtract(1, Nx.pow(b2, t)))
          {Nx.subtract(p, Nx.divide(Nx.multiply(mhat, lr), Nx.add(Nx.sqrt(vhat), eps))), mi, vi}
        end)

      {
        updated |> Enum.map(&elem(&1, 0)) |> List.to_tuple(),
        updated |> Enum.map(&elem(&1, 1)) |> List.to_tuple(),
        updated |> Enum.map(&elem(&1, 2)) |> List.to_tuple()
      }
    end

    defn layer_norm(x, gamma, beta) do
      mean = Nx.mean(x, axes: [-1], keep_axes: true)
      var = Nx.variance(x, axes: [-1], keep_axes: true)
      (x - mean) / Nx.sqrt(var + 1.0e-5) * gamma + beta
    end

    defn(gelu(x), do: 0.5 * x * (1 + Nx.erf(x / Nx.sqrt(2.0))))

    defn transformer_loss(params, tokens, targets) do
      {embedding, wq, wk, wv, wo, gamma, beta, w1, w2} = params
      x = Nx.take(embedding, tokens, axis: 0)
      {batch, seq, dim} = Nx.shape(x)
      q = Nx.dot(x, [2], wq, [0])
      k = Nx.dot(x, [2], wk, [0])
      v = Nx.dot(x, [2], wv, [0])
      scores = Nx.dot(q, [2], [0], k, [2], [0]) / Nx.sqrt(dim)
      # causal mask: position i sees positions up to i
      mask = Nx.greater_equal(Nx.iota({seq, seq}, axis: 0), Nx.iota({seq, seq}, axis: 1))
      scores = Nx.select(Nx.broadcast(mask, {batch, seq, seq}), scores, -1.0e9)
      weights = Nx.exp(scores - Nx.reduce_max(scores, axes: [2], keep_axes: true))
      weights = weights / Nx.sum(weights, axes: [2], keep_axes: true)
      attended = Nx.dot(weights, [2], [0], v, [1], [0])
      x = layer_norm(x + Nx.dot(attended, [2], wo, [0]), gamma, beta)
      h = x |> Nx.dot([2], w1, [0]) |> gelu() |> Nx.dot([2], w2, [0])
      x = layer_norm(x + h, gamma, beta)
      logits = Nx.dot(x, [2], embedding, [1])
      cross_entropy(Nx.reshape(logits, {batch * seq, :auto}), Nx.reshape(targets, {batch * seq}))
    end

    defn transformer_step(params, tokens, targets) do
      {loss, grads} = value_and_grad(params, &transformer_loss(&1, tokens, targets))
      {sgd(params, grads), loss}
    end

    deftransformp sgd(params, grads) do
      params
      |> Tuple.to_list()
      |> Enum.zip_with(Tuple.to_list(grads), fn p, g -> Nx.subtract(p, Nx.multiply(g, 0.1)) end)
      |> List.to_tuple()
    end

    # PCA to two components (eigh of the covariance: Nx orders eigenvalues by magnitude), then
    # k-means on the projections, its centroids started at the first points
    defn pca_kmeans(points) do
      centered = points - Nx.mean(points, axes: [0])
      covariance = Nx.dot(centered, [0], centered, [0]) / (Nx.axis_size(points, 0) - 1)
      {_values, vectors} = Nx.LinAlg.eigh(covariance)
      projected = Nx.dot(centered, vectors[[.., 0..1]])
      kmeans(projected, projected[0..3])
    end

    # Lloyd's iterations: each point to its nearest centroid, each centroid to its points' mean
    defn kmeans(points, centroids) do
      {_, centroids, _} =
        while {i = 0, centroids, points}, i < 5 do
          d = Nx.sum((Nx.new_axis(points, 1) - Nx.new_axis(centroids, 0)) ** 2, axes: [2])
          nearest = Nx.argmin(d, axis: 1)

          sums =
            Nx.indexed_add(Nx.broadcast(0.0, Nx.shape(centroids)), Nx.new_axis(nearest, 1), points, axes: [0])

          counts =
            Nx.indexed_add(
              Nx.broadcast(0.0, {Nx.axis_size(centroids, 0)}),
              Nx.new_axis(nearest, 1),
              Nx.broadcast(1.0, {Nx.axis_size(points, 0)})
            )

          {i + 1, sums / Nx.max(Nx.new_axis(counts, 1), 1.0), points}
        end

      centroids
    end
  end

  defmodule Accel.Nx.ProgramsTest do
    # The programs of Accel.Nx.ProgramsTest.Models on the device, with Accel.Nx.Backend alone and
    # with Accel.Nx.Compiler: no operation falls back to Nx.BinaryBackend (counted with the
    # telemetry event, and with `fallback: :raise`), the results are the binary backend's, and the
    # training steps lower their loss.
    use ExUnit.Case, async: true
    import Accel.Test.Fallbacks, only: [count: 1]
    alias Accel.Nx.ProgramsTest.Models

    setup :count

    defp normal(key, shape, scale) do
      {t, key} = Nx.Random.normal(key, shape: shape, type: :f32)
      {Nx.multiply(t, scale), key}
    end

    # `fun` of host tensors, run on the device with each compiler and on the binary backend
    defp run_everywhere(device, inputs, fun) do
      expected = Nx.Defn.jit_apply(fun, inputs, compiler: Nx.Defn.Evaluator)

      for compiler <- [Nx.Defn.Evaluator, Accel.Nx.Compiler] do
        Nx.with_default_backend({Accel.Nx.Backend, device: device, fallback: :raise}, fn ->
          on_device = Enum.map(inputs, &Nx.backend_copy(&1, {Accel.Nx.Backend, device: device}))
          actual = Nx.Defn.jit_apply(fun, on_device, compiler: compiler)
          assert Accel.Test.Fallbacks.received() == [], "#{inspect(compiler)} fell back"
          {compiler, expected, actual}
        end)
      end
    end

    defp close(expected, actual, tolerance) do
      [expected, actual]
      |> Enum.map(fn c ->
        [c] |> Nx.Defn.Composite.flatten_list() |> Enum.map(&Nx.backend_copy(&1, Nx.BinaryBackend))
      end)
      |> Enum.zip_with(fn [e, a] ->
        diff = Nx.subtract(a, e) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
        scale = e |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number() |> max(1.0)
        assert diff <= tolerance * scale, "differs by #{diff} at scale #{scale}"
      end)
    end

    for device <- Accel.Test.Devices.nx() do
      describe "on #{device}" do
        @describetag Accel.Test.Devices.tags(device)
        @device device

        test "a CNN's training step: conv, max-pool, dropout, cross-entropy, grad, Adam" do
          Nx.default_backend(Nx.BinaryBackend)
          key = Nx.Random.key(7)
          {x, key} = normal(key, {8, 3, 12, 12}, 1.0)
          {w1, key} = normal(key, {6, 3, 3, 3}, 0.3)
          {w2, key} = normal(key, {6 * 6 * 6, 10}, 0.1)
          params = {w1, Nx.broadcast(0.0, {6}), w2, Nx.broadcast(0.0, {10})}
          zeros = params |> Tuple.to_list() |> Enum.map(&Nx.multiply(&1, 0.0)) |> List.to_tuple()
          labels = Nx.remainder(Nx.iota({8}), 10)
          step = &Models.cnn_step/7

          for {_compiler, expected, actual} <-
                run_everywhere(@device, [params, zeros, zeros, x, labels, key, 1], step) do
            close(expected, actual, 2.0e-4)
          end

          # five steps on the same batch: the loss falls
          Nx.with_default_backend({Accel.Nx.Backend, device: @device, fallback: :raise}, fn ->
            jitted = Nx.Defn.jit(step, compiler: Accel.Nx.Compiler)

            {_, _, _, losses} =
              Enum.reduce(1..5, {params, zeros, zeros, []}, fn t, {p, m, v, losses} ->
                {p, m, v, loss} = jitted.(p, m, v, x, labels, key, t)
                {p, m, v, [Nx.to_number(loss) | losses]}
              end)

            assert hd(losses) < List.last(losses), "losses #{inspect(Enum.reverse(losses))}"
          end)

          assert Accel.Test.Fallbacks.received() == []
        end

        test "a transformer block's training step: embedding take, masked attention, layer norm, GELU" do
          Nx.default_backend(Nx.BinaryBackend)
          key = Nx.Random.key(11)
          {dim, vocab, hidden} = {16, 50, 32}
          {emb, key} = normal(key, {vocab, dim}, 0.5)

          {ws, key} =
            Enum.map_reduce([{dim, dim}, {dim, dim}, {dim, dim}, {dim, dim}], key, fn s, k ->
              normal(k, s, 0.3)
            end)

          {w1, key} = normal(key, {dim, hidden}, 0.3)
          {w2, _key} = normal(key, {hidden, dim}, 0.3)
          params = List.to_tuple([emb | ws] ++ [Nx.broadcast(1.0, {dim}), Nx.broadcast(0.0, {dim}), w1, w2])
          tokens = Nx.iota({4, 10}) |> Nx.multiply(7) |> Nx.remainder(vocab)
          targets = Nx.add(tokens, 1) |> Nx.remainder(vocab)

          for {_compiler, expected, actual} <-
                run_everywhere(@device, [params, tokens, targets], &Models.transformer_step/3) do
            close(expected, actual, 2.0e-4)
          end
        end

        test "k-means: argmin and indexed_add in a while loop" do
          Nx.default_backend(Nx.BinaryBackend)
          {points, _} = normal(Nx.Random.key(3), {500, 4}, 1.0)
          centroids = points[0..4]

          for {_compiler, expected, actual} <- run_everywhere(@device, [points, centroids], &Models.kmeans/2) do
            close(expected, actual, 1.0e-4)
          end
        end

        # eigh: on Nx 0.7 the binary backend's own algorithm, ported to C++; from Nx 0.8 on, Nx's
        # composition of device operations
        test "PCA (eigh of the covariance) then k-means on the projections" do
          Nx.default_backend(Nx.BinaryBackend)
          {points, _} = normal(Nx.Random.key(4), {300, 6}, 1.0)
          points = Nx.multiply(points, Nx.tensor([5.0, 3.0, 1.0, 0.5, 0.2, 0.1]))

          for {_compiler, expected, actual} <- run_everywhere(@device, [points], &Models.pca_kmeans/1) do
            close(expected, actual, 1.0e-3)
          end
        end
      end
    end
  end
end
