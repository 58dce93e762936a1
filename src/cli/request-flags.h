/* request-flags.h: the flags that describe a request, shared by `request create` and `run`: each
 * becomes its member of the request's JSON body, its value checked as the API checks it. */
#pragma once

#include <getopt.h>
#include <jansson.h>

enum {
    RF_KIND = 0x300,
    RF_CLASS,
    RF_COUNT,
    RF_MEMORY,
    RF_GUEST_OS,
    RF_SHARE,
    RF_RUNTIME,
    RF_MODEL,
    RF_FALLBACK,
    RF_WAIT_S,
    RF_WAIT_FOR_NODES,
    RF_IMAGE,
    RF_ENV,
    RF_PORT,
};

#define REQUEST_FLAG_OPTIONS                                                                       \
    {"kind", required_argument, NULL, RF_KIND}, {"class", required_argument, NULL, RF_CLASS},      \
            {"count", required_argument, NULL, RF_COUNT},                                          \
            {"memory", required_argument, NULL, RF_MEMORY},                                        \
            {"guest-os", required_argument, NULL, RF_GUEST_OS},                                    \
            {"share", no_argument, NULL, RF_SHARE},                                                \
            {"runtime", required_argument, NULL, RF_RUNTIME},                                      \
            {"model", required_argument, NULL, RF_MODEL},                                          \
            {"fallback", required_argument, NULL, RF_FALLBACK},                                    \
            {"wait-s", required_argument, NULL, RF_WAIT_S},                                        \
            {"wait-for-nodes", no_argument, NULL, RF_WAIT_FOR_NODES},                              \
            {"image", required_argument, NULL, RF_IMAGE},                                          \
            {"env", required_argument, NULL, RF_ENV}, {                                            \
        "port", required_argument, NULL, RF_PORT                                                   \
    }

#define REQUEST_FLAG_HELP                                                                          \
    "  --kind KIND       vm, container, notebook or endpoint\n"                                    \
    "  --class CLASS     the GPU class wanted (`einsora classes` lists them), or cpu\n"            \
    "  --memory GB       instead of a class: the GPU memory needed (Apple, MIG); with a\n"         \
    "                    class, what one unit of it must hold (a Mac's GPU memory)\n"              \
    "  --count N         how many GPUs, all on one node: 1 to 16; for --class cpu the\n"           \
    "                    cores, 1 to 64 (default 1)\n"                                             \
    "  --guest-os OS     a VM's guest: linux or macos\n"                                           \
    "  --share           time-slice one GPU with your own other --share workloads (R2e:\n"         \
    "                    never with another user; no isolation between them)\n"                    \
    "  --runtime R       an endpoint's runtime: vllm, mlx or llama.cpp (default: the one\n"        \
    "                    its placement calls for, R14; other kinds take none). It is the\n"        \
    "                    first choice's: a fallback runs the one its placement calls for\n"        \
    "  --model M         an endpoint's model to serve: a path or a repository name (the\n"         \
    "                    server refuses it for other kinds)\n"                                     \
    "  --fallback A,B    classes to fall back to, in order, after --wait-s (R13)\n"                \
    "  --wait-s S        whole seconds to wait for CLASS before the fallback opens (up to\n"       \
    "                    2592000, 30 days; default 0: at once, when CLASS is busy)\n"              \
    "  --wait-for-nodes  keep it waiting even when no node of the fleet could ever run it\n"       \
    "                    (it is refused otherwise, R18), for nodes that may join\n"                \
    "  --image IMAGE     a container's image, or a VM's disk among the site's (default: the\n"     \
    "                    site's for the kind)\n"                                                   \
    "  --env KEY=VALUE   set in the container (repeat it for more; not for VMs)\n"                 \
    "  --port N          publish this container port (repeat it; default: a notebook's or\n"       \
    "                    endpoint's own)\n"                                                        \
    "  -- CMD...         the container's command (default: the image's)\n"

/* 0: taken into body; 1: c is not one of these flags; EXIT_USAGE: a bad value, said (verb
 * names the command in the sentence). */
int request_flag(int c, const char *arg, json_t *body, const char *verb);

/* What the API would refuse before any call: no kind, neither class nor memory, too many GPUs
 * (EXIT_USAGE, said); 0 when none. */
int request_flags_check(json_t *body, const char *verb);

/* How many arguments follow the first "--" of argv (a command), or -1 when there is none:
 * counted before getopt, which moves the arguments that are no option to the end. */
int request_command_length(int argc, char **argv);

/* args[0..n) as the request's command (n > 0). */
void request_set_command(char **args, int n, json_t *body);
