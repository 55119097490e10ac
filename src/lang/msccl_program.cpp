#include "lang/msccl_program.hpp"

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "util/error.hpp"

namespace weft {

std::string_view msccl_step_type_name(MscclStepType t) {
  switch (t) {
    case MscclStepType::Send: return "s";
    case MscclStepType::Recv: return "r";
    case MscclStepType::RecvCopySend: return "rcs";
    case MscclStepType::RecvReduceSend: return "rrs";
    case MscclStepType::RecvReduceCopy: return "rrc";
    case MscclStepType::RecvReduceCopySend: return "rrcs";
    case MscclStepType::Copy: return "cpy";
    case MscclStepType::Reduce: return "re";
    case MscclStepType::Nop: return "nop";
  }
  return "?";
}

static std::optional<MscclStepType> step_type_from_name(std::string_view s) {
  for (MscclStepType t : {MscclStepType::Send, MscclStepType::Recv, MscclStepType::RecvCopySend,
                          MscclStepType::RecvReduceSend, MscclStepType::RecvReduceCopy,
                          MscclStepType::RecvReduceCopySend, MscclStepType::Copy, MscclStepType::Reduce,
                          MscclStepType::Nop})
    if (msccl_step_type_name(t) == s) return t;
  return std::nullopt;
}

bool msccl_step_sends(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceSend ||
         t == MscclStepType::RecvReduceCopySend;
}

bool msccl_step_receives(MscclStepType t) {
  return t == MscclStepType::Recv || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceSend ||
         t == MscclStepType::RecvReduceCopy || t == MscclStepType::RecvReduceCopySend;
}

bool msccl_step_reads_src(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::RecvReduceSend || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvReduceCopySend || t == MscclStepType::Copy || t == MscclStepType::Reduce;
}

bool msccl_step_writes_dst(MscclStepType t) {
  return t == MscclStepType::Recv || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvReduceCopySend || t == MscclStepType::Copy || t == MscclStepType::Reduce;
}

xml::Position attribute_position(const xml::Element* e, std::string_view name) {
  if (!e) return {};
  if (const xml::Attribute* a = e->find(name)) return a->value_pos;
  return e->pos;
}

void fail_at_attribute(const xml::Document& doc, const xml::Element* e, std::string_view attribute,
                       const std::string& sentence) {
  if (!e) xml::fail_at(doc, {}, sentence);
  if (attribute.empty()) xml::fail_at(doc, e->pos, "<" + e->name + ">: " + sentence);
  xml::fail_at(doc, attribute_position(e, attribute), "<" + e->name + "> attribute " + std::string(attribute) + ": " + sentence);
}

namespace {

// Bounds that keep a hostile file from asking for absurd amounts of memory later on.
constexpr int64_t kMaxGpus = 1 << 16;
constexpr int64_t kMaxChunks = 1 << 24;
constexpr int64_t kMaxChannels = 1 << 10;
constexpr int64_t kMaxThreadBlocks = 1 << 16;

std::string_view buffer_letter(Buffer b) {
  switch (b) {
    case Buffer::Input: return "i";
    case Buffer::Output: return "o";
    case Buffer::Scratch: return "s";
  }
  return "?";
}

// Reads the attributes of one element, failing at the attribute (or element) at fault.
class Attrs {
 public:
  Attrs(const xml::Document& doc, const xml::Element& e) : doc_(doc), e_(e) {}

  [[noreturn]] void fail_attr(std::string_view name, const std::string& sentence) const {
    xml::fail_at(doc_, attribute_position(&e_, name), "<" + e_.name + "> attribute " + std::string(name) + ": " + sentence);
  }

  const xml::Attribute* get(std::string_view name, bool required) const {
    const xml::Attribute* a = e_.find(name);
    if (!a && required) xml::fail_at(doc_, e_.pos, "<" + e_.name + "> lacks the required attribute " + std::string(name));
    return a;
  }

  std::string str(std::string_view name) const { return get(name, true)->value; }

  int64_t integer(std::string_view name, int64_t lo, int64_t hi) const {
    return parse_int(*get(name, true), lo, hi);
  }

  std::optional<int64_t> opt_integer(std::string_view name, int64_t lo, int64_t hi) const {
    const xml::Attribute* a = get(name, false);
    if (!a) return std::nullopt;
    return parse_int(*a, lo, hi);
  }

  bool flag(std::string_view name) const { return integer(name, 0, 1) == 1; }

