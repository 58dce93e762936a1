/* fuzz-fleet-bodies.c: libFuzzer target for the fleet endpoints' body parsers (heartbeat, task
 * result, mode switch). The first byte picks the parser; a refusal always says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    Error err = {0};
    int r;
    switch (data[0] % 3) {
    case 0: {
        FleetHeartbeat h;
        r = fleet_heartbeat_parse(text, len, &h, &err);
        if (r >= 0) {
            if (h.interval_s > FLEET_HEARTBEAT_MAX_S || h.n_running > len)
                abort();
            for (size_t i = 0; i < h.n_running; i++)
                if (!h.running[i] || !fleet_heartbeat_runs(&h, h.running[i]) ||
                    (i && h.running[i - 1] > h.running[i]))
                    abort();
            fleet_heartbeat_done(&h);
        }
        break;
    }
    case 1: {
        FleetTaskResult t;
        r = fleet_task_result_parse(text, len, &t, &err);
        if (r >= 0 && t.verdict[0] && strcmp(t.verdict, "pass") && strcmp(t.verdict, "degraded") &&
            strcmp(t.verdict, "fail"))
            abort();
        break;
    }
    default: {
        FleetModeRequest m;
        r = fleet_mode_parse(text, len, &m, &err);
        if (r >= 0 && strcmp(m.mode, "container") && strcmp(m.mode, "vm-passthrough"))
            abort(); /* vm-vgpu and unknown modes never get through (R2d) */
        break;
    }
    }
    if (r < 0 && !err.message[0])
        abort();
    return 0;
}
