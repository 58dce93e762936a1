/* driver.c: the helpers every driver shares (driver.h). */
#include "drivers/driver.h"

#include <stdlib.h>
#include <string.h>

#include "util/strutil.h"

const char *workload_status_to_string(WorkloadStatus s) {
    static const char *const names[_WORKLOAD_STATUS_MAX] = {[WORKLOAD_ABSENT] = "absent",
                                                            [WORKLOAD_STARTING] = "starting",
                                                            [WORKLOAD_RUNNING] = "running",
                                                            [WORKLOAD_EXITED] = "exited",
                                                            [WORKLOAD_FAILED] = "failed"};
    return s < _WORKLOAD_STATUS_MAX ? names[s] : NULL;
}

void driver_ids_free(char **ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

bool driver_id_is_valid(const char *id) {
    return id && id[0] && strlen(id) < DRIVER_ID_MAX && string_is_digits(id);
}
