// An event trace of one proxy and its endpoints, for finding what serialises the network
// path (docs/port-channels.md, "Tracing the network path"). Off unless WEFT_NET_TRACE names
// a file prefix: then Trace::from_environment returns a recorder, else null, and every
// call site is `if (trace_) trace_->add(...)`, one predictable branch on a null pointer.
//
// Everything is recorded by the proxy thread alone (no locks): when it takes a trigger,
// posts a put, defers or writes a signal, marks and sees an endpoint land, flushes, and,
// through a StagingEndpoint, starts and completes each staging copy and posts and
// releases each chunk. On the receiving side the proxy watches words of its own memory
// that peers' proxies write (a NetFifos connection's posted and acked counters) and
// records each change: when a message's signal landed here. One clock
// (CLOCK_MONOTONIC, nanoseconds) serves every process of a host, so the files of two ranks
// of one machine merge into one timeline.
//
// At the end (the recorder's destructor, when the proxy stops) it writes
// PREFIX.<owner>.<pid>.tsv: a header line, then one event a line:
//   t_ns  event  channel  a  b
// and logs (NET, INFO) a summary line: events, triggers, bytes, the busy span, and the mean
// and largest time from a put's trigger to its signal leaving this rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace weft::proxy {

enum class TraceEvent : uint32_t {
  Take = 0,        ///< a trigger taken: a = op bits, b = bytes
  Put,             ///< a put posted on the endpoint: a = bytes, b = destination offset
  SignalNow,       ///< a signal written at once: a = value
  SignalDeferred,  ///< a signal held until the channel's puts land: a = value
  SignalWritten,   ///< a held signal written: a = value, b = ns it was held
  Mark,            ///< an endpoint marked: channel = endpoint index, a = ticket
  Landed,          ///< an endpoint's ticket seen landed: channel = endpoint index, a = ticket
  FlushBegin,      ///< a flush trigger started
  FlushEnd,        ///< ... and ended
  StageCopy,       ///< a staging copy started: channel = buffer, a = chunk, b = bytes
  StageCopied,     ///< its copy completed: channel = buffer, a = chunk
  StagePut,        ///< the chunk posted to the network: channel = buffer, a = chunk
  StageReleased,   ///< the chunk landed, its buffer free again: channel = buffer, a = chunk
  Watch,           ///< a watched word changed: channel = its label, a = new value
  Count
};

/// The event's name in the file ("take", "put", ...).
const char* trace_event_name(TraceEvent e);

class Trace {
 public:
  /// A recorder when WEFT_NET_TRACE is set (at most WEFT_NET_TRACE_EVENTS events), else
  /// null. `owner` names the file and the summary ("rank3").
  static std::unique_ptr<Trace> from_environment(const std::string& owner);
  /// A recorder writing PREFIX.<owner>.<pid>.tsv; an empty prefix writes nothing (tests).
  Trace(std::string prefix, std::string owner, size_t capacity);
  ~Trace();  ///< writes the file and logs the summary
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  static uint64_t now_ns();
  void add(TraceEvent e, uint32_t channel, uint64_t a = 0, uint64_t b = 0);
  /// Records a Watch event whenever *word changes (checked by poll_watches).
  void watch(const uint64_t* word, uint32_t label);
  void poll_watches();
  /// The events so far (tests).
  struct Record {
    uint64_t t_ns;
    TraceEvent event;
    uint32_t channel;
    uint64_t a, b;
  };
  const std::vector<Record>& records() const { return records_; }
  /// Where the file goes.
  std::string path() const;
  /// Writes the file now (the destructor does it once); returns false if it could not.
  bool write_file();
  /// One line: events, triggers, bytes, span, signal delays.
  std::string summary() const;

 private:
  std::string prefix_, owner_;
  size_t capacity_;
  bool written_ = false;
  uint64_t dropped_ = 0;
  std::vector<Record> records_;
  struct Watched {
    const uint64_t* word;
    uint32_t label;
    uint64_t last;
  };
  std::vector<Watched> watched_;
};

}  // namespace weft::proxy
