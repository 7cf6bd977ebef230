// Typed errors. Library code never exits or aborts: every failure is one of these, with a
// message that says what was wrong and what to do about it.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace tandem {

// Base of every tandem error; catch this to handle them all.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An argument is out of its domain (null, empty where not allowed, bad leading dimension, ...).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// Operand shapes do not agree.
class ShapeMismatch : public Error {
 public:
  using Error::Error;
};

// Operand element types do not agree, or an op does not take that type.
class DTypeMismatch : public Error {
 public:
  using Error::Error;
};

// A buffer belongs to another backend than the op runs on.
class DeviceMismatch : public Error {
 public:
  using Error::Error;
};

// The backend lacks a tier, dtype or capability; the message lists what it has.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// An allocation could not be satisfied. The allocator stays usable afterwards.
class OutOfMemory : public Error {
 public:
  OutOfMemory(std::size_t bytes_requested, std::size_t bytes_free, const std::string& backend);
  std::size_t bytes_requested() const { return bytes_requested_; }
  std::size_t bytes_free() const { return bytes_free_; }
  const std::string& backend() const { return backend_; }

 private:
  std::size_t bytes_requested_;
  std::size_t bytes_free_;
  std::string backend_;
};

// A backend cannot be used here: not built in, no device, no driver, or an unknown name.
class BackendUnavailable : public Error {
 public:
  using Error::Error;
};

// The device or its runtime failed; the message carries the runtime's text and the kernel name.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// Input data is malformed; the message names the file, the line or offset, and what was expected.
class DataError : public Error {
 public:
  using Error::Error;
};

// A file cannot be opened, read or written; the message names the path and the system's reason.
// A DataError, so code that handles bad input handles an unreadable file too.
class IoError : public DataError {
 public:
  using DataError::DataError;
};

}  // namespace tandem
