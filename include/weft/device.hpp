// weft's device API for users' own kernels: memory channels, port channels (through the
// host proxy), semaphores, LL and LL128 packets, bounded waits, thread groups. Include from
// .cu files; host code sees the data types only. docs/device-api.md shows a complete kernel.
#pragma once

#include "weft/device/atomics.hpp"
#include "weft/device/copy.hpp"
#include "weft/device/fifo.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/memory_channel.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/port_channel.hpp"
#include "weft/device/semaphore.hpp"
#include "weft/device/thread_group.hpp"
#include "weft/device/wait.hpp"
