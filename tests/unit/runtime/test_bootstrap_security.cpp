// Bootstrap security over loopback: the hash against published vectors, peers without the
// secret refused, hostile roots and ranks (that hold the secret) refused field by field,
// duplicate ranks, silent connections, and the private file rendezvous.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "scoped_env.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/bootstrap_wire.hpp"
#include "bootstrap/peer_check.hpp"
#include "bootstrap/rendezvous.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft {
namespace {

using test::EnvVar;
using test::read_text;
using test::TempDir;

using Clock = std::chrono::steady_clock;
using bootwire::Claim;
using bootwire::ClaimKind;
using bootwire::ReplyHeader;

net::Address loopback() { return net::resolve("127.0.0.1", 0); }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string hex(const auth::Digest& d) {
  std::string s;
  char b[3];
  for (uint8_t x : d) {
    std::snprintf(b, sizeof(b), "%02x", x);
    s += b;
  }
  return s;
}

struct Outcome {
  bool ok = false;
  ErrorCode code = ErrorCode::Success;
  std::string message;
};

template <typename Fn>
Outcome outcome(Fn fn) {
  Outcome o;
  try {
    fn();
    o.ok = true;
  } catch (const Error& e) {
    o.code = e.code();
    o.message = e.what();
  }
  return o;
}

/// Runs fn(i) on `n` threads.
template <typename Fn>
std::vector<Outcome> run_threads(int n, Fn fn) {
  std::vector<Outcome> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { out[static_cast<size_t>(i)] = outcome([&] { fn(i); }); });
  for (auto& t : threads) t.join();
  return out;
}


int mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

