// util may not include ir (tests/unit/check_layering.cmake must say so).
#pragma once

#include "ir/b.hpp"
