// The ResCCLang syntax tree, laid out for a fast tree-walking evaluator: expressions and
// statements live in flat vectors and refer to each other by index, and every identifier
// is resolved at parse time to a variable slot (an index into the evaluator's value array),
// so that no string is looked up while the program runs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft::resccl {

enum class ExprOp : uint8_t { Int, Var, Neg, Add, Sub, Mul, Div, Mod };

/// One expression node. Int: `value` is the constant; Var: `value` is the slot; Neg: `lhs`
/// is the operand; binary operators: `lhs` and `rhs`. (line, column) is the literal, the
/// name or the operator, which is where an evaluation error points.
struct Expr {
  ExprOp op = ExprOp::Int;
  int32_t lhs = -1;
  int32_t rhs = -1;
  int64_t value = 0;
  int32_t line = 0;
  int32_t column = 0;
};

enum class StmtKind : uint8_t { Assign, For, Transfer, Expect };

/// Which buffer a transfer names: `data` is the unified DataBuffer of the paper, mapped to
/// an IR buffer by the collective (see docs/resccllang.md).
enum class BufferName : uint8_t { Data, Input, Output, Scratch };

/// One statement.
///   Assign:   slot = args[0]
///   For:      for slot in range(args[0..nargs)): body
///   Transfer: transfer(args[0] src, args[1] dst, args[2] step, args[3] chunk, op,
///                      dstChunk=dst_chunk, count=count, srcBuf=src_buf, dstBuf=dst_buf)
///   Expect:   expect(args[0] dstRank, args[1] dstChunk, args[2] srcRank, args[3] srcChunk)
/// Absent expressions are -1. (line, column) is the statement's first token.
struct Stmt {
  StmtKind kind = StmtKind::Assign;
  int32_t line = 0;
  int32_t column = 0;
  int32_t slot = -1;
  int32_t nargs = 0;
  int32_t args[4] = {-1, -1, -1, -1};
  int32_t dst_chunk = -1;
  int32_t count = -1;
  TransferOp op = TransferOp::Copy;
  BufferName src_buf = BufferName::Data;
  BufferName dst_buf = BufferName::Data;
  std::vector<int32_t> body;  ///< For: the statements of the loop body, in order
};

/// One `Name=value` of the header. An integer value is an expression (`expr`, an index
/// into Program::exprs) over the parameters written before it; resccl_header evaluates it
/// after the command line's overrides are applied.
struct HeaderParam {
  std::string name;
  bool is_string = false;
  int32_t expr = -1;      ///< integer parameters: the value's expression
  std::string str_value;  ///< string parameters: the value
  int32_t line = 0;       ///< of the name
  int32_t column = 0;
};

/// A parsed program: its header, its statements and the names of its variable slots.
struct Program {
  int32_t header_line = 1;  ///< where `ResCCLAlgo` is written
  int32_t header_column = 1;
  std::vector<HeaderParam> params;  ///< in the order written
  std::vector<Expr> exprs;
  std::vector<Stmt> stmts;
  std::vector<int32_t> body;        ///< the top-level statements, in order
  std::vector<std::string> slot_names;
  std::unordered_map<std::string, int32_t> slots;  ///< name -> slot

  /// The slot of `name`, created if new.
  int32_t intern(std::string_view name) {
    auto it = slots.find(std::string(name));
    if (it != slots.end()) return it->second;
    int32_t slot = static_cast<int32_t>(slot_names.size());
    slot_names.emplace_back(name);
    slots.emplace(std::string(name), slot);
    return slot;
  }
};

}  // namespace weft::resccl
