/* config.c - argument parsing for gpuqd (getopt_long). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "header.h"
#include "log.h"

int config_parse_size(const char *s, uint64_t *out)
{
    errno = 0;
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'B')
            end++;
        if (*end == 'B')
            end++;
        if (*end)
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* What --version says was built in. */
#ifdef GPUQ_HAVE_SYSTEMD
#define GPUQD_FEAT_SYSTEMD "systemd"
#else
#define GPUQD_FEAT_SYSTEMD "no systemd"
#endif
#ifdef GPUQ_HAVE_CUDA
#define GPUQD_FEAT_CUDA "cuda"
#else
#define GPUQD_FEAT_CUDA "no cuda"
#endif
#define GPUQD_FEATURES GPUQD_FEAT_SYSTEMD ", " GPUQD_FEAT_CUDA

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpuqd [--socket PATH] [--device auto|cuda|cpu] [--max-header N]\n"
            "             [--max-payload N] [--max-inflight N] [--session-staging N]\n"
            "             [--total-staging N] [--max-sessions N] [--max-output N]\n"
            "             [--max-priority low|normal|high] [--log-level error|warn|info|debug]\n"
            "             [--drain-timeout SEC] [--version] [--help]\n"
            "Sizes accept K, M, G suffixes. Socket: --socket, else $GPUQ_SOCKET, else\n"
            "$XDG_RUNTIME_DIR/gpuq/gpuqd.sock, else /run/gpuq/gpuqd.sock.\n");
}

enum { O_SOCKET = 256, O_DEVICE, O_MAXHDR, O_MAXPAY, O_MAXINF, O_SSTG, O_TSTG, O_MAXSES,
       O_MAXOUT, O_LOGLVL, O_DRAIN, O_VERSION, O_HELP, O_MAXPRIO };

static int size_opt(const char *name, const char *arg, uint64_t max, uint64_t *out)
{
    if (config_parse_size(arg, out) || *out == 0 || *out > max) {
        fprintf(stderr, "gpuqd: bad value for --%s: '%s'\n", name, arg);
        return -1;
    }
    return 0;
}

int config_load(config *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, 0, O_SOCKET},
        {"device", required_argument, 0, O_DEVICE},
        {"max-header", required_argument, 0, O_MAXHDR},
        {"max-payload", required_argument, 0, O_MAXPAY},
        {"max-inflight", required_argument, 0, O_MAXINF},
        {"session-staging", required_argument, 0, O_SSTG},
        {"total-staging", required_argument, 0, O_TSTG},
        {"max-sessions", required_argument, 0, O_MAXSES},
        {"max-output", required_argument, 0, O_MAXOUT},
        {"max-priority", required_argument, 0, O_MAXPRIO},
        {"log-level", required_argument, 0, O_LOGLVL},
        {"drain-timeout", required_argument, 0, O_DRAIN},
        {"version", no_argument, 0, O_VERSION},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    memset(c, 0, sizeof *c);
    snprintf(c->device, sizeof c->device, "auto");
    c->socket_mode = 0660;
    gpuq_limits_default(&c->lim);
    c->log_level = LOG_LVL_INFO;
    c->drain_timeout_s = 30.0;
    c->pol.max_priority = GPUQ_PRIO_HIGH;
    optind = 1;
    int o;
    uint64_t v;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_SOCKET:
            if (strlen(optarg) >= sizeof c->socket) {
                fprintf(stderr, "gpuqd: --socket path too long\n");
                return -1;
            }
            snprintf(c->socket, sizeof c->socket, "%s", optarg);
            break;
        case O_DEVICE:
            if (strcmp(optarg, "auto") && strcmp(optarg, "cuda") && strcmp(optarg, "cpu")) {
                fprintf(stderr, "gpuqd: --device must be auto, cuda or cpu\n");
                return -1;
            }
            snprintf(c->device, sizeof c->device, "%s", optarg);
            break;
        case O_MAXHDR:
            if (size_opt("max-header", optarg, 1u << 30, &v)) return -1;
            c->lim.max_header = (uint32_t)v;
            break;
        case O_MAXPAY:
            if (size_opt("max-payload", optarg, UINT64_MAX, &c->lim.max_payload)) return -1;
            break;
        case O_MAXINF:
            if (size_opt("max-inflight", optarg, 1u << 20, &v)) return -1;
            c->lim.max_inflight = (uint32_t)v;
            break;
        case O_SSTG:
            if (size_opt("session-staging", optarg, UINT64_MAX, &c->lim.session_staging)) return -1;
            break;
        case O_TSTG:
            if (size_opt("total-staging", optarg, UINT64_MAX, &c->lim.total_staging)) return -1;
            break;
        case O_MAXSES:
            if (size_opt("max-sessions", optarg, 1u << 20, &v)) return -1;
            c->lim.max_sessions = (uint32_t)v;
            break;
        case O_MAXOUT:
            if (size_opt("max-output", optarg, UINT64_MAX, &c->lim.max_output)) return -1;
            break;
        case O_MAXPRIO:
            if (!strcmp(optarg, "low")) c->pol.max_priority = GPUQ_PRIO_LOW;
            else if (!strcmp(optarg, "normal")) c->pol.max_priority = GPUQ_PRIO_NORMAL;
            else if (!strcmp(optarg, "high")) c->pol.max_priority = GPUQ_PRIO_HIGH;
            else {
                fprintf(stderr, "gpuqd: --max-priority must be low, normal or high\n");
                return -1;
            }
            break;
        case O_LOGLVL:
            if ((c->log_level = log_level_parse(optarg)) < 0) {
                fprintf(stderr, "gpuqd: --log-level must be error, warn, info or debug\n");
                return -1;
            }
            break;
        case O_DRAIN: {
            char *end;
            c->drain_timeout_s = strtod(optarg, &end);
            if (*end || c->drain_timeout_s < 0 || c->drain_timeout_s > 86400) {
                fprintf(stderr, "gpuqd: bad --drain-timeout '%s'\n", optarg);
                return -1;
            }
            break;
        }
        case O_VERSION: printf("gpuqd " GPUQD_VERSION " (%s)\n", GPUQD_FEATURES); return 1;
        case O_HELP: usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpuqd: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (c->lim.session_staging > c->lim.total_staging)
        c->lim.session_staging = c->lim.total_staging;
    return 0;
}
