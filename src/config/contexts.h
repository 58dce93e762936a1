/* contexts.h: the CLI's configuration file, $XDG_CONFIG_HOME/einsora/config (else
 * ~/.config/einsora/config): named contexts like kubeconfig's, each naming the control plane's
 * URLs and the file holding the token, and which context is current. The file is JSON:
 *   {"current-context": "local",
 *    "contexts": [{"name": "local", "servers": ["http://127.0.0.1:7780"],
 *                  "token-file": "/home/me/.local/state/einsora/owner.token"}]}
 * The token itself is never stored here, only where to read it, so the file can be shared. */
#pragma once

#include <stddef.h>

#include "util/error.h"

typedef struct CliContext {
    char *name;
    char **servers; /* one or more URLs */
    size_t n_servers;
    char *token_file; /* may be NULL */
} CliContext;

typedef struct CliConfig {
    char *current; /* may be NULL */
    CliContext *contexts;
    size_t n_contexts;
} CliConfig;

/* Parse the file's text. Anything but the documented shape (unknown keys, a context without a
 * name or server, two contexts of one name, a current-context that names none) is -EINVAL with
 * a sentence. */
int cli_config_parse(const char *text, size_t len, CliConfig **ret, Error *err);
/* The file's text for c (caller frees); NULL when out of memory. */
char *cli_config_format(const CliConfig *c);
void cli_config_free(CliConfig *c);

/* Where the file lives: $XDG_CONFIG_HOME/einsora/config, else $HOME/.config/einsora/config. */
int cli_config_path(char **ret, Error *err);
/* Read the file; a missing file is an empty configuration. */
int cli_config_load(const char *path, CliConfig **ret, Error *err);
/* Write the file atomically with mode 0600, making its folder when missing. */
int cli_config_save(const char *path, const CliConfig *c, Error *err);

const CliContext *cli_config_find(const CliConfig *c, const char *name);
/* Add or replace the context `name` (servers: comma-separated URLs) and make it current. */
int cli_config_set(CliConfig *c, const char *name, const char *servers, const char *token_file,
                   Error *err);
/* Remove the context `name`; when it was current, no context is current. -ENOENT when there is
 * none of that name. */
int cli_config_remove(CliConfig *c, const char *name);
/* The context's servers joined with commas (caller frees); NULL when out of memory. */
char *cli_context_servers(const CliContext *ctx);
