/* metrics-nodes.c: per-node gauges of /metrics: whether each node's agent reports,
 * with label values escaped as the Prometheus text format requires (a node or site name is
 * input: a quote or a newline in it must not end the label or the line). */
#include "api.h"
#include "server-internal.h"

void metrics_label_value(StrBuf *b, const char *v) {
    for (const char *p = v; *p; p++) {
        if (*p == '\\')
            strbuf_puts(b, "\\\\");
        else if (*p == '"')
            strbuf_puts(b, "\\\"");
        else if (*p == '\n')
            strbuf_puts(b, "\\n");
        else
            strbuf_append(b, p, 1);
    }
}

void metrics_write_nodes(StrBuf *b, Server *s) {
    strbuf_puts(b, "# HELP einsora_node_reachable 1 while the node's agent reports (or no agent "
                   "is expected), 0 once it missed its heartbeats.\n"
                   "# TYPE einsora_node_reachable gauge\n");
    pthread_rwlock_rdlock(&s->lock);
    for (size_t i = 0; i < s->nodes.cap; i++) {
        if (!s->nodes.keys[i] || s->nodes.keys[i] == PTRMAP_TOMB)
            continue;
        const Node *n = s->nodes.values[i];
        strbuf_puts(b, "einsora_node_reachable{node=\"");
        metrics_label_value(b, n->spec.name);
        strbuf_puts(b, "\",site=\"");
        metrics_label_value(b, n->spec.site);
        strbuf_printf(b, "\"} %d\n", n->unreachable ? 0 : 1);
    }
    pthread_rwlock_unlock(&s->lock);
}
