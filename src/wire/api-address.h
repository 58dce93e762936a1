/* api-address.h: where the HTTP/JSON API listens by default, the one address the server binds
 * and the CLI's `up` starts it on, and the header that marks its answers. */
#pragma once

#define SERVER_DEFAULT_LISTEN "127.0.0.1:7780"

/* Every answer of the control plane carries this header: a client checks it, so that another
 * web server at the URL it was given (one that answers anything with 200 and JSON of its own,
 * a captive portal) is refused as not Einsora rather than read as an empty fleet. */
#define WIRE_API_HEADER "Einsora-API"
#define WIRE_API_VERSION "1"
