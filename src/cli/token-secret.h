/* token-secret.h: make a new API token secret and the hash the state file keeps of it (shared
 * by `einsora token create` and `einsora up`). */
#pragma once

#include "util/sha256.h"

#define TOKEN_SECRET_SIZE 80 /* "ens_" + 64 hex digits + NUL, with room to spare */

/* 0, or -EIO when the system has no random bytes to give. */
int token_secret_new(char secret[TOKEN_SECRET_SIZE], char hash_hex[SHA256_DIGEST_SIZE * 2 + 1]);
