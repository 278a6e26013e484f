// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"
#include "prom.h"

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int free_port(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	close(fd);
	return ntohs(addr.sin_port);
}

/* ---- HTTP ---------------------------------------------------------------------- */

bool http_raw(int port, const char *request, size_t len, double timeout_s, struct http_reply *out)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	double deadline = now_seconds() + timeout_s;
	char *data = NULL, *split;
	size_t used = 0, capacity = 0, sent = 0;
	int fd;

	memset(out, 0, sizeof(*out));
	out->status = -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		close(fd);
		return false;
	}
	/* The server may answer (and close) before the whole request is sent. */
	while (sent < len) {
		ssize_t n = send(fd, request + sent, len - sent, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		double left = deadline - now_seconds();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)(left * 1000) + 1) <= 0) {
			free(data);
			close(fd);
			return false;
		}
		if (used + 65536 + 1 > capacity) {
			capacity = capacity ? capacity * 2 : 131072;
			data = realloc(data, capacity);
			cr_assert_not_null(data);
		}
		n = recv(fd, data + used, capacity - used - 1, 0);
		if (n < 0 && errno == ECONNRESET && used)
			break; /* answered, then reset: what came is the reply */
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	if (!data)
		return true; /* closed without a byte: status stays -1 */
	data[used] = '\0';
	split = strstr(data, "\r\n\r\n");
	out->head = strndup(data, split ? (size_t)(split - data) : used);
	cr_assert_not_null(out->head);
	if (split) {
		out->body_len = used - (size_t)(split + 4 - data);
		out->body = malloc(out->body_len + 1);
		cr_assert_not_null(out->body);
		memcpy(out->body, split + 4, out->body_len);
		out->body[out->body_len] = '\0';
	}
	if (!strncmp(data, "HTTP/1.", 7) && strlen(data) > 12)
		out->status = atoi(data + 9);
	free(data);
	return true;
}

bool http_get(int port, const char *path, const char *accept, struct http_reply *out)
{
	char *request = NULL;
	bool ok;
	int n;

	/* HTTP/1.0: no chunked replies, the server closes when done. */
	n = asprintf(&request, "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n%s%s%s\r\n", path, port,
		     accept ? "Accept: " : "", accept ? accept : "", accept ? "\r\n" : "");
	cr_assert_gt(n, 0);
	ok = http_raw(port, request, (size_t)n, 30, out);
	free(request);
	return ok;
}

char *http_header(const struct http_reply *r, const char *name)
{
	const char *line = r->head;
	size_t len = strlen(name);

	while (line && (line = strstr(line, "\r\n"))) {
		line += 2;
		if (!strncasecmp(line, name, len) && line[len] == ':') {
			const char *value = line + len + 1;

			while (*value == ' ')
				value++;
			return strndup(value, strcspn(value, "\r\n"));
		}
	}
	return NULL;
}

