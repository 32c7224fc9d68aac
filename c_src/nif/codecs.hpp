// Term <-> buffer conversions for signed 64-bit integers: lists, binaries and ranges in; lists and
// binaries out. Every check on the *shape* of a term lives here and names the offending element.
#pragma once

#include <erl_nif.h>

#include <cstddef>
#include <cstdint>

#include "core/host_buffer.hpp"
#include "core/int64_source.hpp"

namespace accel::nif {

enum class InputKind { List, Binary, Range };

// A decoded input. For lists the integers are copied into `storage`; binaries are viewed in place
// (valid only during this NIF call); ranges are never materialised.
struct Int64Input {
  InputKind kind = InputKind::List;
  Int64Source source;
  HostBuffer storage;
};

// The most list elements a NIF converts on the calling scheduler (~25 ns each: a few hundred
// microseconds); longer lists are converted on a dirty CPU scheduler. Every list codec uses it.
inline constexpr size_t kInlineListElements = 10000;

// How many elements `term` holds, without decoding them: O(1) for binaries and ranges; lists are
// walked for at most `limit` cells (returns limit + 1 when longer). Raises nothing: malformed input
// is reported by decode_int64_input, which runs next.
size_t count_int64_input(ErlNifEnv* env, ERL_NIF_TERM term, size_t limit);

// Throws ArgumentError naming the index and value of the first bad element, an improper tail, a
// binary whose size is not a multiple of 8, or a term that is none of the three kinds.
Int64Input decode_int64_input(ErlNifEnv* env, ERL_NIF_TERM term);

// An integer argument in the signed 64-bit range, or ArgumentError naming it.
int64_t decode_int64_arg(ErlNifEnv* env, ERL_NIF_TERM term, const char* name);

// A new binary of `bytes` bytes for the caller to fill through *data. Large ones are Accel-owned,
// huge-page-backed memory handed to the VM as a resource binary (no copy, no 4 KiB faults).
ERL_NIF_TERM make_output_binary(ErlNifEnv* env, size_t bytes, unsigned char** data);

// The first `bytes` bytes of `buffer` as a binary: small ones copied into a VM binary, large ones
// handed to the VM as they are (the binary owns the buffer from then on).
ERL_NIF_TERM make_owned_binary(ErlNifEnv* env, HostBuffer&& buffer, size_t bytes);

// Throws Accel.Error(:out_of_memory) for a binary output larger than this machine's memory.
void check_binary_output(size_t bytes);

// Throws Accel.Error(:out_of_memory) for a list output that could never fit in this machine's memory.
void check_list_output(size_t count);

// The `count` native-endian int64s in `buffer` as a list; `buffer` is reused as scratch space.
ERL_NIF_TERM encode_int64_list(ErlNifEnv* env, HostBuffer& buffer, size_t count);

// Opens the resource type behind make_output_binary; call from load/upgrade.
bool open_codec_resources(ErlNifEnv* env);

}  // namespace accel::nif
