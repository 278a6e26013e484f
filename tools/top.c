// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `cuprobe top`: every CUDA process on the host, refreshed every interval,
 * sorted by kernel launch rate, from the BPF aggregation maps (nothing per
 * call is streamed). The agent still runs, for kernel names and exits.
 * With --python, a column names the innermost Python frame of each
 * process's most recent launch (one map entry per process, kept in BPF).
 */
#include <curses.h>
#include <term.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_options.h"
#include "cuprobe_internal.h"
#include "record_path.h"
#include "session.h"

#define MAX_ROWS 1024

struct top_row {
	uint32_t pid;
	char comm[17];
	unsigned long long launches;
	double rate;           /* launches per second over the last interval */
	unsigned long long live_bytes;
	unsigned long long peak_bytes;
	unsigned long long top_launches;
	unsigned long long top_handle;
	bool top_graph;
	char python_line[64]; /* --python: FILE:LINE of the last launch's innermost frame */
};

struct top_ctx {
	struct cp_session *session;
	struct cp_names *names;
	pthread_mutex_t lock;   /* names, between the agent and the drawing thread */
	struct cp_record_path path;
	struct top_row previous[MAX_ROWS];
	size_t previous_count;
	unsigned long long previous_ns;
	unsigned long long interval_ms;
	unsigned long exited;
	bool python;            /* --python: the PYTHON LINE column */
	bool quit;
};

static unsigned long long monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* An exit: gone from the view (the session forgets it, its rows too: the maps stay bounded). */
static int on_record(void *arg, const union cp_event *event)
{
	struct top_ctx *ctx = arg;

	if (event->hdr.type == CP_EV_PROC && event->proc.kind == CP_PROC_EXIT)
		ctx->exited++;
	return 0;
}

static struct top_row *row_for(struct top_row *rows, size_t *count, uint32_t pid)
{
	size_t i;

	for (i = 0; i < *count; i++)
		if (rows[i].pid == pid)
			return &rows[i];
	if (*count == MAX_ROWS)
		return NULL;
	memset(&rows[*count], 0, sizeof(rows[*count]));
	rows[*count].pid = pid;
	return &rows[(*count)++];
}

/* The file's last component and the line: the column stays narrow, and the line is what tells. */
static void python_line(struct top_ctx *ctx, uint32_t pid, char *out, size_t size)
{
	struct cp_py_frame frame;
	const char *base;
	uint64_t stack_id;

	snprintf(out, size, "-");
	if (!ctx->session->python ||
	    cp_tracer__python_launch_stack(ctx->session->tracer, pid, &stack_id) ||
	    cp_python__frames(ctx->session->python, pid, stack_id, &frame, 1, NULL) < 1)
		return;
	base = strrchr(frame.file, '/');
	snprintf(out, size, "%s:%d", base ? base + 1 : frame.file, (int)frame.line);
}

static int by_rate_desc(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;

	if (x->rate != y->rate)
		return x->rate < y->rate ? 1 : -1;
	return x->launches < y->launches ? 1 : x->launches > y->launches ? -1 : 0;
}

/*
 * Puts text on screen row y from column 0, cut to what the row shows: nothing
 * on a row past the bottom, nothing past the last column, and never the
 * bottom-right cell (ncurses cannot advance the cursor past it). Bytes that
 * are not printable ASCII become '?', so each byte takes exactly one column.
 * Works at every size, 1x1 included (where nothing is drawn). Never printw:
 * ncurses formats into a buffer sized from the largest screen seen so far,
 * and lines longer than that crashed top in a 12x3 or 25x3 terminal.
 */
static void put_line(int y, const char *text, int height, int width)
{
	char visible[1024];
	int room = width, n;

	if (y < 0 || y >= height || width <= 0)
		return;
	if (y == height - 1)
		room--;
	if (room > (int)sizeof(visible))
		room = sizeof(visible);
	for (n = 0; n < room && text[n]; n++)
		visible[n] = text[n] >= ' ' && text[n] <= '~' ? text[n] : '?';
	if (n)
		mvaddnstr(y, 0, visible, n);
}

