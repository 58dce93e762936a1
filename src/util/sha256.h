/* sha256.h: SHA-256 (FIPS 180-4), used to store API tokens hashed. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32

typedef struct Sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t block[64];
    size_t used; /* bytes waiting in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
void sha256_final(Sha256 *s, uint8_t out[SHA256_DIGEST_SIZE]);

/* One-shot digest of data. */
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_SIZE]);
/* One-shot digest as 64 lower-case hex digits plus NUL. */
void sha256_hex(const void *data, size_t len, char out[SHA256_DIGEST_SIZE * 2 + 1]);
