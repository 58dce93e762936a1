/* routes.c: the API's route table (data only, so the router's fuzz target can use it). */
#include "api.h"

const Route api_routes[] = {
        {"GET", "/healthz", R_HEALTHZ},
        {"GET", "/readyz", R_READYZ},
        {"GET", "/metrics", R_METRICS},
        {"GET", "/v1/classes", R_CLASSES},
        {"GET", "/v1/nodes", R_NODES_LIST},
        {"POST", "/v1/nodes", R_NODES_CREATE},
        {"GET", "/v1/nodes/{name}", R_NODE_SHOW},
        {"PUT", "/v1/nodes/{name}", R_NODE_PUSH},
        {"POST", "/v1/nodes/{name}/cordon", R_NODE_CORDON},
        {"POST", "/v1/nodes/{name}/uncordon", R_NODE_UNCORDON},
        {"GET", "/v1/capacity", R_CAPACITY},
        {"GET", "/v1/requests", R_REQUESTS_LIST},
        {"POST", "/v1/requests", R_REQUESTS_SUBMIT},
        {"GET", "/v1/requests/{id}", R_REQUEST_SHOW},
        {"POST", "/v1/requests/{id}/cancel", R_REQUEST_CANCEL},
        {"POST", "/v1/requests/{id}/release", R_REQUEST_RELEASE},
        {"POST", "/v1/requests/{id}/activate", R_REQUEST_ACTIVATE},
        {"GET", "/v1/events", R_EVENTS},
        {"GET", "/v1/debug/invariants", R_INVARIANTS},
        {"POST", "/v1/nodes/{name}/heartbeat", R_NODE_HEARTBEAT},
        {"POST", "/v1/nodes/{name}/tasks/{id}", R_NODE_TASK_RESULT},
        {"POST", "/v1/nodes/{name}/mode", R_NODE_MODE},
        {"PUT", "/v1/tenants/{name}/trust", R_TENANT_TRUST_GRANT},
        {"DELETE", "/v1/tenants/{name}/trust", R_TENANT_TRUST_WITHDRAW},
        {"GET", "/v1/tenants/trusted", R_TENANTS_TRUSTED},
        {"POST", "/v1/requests/{id}/end", R_REQUEST_END},
        {"GET", "/v1/whoami", R_WHOAMI},
        {"GET", "/v1/capacity/history", R_CAPACITY_HISTORY},
};
const size_t api_n_routes = sizeof(api_routes) / sizeof(api_routes[0]);
