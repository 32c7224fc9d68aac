// Atoms and exception helpers (see nif_util.hpp).
#include "nif/nif_util.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace accel::nif {

Atoms atoms;

void make_atoms(ErlNifEnv* env) {
  auto a = [env](const char* name) { return enif_make_atom(env, name); };
  atoms.ok = a("ok");
  atoms.true_ = a("true");
  atoms.false_ = a("false");
  atoms.nil = a("nil");
  atoms.list = a("list");
  atoms.binary = a("binary");
  atoms.auto_ = a("auto");
  atoms.cpu = a("cpu");
  atoms.opencl = a("opencl");
  atoms.cuda = a("cuda");
  atoms.accel_queued = a("accel_queued");
  atoms.accel_busy = a("accel_busy");
  atoms.retry = a("retry");
  atoms.raise = a("raise");
  atoms.struct_ = a("__struct__");
  atoms.exception = a("__exception__");
  atoms.message = a("message");
  atoms.reason = a("reason");
  atoms.first = a("first");
  atoms.last = a("last");
  atoms.step = a("step");
  atoms.range_module = a("Elixir.Range");
  atoms.argument_error_module = a("Elixir.ArgumentError");
  atoms.accel_error_module = a("Elixir.Accel.Error");
  atoms.none = a("none");
  atoms.record = a("record");
  atoms.mismatch = a("mismatch");
}

ERL_NIF_TERM make_string(ErlNifEnv* env, std::string_view text) {
  ERL_NIF_TERM term;
  unsigned char* data = enif_make_new_binary(env, text.size(), &term);
  if (!text.empty()) std::memcpy(data, text.data(), text.size());
  return term;
}

namespace {

ERL_NIF_TERM argument_error(ErlNifEnv* env, std::string_view message) {
  ERL_NIF_TERM keys[] = {atoms.struct_, atoms.exception, atoms.message};
  ERL_NIF_TERM values[] = {atoms.argument_error_module, atoms.true_, make_string(env, message)};
  ERL_NIF_TERM exception;
  enif_make_map_from_arrays(env, keys, values, 3, &exception);
  return exception;
}

ERL_NIF_TERM accel_error(ErlNifEnv* env, std::string_view reason, std::string_view message) {
  ERL_NIF_TERM keys[] = {atoms.struct_, atoms.exception, atoms.reason, atoms.message};
  ERL_NIF_TERM values[] = {atoms.accel_error_module, atoms.true_,
                           enif_make_atom_len(env, reason.data(), reason.size()), make_string(env, message)};
  ERL_NIF_TERM exception;
  enif_make_map_from_arrays(env, keys, values, 4, &exception);
  return exception;
}

}  // namespace

ERL_NIF_TERM raise_argument_error(ErlNifEnv* env, std::string_view message) {
  return enif_raise_exception(env, argument_error(env, message));
}

ERL_NIF_TERM raise_accel_error(ErlNifEnv* env, std::string_view reason, std::string_view message) {
  return enif_raise_exception(env, accel_error(env, reason, message));
}

ERL_NIF_TERM current_exception_term(ErlNifEnv* env) noexcept {
  try {
    throw;
  } catch (const std::invalid_argument& e) {  // accel::ArgumentError and its kin
    return argument_error(env, e.what());
  } catch (const Error& e) {
    return accel_error(env, e.reason(), e.what());
  } catch (const std::bad_alloc&) {
    return accel_error(env, "out_of_memory", "out of memory");
  } catch (const std::exception& e) {
    return accel_error(env, "internal", e.what());
  } catch (...) {
    return accel_error(env, "internal", "unknown C++ exception");
  }
}

std::string describe_term(ErlNifEnv* env, ERL_NIF_TERM term, size_t max) {
  std::vector<char> buf(max + 4);
  if (enif_is_atom(env, term)) {  // Elixir spelling: :foo, nil, Foo.Bar
    if (enif_get_atom(env, term, buf.data(), static_cast<unsigned>(buf.size()), ERL_NIF_LATIN1) > 0) {
      const std::string name(buf.data());
      if (name == "nil" || name == "true" || name == "false") return name;
      if (name.rfind("Elixir.", 0) == 0) return name.substr(7);
      return ":" + name;
    }
  }
  double d;
  if (enif_get_double(env, term, &d)) {  // shortest text that reads back as the same double
    char text[32];
    for (int digits = 15; digits <= 17; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, d);
      if (std::strtod(text, nullptr) == d) break;
    }
    std::string s(text);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";  // Elixir writes 3.0, not 3
    return s;
  }
  // %T prints Erlang syntax; truncation keeps error messages short for huge terms.
  int n = enif_snprintf(buf.data(), buf.size(), "%T", term);
  std::string text(buf.data());
  if (n >= 0 && static_cast<size_t>(n) >= buf.size()) text = text.substr(0, max) + "...";
  return text;
}

}  // namespace accel::nif
