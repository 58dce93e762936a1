/* engine-local.h: which container engine socket this machine has, for `einsora up` (the local
 * agent's container driver) and `einsora logs`. */
#pragma once

#include <stddef.h>

/* $EINSORA_ENGINE_SOCKET, else Podman's root socket, else Docker's; NULL when none exists. */
const char *cli_local_engine_socket(void);
/* The paths looked at, for a message saying why there is none. */
#define CLI_ENGINE_SOCKETS_LOOKED_AT                                                               \
    "$EINSORA_ENGINE_SOCKET, /run/podman/podman.sock, /var/run/docker.sock"
