// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The PTX rewriter (ptx_rewrite.h). One lexer pass finds the module's
 * header, its .entry directives with their parameter lists and bodies, and
 * the exits in each body; a second pass checks that no matching kernel is
 * referenced from elsewhere in the module (a device-side launch would pass
 * the old parameter list). The new text is the old one with insertions,
 * every byte of the old text kept in order.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuprobe_internal.h"
#include "ptx_jit.h"
#include "ptx_rewrite.h"

/* Kernel parameter blocks: 4 KiB, or 32764 bytes from PTX ISA 8.1 on. */
#define PARAM_LIMIT_OLD 4096u
#define PARAM_LIMIT_NEW 32764u
#define NAME_MAX_LEN 4096

enum tok_kind { TOK_END, TOK_WORD, TOK_PUNCT, TOK_STRING };

struct tok {
	enum tok_kind kind;
	size_t start, len;
};

struct lexer {
	const char *s;
	size_t len, pos;
	int error; /* -EINVAL: an unterminated comment or string */
};

/* An exit statement of a kernel body: where it starts, and its guard. */
struct exit_site {
	size_t pos;
	size_t predicate_start, predicate_len; /* the guard's predicate ("%p1"); 0 length: no guard */
	bool negated;                          /* "@!%p1" */
};

/* What the first pass learns of one .entry. */
struct entry_info {
	struct tok name;
	size_t param_insert;   /* where the added parameter goes */
	int param_shape;       /* 0: "(... )" with params, 1: "()" empty, 2: no parentheses */
	bool opaque_param;     /* a .texref/.samplerref/.surfref parameter */
	size_t body_open;      /* just after its '{' */
	struct exit_site *exits;
	size_t exit_count;
};

struct insertion {
	size_t pos;
	char *text;
};

struct rewriter {
	const char *s;
	size_t len;
	const struct cp_ptx_rewrite_opts *opts;
	struct cp_ptx_rewrite *out;
	char *error;
	size_t error_size;
	struct entry_info *entries;
	size_t entry_count;
	size_t header_end;     /* after the last of .version, .target, .address_size */
	bool seen_version, seen_address_size;
	unsigned int address_size;
	bool foreign;          /* the module already has __cuprobe symbols */
	struct insertion *inserts;
	size_t insert_count;
	char *blocks[CP_PTX_MAX_PROBES]; /* each probe's code as a block (probe_blocks) */
};

static int fail(struct rewriter *rw, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct rewriter *rw, int err, const char *fmt, ...)
{
	va_list ap;

	if (rw->error && rw->error_size) {
		va_start(ap, fmt);
		vsnprintf(rw->error, rw->error_size, fmt, ap);
		va_end(ap);
	}
	return err;
}

bool cp_ptx__glob_matches(const char *glob, const char *mangled)
{
	char name[NAME_MAX_LEN];

	if (!glob || !mangled)
		return false;
	if (!fnmatch(glob, mangled, 0))
		return true;
	cp_demangle_name(mangled, name, sizeof(name));
	return !fnmatch(glob, name, 0);
}

/* ---- the lexer ------------------------------------------------------------------ */

static bool word_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '$' || c == '%' || c == '.';
}

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '$' || c == '.';
}

static struct tok next_tok(struct lexer *lx)
{
	const char *s = lx->s;
	struct tok t = { .kind = TOK_END };

