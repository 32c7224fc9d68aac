// Reading and making lists of small integers without NIF calls per element. ERTS stores a list
// cell as a pointer tagged 0b01 to two words (head, tail), and an integer of at most 60 bits as an
// immediate tagged 0b1111 with the value in the bits above: the layout of every 64-bit ERTS for
// decades, but not part of the NIF API. So it is checked when the NIF loads, against terms made
// through the API (including the boundaries where integers stop being small); where it does not
// hold, read_small_ints() reads nothing and callers take the API path for every element.
#pragma once

#include <erl_nif.h>

#include <cstddef>
#include <cstdint>

namespace accel::nif {

// Checks the layout on this VM and turns the fast reader on where it holds. At load.
void check_small_int_layout(ErlNifEnv* env);
bool small_int_layout_checked();

// Reads the elements of `list` (a proper list, at least `count` long: the caller has measured it)
// while they are small integers, at most `count`, into out[0..); returns how many, and leaves
// `list` at the first cell not read. Returns 0 when the layout check failed.
size_t read_small_ints(ERL_NIF_TERM& list, int64_t* out, size_t count);

// Rewrites count native int64s at `words` in place as their terms: runs of small integers
// without a call each (when the layout check passed), the rest through enif_make_int64.
void int64s_to_terms(ErlNifEnv* env, uint64_t* words, size_t count);

}  // namespace accel::nif
