// The two kinds of failure the core reports. The NIF boundary (nif/nif_util.hpp) turns them into
// Elixir: ArgumentError for bad input, Accel.Error (with a reason atom) for failures of the machine.
#pragma once

#include <stdexcept>
#include <string>

namespace accel {

// Bad input from the caller: the message names the offending option or element.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// An index read from a tensor (gather, scatter) outside its axis. The message is fixed: the caller,
// which knows the axes by their names, finds the first such index and says which.
class IndexOutOfBounds : public ArgumentError {
 public:
  IndexOutOfBounds() : ArgumentError("an index is out of bounds") {}
};

// A failure the caller did not cause and may act on: out of memory, a backend that is unavailable.
class Error : public std::runtime_error {
 public:
  Error(std::string reason, const std::string& message)
      : std::runtime_error(message), reason_(std::move(reason)) {}
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;  // becomes an atom: keep it to [a-z_]
};

}  // namespace accel