  Buffer buffer(std::string_view name) const {
    std::string v = str(name);
    if (v == "i") return Buffer::Input;
    if (v == "o") return Buffer::Output;
    if (v == "s") return Buffer::Scratch;
    fail_attr(name, "\"" + v + "\" is not a buffer (i for input, o for output, s for scratch)");
  }

 private:
  const xml::Document& doc_;
  const xml::Element& e_;

  int64_t parse_int(const xml::Attribute& a, int64_t lo, int64_t hi) const {
    std::string_view v = a.value;
    size_t k = 0;
    bool neg = false;
    if (k < v.size() && v[k] == '-') {
      neg = true;
      ++k;
    }
    if (k == v.size()) fail_attr(a.name, "\"" + a.value + "\" is not an integer");
    int64_t x = 0;
    for (; k < v.size(); ++k) {
      char c = v[k];
      if (c < '0' || c > '9') fail_attr(a.name, "\"" + a.value + "\" is not an integer");
      if (x > (INT64_MAX - (c - '0')) / 10) fail_attr(a.name, a.value + " is too large");
      x = x * 10 + (c - '0');
    }
    if (neg) x = -x;
    if (x < lo || x > hi)
      fail_attr(a.name, a.value + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
};

// Character data between MSCCL's elements is meaningless; a stray word is almost surely a
// damaged file, so it is an error rather than ignored.
void check_no_text(const xml::Document& doc, const xml::Element& e) {
  if (e.text_pos.line != 0) xml::fail_at(doc, e.text_pos, "unexpected text inside <" + e.name + ">");
}

void check_children(const xml::Document& doc, const xml::Element& e, std::string_view child) {
  check_no_text(doc, e);
  for (const xml::Element& c : e.children)
    if (c.name != child)
      xml::fail_at(doc, c.pos, "unexpected element <" + c.name + "> inside <" + e.name + ">; expected <" +
                                   std::string(child) + ">");
}

std::string file_stem(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

void read_step(const xml::Document& doc, const xml::Element& e, int32_t position, MscclStep& st) {
  check_no_text(doc, e);
  if (!e.children.empty()) xml::fail_at(doc, e.children[0].pos, "<step> holds no elements");
  Attrs a(doc, e);
  st.elem = &e;
  st.s = static_cast<int32_t>(a.integer("s", 0, kMaxChunks));
  if (st.s != position)
    a.fail_attr("s", "this is step " + std::to_string(position) + " of its thread block, but s=" + std::to_string(st.s) +
                         "; steps must be numbered 0, 1, 2, ... in order, as dependencies refer to them by position");
  std::string type = a.str("type");
  auto t = step_type_from_name(type);
  if (!t) a.fail_attr("type", "\"" + type + "\" is not a step type (s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)");
  st.type = *t;
  st.srcbuf = a.buffer("srcbuf");
  st.srcoff = static_cast<int32_t>(a.integer("srcoff", -1, kMaxChunks));
  st.dstbuf = a.buffer("dstbuf");
  st.dstoff = static_cast<int32_t>(a.integer("dstoff", -1, kMaxChunks));
  st.cnt = static_cast<int32_t>(a.integer("cnt", st.type == MscclStepType::Nop ? -1 : 1, kMaxChunks));
  st.depid = static_cast<int32_t>(a.integer("depid", -1, kMaxThreadBlocks));
  st.deps = static_cast<int32_t>(a.integer("deps", -1, kMaxChunks));
  st.hasdep = a.flag("hasdep");
  if (st.depid < 0 && st.deps != -1)
    a.fail_attr("deps", "deps=" + std::to_string(st.deps) + " names a step, but depid=-1 names no thread block to wait for");
  if (st.depid >= 0 && st.deps < 0)
    a.fail_attr("deps", "depid=" + std::to_string(st.depid) + " names a thread block to wait for, so deps must name one of its steps");
}

void check_range(const Attrs& a, const MscclGpu& gpu, std::string_view buf_attr, std::string_view off_attr,
                 Buffer b, int32_t off, int32_t cnt) {
  int32_t size = b == Buffer::Input ? gpu.i_chunks : b == Buffer::Output ? gpu.o_chunks : gpu.s_chunks;
  std::string_view count_attr = b == Buffer::Input ? "i_chunks" : b == Buffer::Output ? "o_chunks" : "s_chunks";
  if (off < 0) a.fail_attr(off_attr, "this step uses its " + std::string(buf_attr) + ", so the offset must not be -1");
  if (static_cast<int64_t>(off) + cnt > size)
    a.fail_attr(off_attr, "chunks [" + std::to_string(off) + ", " + std::to_string(static_cast<int64_t>(off) + cnt) +
                              ") (offset " + std::to_string(off) + ", cnt " + std::to_string(cnt) + ") of the " +
                              std::string(to_string(b)) + " buffer lie beyond the " + std::to_string(size) +
                              " chunks that gpu " + std::to_string(gpu.id) + " declares (" + std::string(count_attr) + ")");
}

/// The <gpu> elements by id: each id once, all of 0..ngpus-1.
std::vector<const xml::Element*> gpus_by_id(const xml::Document& doc, const MscclProgram& p) {
  const xml::Element& root = doc.root;
  std::vector<const xml::Element*> by_id(static_cast<size_t>(p.ngpus), nullptr);
  for (const xml::Element& g : root.children) {
    Attrs ga(doc, g);
    auto id = ga.integer("id", 0, INT32_MAX);
    if (id >= p.ngpus) ga.fail_attr("id", "gpu " + std::to_string(id) + " does not exist: ngpus=" + std::to_string(p.ngpus));
    if (by_id[static_cast<size_t>(id)])
      ga.fail_attr("id", "gpu " + std::to_string(id) + " is described twice (first at line " +
                             std::to_string(by_id[static_cast<size_t>(id)]->pos.line) + ")");
    by_id[static_cast<size_t>(id)] = &g;
  }
  for (int32_t r = 0; r < p.ngpus; ++r)
    if (!by_id[static_cast<size_t>(r)])
      xml::fail_at(doc, root.pos, "ngpus=" + std::to_string(p.ngpus) + " but gpu " + std::to_string(r) + " has no <gpu> element");
  return by_id;
}

/// Gpu r's thread blocks: ids 0..n-1, each once; one thread block per connection and
/// direction; their steps.
void read_thread_blocks(const xml::Document& doc, const xml::Element& ge, int32_t r, const MscclProgram& p, MscclGpu& gpu) {
  size_t ntb = ge.children.size();
  std::vector<const xml::Element*> tb_by_id(ntb, nullptr);
  for (const xml::Element& te : ge.children) {
    Attrs ta(doc, te);
    auto id = ta.integer("id", 0, kMaxThreadBlocks);
    if (static_cast<size_t>(id) >= ntb)
      ta.fail_attr("id", "gpu " + std::to_string(r) + " has " + std::to_string(ntb) +
                             " thread blocks, so their ids must be 0 to " + std::to_string(ntb - 1) + ", not " + std::to_string(id));
    if (tb_by_id[static_cast<size_t>(id)])
      ta.fail_attr("id", "thread block " + std::to_string(id) + " of gpu " + std::to_string(r) + " is described twice (first at line " +
                             std::to_string(tb_by_id[static_cast<size_t>(id)]->pos.line) + ")");
    tb_by_id[static_cast<size_t>(id)] = &te;
  }
  gpu.tbs.resize(ntb);
  std::map<std::pair<int32_t, int32_t>, int32_t> send_conn, recv_conn;  // (peer, chan) -> tb
  for (size_t k = 0; k < ntb; ++k) {
    const xml::Element& te = *tb_by_id[k];
    check_children(doc, te, "step");
    Attrs ta(doc, te);
    MscclThreadBlock& tb = gpu.tbs[k];
    tb.elem = &te;
    tb.id = static_cast<int32_t>(k);
    tb.send = static_cast<int32_t>(ta.integer("send", -1, p.ngpus - 1));
    tb.recv = static_cast<int32_t>(ta.integer("recv", -1, p.ngpus - 1));
    tb.chan = static_cast<int32_t>(ta.integer("chan", 0, p.nchannels - 1));
    if (tb.send == r) ta.fail_attr("send", "thread block " + std::to_string(k) + " of gpu " + std::to_string(r) + " sends to its own gpu");
    if (tb.recv == r) ta.fail_attr("recv", "thread block " + std::to_string(k) + " of gpu " + std::to_string(r) + " receives from its own gpu");
    // One thread block per connection (peer, channel) and direction, as MSCCL requires:
    // two blocks on one connection would interleave their data in its FIFO.
    if (tb.send >= 0) {
      auto [it, fresh] = send_conn.emplace(std::make_pair(tb.send, tb.chan), tb.id);
      if (!fresh)
        ta.fail_attr("chan", "thread blocks " + std::to_string(it->second) + " and " + std::to_string(tb.id) + " of gpu " +
                                 std::to_string(r) + " both send to gpu " + std::to_string(tb.send) + " on channel " +
                                 std::to_string(tb.chan) + "; a connection has one thread block at each end");
    }
    if (tb.recv >= 0) {
      auto [it, fresh] = recv_conn.emplace(std::make_pair(tb.recv, tb.chan), tb.id);
      if (!fresh)
        ta.fail_attr("chan", "thread blocks " + std::to_string(it->second) + " and " + std::to_string(tb.id) + " of gpu " +
                                 std::to_string(r) + " both receive from gpu " + std::to_string(tb.recv) + " on channel " +
                                 std::to_string(tb.chan) + "; a connection has one thread block at each end");
    }
    tb.steps.resize(te.children.size());
    for (size_t s = 0; s < te.children.size(); ++s) read_step(doc, te.children[s], static_cast<int32_t>(s), tb.steps[s]);
  }

}

/// Checks that need gpu r's thread blocks: peers, buffer ranges, dependency targets.
void check_thread_blocks(const xml::Document& doc, const MscclGpu& gpu, int32_t r) {
  for (const MscclThreadBlock& tb : gpu.tbs) {
    bool after_nop_dep = false;
    for (const MscclStep& st : tb.steps) {
      Attrs sa(doc, *st.elem);
      std::string what = "a '" + std::string(msccl_step_type_name(st.type)) + "' step";
      if (msccl_step_sends(st.type) && tb.send < 0)
        sa.fail_attr("type", what + " sends, but its thread block " + std::to_string(tb.id) + " has send=-1");
      if (msccl_step_receives(st.type) && tb.recv < 0)
        sa.fail_attr("type", what + " receives, but its thread block " + std::to_string(tb.id) + " has recv=-1");
      if (msccl_step_reads_src(st.type)) check_range(sa, gpu, "srcbuf", "srcoff", st.srcbuf, st.srcoff, st.cnt);
      if (msccl_step_writes_dst(st.type)) check_range(sa, gpu, "dstbuf", "dstoff", st.dstbuf, st.dstoff, st.cnt);
      if (st.depid >= 0) {
        if (static_cast<size_t>(st.depid) >= gpu.tbs.size())
          sa.fail_attr("depid", "gpu " + std::to_string(r) + " has no thread block " + std::to_string(st.depid));
        const MscclThreadBlock& dep = gpu.tbs[static_cast<size_t>(st.depid)];
        if (static_cast<size_t>(st.deps) >= dep.steps.size())
          sa.fail_attr("deps", "thread block " + std::to_string(st.depid) + " of gpu " + std::to_string(r) + " has " +
                                   std::to_string(dep.steps.size()) + " steps, so it has no step " + std::to_string(st.deps));
      }
      // MSCCL's executor drops nop steps and folds their dependencies into the next real
      // step, counting positions through those dependencies: a nop without one, or a real
      // step after such nops without one of its own, would shift every later step number.
      if (st.type == MscclStepType::Nop) {
        if (st.depid < 0)
          sa.fail_attr("depid", "a nop step must wait for something (depid >= 0); MSCCL keeps a nop only as a dependency");
        after_nop_dep = true;
      } else {
        if (after_nop_dep && st.depid < 0)
          sa.fail_attr("depid", "this step follows nop steps that carry dependencies, so MSCCL requires it to carry one too (depid >= 0)");
        after_nop_dep = false;
      }
    }
  }
}

}  // namespace

MscclProgram read_msccl_program(const xml::Document& doc) {
  const xml::Element& root = doc.root;
  if (root.name != "algo")
    xml::fail_at(doc, root.pos, "the root element is <" + root.name + ">; an MSCCL algorithm file starts with <algo>");
  check_children(doc, root, "gpu");
  Attrs a(doc, root);
  MscclProgram p;
  p.elem = &root;
  const xml::Attribute* name = a.get("name", false);
  p.name = name ? name->value : file_stem(doc.file);
  p.proto = a.str("proto");
  if (p.proto != "Simple" && p.proto != "LL" && p.proto != "LL128")
    a.fail_attr("proto", "\"" + p.proto + "\" is not a protocol (Simple, LL or LL128, spelled so)");
  p.nchannels = static_cast<int32_t>(a.integer("nchannels", 1, kMaxChannels));
  p.nchunksperloop = static_cast<int32_t>(a.integer("nchunksperloop", 1, kMaxChunks));
  p.ngpus = static_cast<int32_t>(a.integer("ngpus", 1, kMaxGpus));
  p.coll = a.str("coll");
  p.inplace = a.flag("inplace");
  p.outofplace = a.get("outofplace", false) ? a.flag("outofplace") : !p.inplace;
  if (!p.inplace && !p.outofplace)
    a.fail_attr("outofplace", "inplace=0 and outofplace=0: the algorithm would run for no buffer layout");
  p.min_bytes = a.opt_integer("minBytes", 0, INT64_MAX).value_or(0);
  p.max_bytes = a.opt_integer("maxBytes", 0, INT64_MAX).value_or(INT64_MAX);
  if (p.max_bytes == 0) p.max_bytes = INT64_MAX;  // MSCCL's scheduler reads maxBytes=0 as no upper bound
  if (p.max_bytes < p.min_bytes)
    a.fail_attr("maxBytes", "maxBytes=" + std::to_string(p.max_bytes) + " is below minBytes=" + std::to_string(p.min_bytes));
  if (auto root = a.opt_integer("root", 0, p.ngpus - 1)) p.root = static_cast<int32_t>(*root);

  const std::vector<const xml::Element*> by_id = gpus_by_id(doc, p);
  p.gpus.resize(static_cast<size_t>(p.ngpus));
  for (int32_t r = 0; r < p.ngpus; ++r) {
    const xml::Element& ge = *by_id[static_cast<size_t>(r)];
    check_children(doc, ge, "tb");
    Attrs ga(doc, ge);
    MscclGpu& gpu = p.gpus[static_cast<size_t>(r)];
    gpu.elem = &ge;
    gpu.id = r;
    gpu.i_chunks = static_cast<int32_t>(ga.integer("i_chunks", 0, kMaxChunks));
    gpu.o_chunks = static_cast<int32_t>(ga.integer("o_chunks", 0, kMaxChunks));
    gpu.s_chunks = static_cast<int32_t>(ga.integer("s_chunks", 0, kMaxChunks));
    read_thread_blocks(doc, ge, r, p, gpu);
    check_thread_blocks(doc, gpu, r);
  }
  return p;
}

std::string write_msccl_program(const MscclProgram& p) {
  std::string out;
  auto attr = [&](std::string_view name, const std::string& value) {
    out += ' ';
    out += name;
    out += "=\"";
    out += xml::escape(value);
    out += '"';
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  out += "<algo";
  attr("name", p.name);
  attr("proto", p.proto);
  attr("nchannels", num(p.nchannels));
  attr("nchunksperloop", num(p.nchunksperloop));
  attr("ngpus", num(p.ngpus));
  attr("coll", p.coll);
  attr("inplace", num(p.inplace ? 1 : 0));
  attr("outofplace", num(p.outofplace ? 1 : 0));
  attr("minBytes", num(p.min_bytes));
  attr("maxBytes", num(p.max_bytes));
  if (p.root >= 0) attr("root", num(p.root));
  out += ">\n";
  for (const MscclGpu& g : p.gpus) {
    out += "  <gpu";
    attr("id", num(g.id));
    attr("i_chunks", num(g.i_chunks));
    attr("o_chunks", num(g.o_chunks));
    attr("s_chunks", num(g.s_chunks));
    out += ">\n";
    for (const MscclThreadBlock& tb : g.tbs) {
      out += "    <tb";
      attr("id", num(tb.id));
      attr("send", num(tb.send));
      attr("recv", num(tb.recv));
      attr("chan", num(tb.chan));
      out += ">\n";
      for (const MscclStep& st : tb.steps) {
        out += "      <step";
        attr("s", num(st.s));
        attr("type", std::string(msccl_step_type_name(st.type)));
        attr("srcbuf", std::string(buffer_letter(st.srcbuf)));
        attr("srcoff", num(st.srcoff));
        attr("dstbuf", std::string(buffer_letter(st.dstbuf)));
        attr("dstoff", num(st.dstoff));
        attr("cnt", num(st.cnt));
        attr("depid", num(st.depid));
        attr("deps", num(st.deps));
        attr("hasdep", num(st.hasdep ? 1 : 0));
        out += "/>\n";
      }
      out += "    </tb>\n";
    }
    out += "  </gpu>\n";
  }
  out += "</algo>\n";
  return out;
}

}  // namespace weft
