/* request-names.h: a submitted request's class names checked against the catalog before
 * anything is stored: a name the catalog does not know is bad input, answered with the
 * nearest names it does know (never a stored "refused" request). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "core/catalog.h"
#include "wire/request.h"

/* 0 when every name (class and fallbacks) is in the catalog; otherwise -EINVAL with *ret the
 * error body: {code: "unknown_class" or "vgpu_not_supported", message, field, name,
 * closest: [...]}, caller owns it. */
int request_names_check(const Catalog *cat, const ApiRequest *r, json_t **ret);
/* Whether name is a class of the catalog (or cpu). */
bool class_name_known(const Catalog *cat, const char *name);
/* The error body above for one name in `field`; tail ends the message (". " style). */
json_t *class_name_unknown(const Catalog *cat, const char *field, const char *name,
                           const char *tail);