static void refresh_view(void *arg)
{
	struct top_ctx *ctx = arg;
	struct top_row rows[MAX_ROWS];
	struct cp_stats_snapshot snap;
	struct cp_counters counters;
	size_t count = 0, i, j;
	unsigned long long now = monotonic_ns();
	double seconds = ctx->previous_ns ? (now - ctx->previous_ns) / 1e9 : 0;
	int line = 0, height, width;
	char text[1024];

	if (cp_tracer__snapshot(ctx->session->tracer, 0, &snap))
		return;
	for (i = 0; i < snap.kernel_count; i++) {
		const struct cp_kernel_row *k = &snap.kernels[i];
		struct top_row *row = row_for(rows, &count, k->pid);

		if (!row)
			continue;
		row->launches += k->launches;
		if (k->launches > row->top_launches) {
			row->top_launches = k->launches;
			row->top_handle = k->handle;
			row->top_graph = k->graph;
		}
	}
	for (i = 0; i < snap.mem_count; i++) {
		struct top_row *row = row_for(rows, &count, snap.mems[i].pid);

		if (row) {
			row->live_bytes = snap.mems[i].live_bytes;
			row->peak_bytes = snap.mems[i].peak_bytes;
		}
	}
	for (i = 0; i < count; i++) {
		if (cp_proc__comm(rows[i].pid, 0, rows[i].comm, sizeof(rows[i].comm)))
			snprintf(rows[i].comm, sizeof(rows[i].comm), "?");
		for (j = 0; j < ctx->previous_count; j++)
			if (ctx->previous[j].pid == rows[i].pid)
				break;
		if (seconds > 0) {
			unsigned long long before = j < ctx->previous_count ? ctx->previous[j].launches : 0;

			rows[i].rate = rows[i].launches >= before ?
				(rows[i].launches - before) / seconds : 0;
		}
		if (ctx->python)
			python_line(ctx, rows[i].pid, rows[i].python_line, sizeof(rows[i].python_line));
	}
	cp_stats_snapshot__release(&snap);
	qsort(rows, count, sizeof(rows[0]), by_rate_desc);
	memcpy(ctx->previous, rows, count * sizeof(rows[0]));
	ctx->previous_count = count;
	ctx->previous_ns = now;

	getmaxyx(stdscr, height, width);
	erase();
	snprintf(text, sizeof(text), "cuprobe top - %zu CUDA processes - every %.1f s - q quits",
		 count, ctx->interval_ms / 1000.0);
	attron(A_BOLD);
	put_line(line++, text, height, width);
	attroff(A_BOLD);
	if (!cp_tracer__read_counters(ctx->session->tracer, &counters) &&
	    (counters.kernel_stats_full || counters.mem_stats_full || counters.live_allocs_full)) {
		snprintf(text, sizeof(text),
			 "warning: maps full: %llu kernel, %llu memory, %llu allocation updates dropped",
			 (unsigned long long)counters.kernel_stats_full,
			 (unsigned long long)counters.mem_stats_full,
			 (unsigned long long)counters.live_allocs_full);
		put_line(line++, text, height, width);
	}
	line++;
	/* The bar spans the row: "TOP KERNEL" padded to a width put_line cuts. */
	snprintf(text, sizeof(text), "%7s %-16s %11s %12s %9s %9s  %s%-*s", "PID", "COMMAND",
		 "LAUNCH/S", "LAUNCHES", "DEV LIVE", "DEV PEAK",
		 ctx->python ? "PYTHON LINE               " : "", width, "TOP KERNEL");
	attron(A_REVERSE);
	put_line(line++, text, height, width);
	attroff(A_REVERSE);
	pthread_mutex_lock(&ctx->lock);
	for (i = 0; i < count && line < height; i++) {
		char live[16], peak[16], label[64], python[32] = "";
		const char *kernel = "-";

		cp_format__bytes(rows[i].live_bytes, true, live, sizeof(live));
		cp_format__bytes(rows[i].peak_bytes, true, peak, sizeof(peak));
		/* The one naming path: probe-learned, stub, or the driver's record of a late attach. */
		if (rows[i].top_launches)
			kernel = cp_format__kernel_label(ctx->names, rows[i].pid, rows[i].top_handle,
							 rows[i].top_graph, NULL, label, sizeof(label));
		/* A longer FILE:LINE keeps its end: the line number is what tells. */
		if (ctx->python) {
			size_t n = strlen(rows[i].python_line);
			const char *shown = rows[i].python_line + (n > 25 ? n - 25 : 0);

			snprintf(python, sizeof(python), "%-25s ", shown);
		}
		/* The kernel takes the rest of the row, cut where the screen ends. */
		snprintf(text, sizeof(text), "%7u %-16.16s %11.0f %12llu %9s %9s  %s%s", rows[i].pid,
			 rows[i].comm, rows[i].rate, rows[i].launches, live, peak, python, kernel);
		put_line(line++, text, height, width);
	}
	pthread_mutex_unlock(&ctx->lock);
	if (!count)
		put_line(line, "(no CUDA activity seen yet)", height, width);
	refresh();
}

