defmodule Accel.Kernel.Magic do
  @moduledoc false
  # Magic numbers for signed 64-bit division by a divisor that is the same for every element of a
  # call (Hacker's Delight, 2nd ed., figure 10-1): a quotient is then a multiply-high, an add, two
  # shifts (kernels/user.h, accel_div_magic), where a 64-bit divide costs tens of cycles on a CPU
  # and a long software routine on a GPU.

  import Bitwise

  @two63 0x8000000000000000
  @mask 0xFFFFFFFFFFFFFFFF

  @doc """
  {m, s, adj} for divisor d (|d| >= 2; {0, 0, 0} otherwise, where the kernel divides plainly):
  q = (mulhi(m, n) + adj * n) >>> s, plus 1 when negative, is trunc(n / d).

      iex> Accel.Kernel.Magic.signed(7)
      {5270498306774157605, 1, 0}
  """
  def signed(d) when is_integer(d) and d in [-1, 0, 1], do: {0, 0, 0}

  def signed(d) when is_integer(d) do
    ad = abs(d)
    t = @two63 + if(d < 0, do: 1, else: 0)
    anc = t - 1 - rem(t, ad)
    {p, q2} = search(63, div(@two63, anc), rem(@two63, anc), div(@two63, ad), rem(@two63, ad), anc, ad)
    m = q2 + 1 &&& @mask
    m = if d < 0, do: -m &&& @mask, else: m
    m = if m >= @two63, do: m - 0x10000000000000000, else: m
    adj = if(d > 0 and m < 0, do: 1, else: if(d < 0 and m > 0, do: -1, else: 0))
    {m, p - 64, adj}
  end

  defp search(p, q1, r1, q2, r2, anc, ad) do
    p = p + 1
    {q1, r1} = step(q1, r1, anc)
    {q2, r2} = step(q2, r2, ad)
    delta = ad - r2
    if q1 < delta or (q1 == delta and r1 == 0), do: search(p, q1, r1, q2, r2, anc, ad), else: {p, q2}
  end

  defp step(q, r, d) do
    {q, r} = {2 * q, 2 * r}
    if r >= d, do: {q + 1, r - d}, else: {q, r}
  end

  @doc "The quotient as the kernel computes it from the magic numbers (for tests)."
  def quotient(n, d) when d in [-1, 0, 1], do: div(n, d)

  def quotient(n, d) do
    {m, s, adj} = signed(d)
    q = (m * n) >>> 64
    q = wrap(q + adj * n)
    q = q >>> s
    if q < 0, do: q + 1, else: q
  end

  defp wrap(x) do
    x = x &&& @mask
    if x >= @two63, do: x - 0x10000000000000000, else: x
  end
end
