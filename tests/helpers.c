// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "helpers.h"

extern char **environ;

void require_root(void)
{
	if (geteuid() != 0)
		cr_assert_fail("this test needs root (BPF programs are loaded); run the suite as root "
			       "(euid is %d)", (int)geteuid());
}

char *make_tmpdir(void)
{
	char *path = strdup("/tmp/cuprobe-test-XXXXXX");

	cr_assert_not_null(path);
	cr_assert_not_null(mkdtemp(path), "mkdtemp: %s", strerror(errno));
	return path;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void remove_tree(const char *path)
{
	if (path)
		nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define ROOT_COPIES_MAX 16

static struct {
	char *dir;
	char *from[ROOT_COPIES_MAX], *to[ROOT_COPIES_MAX];
	size_t count;
} root_copies;

static void remove_root_copies(void)
{
	size_t i;

	for (i = 0; i < root_copies.count; i++) {
		free(root_copies.from[i]);
		free(root_copies.to[i]);
	}
	if (root_copies.dir)
		remove_tree(root_copies.dir);
	free(root_copies.dir);
	memset(&root_copies, 0, sizeof(root_copies));
}

const char *root_owned_copy(const char *path)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char buf[65536], *to;
	size_t i, n;
	FILE *in, *out;

	for (i = 0; i < root_copies.count; i++)
		if (!strcmp(root_copies.from[i], path))
			return root_copies.to[i];
	cr_assert_lt(root_copies.count, ROOT_COPIES_MAX);
	if (!root_copies.dir) {
		root_copies.dir = make_tmpdir();
		atexit(remove_root_copies);
	}
	to = path_join(root_copies.dir, base);
	in = fopen(path, "rb");
	out = fopen(to, "wb");
	cr_assert(in && out, "cannot copy %s: %s", path, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, out), n);
	cr_assert(!ferror(in));
	fclose(in);
	cr_assert_eq(fclose(out), 0);
	cr_assert_eq(chmod(to, 0644), 0);
	root_copies.from[root_copies.count] = strdup(path);
	root_copies.to[root_copies.count] = to;
	return root_copies.to[root_copies.count++];
}

char *small_disk(const char *size)
{
	char *dir = make_tmpdir(), options[64];

	snprintf(options, sizeof(options), "size=%s", size);
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
	cr_assert_eq(mount("tmpfs", dir, "tmpfs", 0, options), 0, "mount: %s", strerror(errno));
	return dir;
}

void small_disk_free(char *dir)
{
	umount2(dir, MNT_DETACH);
	remove_tree(dir);
	free(dir);
}

char *path_join(const char *dir, const char *name)
{
	char *out = NULL;

	cr_assert(asprintf(&out, "%s/%s", dir, name) > 0);
	return out;
}

char *read_text(const char *path)
{
	FILE *f = fopen(path, "re");
	char *data = NULL;
	size_t size = 0;

	if (!f)
		return NULL;
	FILE *mem = open_memstream(&data, &size);
	char chunk[65536];
	size_t n;

	cr_assert_not_null(mem);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, mem);
	fclose(f);
	fclose(mem);
	return data;
}

bool write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	if (!f)
		return false;
	fputs(text, f);
	return fclose(f) == 0;
}

size_t count_lines(const char *text)
{
	size_t lines = 0;
	const char *p;

	if (!text || !*text)
		return 0;
	for (p = text; *p; p++)
		if (*p == '\n')
			lines++;
	if (p[-1] != '\n')
		lines++;
	return lines;
}

static char **child_environment(char **extra)
{
	size_t n = 0, e = 0, i, out = 0;
	char **env;

	while (environ[n])
		n++;
	while (extra && extra[e])
		e++;
	env = calloc(n + e + 1, sizeof(*env));
	cr_assert_not_null(env);
	for (i = 0; i < n; i++) {
		/* The suite may be started under sudo: cuprobe must not drop to that user. */
		if (!strncmp(environ[i], "SUDO_UID=", 9) || !strncmp(environ[i], "SUDO_GID=", 9))
			continue;
		env[out++] = environ[i];
	}
	for (i = 0; i < e; i++)
		env[out++] = extra[i];
	env[out] = NULL;
	return env;
}

