/* api-address.h: where the HTTP/JSON API listens by default, the one address the server binds
 * and the CLI's `up` starts it on, and the header that marks its answers. */
#pragma once

#define SERVER_DEFAULT_LISTEN "127.0.0.1:7780"

/* Every answer of the control plane carries this header: a client checks it, so that another
 * web server at the URL it was given (one that answers anything with 200 and JSON of its own,
 * a captive portal) is refused as not Einsora rather than read as an empty fleet. */
#define WIRE_API_HEADER "Einsora-API"
#define WIRE_API_VERSION "1"

/* An agent sends its instance (a random id kept in its state folder) on every call: the control
 * plane refuses another instance's calls for a node whose agent is alive, so that a second
 * agent started by mistake for the same node (another state folder, the same --name) cannot
 * end, or start again, the first one's workloads (R17). */
#define WIRE_AGENT_HEADER "Einsora-Agent"
#define WIRE_AGENT_INSTANCE_MAX 64