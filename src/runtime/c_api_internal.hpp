// Hooks of the C API (c_api.cpp) for C APIs of layers built on it (src/part): the
// communicator behind a handle, and the message weftGetLastError returns.
#pragma once

#include <string>

#include "weft/weft.h"

namespace weft {

class Communicator;

/// The communicator behind `comm`; weft::Error (InvalidArgument) for a null, destroyed or
/// unknown handle, as every call on a communicator reports it.
Communicator& communicator_of(weftComm_t comm);
/// Sets what weftGetLastError returns on this thread.
void set_last_error(std::string message);

}  // namespace weft
