// Checks on what peers send at communicator initialization (the PeerInfo all-gather over
// the bootstrap): every field is untrusted, even from a peer that proved the secret, and
// is bounded before it indexes, sizes or points at anything. Host-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::peer_check {

/// Throws Remote ("rank <me>: rank <peer> sent <field> = <value>, outside <lo>..<hi>")
/// unless lo <= value <= hi.
void field_in_range(int me, int peer, const char* field, int64_t value, int64_t lo, int64_t hi);

/// A process-wide registry of the live arenas of this process's communicators: a peer that
/// says it shares this process may only name one of them, of the size both ends expect.
void register_arena(const void* base, size_t bytes);
void unregister_arena(const void* base);
/// Throws Remote unless `ptr` is the base of a registered arena of exactly `bytes` bytes.
void check_local_arena(int me, int peer, uint64_t ptr, size_t bytes);

}  // namespace weft::peer_check
