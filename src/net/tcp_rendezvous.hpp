// Whether the active-message mode asks UCX for rendezvous (UCP_AM_SEND_FLAG_RNDV) on its
// messages of WEFT_NET_RNDV_BYTES or more to a peer. Not where the peer's data goes over
// UCX's TCP transport, unless WEFT_NET_TCP_RNDV=1: a peer that dies while a rendezvous to it
// is in flight sends UCX's TCP transport into error paths that complete one operation
// twice (the send that meets the reset connection, after the connection's purge completed
// it: uct_tcp_ep_sendv) or handle an acknowledgement of a rendezvous put after the failure
// cleared what it acknowledges (uct_tcp_ep_handle_put_ack), and a UCX built with assertions
// (Debian's and Ubuntu's libucx0) aborts the surviving process there instead of reporting
// the failure ("uct_iface.h: Assertion `comp->count > 0' failed", "tcp_ep.c: Assertion
// `ep->flags & UCT_TCP_EP_FLAG_PUT_TX_WAITING_ACK' failed"). Eager messages take neither
// path (docs/port-channels.md, "Active messages").
#pragma once

#include <string>

namespace weft::net {

/// True when `lanes`, UCX's lanes to a peer as UcxTransport::describe_peer gives them
/// ("lane[0]: 1:tcp/lo.0 md[0] -> md[0]/tcp/sysdev[255] am am_bw#0 keepalive wireup; ..."),
/// has a lane that carries active messages (usage "am" or "am_bw#N") over TCP.
bool data_over_tcp(const std::string& lanes);

/// Whether large messages to a peer go by rendezvous: always where its data does not go
/// over TCP (`over_tcp` false), else only with WEFT_NET_TCP_RNDV=1.
bool rendezvous_allowed(bool over_tcp);

}  // namespace weft::net
