/* token-secret.c: new token secrets (token-secret.h). */
#include "token-secret.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int token_secret_new(char secret[TOKEN_SECRET_SIZE], char hash_hex[SHA256_DIGEST_SIZE * 2 + 1]) {
    uint8_t raw[32];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return -EIO;
    strcpy(secret, "ens_");
    for (size_t i = 0; i < sizeof(raw); i++)
        sprintf(secret + 4 + 2 * i, "%02x", raw[i]);
    sha256_hex(secret, strlen(secret), hash_hex);
    return 0;
}
