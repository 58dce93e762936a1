/* catalog-closest.h: the catalog's class names nearest to a name it does not know, so that a
 * typo is answered with what the user most likely meant. Pure. */
#pragma once

#include <stddef.h>

#include "core/catalog.h"

#define CATALOG_CLOSEST_MAX 3

/* Write up to `max` class names (pointers into the catalog), nearest first, to ret; returns
 * how many. Nearness: first how few edits turn `name` into a part of the class name (so
 * "h100" finds every H100 class), then how few turn it into the whole name; ties keep
 * catalog order. Case is ignored. */
size_t catalog_closest(const Catalog *c, const char *name, const char **ret, size_t max);
