// Hooks of the C API (c_api.cpp) for C APIs of layers built on it (src/part): the
// communicator behind a handle, and the message weftGetLastError returns.
#pragma once

#include <new>
#include <stdexcept>
#include <string>

#include "util/error.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

class Communicator;

/// The communicator behind `comm`; weft::Error (InvalidArgument) for a null, destroyed or
/// unknown handle, as every call on a communicator reports it.
Communicator& communicator_of(weftComm_t comm);
/// Sets what weftGetLastError returns on this thread.
void set_last_error(std::string message);

/// Runs `f` for the C function `fn`: weftSuccess, or the error's code with the message
/// weftGetLastError then returns ("fn: what"); nothing escapes.
template <typename F>
weftResult_t api_guard(const char* fn, F&& f) noexcept {
  try {
    f();
    return weftSuccess;
  } catch (const Error& e) {
    set_last_error(std::string(fn) + ": " + e.what());
    WEFT_LOG(Warn, "API", fn << ": " << e.what());
    return static_cast<weftResult_t>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error(std::string(fn) + ": out of host memory");
    return weftSystemError;
  } catch (const std::exception& e) {
    set_last_error(std::string(fn) + ": internal error: " + e.what());
    WEFT_LOG(Warn, "API", fn << ": internal error: " << e.what());
    return weftInternalError;
  } catch (...) {
    set_last_error(std::string(fn) + ": internal error (unknown exception)");
    return weftInternalError;
  }
}

}  // namespace weft
