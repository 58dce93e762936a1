/* json-cleanup.h: _cleanup_json_ for jansson values, apart from macro.h so that modules
 * without jansson do not need its header. jansson (2.11 on) has the handler itself. */
#pragma once

#include <jansson.h>

#include "util/macro.h"

#define _cleanup_json_ _cleanup_(json_decrefp)