	while (lx->pos < lx->len) {
		char c = s[lx->pos];

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
			lx->pos++;
		} else if (c == '/' && lx->pos + 1 < lx->len && s[lx->pos + 1] == '/') {
			while (lx->pos < lx->len && s[lx->pos] != '\n')
				lx->pos++;
		} else if (c == '/' && lx->pos + 1 < lx->len && s[lx->pos + 1] == '*') {
			lx->pos += 2;
			while (lx->pos + 1 < lx->len && !(s[lx->pos] == '*' && s[lx->pos + 1] == '/'))
				lx->pos++;
			if (lx->pos + 1 >= lx->len) {
				lx->error = -EINVAL;
				lx->pos = lx->len;
				return t;
			}
			lx->pos += 2;
		} else {
			break;
		}
	}
	if (lx->pos >= lx->len)
		return t;
	t.start = lx->pos;
	if (s[lx->pos] == '"') {
		lx->pos++;
		while (lx->pos < lx->len && s[lx->pos] != '"') {
			if (s[lx->pos] == '\\')
				lx->pos++;
			lx->pos++;
		}
		if (lx->pos >= lx->len) {
			lx->error = -EINVAL;
			return (struct tok){ .kind = TOK_END };
		}
		lx->pos++;
		t.kind = TOK_STRING;
	} else if (word_start(s[lx->pos])) {
		lx->pos++;
		while (lx->pos < lx->len && word_char(s[lx->pos]))
			lx->pos++;
		t.kind = TOK_WORD;
	} else {
		lx->pos++;
		t.kind = TOK_PUNCT;
	}
	t.len = lx->pos - t.start;
	return t;
}

static struct tok peek_tok(const struct lexer *lx)
{
	struct lexer copy = *lx;

	return next_tok(&copy);
}

static bool is(const struct rewriter *rw, struct tok t, const char *text)
{
	size_t n = strlen(text);

	return t.kind != TOK_END && t.len == n && !memcmp(rw->s + t.start, text, n);
}

static bool is_punct(const struct rewriter *rw, struct tok t, char c)
{
	return t.kind == TOK_PUNCT && rw->s[t.start] == c;
}

static bool has_prefix(const struct rewriter *rw, struct tok t, const char *prefix)
{
	size_t n = strlen(prefix);

	return t.kind == TOK_WORD && t.len >= n && !memcmp(rw->s + t.start, prefix, n);
}

/* The rest of the line: debug directives (.loc, .file) end there, not at a ';'. */
static void skip_line(struct lexer *lx)
{
	while (lx->pos < lx->len && lx->s[lx->pos] != '\n')
		lx->pos++;
}

/* ---- the module header -------------------------------------------------------------- */

static unsigned int parse_uint(const char *s, size_t len, size_t *used)
{
	unsigned int v = 0;
	size_t i = 0;

	while (i < len && s[i] >= '0' && s[i] <= '9' && v < 100000000u)
		v = v * 10 + (unsigned int)(s[i++] - '0');
	if (used)
		*used = i;
	return v;
}

static void parse_version(struct rewriter *rw, struct lexer *lx)
{
	struct tok t = next_tok(lx);
	size_t used;

	if (t.kind != TOK_WORD)
		return;
	rw->out->version_major = parse_uint(rw->s + t.start, t.len, &used);
	if (used < t.len && rw->s[t.start + used] == '.')
		rw->out->version_minor = parse_uint(rw->s + t.start + used + 1, t.len - used - 1, NULL);
	rw->seen_version = true;
	rw->header_end = t.start + t.len;
}

static void parse_target(struct rewriter *rw, struct lexer *lx)
{
	struct tok t = next_tok(lx);

	for (;;) {
		if (t.kind != TOK_WORD)
			return;
		if (has_prefix(rw, t, "sm_") && !rw->out->target_arch)
			rw->out->target_arch = parse_uint(rw->s + t.start + 3, t.len - 3, NULL);
		rw->header_end = t.start + t.len;
		if (!is_punct(rw, peek_tok(lx), ','))
			return;
		next_tok(lx);
		t = next_tok(lx);
	}
}

static void parse_address_size(struct rewriter *rw, struct lexer *lx)
{
	struct tok t = next_tok(lx);

	if (t.kind != TOK_WORD)
		return;
	rw->address_size = parse_uint(rw->s + t.start, t.len, NULL);
	rw->seen_address_size = true;
	rw->header_end = t.start + t.len;
}

/* ---- entries ------------------------------------------------------------------------ */

static size_t align_up(size_t v, size_t a)
{
	return a ? (v + a - 1) / a * a : v;
}

