// A header of the lower folder's neighbour above.
#pragma once

#include "util/a.hpp"
