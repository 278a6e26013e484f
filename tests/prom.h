/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the exporter tests share: a tiny HTTP/1.0 client, `cuprobe exporter`
 * and Debian's real `prometheus` started on free loopback ports (each
 * stopped, and reaped, by *_stop, which a fixture's teardown calls), and
 * Prometheus's query API read with jansson.
 */
#ifndef CUPROBE_TEST_PROM_H
#define CUPROBE_TEST_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#define PROMETHEUS_BIN "/usr/bin/prometheus"
#define PROMTOOL_BIN "/usr/bin/promtool"

/* A free TCP port on 127.0.0.1 (bound to port 0, read back, closed). */
int free_port(void);

struct http_reply {
	int status;             /* -1: no status line came */
	char *head;             /* status line and headers */
	char *body;             /* NUL added; body_len counts the bytes */
	size_t body_len;
};

/*
 * Sends request (the whole text) to 127.0.0.1:port and reads until the
 * server closes. false when the connection failed or timeout_s passed.
 */
bool http_raw(int port, const char *request, size_t len, double timeout_s, struct http_reply *out);
/* GET path over HTTP/1.0, with an Accept header when accept is not NULL. */
bool http_get(int port, const char *path, const char *accept, struct http_reply *out);
/* The value of header name (case-insensitive) in r->head, malloc'd, or NULL. */
char *http_header(const struct http_reply *r, const char *name);
void http_reply_free(struct http_reply *r);

struct exporter_proc {
	pid_t pid;
	int port;
	char *err_path;         /* its standard error */
};

/*
 * `cuprobe exporter --listen 127.0.0.1:PORT --lib SIM ARGS...` with stderr in
 * dir; returns once it says it serves (fails the test after 60 s).
 */
void exporter_start(struct exporter_proc *e, const char *dir, const char *const *args);
/* SIGTERM, then SIGKILL after 20 s; returns its exit status (-1: killed, or never started). */
int exporter_stop(struct exporter_proc *e);

struct prometheus_proc {
	pid_t pid;
	int port;
	char *err_path;
};

/*
 * Prometheus scraping 127.0.0.1:target_port every second (job "cuprobe"),
 * TSDB in dir/tsdb, native histograms on; returns once /-/ready answers 200.
 */
void prometheus_start(struct prometheus_proc *p, const char *dir, int target_port);

struct prometheus_opts {
	bool classic_histograms; /* without the native-histograms feature: the _bucket series */
	const char *rule_file;   /* loaded, evaluated every second; NULL: none */
};

/* prometheus_start, with opts (NULL: as prometheus_start). */
void prometheus_start_with(struct prometheus_proc *p, const char *dir, int target_port,
			   const struct prometheus_opts *opts);
void prometheus_stop(struct prometheus_proc *p);

/* data.result of an instant query (a new reference), or NULL when it failed. */
json_t *prom_query(int port, const char *promql);
/*
 * The value of a query whose result is one sample (a scalar or a vector of
 * one); false when the result is empty (no such series yet) or the query failed.
 */
bool prom_value(int port, const char *promql, double *value);
/* Polls prom_value until it equals want or timeout_s passes; returns the last value (-1: none). */
double prom_wait_value(int port, const char *promql, double want, double timeout_s);

/* Monotonic seconds. */
double now_seconds(void);

#endif