TEST(BootstrapAuth, Sha256AndHmacMatchPublishedVectors) {
  EXPECT_EQ(hex(auth::sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(auth::sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char* two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(auth::sha256(two, std::strlen(two))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
  std::string k1(20, '\x0b');
  EXPECT_EQ(hex(auth::Hmac(k1.data(), k1.size()).update("Hi There", 8).finish()),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const char* q = "what do ya want for nothing?";
  EXPECT_EQ(hex(auth::Hmac("Jefe", 4).update(q, std::strlen(q)).finish()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string k6(131, '\xaa');
  const char* m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(hex(auth::Hmac(k6.data(), k6.size()).update(m6, std::strlen(m6)).finish()),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5};
  EXPECT_TRUE(auth::equal_ct(a, a, 4));
  EXPECT_FALSE(auth::equal_ct(a, b, 4));
}

TEST(BootstrapAuth, SecretsFromHexAreCheckedWithoutEchoingThem) {
  EXPECT_NO_THROW(auth::secret_from_hex(std::string(32, 'a'), "S"));
  EXPECT_THROW(auth::secret_from_hex(std::string(30, 'a'), "S"), Error);  // under 128 bits
  try {
    auth::secret_from_hex(std::string(31, 'a') + "zz", "S");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_EQ(std::string(e.what()).find("aaaa"), std::string::npos) << e.what();
  }
}

TEST(BootstrapAuth, UniqueIdsCarryFreshSecretsThatRoundTrip) {
  UniqueId a = start_bootstrap_root(loopback(), 0, 1), b = start_bootstrap_root(loopback(), 0, 1);
  EXPECT_NE(a.secret, b.secret);
  EXPECT_NE(a.secret, auth::Secret{});
  char buf[UniqueId::kBytes];
  a.serialize(buf);
  UniqueId back = UniqueId::deserialize(buf);
  EXPECT_EQ(back.secret, a.secret);
  EXPECT_EQ(back.magic, a.magic);
  EXPECT_EQ(back.root.str(), a.root.str());
  // An id without a secret (an old or hand-made one) is refused before connecting.
  back.secret = {};
  EXPECT_THROW(Bootstrap::join(back, 0, 1, 1), Error);
}

TEST(BootstrapAuth, WrongSecretIsRefusedLoggedAndSeesNothing) {
  TempDir dir("weft-boot-test");
  const std::string log = dir.path + "/log";
  std::string text;
  {
    EnvVar lf("WEFT_LOG_FILE", log.c_str()), ll("WEFT_LOG_LEVEL", "WARN");
    log::reload();
    UniqueId id = start_bootstrap_root(loopback(), 0, 5);
    UniqueId forged = id;  // the public magic and address, a secret of its own
    forged.secret = auth::random_secret();
    Outcome bad = outcome([&] { Bootstrap::join(forged, 1, 2, 3); });
    EXPECT_FALSE(bad.ok);
    EXPECT_EQ(bad.code, ErrorCode::Remote);
    EXPECT_NE(bad.message.find("did not prove that it holds the communicator's secret"), std::string::npos)
        << bad.message;

    // A raw client that answers the challenge with a guess gets nothing but a closed socket.
    net::Socket s = net::Socket::connect(id.root, net::deadline_in(3), "root");
    bootwire::Open o{};
    std::memcpy(o.tag, bootwire::kTag, sizeof(o.tag));
    o.protocol = bootwire::kProtocol;
    o.magic = id.magic;
    s.send_all(&o, sizeof(o), net::deadline_in(3), "root");
    bootwire::Answer a{};
    s.recv_all(&a, sizeof(a), net::deadline_in(3), "root");
    EXPECT_EQ(a.status, 0);
    bootwire::SignedClaim sc{};
    sc.claim.kind = static_cast<uint32_t>(ClaimKind::Root);
    sc.claim.version = bootstrap_version();
    sc.claim.rank = 1;
    sc.claim.nranks = 2;
    sc.claim.listen = loopback();
    sc.claim.listen.port = 1;
    s.send_all(&sc, sizeof(sc), net::deadline_in(3), "root");
    char byte;
    try {
      s.recv_all(&byte, 1, net::deadline_in(3), "root");
      FAIL() << "the root sent data to a peer without the secret";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Remote) << e.what();  // closed, not a timeout
    }

    // The real ranks still form the communicator.
    auto out = run_threads(2, [&](int r) { Bootstrap::join(id, r, 2, 5)->barrier(5); });
    EXPECT_TRUE(out[0].ok) << out[0].message;
    EXPECT_TRUE(out[1].ok) << out[1].message;
    text = read_text(log);
  }
  log::reload();
  EXPECT_NE(text.find("refused the connection from 127.0.0.1:"), std::string::npos) << text;
  EXPECT_NE(text.find("does not hold the communicator's secret"), std::string::npos) << text;
}

TEST(BootstrapAuth, RecomputedMagicWithoutTheSecretIsRefused) {
  // The environment init's magic is a hash of public values (address, size, job): an
  // outsider can compute it. With WEFT_BOOTSTRAP_SECRET it still cannot join.
  TempDir dir("weft-boot-test");
  net::Socket probe = net::Socket::listen(loopback());
  const int port = probe.local_address().port;
  probe.close();
  const std::string secret(64, 'c');
  EnvVar a("WEFT_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str()),
      d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()), s("WEFT_BOOTSTRAP_SECRET", secret.c_str()),
      t("WEFT_BOOTSTRAP_TIMEOUT", "5");
  UniqueId id0 = rendezvous::unique_id_from_env(0, 2, "job");
  UniqueId id1 = rendezvous::unique_id_from_env(1, 2, "job");
  EXPECT_EQ(id0.magic, id1.magic);
  EXPECT_EQ(id0.secret, id1.secret);
  UniqueId outsider = id1;  // what an outsider can recompute
  outsider.secret = auth::secret_from_hex(std::string(64, 'd'), "guess");
  Outcome bad = outcome([&] { Bootstrap::join(outsider, 1, 2, 2); });
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("did not prove"), std::string::npos) << bad.message;
  std::vector<UniqueId> ids = {id0, id1};
  auto out = run_threads(2, [&](int r) { Bootstrap::join(ids[static_cast<size_t>(r)], r, 2, 5)->barrier(5); });
  EXPECT_TRUE(out[0].ok) << out[0].message;
  EXPECT_TRUE(out[1].ok) << out[1].message;
  EXPECT_EQ(mode_of(dir.path + "/weft-" + std::to_string(geteuid())), -1);  // no file needed
}

/// A rank played by hand: it holds the secret and claims what the test says.
Outcome hostile_rank(const UniqueId& id, Claim c) {
  return outcome([&] {
    net::Socket s = net::Socket::connect(id.root, net::deadline_in(3), "root");
    bootwire::client_handshake(s, id.magic, id.secret, c, net::deadline_in(3), "root");
    ReplyHeader h{};
    s.recv_all(&h, sizeof(h), net::deadline_in(5), "root");
    if (h.status != 0) fail(static_cast<ErrorCode>(h.status), "refused");
  });
}

TEST(BootstrapFields, OutOfRangeRankIsRefusedWithoutACrash) {
  for (int bad : {2, -1, 1 << 30}) {
    UniqueId id = start_bootstrap_root(loopback(), 0, 5);
    Claim c{};
    c.kind = static_cast<uint32_t>(ClaimKind::Root);
    c.version = bootstrap_version();
    c.rank = bad;
    c.nranks = 2;
    c.listen = loopback();
    c.listen.port = 9;
    Outcome h = hostile_rank(id, c);
    EXPECT_FALSE(h.ok);
    // The communicator it tried to enter fails with an error naming the claim, at once.
    auto t0 = Clock::now();
    Outcome r0 = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
    EXPECT_FALSE(r0.ok);
    EXPECT_NE(r0.message.find("claimed rank " + std::to_string(bad) + ", outside 0..1"), std::string::npos)
        << r0.message;
    EXPECT_LT(since(t0), 3.0);
  }
}

TEST(BootstrapFields, InvalidListenAddressIsRefused) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 5);
  Claim c{};
  c.kind = static_cast<uint32_t>(ClaimKind::Root);
  c.version = bootstrap_version();
  c.rank = 1;
  c.nranks = 2;
  c.listen.family = 12345;
  EXPECT_FALSE(hostile_rank(id, c).ok);
  Outcome r0 = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
  EXPECT_NE(r0.message.find("invalid listen address"), std::string::npos) << r0.message;
}

/// A root played by hand: it holds the secret, lets one rank through the handshake, then
/// answers with `reply` (and a valid proof over what it sends, unless `bad_proof`).
void hostile_root(const net::Socket& listener, const UniqueId& id, ReplyHeader h, const std::string& message,
                  bool bad_proof = false, bool send_body = true) {
  bootwire::Acceptor acc(listener, id.magic, id.secret, "test root");
  std::optional<bootwire::Session> s = acc.next(net::deadline_in(5));
  ASSERT_TRUE(s);
  auto dl = net::deadline_in(5);
  try {  // the rank may refuse (and close) after the header
    s->sock.send_all(&h, sizeof(h), dl, "rank");
    if (send_body) {
      if (!message.empty()) s->sock.send_all(message.data(), message.size(), dl, "rank");
      auth::Digest p = bootwire::reply_proof(id.secret, s->nonces, h, message, nullptr, 0);
      if (bad_proof) p[0] ^= 1;
      s->sock.send_all(p.data(), p.size(), dl, "rank");
    }
  } catch (const Error&) {
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

UniqueId hostile_root_id(const net::Socket& listener) {
  UniqueId id;
  id.magic = 77;
  id.version = bootstrap_version();
  id.root = listener.local_address();
  id.secret = auth::random_secret();
  return id;
}

TEST(BootstrapFields, OversizeMessageIsRefusedBeforeAllocating) {
  net::Socket listener = net::Socket::listen(loopback());
  UniqueId id = hostile_root_id(listener);
  std::thread root([&] { hostile_root(listener, id, ReplyHeader{4, 0xffffffffu}, "", false, false); });
  auto t0 = Clock::now();
  Outcome o = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
  root.join();
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.code, ErrorCode::Remote);
  EXPECT_NE(o.message.find("message_bytes is 4294967295, above the limit of 4096"), std::string::npos) << o.message;
  EXPECT_LT(since(t0), 2.0);  // no 4 GiB zero-fill
}

TEST(BootstrapFields, UnknownStatusCodeIsRefused) {
  net::Socket listener = net::Socket::listen(loopback());
  UniqueId id = hostile_root_id(listener);
  std::thread root([&] { hostile_root(listener, id, ReplyHeader{999, 2}, "no"); });
  Outcome o = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
  root.join();
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.code, ErrorCode::Remote);
  EXPECT_NE(o.message.find("status code 999, which is no weft error code"), std::string::npos) << o.message;
}

TEST(BootstrapFields, ReplyWithoutAValidProofIsRefused) {
  net::Socket listener = net::Socket::listen(loopback());
  UniqueId id = hostile_root_id(listener);
  std::thread root([&] { hostile_root(listener, id, ReplyHeader{5, 3}, "bad", true); });
  Outcome o = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
  root.join();
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.message.find("carries no valid proof"), std::string::npos) << o.message;
}

TEST(BootstrapFields, RootWithoutTheSecretIsRefusedBeforeTheRankSaysAnything) {
  // Someone else listens where the rank expects its root (a squatted port).
  net::Socket listener = net::Socket::listen(loopback());
  UniqueId id = hostile_root_id(listener);
  UniqueId theirs = id;
  theirs.secret = auth::random_secret();
  std::thread root([&] {
    bootwire::Acceptor acc(listener, id.magic, theirs.secret, "squatter");
    std::optional<bootwire::Session> s = acc.next(net::deadline_in(1.5));
    EXPECT_FALSE(s) << "the rank sent its claim to a root that cannot prove the secret";
  });
  Outcome o = outcome([&] { Bootstrap::join(id, 0, 2, 5); });
  root.join();
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.message.find("did not prove"), std::string::npos) << o.message;
}

TEST(BootstrapRanks, DuplicateRankIsAnErrorForBothClaimantsAtOnce) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  auto t0 = Clock::now();
  // Ranks 0, 1 and a second 1 of 3 (rank 2 never comes): nobody waits for the deadline.
  const int rank_of[3] = {0, 1, 1};
  auto out = run_threads(3, [&](int i) { Bootstrap::join(id, rank_of[i], 3, 10); });
  EXPECT_LT(since(t0), 5.0);
  for (const Outcome& o : out) {
    EXPECT_FALSE(o.ok);
    EXPECT_EQ(o.code, ErrorCode::InvalidArgument) << o.message;
    EXPECT_NE(o.message.find("two processes claimed rank 1"), std::string::npos) << o.message;
  }
}

