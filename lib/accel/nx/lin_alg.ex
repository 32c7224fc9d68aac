if Code.ensure_loaded?(Nx) do
  defmodule Accel.Nx.LinAlg do
    @moduledoc false
    # Accel.Nx.Backend's linear algebra through LAPACK (OpenBLAS's) on the host: cholesky, qr,
    # determinant, solve (so invert) and triangular_solve, for real float results (integers and
    # f16/bf16 compute in f32 or f64, as Nx's output type says), and solve and triangular_solve of
    # complex matrices (c64 computes in c128, each result rounded once; a complex determinant is
    # Nx's composition: LAPACK's factors give other signed zeros than the doctests Nx writes;
    # on Nx 0.7 that composition's complex lu falls back). Tensors of a device are read to
    # the host, factored there and their factors written back (core/tensor_linalg.cpp). Leading
    # axes are batches. Anything else runs `otherwise`: Nx's own composition (a block's default, on
    # Nx 0.13) or Nx.BinaryBackend (Accel.Nx.Fallback).
    #
    # Only results Nx's own compositions would give: Nx differentiates a decomposition through its
    # composition, with that composition's factors, so a factor in other signs (LAPACK's Q, or
    # eigenvectors and singular vectors, unique only up to sign, or LU with other pivots) would
    # make every gradient through it silently wrong. Q comes in Nx's signs; eigh, svd and lu stay
    # Nx's compositions (Nx 0.7's eigh and lu: the binary backend's own algorithms, ported).

    alias Accel.Nx.{Complex, Storage}
    alias Accel.Tensor, as: AT
    alias Nx.Tensor, as: T

    def cholesky(%T{} = out, %T{shape: shape} = t, otherwise) do
      {batch, n, n} = matrices(shape)
      decompose(:cholesky, [out], t, [batch, n, n], 1.0e-10, otherwise)
    end

    # Q m x k and R k x n; Q m x m beyond k columns (mode: :complete of a tall matrix) is not unique
    # even in its signs, so Nx's composition makes it.
    def qr({%T{shape: q_shape}, _r} = out, %T{shape: shape} = t, opts, otherwise) do
      {batch, m, n} = matrices(shape)

      if elem(q_shape, tuple_size(q_shape) - 1) == min(m, n),
        do: decompose(:qr, Tuple.to_list(out), t, [batch, m, n], opts[:eps] || 1.0e-10, otherwise),
        else: otherwise.()
    end

    # Nx 0.7's eigh callback: the binary backend's own algorithm (Hessenberg reduction, unshifted QR
    # iterations), operation for operation in C++, so its results to the bit; Nx 0.7's tests are
    # written against them. (Nx 0.13 calls a block instead, whose composition runs on the device.)
    def eigh({%T{}, %T{}} = out, %T{shape: shape} = t, opts, otherwise) do
      {batch, n, n} = matrices(shape)
      max_iter = opts[:max_iter] || 1_000

      unless is_integer(max_iter),
        do: raise(ArgumentError, "eigh: max_iter must be an integer, got: #{inspect(max_iter)}")

      # (as Elixir's 1..max_iter counts)
      iterations = if max_iter >= 1, do: max_iter, else: 2 - max_iter
      decompose(:eigh_nx07, Tuple.to_list(out), t, [batch, n, n, iterations], opts[:eps] || 1.0e-4, otherwise)
    end

    # Nx 0.7's lu callback: the binary backend's own loops, ported the same way (P in the input's
    # type, L and U floats); integer matrices compute in f64, as exactly as Elixir's integers up to
    # 2^53.
    def lu({%T{}, %T{type: type}, %T{}} = out, %T{shape: shape} = t, opts, otherwise) do
      {batch, n, n} = matrices(shape)

      compute = if Storage.compute?([t.type]) and Storage.float?(t.type), do: type, else: {:f, 64}

      decompose(:lu_nx07, Tuple.to_list(out), t, [batch, n, n], opts[:eps] || 1.0e-10, otherwise, compute)
    end

    def determinant(%T{} = out, %T{shape: shape} = t, otherwise) do
      {batch, n, n} = matrices(shape)
      decompose(:determinant, [out], t, [batch, n, n], 0.0, otherwise)
    end

    # A X = B, B a vector or a matrix per batch
    def solve(%T{} = out, %T{shape: a_shape} = a, %T{shape: b_shape} = b, otherwise) do
      {batch, n, n} = matrices(a_shape)

      cols =
        if tuple_size(b_shape) == tuple_size(a_shape), do: elem(b_shape, tuple_size(b_shape) - 1), else: 1

      solved(out, a, b, [batch, n, n, cols], [true, true, false, false], otherwise)
    end

    def triangular_solve(%T{} = out, %T{shape: a_shape} = a, %T{shape: b_shape} = b, opts, otherwise) do
      {batch, n, n} = matrices(a_shape)
      left = Keyword.get(opts, :left_side, true)

      # (Nx 0.13's transform_a: :conjugate, the matrix conjugated first: a real one is itself)
      a =
        if opts[:transform_a] == :conjugate and match?({:c, _}, a.type),
          do: Accel.Nx.Backend.conjugate(a, a),
          else: a

      {rows, cols} =
        cond do
          tuple_size(b_shape) == tuple_size(a_shape) ->
            {elem(b_shape, tuple_size(b_shape) - 2), elem(b_shape, tuple_size(b_shape) - 1)}

          left ->
            {n, 1}

          true ->
            {1, n}
        end

      flags = [
        left,
        Keyword.get(opts, :lower, true),
        Keyword.get(opts, :transform_a, :none) == :transpose,
        true
      ]

      solved(out, a, b, [batch, n, rows, cols], flags, otherwise)
    end

    # {batch, rows, columns} of a tensor whose last two axes are matrices
    defp matrices(shape) do
      dims = Tuple.to_list(shape)
      [m, n] = Enum.take(dims, -2)
      {dims |> Enum.drop(-2) |> Enum.product(), m, n}
    end

    # `type`: the type the matrices compute in (the first factor's, unless given)
    defp decompose(op, outs, %T{type: in_type} = t, dims, eps, otherwise, type \\ nil) do
      type = type || hd(outs).type

      # (complex types have no compute type: their matrices run `otherwise`)
      if Storage.compute?([in_type | Enum.map(outs, & &1.type)]) do
        [a] = Storage.operands!(op, [t])
        a = Storage.cast(a, type)

        factors =
          AT.allocate(fn ref -> Accel.NIF.tensor_decompose(op, a.ref, dims, eps / 1, ref) end)
          |> Enum.zip_with(outs, fn term, %T{shape: shape, type: type} = o ->
            factor = term |> AT.wrap({Nx.size(shape)}, a.type) |> AT.reshape(shape) |> Storage.cast(type)
            Storage.wrap(factor, o, Storage.auto?([t]))
          end)

        if length(outs) == 1, do: hd(factors), else: List.to_tuple(factors)
      else
        otherwise.()
      end
    end

    # Complex matrices and right sides of the result's type: their (re, im) pairs, solved in
    # complex f64 arithmetic: LAPACK's zgetrf/zgetrs (transposes plain, as Nx's), triangular
    # systems as Nx.BinaryBackend solves them, formula for formula (its bits, signed zeros too).
    defp solved(
           %T{type: {:c, _} = type} = out,
           %T{type: type} = a,
           %T{type: type} = b,
           dims,
           flags,
           _otherwise
         ) do
      [x, y] = Storage.operands!(:solve, [a, b]) |> Enum.map(&Complex.pairs(&1, type))
      size = Nx.size(out.shape)
      result = AT.new({size, 2}, x.type, &Accel.NIF.tensor_solve(x.ref, y.ref, dims, flags ++ [true], &1))
      Storage.wrap(Complex.from_pairs(result, type, out.shape), out, Storage.auto?([a, b]))
    end

    defp solved(%T{type: type} = out, %T{} = a, %T{} = b, dims, flags, otherwise) do
      if Storage.compute?([type, a.type, b.type]) do
        [x, y] = Storage.operands!(:solve, [a, b]) |> Enum.map(&Storage.cast(&1, type))

        result =
          AT.new(
            {Nx.size(out.shape)},
            x.type,
            &Accel.NIF.tensor_solve(x.ref, y.ref, dims, flags ++ [false], &1)
          )

        Storage.wrap(AT.reshape(result, out.shape), out, Storage.auto?([a, b]))
      else
        otherwise.()
      end
    end
  end
end
