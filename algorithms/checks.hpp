// Argument checks shared by the public ops: each throws the typed error a user can act on.
#pragma once

#include <initializer_list>
#include <string>

#include "tandem/buffer.hpp"
#include "tandem/ops.hpp"

namespace tandem::checks {

// The buffer is a real handle; returns its backend.
Backend& backend_of(const Buffer& b, const char* op, const char* role);
// Every buffer belongs to `backend`, else DeviceMismatch naming both.
void same_backend(Backend& backend, const Buffer& b, const char* op, const char* role);
// dtype is one of `allowed`, else DTypeMismatch listing them.
void dtype_in(DType t, std::initializer_list<DType> allowed, const char* op, const char* role);
void same_dtype(DType expected, const Buffer& b, const char* op, const char* role);
void same_size(std::size_t expected, const Buffer& b, const char* op, const char* role);
// ld >= cols, rows/cols >= 0, and the buffer holds the matrix.
void matrix_fits(const Matrix& m, const char* op, const char* role);
// An output may be the very same view as an input (in place) or not touch it at all; a partial
// overlap would make the result depend on the order elements are processed in.
void same_or_disjoint(const Buffer& out, const Buffer& in, const char* op, const char* out_role, const char* in_role);
// Two views that must not share memory (matmul output vs inputs, transpose).
void no_overlap(const Buffer& out, const Buffer& in, const char* op, const char* out_role, const char* in_role);

// Every i32 label (read back on queue q) is a class in [0, classes), else InvalidArgument naming the row.
void classes_in_range(const Buffer& labels, std::int64_t classes, Queue q, const char* op);

// variant is automatic or one the backend keeps, else Unsupported listing them.
void variant_in(const Backend& backend, ReduceVariant variant);
void variant_in(const Backend& backend, ScanVariant variant);

std::string list_dtypes(std::initializer_list<DType> allowed);

}  // namespace tandem::checks