static void redirect(int fd, const char *path, int flags)
{
	int opened = open(path ? path : "/dev/null", flags, 0644);

	if (opened < 0)
		_exit(126);
	if (opened != fd) {
		dup2(opened, fd);
		close(opened);
	}
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

pid_t spawn_program(char *const argv[], const struct run_opts *opts)
{
	static const struct run_opts none;
	char **env;
	pid_t pid;

	if (!opts)
		opts = &none;
	env = child_environment(opts->extra_env);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		sigset_t all;

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		redirect(STDIN_FILENO, "/dev/null", O_RDONLY);
		redirect(STDOUT_FILENO, opts->stdout_path, O_WRONLY | O_CREAT | O_TRUNC);
		redirect(STDERR_FILENO, opts->stderr_path, O_WRONLY | O_CREAT | O_TRUNC);
		if (opts->as_nobody) {
			gid_t gid = 65534;

			if (setgroups(1, &gid) || setgid(65534) || setuid(65534))
				_exit(125);
		}
		/* If the test worker dies (timeout), do not leave a tracer behind. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execve(argv[0], argv, env);
		_exit(127);
	}
	free(env);
	return pid;
}

int wait_program(pid_t pid, double timeout_s)
{
	double deadline = now_s() + timeout_s;
	int status;
	pid_t got;

	for (;;) {
		got = waitpid(pid, &status, timeout_s > 0 ? WNOHANG : 0);
		if (got == pid)
			break;
		cr_assert(got == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
		if (timeout_s > 0 && now_s() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		if (got == 0)
			usleep(5000);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

int run_program(char *const argv[], const struct run_opts *opts, double *elapsed_s)
{
	double start = now_s();
	int status = wait_program(spawn_program(argv, opts), 0);

	if (elapsed_s)
		*elapsed_s = now_s() - start;
	return status;
}

int run_program_rusage(char *const argv[], const struct run_opts *opts, struct rusage *usage)
{
	pid_t pid = spawn_program(argv, opts);
	int status;

	cr_assert_eq(wait4(pid, &status, 0, usage), pid, "wait4: %s", strerror(errno));
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

bool wait_for_text(const char *path, const char *needle, double timeout_s)
{
	double deadline = now_s() + timeout_s;

	do {
		char *text = read_text(path);
		bool found = text && strstr(text, needle);

		free(text);
		if (found)
			return true;
		usleep(10000);
	} while (now_s() < deadline);
	return false;
}

/* The pid in the children list text (space-separated) whose /proc/PID/comm is comm, or 0. */
static pid_t find_named(const char *list, const char *comm)
{
	char path[64], *name;
	const char *p = list;
	char *end;

	for (; *p; p = end) {
		pid_t pid = (pid_t)strtol(p, &end, 10);
		bool same;

		if (end == p)
			break;
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		name = read_text(path);
		same = name && (name[strcspn(name, "\n")] = '\0', !strcmp(name, comm));
		free(name);
		if (same)
			return pid;
	}
	return 0;
}

pid_t child_named(pid_t parent, const char *comm, double timeout_s)
{
	double deadline = now_s() + timeout_s;
	char path[96];
	pid_t found;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", parent, parent);
	do {
		char *list = read_text(path);

		found = list ? find_named(list, comm) : 0;
		free(list);
		if (found)
			return found;
		usleep(10000);
	} while (now_s() < deadline);
	return 0;
}

char process_state(pid_t pid)
{
	char path[64], *text, *close_paren;
	char state = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	text = read_text(path);
	if (text && (close_paren = strrchr(text, ')')) && close_paren[1] == ' ')
		state = close_paren[2];
	free(text);
	return state;
}

pid_t start_background(char *const argv[])
{
	pid_t pid = fork();

	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		redirect(STDIN_FILENO, "/dev/null", O_RDONLY);
		redirect(STDOUT_FILENO, NULL, O_WRONLY);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static char *find_in_path(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs, *dir, *save = NULL, *found = NULL;

	dirs = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	cr_assert_not_null(dirs);
	for (dir = strtok_r(dirs, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		char *candidate = path_join(dir, name);

		if (!access(candidate, X_OK))
			found = candidate;
		else
			free(candidate);
	}
	free(dirs);
	return found;
}

/* Runs `tmux -S SOCKET -f /dev/null ARGS...`, its stdout into out_path; true when it exits 0. */
static bool tmux_run(struct tmux *t, const char *out_path, const char *const *args)
{
	struct run_opts opts = { .stdout_path = out_path };
	char *argv[16];
	int n = 0, i;

	if (!t->dir)
		return false;
	argv[n++] = t->program;
	argv[n++] = "-S";
	argv[n++] = t->socket;
	argv[n++] = "-f";
	argv[n++] = "/dev/null";
	for (i = 0; args[i]; i++) {
		cr_assert_lt(n, 15, "too many tmux arguments");
		argv[n++] = (char *)args[i];
	}
	argv[n] = NULL;
	return run_program(argv, &opts, NULL) == 0;
}

void tmux_start(struct tmux *t, int cols, int rows, const char *shell_command)
{
	char width[16], height[16];
	const char *args[] = { "new-session", "-d", "-s", "test", "-x", width, "-y", height,
			       shell_command, NULL };

	memset(t, 0, sizeof(*t));
	t->program = find_in_path("tmux");
	cr_assert_not_null(t->program, "tmux is not installed (tests/install-deps.sh installs it)");
	t->dir = make_tmpdir();
	t->socket = path_join(t->dir, "socket");
	snprintf(width, sizeof(width), "%d", cols);
	snprintf(height, sizeof(height), "%d", rows);
	cr_assert(tmux_run(t, NULL, args), "tmux new-session (%dx%d) failed: %s", cols, rows,
		  shell_command);
}

char *tmux_capture(struct tmux *t)
{
	const char *args[] = { "capture-pane", "-p", "-t", "test", NULL };
	char *path, *text = NULL;

	if (!t->dir)
		return NULL;
	path = path_join(t->dir, "capture");
	if (tmux_run(t, path, args))
		text = read_text(path);
	free(path);
	return text;
}

bool tmux_resize(struct tmux *t, int cols, int rows)
{
	char width[16], height[16], expected[40];
	const char *resize[] = { "resize-window", "-t", "test", "-x", width, "-y", height, NULL };
	const char *size[] = { "display-message", "-p", "-t", "test",
			       "#{pane_width}x#{pane_height}", NULL };
	char *path, *text;
	bool done;

	if (!t->dir)
		return false;
	snprintf(width, sizeof(width), "%d", cols);
	snprintf(height, sizeof(height), "%d", rows);
	snprintf(expected, sizeof(expected), "%dx%d\n", cols, rows);
	if (!tmux_run(t, NULL, resize))
		return false;
	path = path_join(t->dir, "size");
	text = tmux_run(t, path, size) ? read_text(path) : NULL;
	done = text && !strcmp(text, expected);
	free(text);
	free(path);
	return done;
}

bool tmux_send_keys(struct tmux *t, const char *keys)
{
	const char *args[] = { "send-keys", "-t", "test", keys, NULL };

	return tmux_run(t, NULL, args);
}

void tmux_stop(struct tmux *t)
{
	const char *args[] = { "kill-server", NULL };

	if (!t->dir)
		return;
	tmux_run(t, NULL, args); /* fails when the server has already gone */
	remove_tree(t->dir);
	free(t->dir);
	free(t->socket);
	free(t->program);
	memset(t, 0, sizeof(*t));
}

bool parse_cuprobe_summary(const char *text, struct cuprobe_summary *out)
{
	const char *p = text;

	while (p && *p) {
		if (sscanf(p, "cuprobe: %llu events delivered, %llu lost, %llu of %llu launches with unknown names",
			   &out->delivered, &out->lost, &out->unnamed, &out->launches) == 4)
			return true;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

long long line_value(const char *line, const char *key)
{
	size_t n = strlen(key);
	const char *p = line;

	while ((p = strstr(p, key))) {
		if ((p == line || p[-1] == ' ') && p[n] == '=')
			return strtoll(p + n + 1, NULL, 0);
		p += n;
	}
	return -1;
}

char *find_line(const char *text, const char *prefix, int nth)
{
	const char *p = text;
	size_t n = strlen(prefix);

	while (p && *p) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len >= n && !strncmp(p, prefix, n) && nth-- == 0)
			return strndup(p, len);
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

uint64_t parse_hex(const char *text)
{
	char *end;
	uint64_t value;

	cr_assert(text && !strncmp(text, "0x", 2), "not a 0x hex string: %s", text ? text : "(null)");
	errno = 0;
	value = strtoull(text + 2, &end, 16);
	cr_assert(!errno && end != text + 2 && !*end, "not a hex number: %s", text);
	return value;
}

#ifdef CUPROBE_TEST_WITH_JSON
json_t *load_json_lines(const char *path)
{
	char *text = read_text(path), *line, *save = NULL;
	json_t *arr = json_array();
	size_t lineno = 0;

	cr_assert_not_null(text, "cannot read %s", path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t error;
		json_t *obj = json_loads(line, JSON_REJECT_DUPLICATES, &error);

		lineno++;
		cr_assert_not_null(obj, "%s:%zu is not JSON (%s): %s", path, lineno, error.text, line);
		cr_assert(json_is_object(obj), "%s:%zu is not a JSON object: %s", path, lineno, line);
		json_array_append_new(arr, obj);
	}
	free(text);
	return arr;
}

const char *jstr(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_string(v), "field \"%s\" missing or not a string", key);
	return json_string_value(v);
}

long long jint(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	cr_assert(json_is_integer(v), "field \"%s\" missing or not an integer", key);
	return json_integer_value(v);
}

uint64_t jhex(json_t *obj, const char *key)
{
	return parse_hex(jstr(obj, key));
}

size_t count_events(json_t *arr, const char *type, const char *api)
{
	size_t i, n = 0;
	json_t *ev;

	json_array_foreach(arr, i, ev) {
		json_t *t = json_object_get(ev, "type"), *a = json_object_get(ev, "api");

		if (!json_is_string(t) || strcmp(json_string_value(t), type))
			continue;
		if (api && (!json_is_string(a) || strcmp(json_string_value(a), api)))
			continue;
		n++;
	}
	return n;
}

bool jdims_equal(json_t *obj, const char *key, long long a, long long b, long long c)
{
	json_t *v = json_object_get(obj, key);

	return json_is_array(v) && json_array_size(v) == 3 &&
	       json_is_integer(json_array_get(v, 0)) && json_integer_value(json_array_get(v, 0)) == a &&
	       json_is_integer(json_array_get(v, 1)) && json_integer_value(json_array_get(v, 1)) == b &&
	       json_is_integer(json_array_get(v, 2)) && json_integer_value(json_array_get(v, 2)) == c;
}
#endif

/* ---- option lists: --help, the man page ----------------------------------------- */

static void option_list_add(struct option_list *l, const char *name, size_t len)
{
	size_t i;

	if (len >= sizeof(l->names[0]))
		return;
	for (i = 0; i < l->count; i++)
		if (strlen(l->names[i]) == len && !strncmp(l->names[i], name, len))
			return;
	cr_assert_lt(l->count, OPTION_LIST_MAX);
	memcpy(l->names[l->count], name, len);
	l->names[l->count++][len] = '\0';
}

bool option_list_has(const struct option_list *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->count; i++)
		if (!strcmp(l->names[i], name))
			return true;
	return false;
}

void scan_options(const char *text, struct option_list *l)
{
	const char *p = text;

	while ((p = strchr(p, '-'))) {
		const char *start = p;
		size_t n;

		if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-')) {
			p++;
			continue;
		}
		if (p[1] == '-' && islower((unsigned char)p[2])) {
			for (n = 2; islower((unsigned char)p[n]) || p[n] == '-'; n++)
				;
			option_list_add(l, start, n);
			p += n;
		} else if (isalpha((unsigned char)p[1]) && !isalnum((unsigned char)p[2]) && p[2] != '-') {
			option_list_add(l, start, 2);
			p += 2;
		} else {
			p++;
		}
	}
}

void help_text_options(const char *help, struct option_list *l)
{
	char *text = strdup(help), *line, *save = NULL;

	cr_assert_not_null(text);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char label[64], *gap;

		if (strncmp(line, "  -", 3) && strncmp(line, "      --", 8))
			continue;
		/* The label ends where two spaces start the help text. */
		snprintf(label, sizeof(label), "%s", line);
		gap = strstr(label + 6, "  ");
		if (gap)
			*gap = '\0';
		scan_options(label, l);
	}
	free(text);
}

bool man_section_options(const char *man, const char *heading, struct option_list *l)
{
	char line_of[128], *section, *next, *p, *q;
	const char *found;

	snprintf(line_of, sizeof(line_of), "\n%s\n", heading);
	found = strstr(man, line_of);
	if (!found)
		return false;
	section = strdup(found + 1);
	cr_assert_not_null(section);
	next = strstr(section + 1, "\n.SS ");
	if (!next || (strstr(section + 1, "\n.SH ") && strstr(section + 1, "\n.SH ") < next))
		next = strstr(section + 1, "\n.SH ");
	if (next)
		*next = '\0';
	for (p = strstr(section, ".TP\n"); p; p = strstr(p + 1, ".TP\n")) {
		char line[256];
		size_t i;

		q = p + 4;
		for (i = 0; q[0] && q[0] != '\n' && i < sizeof(line) - 1; q++) {
			if (q[0] == '\\' && q[1] == '-') {
				line[i++] = '-';
				q++;
			} else if (q[0] == '\\' && q[1] == 'f') {
				q += 2;
			} else {
				line[i++] = q[0];
			}
		}
		line[i] = '\0';
		scan_options(line, l);
	}
	free(section);
	return true;
}