TEST(BootstrapRanks, SilentConnectionsDoNotDelayAGoodJoin) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 30);
  std::vector<net::Socket> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(net::Socket::connect(id.root, net::deadline_in(3), "root"));
  // One that sends half an Open and stops.
  net::Socket half = net::Socket::connect(id.root, net::deadline_in(3), "root");
  half.send_all(bootwire::kTag, 4, net::deadline_in(3), "root");
  auto t0 = Clock::now();
  auto out = run_threads(3, [&](int r) { Bootstrap::join(id, r, 3, 30)->barrier(5); });
  for (const Outcome& o : out) EXPECT_TRUE(o.ok) << o.message;
  EXPECT_LT(since(t0), 3.0);  // serially, 21 silent connections cost 10 s each
}

TEST(BootstrapRanks, ClosedNeighbourIsReportedByTheLivenessHook) {
  UniqueId id = start_bootstrap_root(loopback(), 0, 10);
  std::vector<std::unique_ptr<Bootstrap>> b(3);
  auto out = run_threads(3, [&](int r) { b[static_cast<size_t>(r)] = Bootstrap::join(id, r, 3, 10); });
  for (const Outcome& o : out) ASSERT_TRUE(o.ok) << o.message;
  for (auto& x : b) EXPECT_TRUE(x->closed_neighbours().empty());
  b[1]->close();  // as if rank 1's process died
  std::vector<int> seen0, seen2;
  for (int i = 0; i < 100 && (seen0.empty() || seen2.empty()); ++i) {
    seen0 = b[0]->closed_neighbours();
    seen2 = b[2]->closed_neighbours();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(seen0, std::vector<int>{1});
  EXPECT_EQ(seen2, std::vector<int>{1});
}

TEST(PeerCheck, RankAndArenaFieldsAreBoundedBeforeUse) {
  EXPECT_NO_THROW(peer_check::field_in_range(0, 1, "rank", 1, 1, 1));
  Outcome o = outcome([] { peer_check::field_in_range(0, 1, "rank", 1 << 30, 1, 1); });
  EXPECT_EQ(o.code, ErrorCode::Remote);
  EXPECT_NE(o.message.find("rank 0: rank 1 sent rank = 1073741824, outside 1..1"), std::string::npos) << o.message;
  std::vector<char> arena(64);
  peer_check::register_arena(arena.data(), arena.size());
  EXPECT_NO_THROW(peer_check::check_local_arena(0, 1, reinterpret_cast<uintptr_t>(arena.data()), 64));
  EXPECT_THROW(peer_check::check_local_arena(0, 1, reinterpret_cast<uintptr_t>(arena.data()) + 8, 64), Error);
  EXPECT_THROW(peer_check::check_local_arena(0, 1, reinterpret_cast<uintptr_t>(arena.data()), 128), Error);
  peer_check::unregister_arena(arena.data());
  EXPECT_THROW(peer_check::check_local_arena(0, 1, reinterpret_cast<uintptr_t>(arena.data()), 64), Error);
}

// ---- the file rendezvous of weftCommInitFromEnv ----

std::string only_file_in(const std::string& dir) {
  std::string out;
  FILE* p = popen(("ls -A '" + dir + "'").c_str(), "r");
  char line[512];
  while (p && fgets(line, sizeof(line), p)) out += line;
  if (p) pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(Rendezvous, FileIsPrivateExclusiveAndRemovedOnceUp) {
  TempDir dir("weft-boot-test");
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()), a("WEFT_BOOTSTRAP_ADDR", nullptr), m("MASTER_ADDR", nullptr),
      s("WEFT_BOOTSTRAP_SECRET", nullptr), t("WEFT_BOOTSTRAP_TIMEOUT", "10");
  const std::string priv = dir.path + "/weft-" + std::to_string(geteuid());
  UniqueId id0 = rendezvous::unique_id_from_env(0, 2, "job-42");
  EXPECT_EQ(mode_of(priv), 0700);
  const std::string name = only_file_in(priv);
  ASSERT_FALSE(name.empty());
  EXPECT_EQ(mode_of(priv + "/" + name), 0600) << name;
  UniqueId id1 = rendezvous::unique_id_from_env(1, 2, "job-42");
  EXPECT_EQ(id1.secret, id0.secret);
  std::vector<UniqueId> ids = {id0, id1};
  auto out = run_threads(2, [&](int r) { Bootstrap::join(ids[static_cast<size_t>(r)], r, 2, 10)->barrier(5); });
  EXPECT_TRUE(out[0].ok) << out[0].message;
  EXPECT_TRUE(out[1].ok) << out[1].message;
  EXPECT_EQ(only_file_in(priv), "");  // removed once every rank joined
}

TEST(Rendezvous, SymlinkAtThePathIsRefused) {
  TempDir dir("weft-boot-test");
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str());
  const std::string priv = rendezvous::private_dir();
  const std::string target = dir.path + "/target", path = priv + "/id";
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  UniqueId id;
  id.magic = 1;
  id.secret = auth::random_secret();
  Outcome o = outcome([&] { rendezvous::publish(path, id); });
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.code, ErrorCode::InvalidUsage);
  EXPECT_NE(o.message.find("symbolic link"), std::string::npos) << o.message;
  EXPECT_EQ(mode_of(target), -1) << "the id was written through the link";
  Outcome r = outcome([&] { rendezvous::read_published(path); });
  EXPECT_NE(r.message.find("symbolic link"), std::string::npos) << r.message;
  // A private directory that is a link, or open to others, is refused too.
  ::unlink(path.c_str());
  ASSERT_EQ(::chmod(priv.c_str(), 0755), 0);
  Outcome open_dir = outcome([] { rendezvous::private_dir(); });
  EXPECT_NE(open_dir.message.find("not a private directory"), std::string::npos) << open_dir.message;
  ASSERT_EQ(::rmdir(priv.c_str()), 0);
  ASSERT_EQ(::symlink(dir.path.c_str(), priv.c_str()), 0);
  Outcome link_dir = outcome([] { rendezvous::private_dir(); });
  EXPECT_NE(link_dir.message.find("symbolic link"), std::string::npos) << link_dir.message;
}