static bool on_key(void *arg)
{
	struct top_ctx *ctx = arg;
	int key;

	while ((key = getch()) != ERR) {
		if (key == 'q' || key == 'Q') {
			ctx->quit = true;
			return true;
		}
		if (key == KEY_RESIZE || key == ' ')
			refresh_view(ctx);
	}
	return false;
}

/* Whether ncurses knows the terminal TERM names (what newterm needs). */
static bool terminal_usable(void)
{
	TERMINAL *saved = cur_term, *checked;
	int status = 0;

	if (setupterm(NULL, STDOUT_FILENO, &status) != OK)
		return false;
	checked = set_curterm(saved);
	del_curterm(checked);
	return true;
}

int cp_cmd_top(const union cp_options *options)
{
	const struct cp_top_options *opts = &options->top;
	CP_OPTS(cp_tracer_opts, tracer_opts);
	struct cp_wait_hooks hooks = { 0 };
	struct cp_session session;
	struct top_ctx *ctx;
	SCREEN *screen = NULL;
	int exit_code;

	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		cp_say("top needs a terminal (use cuprobe stats --interval for a log)");
		return CP_EXIT_USAGE;
	}
	/* A terminal ncurses cannot drive is the same mistake: said before anything is loaded. */
	if (!terminal_usable()) {
		cp_say("cannot drive this terminal (TERM=%s)", getenv("TERM") ? getenv("TERM") : "");
		return CP_EXIT_USAGE;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		cp_say("out of memory");
		return CP_EXIT_SETUP;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->interval_ms = opts->interval_ms ? opts->interval_ms : 1000;
	ctx->python = opts->common.python;
	tracer_opts.aggregate = true;
	tracer_opts.no_call_records = true;
	exit_code = cp_session__open(&session, &opts->common);
	if (!exit_code)
		exit_code = cp_session__attach(&session, &tracer_opts);
	if (exit_code)
		goto cleanup;
	ctx->session = &session;
	ctx->names = session.names;
	ctx->path = (struct cp_record_path){ .on_record = on_record, .ctx = ctx, .lock = &ctx->lock };
	exit_code = cp_record_path__start(&ctx->path, &session);
	if (exit_code)
		goto cleanup;
	exit_code = CP_EXIT_SETUP;
	screen = newterm(NULL, stdout, stdin);
	if (!screen) {
		cp_say("cannot drive this terminal (TERM=%s)", getenv("TERM") ? getenv("TERM") : "");
		goto cleanup;
	}
	cbreak();
	noecho();
	nodelay(stdscr, TRUE);
	keypad(stdscr, TRUE);
	curs_set(0);
	refresh_view(ctx);
	hooks.tick_ms = ctx->interval_ms;
	hooks.tick = refresh_view;
	hooks.extra_fd = STDIN_FILENO;
	hooks.on_extra = on_key;
	hooks.ctx = ctx;
	cp_session__run(&session, &hooks, NULL);
	endwin();
	delscreen(screen);
	screen = NULL;
	exit_code = cp_session__finish(&session);

cleanup:
	if (screen) {
		endwin();
		delscreen(screen);
	}
	cp_session__close(&session);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
	return exit_code;
}
