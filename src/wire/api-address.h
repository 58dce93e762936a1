/* api-address.h: where the HTTP/JSON API listens by default, the one address the server binds
 * and the CLI's `up` starts it on. */
#pragma once

#define SERVER_DEFAULT_LISTEN "127.0.0.1:7780"