static size_t type_size(const struct rewriter *rw, struct tok t)
{
	static const struct { const char *name; size_t size; } types[] = {
		{ ".b8", 1 }, { ".u8", 1 }, { ".s8", 1 },
		{ ".b16", 2 }, { ".u16", 2 }, { ".s16", 2 }, { ".f16", 2 }, { ".bf16", 2 },
		{ ".b32", 4 }, { ".u32", 4 }, { ".s32", 4 }, { ".f32", 4 }, { ".f16x2", 4 },
		{ ".bf16x2", 4 },
		{ ".b64", 8 }, { ".u64", 8 }, { ".s64", 8 }, { ".f64", 8 },
		{ ".b128", 16 },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (is(rw, t, types[i].name))
			return types[i].size;
	return 0;
}

/*
 * One parameter's tokens, from its .param to the ',' or ')' after it:
 * its size and alignment laid out at *offset.
 */
static int parse_param(struct rewriter *rw, struct lexer *lx, struct entry_info *e,
		       struct cp_ptx_kernel *k, size_t *offset, struct tok *end)
{
	size_t align = 0, size = 0, count = 1;
	bool pointee = false;
	struct tok t = next_tok(lx), last = t;

	if (!is(rw, t, ".param"))
		return fail(rw, -EINVAL, "kernel %s: a parameter is not a .param", k->name);
	for (t = next_tok(lx); t.kind != TOK_END; t = next_tok(lx)) {
		if (is_punct(rw, t, ',') || is_punct(rw, t, ')'))
			break;
		last = t;
		if (is(rw, t, ".ptr")) {
			pointee = true;
		} else if (is(rw, t, ".align")) {
			struct tok n = next_tok(lx);

			if (!pointee)
				align = parse_uint(rw->s + n.start, n.len, NULL);
		} else if (is(rw, t, ".texref") || is(rw, t, ".samplerref") || is(rw, t, ".surfref")) {
			e->opaque_param = true;
			size = 8;
		} else if (type_size(rw, t)) {
			size = type_size(rw, t);
		} else if (is_punct(rw, t, '[')) {
			struct tok n = next_tok(lx);

			count = parse_uint(rw->s + n.start, n.len, NULL);
			last = next_tok(lx);
			if (!is_punct(rw, last, ']'))
				return fail(rw, -EINVAL, "kernel %s: a parameter's array size", k->name);
		}
	}
	if (!size)
		return fail(rw, -EINVAL, "kernel %s: a parameter of unknown type", k->name);
	if (!align)
		align = size;
	*offset = align_up(*offset, align) + size * count;
	k->param_count++;
	e->param_insert = last.start + last.len;
	*end = t;
	return 0;
}

static int add_exit(struct entry_info *e, const struct exit_site *site)
{
	struct exit_site *grown = realloc(e->exits, (e->exit_count + 1) * sizeof(*grown));

	if (!grown)
		return -ENOMEM;
	e->exits = grown;
	e->exits[e->exit_count++] = *site;
	return 0;
}

/* A body, from after its '{' to its matching '}': the exits in it. */
static int parse_body(struct rewriter *rw, struct lexer *lx, struct entry_info *e,
		      const struct cp_ptx_kernel *k)
{
	bool statement_start = true;
	int depth = 1;
	struct tok t;

	while ((t = next_tok(lx)).kind != TOK_END) {
		if (is_punct(rw, t, '{')) {
			depth++;
			statement_start = true;
		} else if (is_punct(rw, t, '}')) {
			if (--depth == 0)
				return 0;
			statement_start = true;
		} else if (is_punct(rw, t, ';')) {
			statement_start = true;
		} else if (statement_start) {
			struct exit_site site = { .pos = t.start };

			if (is(rw, t, ".loc") || is(rw, t, ".file")) {
				skip_line(lx);
				continue;
			}
			if (t.kind == TOK_WORD && is_punct(rw, peek_tok(lx), ':')) {
				next_tok(lx); /* a label */
				continue;
			}
			statement_start = false;
			if (is_punct(rw, t, '@')) {
				t = next_tok(lx);
				site.negated = is_punct(rw, t, '!');
				if (site.negated)
					t = next_tok(lx);
				if (t.kind != TOK_WORD)
					return fail(rw, -EINVAL, "kernel %s: a guard without a predicate", k->name);
				site.predicate_start = t.start;
				site.predicate_len = t.len;
				t = next_tok(lx);
			}
			if (is(rw, t, "ret") || has_prefix(rw, t, "ret.") || is(rw, t, "exit")) {
				int err = add_exit(e, &site);

				if (err)
					return fail(rw, err, "out of memory");
			}
		}
	}
	return fail(rw, lx->error ? lx->error : -EINVAL, "kernel %s: its body does not end", k->name);
}

static int new_kernel(struct rewriter *rw, struct tok name, struct entry_info **e,
		      struct cp_ptx_kernel **k)
{
	struct cp_ptx_rewrite *out = rw->out;
	struct entry_info *entries;
	struct cp_ptx_kernel *kernels;
	size_t i;

	entries = realloc(rw->entries, (rw->entry_count + 1) * sizeof(*entries));
	if (!entries)
		return -ENOMEM;
	rw->entries = entries;
	kernels = realloc(out->kernels, (out->kernel_count + 1) * sizeof(*kernels));
	if (!kernels)
		return -ENOMEM;
	out->kernels = kernels;
	*e = &rw->entries[rw->entry_count++];
	*k = &out->kernels[out->kernel_count++];
	memset(*e, 0, sizeof(**e));
	memset(*k, 0, sizeof(**k));
	(*e)->name = name;
	(*k)->name = strndup(rw->s + name.start, name.len);
	if (!(*k)->name)
		return -ENOMEM;
	for (i = 0; i < rw->opts->probe_count; i++)
		if (cp_ptx__glob_matches(rw->opts->probes[i].glob, (*k)->name))
			(*k)->probes |= 1ull << i;
	return 0;
}

/* After ".entry": its name, parameters, directives, and body or ';'. */
static int parse_entry(struct rewriter *rw, struct lexer *lx)
{
	struct entry_info *e;
	struct cp_ptx_kernel *k;
	size_t offset = 0;
	struct tok t, name = next_tok(lx);
	int err;

	if (name.kind != TOK_WORD)
		return fail(rw, -EINVAL, ".entry without a name");
	err = new_kernel(rw, name, &e, &k);
	if (err)
		return fail(rw, err, "out of memory");
	t = next_tok(lx);
	if (is_punct(rw, t, '(')) {
		if (is_punct(rw, peek_tok(lx), ')')) {
			t = next_tok(lx);
			e->param_shape = 1;
			e->param_insert = t.start;
		} else {
			do {
				err = parse_param(rw, lx, e, k, &offset, &t);
				if (err)
					return err;
			} while (is_punct(rw, t, ','));
			if (!is_punct(rw, t, ')'))
				return fail(rw, -EINVAL, "kernel %s: its parameter list does not end", k->name);
		}
		k->param_bytes = offset;
		t = next_tok(lx);
	} else {
		e->param_shape = 2;
		e->param_insert = name.start + name.len;
	}
	/* Performance directives (.maxntid 128, 1, 1 ...), a .pragma "..."; then the body or ';'. */
	for (; t.kind != TOK_END; t = next_tok(lx)) {
		if (is(rw, t, ".pragma")) {
			t = next_tok(lx);
			if (t.kind != TOK_STRING || !is_punct(rw, next_tok(lx), ';'))
				return fail(rw, -EINVAL, "kernel %s: a .pragma not ending in ';'", k->name);
			continue;
		}
		if (is_punct(rw, t, ';'))
			return 0;
		if (is_punct(rw, t, '{')) {
			k->defined = true;
			e->body_open = t.start + 1;
			return parse_body(rw, lx, e, k);
		}
	}
	return fail(rw, lx->error ? lx->error : -EINVAL, "kernel %s: neither a body nor ';'", k->name);
}

/* The first pass: header, entries, exits; braces outside entries tracked to know the module scope. */
static int scan_module(struct rewriter *rw)
{
	struct lexer lx = { .s = rw->s, .len = rw->len };
	int depth = 0, err;
	struct tok t;

	while ((t = next_tok(&lx)).kind != TOK_END) {
		if (has_prefix(rw, t, "__cuprobe") || has_prefix(rw, t, "%__cuprobe"))
			rw->foreign = true;
		if (is_punct(rw, t, '{')) {
			depth++;
		} else if (is_punct(rw, t, '}')) {
			if (depth > 0)
				depth--;
		} else if (depth == 0 && t.kind == TOK_WORD) {
			if (is(rw, t, ".version")) {
				parse_version(rw, &lx);
			} else if (is(rw, t, ".target")) {
				parse_target(rw, &lx);
			} else if (is(rw, t, ".address_size")) {
				parse_address_size(rw, &lx);
			} else if (is(rw, t, ".entry")) {
				err = parse_entry(rw, &lx);
				if (err)
					return err;
			}
		}
	}
	if (lx.error)
		return fail(rw, lx.error, "an unterminated comment or string");
	return 0;
}

/*
 * The second pass: a matching kernel's name anywhere but where it is
 * declared or defined (taking its address for a device-side launch).
 */
static int check_references(struct rewriter *rw)
{
	struct lexer lx = { .s = rw->s, .len = rw->len };
	size_t i, j, matched = 0, *index, *seen;
	struct tok t;
	int err = 0;

	index = calloc(rw->entry_count ? rw->entry_count : 1, sizeof(*index));
	seen = calloc(rw->entry_count ? rw->entry_count : 1, sizeof(*seen));
	if (!index || !seen) {
		free(index);
		free(seen);
		return fail(rw, -ENOMEM, "out of memory");
	}
	for (i = 0; i < rw->entry_count; i++)
		if (rw->out->kernels[i].probes)
			index[matched++] = i;
	while ((t = next_tok(&lx)).kind != TOK_END) {
		if (t.kind != TOK_WORD)
			continue;
		for (j = 0; j < matched; j++) {
			const struct tok *name = &rw->entries[index[j]].name;

			if (t.len == name->len && !memcmp(rw->s + t.start, rw->s + name->start, t.len))
				seen[j]++;
		}
	}
	for (j = 0; j < matched && !err; j++) {
		const struct tok *name = &rw->entries[index[j]].name;
		size_t declared = 0;

		/* Each .entry of that name (a declaration and its definition) names it once. */
		for (i = 0; i < rw->entry_count; i++)
			declared += rw->entries[i].name.len == name->len &&
				    !memcmp(rw->s + rw->entries[i].name.start, rw->s + name->start, name->len);
		if (seen[j] > declared)
			err = fail(rw, -ENOTSUP,
				   "kernel %s is referenced inside its module (a device-side launch would pass the old parameters)",
				   rw->out->kernels[index[j]].name);
	}
	free(index);
	free(seen);
	return err;
}

/* ---- the new text ---------------------------------------------------------------------- */

static int insert(struct rewriter *rw, size_t pos, char *text)
{
	struct insertion *grown;

	if (!text)
		return -ENOMEM;
	grown = realloc(rw->inserts, (rw->insert_count + 1) * sizeof(*grown));
	if (!grown) {
		free(text);
		return -ENOMEM;
	}
	rw->inserts = grown;
	rw->inserts[rw->insert_count++] = (struct insertion){ .pos = pos, .text = text };
	return 0;
}

/*
 * One kernel's probes of one kind (entry or exit), each program's code in
 * a block of its own (cp_ptx__inline_block), all skipped where the exit's
 * guard (site; NULL at the entry) does not hold.
 */
static char *probe_blocks(const struct rewriter *rw, uint64_t probes, const struct exit_site *site)
{
	bool at_exit = site != NULL, guarded = site && site->predicate_len;
	char *text = NULL;
	size_t size = 0, i;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return NULL;
	/* At an exit the statement's own indentation is already there. */
	fprintf(f, "%s{ // cuprobe: %s programs\n", at_exit ? "" : "\t", at_exit ? "exit" : "entry");
	if (guarded) /* "@%p1 ret" skips them where "@!%p1" holds, and the other way round */
		fprintf(f, "\t@%s%.*s bra \t$__cuprobe_skip;\n", site->negated ? "" : "!",
			(int)site->predicate_len, rw->s + site->predicate_start);
	for (i = 0; i < rw->opts->probe_count; i++)
		if (probes >> i & 1 && rw->opts->probes[i].at_exit == at_exit)
			fprintf(f, "\t// %s\n%s", rw->opts->probes[i].function, rw->blocks[i]);
	if (guarded)
		fputs("$__cuprobe_skip:\n", f);
	fputs(at_exit ? "\t}\n\t" : "\t}\n", f);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}

static int plan_kernel(struct rewriter *rw, const struct entry_info *e, const struct cp_ptx_kernel *k)
{
	unsigned int limit = rw->out->version_major > 8 ||
			     (rw->out->version_major == 8 && rw->out->version_minor >= 1) ?
			     PARAM_LIMIT_NEW : PARAM_LIMIT_OLD;
	bool has_exit_probe = false, has_entry_probe = false;
	char *text, *calls = NULL;
	size_t i;
	int err;

	if (e->opaque_param)
		return fail(rw, -ENOTSUP, "kernel %s takes a texture, sampler or surface reference parameter",
			    k->name);
	if (align_up(k->param_bytes, 8) + 8 > limit)
		return fail(rw, -ENOTSUP, "kernel %s: %zu bytes of parameters leave no room for cuprobe's (limit %u)",
			    k->name, k->param_bytes, limit);
	for (i = 0; i < rw->opts->probe_count; i++)
		if (k->probes >> i & 1) {
			has_exit_probe |= rw->opts->probes[i].at_exit;
			has_entry_probe |= !rw->opts->probes[i].at_exit;
		}
	text = strdup(e->param_shape == 0 ? ",\n\t.param .u64 " CP_PTX_LAUNCH_PARAM :
		      e->param_shape == 1 ? ".param .u64 " CP_PTX_LAUNCH_PARAM :
					    "(.param .u64 " CP_PTX_LAUNCH_PARAM ")");
	err = insert(rw, e->param_insert, text);
	if (err || !k->defined)
		return err;
	/* Each block reads the kernel's parameter itself: the kernel needs no register of ours. */
	if (has_entry_probe) {
		calls = probe_blocks(rw, k->probes, NULL);
		if (!calls || asprintf(&text, "\n%s", calls) < 0)
			text = NULL;
		free(calls);
		err = insert(rw, e->body_open, text);
	}
	for (i = 0; !err && has_exit_probe && i < e->exit_count; i++) {
		const struct exit_site *x = &e->exits[i];

		err = insert(rw, x->pos, probe_blocks(rw, k->probes, x));
	}
	return err;
}

static int by_position(const void *a, const void *b)
{
	const struct insertion *x = a, *y = b;

	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int assemble(struct rewriter *rw)
{
	size_t total = rw->len + 1, i, at = 0, used = 0;
	char *text;

	/* Stable: insertions at one position keep the order they were made in. */
	for (i = 0; i < rw->insert_count; i++)
		total += strlen(rw->inserts[i].text);
	text = malloc(total);
	if (!text)
		return -ENOMEM;
	qsort(rw->inserts, rw->insert_count, sizeof(*rw->inserts), by_position);
	for (i = 0; i < rw->insert_count; i++) {
		const struct insertion *in = &rw->inserts[i];
		size_t n = strlen(in->text);

		memcpy(text + used, rw->s + at, in->pos - at);
		used += in->pos - at;
		at = in->pos;
		memcpy(text + used, in->text, n);
		used += n;
	}
	memcpy(text + used, rw->s + at, rw->len - at);
	used += rw->len - at;
	text[used] = '\0';
	rw->out->text = text;
	rw->out->len = used;
	return 0;
}

/* Can the module take the inserted code at all? */
static int check_module(struct rewriter *rw)
{
	const struct cp_ptx_rewrite *out = rw->out;

	if (!rw->seen_version)
		return fail(rw, -EINVAL, "not PTX: no .version");
	if (out->version_major * 10 + out->version_minor <
	    CP_PTX_MIN_VERSION_MAJOR * 10 + CP_PTX_MIN_VERSION_MINOR)
		return fail(rw, -ENOTSUP, "PTX ISA %u.%u is older than %u.%u, the oldest cuprobe's code joins",
			    out->version_major, out->version_minor, CP_PTX_MIN_VERSION_MAJOR,
			    CP_PTX_MIN_VERSION_MINOR);
	if (out->target_arch < CP_PTX_MIN_ARCH)
		return fail(rw, -ENOTSUP, "PTX for sm_%u: cuprobe's code needs sm_%u or later",
			    out->target_arch, CP_PTX_MIN_ARCH);
	if (!rw->seen_address_size || rw->address_size != 64)
		return fail(rw, -ENOTSUP, "the module uses 32-bit addresses (.address_size %s)",
			    rw->seen_address_size ? "32" : "missing");
	if (rw->foreign)
		return fail(rw, -ENOTSUP, "the module already holds cuprobe's symbols (__cuprobe*)");
	return 0;
}

int cp_ptx__rewrite(const char *ptx, size_t len, const struct cp_ptx_rewrite_opts *opts,
		    struct cp_ptx_rewrite *out, char *error, size_t error_size)
{
	struct rewriter rw = { .s = ptx, .len = len, .opts = opts, .out = out, .error = error,
			       .error_size = error_size };
	uint64_t used = 0; /* probes some kernel matched */
	size_t i;
	int err;

	if (error && error_size)
		error[0] = '\0';
	if (!ptx || !opts || !out || opts->probe_count > CP_PTX_MAX_PROBES)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	/* A NUL inside ends the text, as the driver reads it. */
	rw.len = strnlen(ptx, len);
	err = scan_module(&rw);
	for (i = 0; !err && i < out->kernel_count; i++)
		used |= out->kernels[i].probes;
	if (err || !used)
		goto out;
	err = check_module(&rw);
	if (!err)
		err = check_references(&rw);
	if (!err) {
		char *prelude;

		err = asprintf(&prelude, "\n%s\n", opts->prelude ? opts->prelude : "") < 0 ?
		      -ENOMEM : insert(&rw, rw.header_end, prelude);
	}
	for (i = 0; !err && i < opts->probe_count; i++) {
		if (!(used >> i & 1))
			continue;
		rw.blocks[i] = cp_ptx__inline_block(opts->prelude, opts->probes[i].function);
		if (!rw.blocks[i])
			err = fail(&rw, -EINVAL, "program %s: no function of that name in the prelude",
				   opts->probes[i].function);
	}
	for (i = 0; !err && i < out->kernel_count; i++)
		if (out->kernels[i].probes)
			err = plan_kernel(&rw, &rw.entries[i], &out->kernels[i]);
	if (!err)
		err = assemble(&rw);
	if (err == -ENOMEM)
		fail(&rw, err, "out of memory");
out:
	for (i = 0; i < rw.entry_count; i++)
		free(rw.entries[i].exits);
	free(rw.entries);
	for (i = 0; i < rw.insert_count; i++)
		free(rw.inserts[i].text);
	free(rw.inserts);
	for (i = 0; i < CP_PTX_MAX_PROBES; i++)
		free(rw.blocks[i]);
	return err;
}

void cp_ptx_rewrite__release(struct cp_ptx_rewrite *rewrite)
{
	size_t i;

	if (!rewrite)
		return;
	free(rewrite->text);
	for (i = 0; i < rewrite->kernel_count; i++)
		free(rewrite->kernels[i].name);
	free(rewrite->kernels);
	memset(rewrite, 0, sizeof(*rewrite));
}
