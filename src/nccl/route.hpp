// Where an NCCL call goes: to weft as it is, to weft as bytes, to weft after a local
// pre-multiplication (PreMulSum), to the real NCCL named by WEFT_NCCL_FALLBACK, or nowhere
// (an error). Pure functions of the call's collective, type and operator, so that every
// rank decides alike and the unit tests can check the table without a GPU.
#pragma once

#include <cstddef>
#include <string>

#include "ir/datatype.hpp"
#include "util/error.hpp"

namespace weft::nccl {

/// The operations of NCCL's API that move data.
enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter, Send, Recv };

const char* coll_name(Coll c);
/// True for the collectives that combine values (AllReduce, Reduce, ReduceScatter).
bool reduces(Coll c);

/// Bytes per element of an ncclDataType_t value (fp8 types included); 0 for an unknown type.
size_t type_size(int nccl_type);
/// "float32", "float8e4m3", ...; "type N" for an unknown value.
std::string type_name(int nccl_type);
/// "sum", "prod", "max", "min", "avg", "premulsum"; "op N" otherwise.
std::string op_name(int nccl_op);

/// NCCL's first value for operators made by ncclRedOpCreatePreMulSum.
constexpr int kFirstUserOp = 5;
/// NCCL's type values beyond weft's: 0..9 are weft's DataType (ir/datatype.hpp), and NCCL's
/// operators 0..4 weft's RedOp.
constexpr int kFloat8e4m3 = 10, kFloat8e5m2 = 11, kNumTypes = 12;
static_assert(kNumDataTypes == kFloat8e4m3 && kNumRedOps == kFirstUserOp);

struct Route {
  enum class Kind {
    Weft,       ///< weft runs it with weft_type / weft_op
    PreMulSum,  ///< weft scales the input locally, then sums (weft_type, weft_op = Sum)
    Fallback,   ///< the real NCCL runs it
  };
  Kind kind = Kind::Weft;
  int weft_type = 0;
  int weft_op = 0;
  /// Why weft does not run it ("fp8 reduction", ...): the kind logged once per process and
  /// the reason in the error when no fallback is configured.
  std::string fallback_kind;
};

/// Decides the route of collective `c` on `nccl_type` with `nccl_op` (ignored for
/// collectives that do not reduce). `user_op_type` is the type an operator made by
/// ncclRedOpCreatePreMulSum was made for, or -1 when `nccl_op` names no such operator.
/// Throws weft::Error(InvalidArgument) for an unknown type or operator, or an operator used
/// with another type than its own.
Route route(Coll c, int nccl_type, int nccl_op, int user_op_type);

/// The ncclResult_t value for a weft::ErrorCode: 0..7 are shared; a timeout (a peer that
/// stopped answering) is ncclRemoteError; malformed inputs are ncclInvalidArgument; a plan
/// that fails verification is ncclInternalError.
int to_nccl_result(ErrorCode code);

/// NCCL's string for a result code ("unhandled cuda error", ...).
const char* result_string(int nccl_result);

}  // namespace weft::nccl