TEST(Rendezvous, FileOpenToOthersIsRefused) {
  TempDir dir("weft-boot-test");
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str());
  const std::string path = rendezvous::private_dir() + "/id";
  UniqueId id;
  id.magic = 1;
  id.secret = auth::random_secret();
  rendezvous::publish(path, id);
  EXPECT_EQ(mode_of(path), 0600);
  ASSERT_TRUE(rendezvous::read_published(path));
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_THROW(rendezvous::read_published(path), Error);
}

TEST(Rendezvous, LeftoverFileFromAnEarlierRunIsReplacedAndReRead) {
  TempDir dir("weft-boot-test");
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()), a("WEFT_BOOTSTRAP_ADDR", nullptr), m("MASTER_ADDR", nullptr),
      s("WEFT_BOOTSTRAP_SECRET", nullptr), t("WEFT_BOOTSTRAP_TIMEOUT", "10");
  // An earlier run died and left its id (a dead root, another secret).
  UniqueId stale = start_bootstrap_root(loopback(), 0, 0.2);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  UniqueId probe = rendezvous::unique_id_from_env(0, 1, "job-7");  // learns the file name
  std::string name = only_file_in(rendezvous::private_dir());
  Bootstrap::join(probe, 0, 1, 5);
  rendezvous::publish(rendezvous::private_dir() + "/" + name, stale);
  // Rank 1 starts first and reads the stale id; rank 0 comes later and replaces it.
  auto t0 = Clock::now();
  auto out = run_threads(2, [&](int r) {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    UniqueId id = rendezvous::unique_id_from_env(r, 2, "job-7");
    Bootstrap::join(id, r, 2, 10)->barrier(5);
  });
  EXPECT_TRUE(out[0].ok) << out[0].message;
  EXPECT_TRUE(out[1].ok) << out[1].message;
  EXPECT_LT(since(t0), 8.0);
}

