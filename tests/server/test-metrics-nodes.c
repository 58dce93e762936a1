/* test-metrics-nodes.c: /metrics per-node reachability gauges, with label values escaped as
 * the Prometheus text format requires. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "srv-helpers.h"

Test(metrics_nodes, metrics_label_values_escape_backslash_quote_and_newline) {
    StrBuf b = {0};
    metrics_label_value(&b, "a\"b\\c\nd");
    cr_expect_str_eq(strbuf_cstr(&b), "a\\\"b\\\\c\\nd");
    strbuf_done(&b);
}

Test(metrics_nodes, metrics_show_each_nodes_reachability, .timeout = 60) {
    TestServer ts = {0};
    ts_start(&ts);
    ts_add_h100_node(&ts, "n1", "alice", 1);
    char *text = ts_metrics(&ts);
    cr_expect(strstr(text, "# TYPE einsora_node_reachable gauge\n"), "%s", text);
    cr_expect(strstr(text, "\neinsora_node_reachable{node=\"n1\",site=\"dc1\"} 1\n"), "%s", text);
    free(text);
    ts_stop(&ts);
}
