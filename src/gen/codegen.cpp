#include "gen/codegen.hpp"

#include <sstream>

#include "ir/datatype.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::gen {

namespace {

/// The element type's name in the generated source (cstdint and the fp16/bf16 types of the
/// embedded headers).
const char* source_type_name(DataType t) {
  switch (t) {
    case DataType::Int8: return "int8_t";
    case DataType::Uint8: return "uint8_t";
    case DataType::Int32: return "int32_t";
    case DataType::Uint32: return "uint32_t";
    case DataType::Int64: return "int64_t";
    case DataType::Uint64: return "uint64_t";
    case DataType::Float16: return "__half";
    case DataType::Float32: return "float";
    case DataType::Float64: return "double";
    case DataType::Bfloat16: return "__nv_bfloat16";
  }
  return "?";
}

/// A call of weft::gen::run (gen/gen_kernel.cuh) for slot `gs` over micro-batches [k0, k1).
void emit_slot(std::ostringstream& o, const exec::DevSlot& s, int32_t gs, const char* k0, const char* k1,
               const char* indent) {
  o << indent << "if (!weft::gen::run<T, kProto, kOp, " << int(s.prim) << ", " << int(s.src_buf) << ", "
    << int(s.dst_buf) << ", " << int(s.flags) << ">(iv, sh, " << s.send_conn << ", " << s.recv_conn << ", "
    << s.src_index << ", " << s.dst_index << ", " << s.count << ", " << s.instance << ", " << s.instances << ", "
    << s.dep_begin << ", " << s.ndeps << ", " << gs << ", " << k0 << ", " << k1 << ", par)) return;\n";
}

}  // namespace

bool executor_is_gen() {
  const std::string v = config::get_string("WEFT_EXECUTOR");
  if (v == "gen") return true;
  if (v == "interp" || v.empty()) return false;
  fail(ErrorCode::InvalidArgument, "WEFT_EXECUTOR='" + v + "' is neither interp nor gen");
}

KernelSpec canonical_spec(const LoweredPlan& lp, KernelSpec spec) {
  spec.op = combining_op(spec.op);
  if (!lp.has_reduction) {
    spec.op = kOpSum;
    // The type of the same size that stands for every one (1 byte uint8, 2 float16, 4
    // uint32, 8 uint64); an unknown type stays, for generate_source to refuse.
    if (valid_dtype(spec.dtype)) spec.dtype = static_cast<int>(move_type(static_cast<DataType>(spec.dtype)));
  }
  return spec;
}

std::string generate_source(const LoweredPlan& lp, const KernelSpec& spec) {
  if (spec.rank < 0 || static_cast<size_t>(spec.rank) >= lp.ranks.size())
    fail(ErrorCode::InvalidArgument, "generated kernel: rank " + std::to_string(spec.rank) + " is outside the plan's " +
                                         std::to_string(lp.ranks.size()) + " ranks");
  if (!valid_dtype(spec.dtype))
    fail(ErrorCode::InvalidArgument, "generated kernel: unknown data type " + std::to_string(spec.dtype));
  if (!valid_op(spec.op))
    fail(ErrorCode::InvalidArgument, "generated kernel: unknown reduction " + std::to_string(spec.op));
  if (spec.protocol != exec::kSimple && spec.protocol != exec::kLL)
    fail(ErrorCode::InvalidArgument,
         "generated kernel: protocol " + std::to_string(spec.protocol) + " is neither Simple nor LL");
  const LoweredRank& lr = lp.ranks[static_cast<size_t>(spec.rank)];
  const bool task = lp.plan.execution != ExecutionModel::Algorithm;
  std::ostringstream o;
  o << "// weft generated kernel: plan '" << lp.plan.algorithm << "', rank " << spec.rank << " of " << lp.ranks.size()
    << ", " << source_type_name(static_cast<DataType>(spec.dtype)) << ", " << op_name(spec.op) << ", "
    << (spec.protocol == exec::kLL ? "LL" : "Simple") << ", " << (task ? "task" : "algorithm") << " level\n"
    << "#include \"gen/gen_kernel.cuh\"\n\n"
    // The launch passes the host's ExecArgs: the layouts must agree.
    << "static_assert(sizeof(weft::exec::ExecArgs) == " << sizeof(exec::ExecArgs)
    << " && alignof(weft::exec::ExecArgs) == " << alignof(exec::ExecArgs)
    << " && sizeof(weft::exec::Geometry) == " << sizeof(exec::Geometry)
    << " && sizeof(weft::exec::ChannelHandle) == " << sizeof(exec::ChannelHandle)
    << ", \"the generated kernel's ExecArgs differ from the host's\");\n\n"
    << "extern \"C\" __global__ void __launch_bounds__(weft::exec::kMaxThreads)\n"
    << kKernelName << "(const __grid_constant__ weft::exec::ExecArgs a) {\n"
    << "  using T = " << source_type_name(static_cast<DataType>(spec.dtype)) << ";\n"
    << "  constexpr int kProto = " << int(spec.protocol) << ";\n"
    << "  constexpr int kOp = " << combining_op(spec.op) << ";\n"
    << "  __shared__ weft::exec::BlockShared sh;\n"
    << "  weft::exec::Invocation iv;\n"
    << "  uint32_t par = 0;\n"
    << "  const uint32_t nmb = a.geo.nmb;\n"
    << "  switch (blockIdx.x) {\n";
  for (size_t t = 0; t < lr.tbs.size(); ++t) {
    const exec::DevTB& tb = lr.tbs[t];
    if (tb.nslots == 0) continue;  // the interpreter's block returns at once too
    int32_t base_slot = -1;        // the interpreter's choice: the first slot others wait on
    for (int32_t i = 0; i < tb.nslots && base_slot < 0; ++i)
      if (lr.slots[static_cast<size_t>(tb.slot_begin + i)].flags & exec::kHasDependents) base_slot = tb.slot_begin + i;
    o << "    case " << t << ": {\n"
      << "      if (!weft::gen::begin_block(a, iv, sh, " << t << ", " << tb.slot_begin << ", " << base_slot << ", "
      << tb.conn_begin << ", " << tb.nconns << ")) return;\n";
    if (task) {
      for (int32_t i = 0; i < tb.nslots; ++i)
        emit_slot(o, lr.slots[static_cast<size_t>(tb.slot_begin + i)], tb.slot_begin + i, "0", "nmb", "      ");
    } else {
      // exec::InvocationOrder: every slot over a window of a.mb_window micro-batches, then the next window.
      o << "      const uint32_t win = weft::exec::order_window(false, nmb, a.mb_window);\n"
        << "      for (uint32_t k = 0; k < nmb; k += win) {\n"
        << "        const uint32_t k1 = nmb - k > win ? k + win : nmb;\n";
      for (int32_t i = 0; i < tb.nslots; ++i)
        emit_slot(o, lr.slots[static_cast<size_t>(tb.slot_begin + i)], tb.slot_begin + i, "k", "k1", "        ");
      o << "      }\n";
    }
    o << "      return;\n    }\n";
  }
  o << "    default: return;\n  }\n}\n";
  return o.str();
}

}  // namespace weft::gen