TEST(Rendezvous, AddressRendezvousBindsTheGivenAddressNotTheWildcard) {
  TempDir dir("weft-boot-test");
  net::Socket probe = net::Socket::listen(loopback());
  const int port = probe.local_address().port;
  probe.close();
  EnvVar d("WEFT_BOOTSTRAP_DIR", dir.path.c_str()), a("WEFT_BOOTSTRAP_ADDR", nullptr), m("MASTER_ADDR", "127.0.0.1"),
      p("MASTER_PORT", std::to_string(port - 1).c_str()), s("WEFT_BOOTSTRAP_SECRET", nullptr),
      t("WEFT_BOOTSTRAP_TIMEOUT", "10");
  UniqueId id0 = rendezvous::unique_id_from_env(0, 2, "");
  EXPECT_EQ(id0.root.str(), "127.0.0.1:" + std::to_string(port));
  // /proc/net/tcp lists listeners as "local_address:port ... 0A"; the wildcard would be 00000000.
  char want[32];
  std::snprintf(want, sizeof(want), "0100007F:%04X", port);
  char wildcard[32];
  std::snprintf(wildcard, sizeof(wildcard), "00000000:%04X", port);
  std::string tcp = read_text("/proc/net/tcp");
  EXPECT_NE(tcp.find(want), std::string::npos);
  EXPECT_EQ(tcp.find(wildcard), std::string::npos);
  UniqueId id1 = rendezvous::unique_id_from_env(1, 2, "");
  EXPECT_EQ(id1.secret, id0.secret);
  std::vector<UniqueId> ids = {id0, id1};
  auto out = run_threads(2, [&](int r) { Bootstrap::join(ids[static_cast<size_t>(r)], r, 2, 10)->barrier(5); });
  EXPECT_TRUE(out[0].ok) << out[0].message;
  EXPECT_TRUE(out[1].ok) << out[1].message;
}

}  // namespace
}  // namespace weft
