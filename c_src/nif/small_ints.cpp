// The fast list reader and its load-time check (see small_ints.hpp).
#include "nif/small_ints.hpp"

#include <atomic>
#include <cstring>
#include <vector>

namespace accel::nif {
namespace {

std::atomic<bool> g_layout_ok{false};

constexpr uint64_t kListTag = 0x1, kListMask = 0x3;    // TAG_PRIMARY_LIST
constexpr uint64_t kSmallTag = 0xF, kSmallMask = 0xF;  // _TAG_IMMED1_SMALL
constexpr int kSmallShift = 4;                         // _TAG_IMMED1_SIZE
constexpr int64_t kSmallMax = (int64_t{1} << 59) - 1, kSmallMin = -(int64_t{1} << 59);  // 60 bits

size_t read_raw(ERL_NIF_TERM& list, int64_t* out, size_t count) {
  uint64_t t = static_cast<uint64_t>(list);
  size_t n = 0;
  while (n < count && (t & kListMask) == kListTag) {
    const uint64_t* cell = reinterpret_cast<const uint64_t*>(t - kListTag);
    const uint64_t head = cell[0];
    if ((head & kSmallMask) != kSmallTag) break;
    out[n++] = static_cast<int64_t>(head) >> kSmallShift;  // arithmetic shift: the sign comes back
    t = cell[1];
  }
  list = static_cast<ERL_NIF_TERM>(t);
  return n;
}

size_t write_raw(uint64_t* words, size_t count) {
  size_t n = 0;
  for (; n < count; ++n) {
    const int64_t v = static_cast<int64_t>(words[n]);
    if (v < kSmallMin || v > kSmallMax) break;
    words[n] = (static_cast<uint64_t>(v) << kSmallShift) | kSmallTag;
  }
  return n;
}

}  // namespace

void check_small_int_layout(ErlNifEnv* env) {
  static_assert(sizeof(ERL_NIF_TERM) == sizeof(uint64_t), "a 64-bit VM");
  // Small at both ends of the 60-bit range, then the first values that are not (bignums), where
  // the reader must stop; the API says which are which.
  const int64_t values[] = {0, 1, -1, 42, -42, 6700417, INT32_MAX, INT32_MIN, kSmallMax, kSmallMin, kSmallMax + 1};
  const size_t n = sizeof values / sizeof values[0];
  std::vector<ERL_NIF_TERM> terms;
  for (int64_t v : values) terms.push_back(enif_make_int64(env, v));
  const ERL_NIF_TERM list = enif_make_list_from_array(env, terms.data(), static_cast<unsigned>(n));
  // Before reading through any pointer: the immediates and the list's tag are as expected.
  bool tags = (static_cast<uint64_t>(list) & kListMask) == kListTag;
  for (size_t i = 0; i + 1 < n; ++i)
    tags = tags && (terms[i] & kSmallMask) == kSmallTag && static_cast<int64_t>(terms[i]) >> kSmallShift == values[i];
  tags = tags && (terms[n - 1] & kSmallMask) != kSmallTag;
  for (size_t i = 0; i + 1 < n; ++i) {  // and making them: the API's terms, bit for bit
    uint64_t word = static_cast<uint64_t>(values[i]);
    tags = tags && write_raw(&word, 1) == 1 && word == static_cast<uint64_t>(terms[i]);
  }
  uint64_t big = static_cast<uint64_t>(values[n - 1]);
  tags = tags && write_raw(&big, 1) == 0;
  if (!tags) {
    g_layout_ok.store(false, std::memory_order_relaxed);
    return;
  }
  ERL_NIF_TERM rest = list;
  int64_t read[sizeof values / sizeof values[0]] = {};
  const size_t got = read_raw(rest, read, n);
  bool ok = got == n - 1 && std::memcmp(read, values, (n - 1) * sizeof(int64_t)) == 0;
  // The reader stopped on the bignum's cell, which the API must see as the list's last one.
  ERL_NIF_TERM head, tail;
  ErlNifSInt64 last = 0;
  ok = ok && enif_get_list_cell(env, rest, &head, &tail) && enif_get_int64(env, head, &last) &&
       last == values[n - 1] && enif_is_empty_list(env, tail);
  // And a list that is not of integers stops it at once.
  ERL_NIF_TERM other = enif_make_list1(env, enif_make_double(env, 1.0));
  ok = ok && read_raw(other, read, 1) == 0;
  g_layout_ok.store(ok, std::memory_order_relaxed);
}

bool small_int_layout_checked() { return g_layout_ok.load(std::memory_order_relaxed); }

void int64s_to_terms(ErlNifEnv* env, uint64_t* words, size_t count) {
  const bool fast = g_layout_ok.load(std::memory_order_relaxed);
  for (size_t i = 0; i < count; ++i) {
    if (fast) i += write_raw(words + i, count - i);
    if (i == count) break;
    words[i] = static_cast<uint64_t>(enif_make_int64(env, static_cast<int64_t>(words[i])));
  }
}

size_t read_small_ints(ERL_NIF_TERM& list, int64_t* out, size_t count) {
  return g_layout_ok.load(std::memory_order_relaxed) ? read_raw(list, out, count) : 0;
}

}  // namespace accel::nif
