#include "nccl/route.hpp"

namespace weft::nccl {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllToAll: return "AlltoAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::Send: return "Send";
    case Coll::Recv: return "Recv";
  }
  return "?";
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

size_t type_size(int t) {
  if (t == kFloat8e4m3 || t == kFloat8e5m2) return 1;
  return dtype_bytes(t);  // NCCL's 0..9 are weft's types (ir/datatype.hpp)
}

std::string type_name(int t) {
  if (valid_dtype(t)) return dtype_name(t);
  if (t == kFloat8e4m3) return "float8e4m3";
  if (t == kFloat8e5m2) return "float8e5m2";
  return "type " + std::to_string(t);
}

std::string op_name(int op) {
  if (valid_op(op)) return ::weft::op_name(op);  // NCCL's 0..4 are weft's operators
  if (op >= kFirstUserOp) return "premulsum (op " + std::to_string(op) + ")";
  return "op " + std::to_string(op);
}

Route route(Coll c, int type, int op, int user_op_type) {
  if (type_size(type) == 0)
    fail(ErrorCode::InvalidArgument, std::string(coll_name(c)) + ": unknown data type " + std::to_string(type) +
                                         " (NCCL's types are 0 to 11)");
  const bool fp8 = type == kFloat8e4m3 || type == kFloat8e5m2;
  Route r;
  if (!reduces(c)) {
    // Moving data needs only the element size: fp8 travels as bytes.
    r.weft_type = fp8 ? static_cast<int>(DataType::Uint8) : type;
    r.weft_op = kOpSum;
    return r;
  }
  if (op < 0 || (op >= kFirstUserOp && user_op_type < 0))
    fail(ErrorCode::InvalidArgument, std::string(coll_name(c)) + ": unknown reduction operator " +
                                         std::to_string(op) + " (not built in, not made by ncclRedOpCreatePreMulSum "
                                         "on this communicator, or destroyed)");
  if (op >= kFirstUserOp && user_op_type != type)
    fail(ErrorCode::InvalidArgument, std::string(coll_name(c)) + ": operator " + std::to_string(op) +
                                         " was made for " + type_name(user_op_type) + " but is used with " +
                                         type_name(type));
  if (fp8) {
    r.kind = Route::Kind::Fallback;
    r.fallback_kind = std::string(coll_name(c)) + " of " + type_name(type) + " (" +
                      (op >= kFirstUserOp ? std::string("premulsum") : op_name(op)) + ")";
    return r;
  }
  r.weft_type = type;
  if (op >= kFirstUserOp) {
    r.kind = Route::Kind::PreMulSum;
    r.weft_op = kOpSum;
  } else {
    r.weft_op = op;
  }
  return r;
}

int to_nccl_result(ErrorCode code) {
  switch (code) {
    case ErrorCode::Success: return 0;
    case ErrorCode::UnhandledCuda: return 1;
    case ErrorCode::System: return 2;
    case ErrorCode::Internal: return 3;
    case ErrorCode::InvalidArgument: return 4;
    case ErrorCode::InvalidUsage: return 5;
    case ErrorCode::Remote: return 6;
    case ErrorCode::InProgress: return 7;
    case ErrorCode::Timeout: return 6;
    case ErrorCode::Parse: return 4;
    case ErrorCode::Verify: return 3;
  }
  return 3;
}

const char* result_string(int r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error (run with WEFT_LOG_LEVEL=INFO for details)";
    case 2: return "unhandled system error (run with WEFT_LOG_LEVEL=INFO for details)";
    case 3: return "internal error - please report this issue";
    case 4: return "invalid argument (run with WEFT_LOG_LEVEL=WARN for details)";
    case 5: return "invalid usage (run with WEFT_LOG_LEVEL=WARN for details)";
    case 6: return "remote process exited or there was a network error";
    case 7: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

}  // namespace weft::nccl
