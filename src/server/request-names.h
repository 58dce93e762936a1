/* request-names.h: a submitted request's class names checked against the catalog before
 * anything is stored: a name the catalog does not know is bad input, answered with the
 * nearest names it does know (never a stored "refused" request). */
#pragma once

#include <jansson.h>

#include "core/catalog.h"
#include "wire/request.h"

/* 0 when every name (class and fallbacks) is in the catalog; otherwise -EINVAL with *ret the
 * error body: {code: "unknown_class" or "vgpu_not_supported", message, field, name,
 * closest: [...]}, caller owns it. */
int request_names_check(const Catalog *cat, const ApiRequest *r, json_t **ret);