void http_reply_free(struct http_reply *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

/* ---- processes -------------------------------------------------------------------- */

/* SIGTERM, then SIGKILL after timeout_s: the exit status (-1 when it had to be killed). */
static int stop_child(pid_t pid, double timeout_s)
{
	if (pid <= 0)
		return -1;
	kill(pid, SIGTERM);
	return wait_program(pid, timeout_s);
}

void exporter_start(struct exporter_proc *e, const char *dir, const char *const *args)
{
	char listen[64], *argv[32];
	struct run_opts opts = { 0 };
	double deadline;
	int n = 0, i;

	e->port = free_port();
	e->err_path = path_join(dir, "exporter.err");
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", e->port);
	argv[n++] = CUPROBE_BIN;
	argv[n++] = "exporter";
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--lib";
	argv[n++] = CUDA_SIM_LIB;
	for (i = 0; args && args[i] && n < 31; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	opts.stderr_path = e->err_path;
	e->pid = spawn_program(argv, &opts);
	deadline = now_seconds() + 60;
	while (!wait_for_text(e->err_path, "serving metrics on", 0.2)) {
		int status;

		if (waitpid(e->pid, &status, WNOHANG) == e->pid) {
			char *err = read_text(e->err_path);

			e->pid = 0;
			cr_assert_fail("cuprobe exporter exited at start: %s", err ? err : "");
		}
		cr_assert_lt(now_seconds(), deadline, "cuprobe exporter did not start serving in 60 s");
	}
}

int exporter_stop(struct exporter_proc *e)
{
	int status = stop_child(e->pid, 20);

	e->pid = 0;
	return status;
}

void prometheus_start(struct prometheus_proc *p, const char *dir, int target_port)
{
	prometheus_start_with(p, dir, target_port, NULL);
}

void prometheus_start_with(struct prometheus_proc *p, const char *dir, int target_port,
			   const struct prometheus_opts *with)
{
	char *config = path_join(dir, "prometheus.yml"), *tsdb = path_join(dir, "tsdb"), *text = NULL;
	char config_arg[512], tsdb_arg[512], listen_arg[128];
	char *argv[] = { PROMETHEUS_BIN, config_arg, tsdb_arg, listen_arg, "--log.level=warn",
			 "--enable-feature=native-histograms", NULL };
	struct run_opts opts = { 0 };
	struct http_reply r;
	double deadline;

	cr_assert_eq(access(PROMETHEUS_BIN, X_OK), 0,
		     "%s is missing: tests/install-deps.sh installs Debian's prometheus", PROMETHEUS_BIN);
	p->port = free_port();
	p->err_path = path_join(dir, "prometheus.err");
	cr_assert(asprintf(&text,
			   "global:\n"
			   "  scrape_interval: 1s\n"
			   "  scrape_timeout: 1s\n"
			   "  evaluation_interval: 1s\n"
			   "%s%s%s"
			   "scrape_configs:\n"
			   "  - job_name: cuprobe\n"
			   "    static_configs:\n"
			   "      - targets: ['127.0.0.1:%d']\n",
			   with && with->rule_file ? "rule_files: ['" : "",
			   with && with->rule_file ? with->rule_file : "",
			   with && with->rule_file ? "']\n" : "", target_port) > 0);
	cr_assert(write_text(config, text), "cannot write %s", config);
	snprintf(config_arg, sizeof(config_arg), "--config.file=%s", config);
	snprintf(tsdb_arg, sizeof(tsdb_arg), "--storage.tsdb.path=%s", tsdb);
	snprintf(listen_arg, sizeof(listen_arg), "--web.listen-address=127.0.0.1:%d", p->port);
	if (with && with->classic_histograms)
		argv[5] = NULL;
	opts.stderr_path = p->err_path;
	p->pid = spawn_program(argv, &opts);
	free(text);
	free(config);
	free(tsdb);
	deadline = now_seconds() + 60;
	for (;;) {
		int status;
		bool ready = http_get(p->port, "/-/ready", NULL, &r) && r.status == 200;

		http_reply_free(&r);
		if (ready)
			break;
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			char *err = read_text(p->err_path);

			p->pid = 0;
			cr_assert_fail("prometheus exited at start: %s", err ? err : "");
		}
		cr_assert_lt(now_seconds(), deadline, "prometheus not ready in 60 s");
		usleep(100000);
	}
}

void prometheus_stop(struct prometheus_proc *p)
{
	stop_child(p->pid, 20);
	p->pid = 0;
}

/* ---- the query API ---------------------------------------------------------------- */

static char *url_encode(const char *text)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(text) * 3 + 1), *o = out;
	const unsigned char *p;

	cr_assert_not_null(out);
	for (p = (const unsigned char *)text; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

json_t *prom_query(int port, const char *promql)
{
	char *encoded = url_encode(promql), *path = NULL;
	struct http_reply r;
	json_t *doc, *result = NULL;
	json_error_t error;

	cr_assert(asprintf(&path, "/api/v1/query?query=%s", encoded) > 0);
	free(encoded);
	if (!http_get(port, path, NULL, &r) || r.status != 200 || !r.body) {
		free(path);
		http_reply_free(&r);
		return NULL;
	}
	free(path);
	doc = json_loads(r.body, 0, &error);
	cr_assert_not_null(doc, "Prometheus answered no JSON (%s): %s", error.text, r.body);
	http_reply_free(&r);
	if (!strcmp(json_string_value(json_object_get(doc, "status")) ?: "", "success")) {
		result = json_object_get(json_object_get(doc, "data"), "result");
		json_incref(result);
	}
	json_decref(doc);
	return result;
}

bool prom_value(int port, const char *promql, double *value)
{
	json_t *result = prom_query(port, promql), *pair = NULL;
	const char *text;

	if (!result)
		return false;
	if (json_is_array(result) && json_array_size(result) == 1)
		pair = json_object_get(json_array_get(result, 0), "value");
	else if (json_is_array(result) && json_array_size(result) == 2 &&
		 json_is_number(json_array_get(result, 0)))
		pair = result; /* a scalar: [time, "value"] */
	text = pair ? json_string_value(json_array_get(pair, 1)) : NULL;
	if (text)
		*value = strtod(text, NULL);
	json_decref(result);
	return text != NULL;
}

double prom_wait_value(int port, const char *promql, double want, double timeout_s)
{
	double deadline = now_seconds() + timeout_s, value = -1;

	do {
		if (prom_value(port, promql, &value) && value == want)
			return value;
		usleep(250000);
	} while (now_seconds() < deadline);
	return value;
}
