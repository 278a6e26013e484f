// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where CPython keeps what the frame walker reads, per version, for x86-64
 * release builds (the default, GIL, build):
 *
 *  - 3.10, 3.11, 3.12: cuprobe's tables, the offsetof() of each field in
 *    CPython's own headers (Include/cpython/pystate.h, code.h, frameobject.h,
 *    unicodeobject.h; Include/internal/pycore_runtime.h, pycore_interp.h,
 *    pycore_frame.h), measured for 3.10.13, 3.11.2, 3.11.7 and 3.12.1, the
 *    same within each minor version;
 *  - 3.13 and later: the interpreter's own _Py_DebugOffsets, the first
 *    member of _PyRuntime, whose layout is fixed per minor version
 *    (Include/internal/pycore_runtime.h in 3.13, pycore_debug_offsets.h in
 *    3.14). Free-threaded builds are not walked.
 *
 * What stays fixed in every version here: PyObject's ob_type at 8 and the
 * bit fields of a string's state (kind in bits 2-4, compact 5, ascii 6).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cuprobe_internal.h"

#define NONE CP_PY_NO_OFFSET

/* What 3.11 and 3.12 have at the same place. */
#define PY_311_AND_312								\
	.flags = CP_PY_CFRAME,							\
	.runtime_interpreters_head = 40, .interp_next = 0,			\
	.tstate_next = 8, .tstate_interp = 16, .tstate_frame = 56,		\
	.code_filename = 112, .code_name = 120, .code_qualname = 128,		\
	.code_linetable = 136, .unicode_length = 16, .unicode_state = 32,	\
	.bytes_size = 16, .bytes_data = 32

struct py_table {
	uint32_t version;
	struct cp_py_proc layout;
};

static const struct py_table tables[] = {
	{ CP_PY_VERSION(3, 10), {
		.flags = CP_PY_FRAME_OBJECTS,
		.runtime_interpreters_head = 32,
		.interp_next = 0, .interp_threads_head = 8, /* tstate_head */
		.tstate_next = 8, .tstate_interp = 16, .tstate_thread_id = 176,
		.tstate_frame = 24, .cframe_current_frame = NONE, .tstate_datastack = NONE,
		/* PyFrameObject: f_back, f_code, f_lasti (an int: code units) */
		.frame_code = 32, .frame_previous = 24, .frame_instr = 96, .frame_owner = NONE,
		.code_filename = 104, .code_name = 112, .code_qualname = NONE,
		.code_linetable = 120, .code_firstlineno = 40, .code_adaptive = NONE,
		.unicode_length = 16, .unicode_state = 32,
		.unicode_ascii_data = 48, .unicode_compact_data = 72,
		.bytes_size = 16, .bytes_data = 32,
	} },
	{ CP_PY_VERSION(3, 11), {
		PY_311_AND_312,
		.interp_threads_head = 16, .tstate_thread_id = 152,
		.cframe_current_frame = 8, .tstate_datastack = 296,
		/* _PyInterpreterFrame: f_code, previous, prev_instr, owner (a char) */
		.frame_code = 32, .frame_previous = 48, .frame_instr = 56, .frame_owner = 69,
		.code_firstlineno = 72, .code_adaptive = 184,
		.unicode_ascii_data = 48, .unicode_compact_data = 72,
	} },
	{ CP_PY_VERSION(3, 12), {
		PY_311_AND_312,
		.interp_threads_head = 72, .tstate_thread_id = 136,
		.cframe_current_frame = 0, .tstate_datastack = 232,
		.frame_code = 0, .frame_previous = 8, .frame_instr = 56, .frame_owner = 70,
		.code_firstlineno = 68, .code_adaptive = 192,
		.unicode_ascii_data = 40, .unicode_compact_data = 56,
	} },
};

/*
 * _Py_DebugOffsets (cookie "xdebugpy"), 3.13 and 3.14, up to the sections
 * the walker needs. Each section starts with the size of the struct it
 * describes; the fields read are at the same place of their section in both.
 */
struct debug_head {
	char cookie[8];
	uint64_t version;       /* PY_VERSION_HEX */
	uint64_t free_threaded;
	struct { uint64_t size, finalizing, interpreters_head; } runtime_state;
};

struct debug_interp { uint64_t size, id, next, threads_head; };
struct debug_thread_state {
	uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
		 datastack_chunk, status;
};
struct debug_frame { uint64_t size, previous, executable, instr_ptr, localsplus, owner; };
struct debug_code {
	uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
		 localsplusnames, localspluskinds, co_code_adaptive;
};
struct debug_bytes { uint64_t size, ob_size, ob_sval; };
struct debug_unicode { uint64_t size, state, length, asciiobject_size; };

/* Include/internal/pycore_runtime.h of 3.13. */
struct debug_offsets_313 {
	struct debug_head head;
	struct { struct debug_interp common; uint64_t gc, imports_modules, sysdict, builtins,
		 ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
		 gil_runtime_state_locked, gil_runtime_state_holder; } interpreter_state;
	struct debug_thread_state thread_state;
	struct debug_frame interpreter_frame;
	struct debug_code code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object, dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct debug_bytes bytes_object;
	struct debug_unicode unicode_object;
};

/* Include/internal/pycore_debug_offsets.h of 3.14. */
struct debug_offsets_314 {
	struct debug_head head;
	struct { struct debug_interp common; uint64_t threads_main, gc, imports_modules, sysdict,
		 builtins, ceval_gil, gil_runtime_state, gil_runtime_state_enabled,
		 gil_runtime_state_locked, gil_runtime_state_holder, code_object_generation,
		 tlbc_generation; } interpreter_state;
	struct debug_thread_state thread_state;
	struct { struct debug_frame common; uint64_t stackpointer, tlbc_index; } interpreter_frame;
	struct { struct debug_code common; uint64_t co_tlbc; } code_object;
	struct { uint64_t size, ob_type; } pyobject;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type_object;
	struct { uint64_t size, ob_item, ob_size; } tuple_object, list_object;
	struct { uint64_t size, used, table, mask; } set_object;
	struct { uint64_t size, ma_keys, ma_values; } dict_object;
	struct { uint64_t size, ob_fval; } float_object;
	struct { uint64_t size, lv_tag, ob_digit; } long_object;
	struct debug_bytes bytes_object;
	struct debug_unicode unicode_object;
};

size_t cp_py_layout__debug_offsets_size(void)
{
	return sizeof(struct debug_offsets_313) > sizeof(struct debug_offsets_314) ?
	       sizeof(struct debug_offsets_313) : sizeof(struct debug_offsets_314);
}

/* The one read covering the frame fields the walker takes (the owner is one byte). */
static int frame_span(struct cp_py_proc *layout)
{
	uint32_t fields[3] = { layout->frame_code, layout->frame_previous, layout->frame_instr };
	uint32_t start = UINT32_MAX, end = 0, i;

	for (i = 0; i < 3; i++) {
		start = fields[i] < start ? fields[i] : start;
		end = fields[i] + 8 > end ? fields[i] + 8 : end;
	}
	if (layout->frame_owner != NONE) {
		start = layout->frame_owner < start ? layout->frame_owner : start;
		end = layout->frame_owner + 1 > end ? layout->frame_owner + 1 : end;
	}
	if (end - start > CP_PY_FRAME_READ_MAX)
		return -ERANGE;
	layout->frame_read_start = start;
	layout->frame_read_size = end - start;
	return 0;
}

int cp_py_layout__table(uint32_t version, struct cp_py_proc *out)
{
	size_t i;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		if (tables[i].version != version)
			continue;
		*out = tables[i].layout;
		out->version = version;
		return frame_span(out);
	}
	return -ENOTSUP;
}

/* An offset the interpreter gave: a field of field_size bytes inside a struct of struct_size. */
static bool inside(uint64_t offset, uint64_t field_size, uint64_t struct_size)
{
	return offset < UINT32_MAX && offset + field_size <= struct_size;
}

static int from_debug(struct cp_py_proc *out, uint32_t version, const struct debug_head *head,
		      const struct debug_interp *interp, const struct debug_thread_state *tstate,
		      const struct debug_frame *frame, const struct debug_code *code,
		      const struct debug_bytes *bytes, const struct debug_unicode *unicode)
{
	if (!inside(head->runtime_state.interpreters_head, 8, head->runtime_state.size) ||
	    !inside(interp->next, 8, interp->size) || !inside(interp->threads_head, 8, interp->size) ||
	    !inside(tstate->next, 8, tstate->size) || !inside(tstate->interp, 8, tstate->size) ||
	    !inside(tstate->thread_id, 8, tstate->size) ||
	    !inside(tstate->current_frame, 8, tstate->size) ||
	    !inside(tstate->datastack_chunk, 8, tstate->size) ||
	    !inside(frame->previous, 8, frame->size) || !inside(frame->executable, 8, frame->size) ||
	    !inside(frame->instr_ptr, 8, frame->size) || !inside(frame->owner, 1, frame->size) ||
	    !inside(code->filename, 8, code->size) || !inside(code->name, 8, code->size) ||
	    !inside(code->qualname, 8, code->size) || !inside(code->linetable, 8, code->size) ||
	    !inside(code->firstlineno, 4, code->size) ||
	    !inside(code->co_code_adaptive, 0, code->size) ||
	    !inside(bytes->ob_size, 8, bytes->size) || !inside(bytes->ob_sval, 0, bytes->size) ||
	    !inside(unicode->state, 4, unicode->size) || !inside(unicode->length, 8, unicode->size) ||
	    !inside(unicode->asciiobject_size, 0, unicode->size))
		return -EPROTO;
	memset(out, 0, sizeof(*out));
	out->version = version;
	out->flags = version >= CP_PY_VERSION(3, 14) ? CP_PY_TAGGED_CODE : 0;
	out->runtime_interpreters_head = head->runtime_state.interpreters_head;
	out->interp_next = interp->next;
	out->interp_threads_head = interp->threads_head;
	out->tstate_next = tstate->next;
	out->tstate_interp = tstate->interp;
	out->tstate_thread_id = tstate->thread_id;
	out->tstate_frame = tstate->current_frame;
	out->tstate_datastack = tstate->datastack_chunk;
	out->cframe_current_frame = NONE;
	out->frame_previous = frame->previous;
	out->frame_code = frame->executable;
	out->frame_instr = frame->instr_ptr;
	out->frame_owner = frame->owner;
	out->code_filename = code->filename;
	out->code_name = code->name;
	out->code_qualname = code->qualname;
	out->code_linetable = code->linetable;
	out->code_firstlineno = code->firstlineno;
	out->code_adaptive = code->co_code_adaptive;
	out->bytes_size = bytes->ob_size;
	out->bytes_data = bytes->ob_sval;
	out->unicode_state = unicode->state;
	out->unicode_length = unicode->length;
	out->unicode_ascii_data = unicode->asciiobject_size;
	/* PyCompactUnicodeObject: utf8_length and utf8 after the ASCII header (3.12+). */
	out->unicode_compact_data = unicode->asciiobject_size + 16;
	return frame_span(out);
}

int cp_py_layout__from_debug_offsets(const void *data, size_t size, uint32_t version,
				     struct cp_py_proc *out)
{
	struct debug_head head;

	if (!data || !out || size < sizeof(head))
		return -EINVAL;
	memcpy(&head, data, sizeof(head));
	if (memcmp(head.cookie, "xdebugpy", 8))
		return -EPROTO;
	/* The offsets say which version they describe: it must be the one found. */
	if (CP_PY_VERSION(head.version >> 24 & 0xff, head.version >> 16 & 0xff) != version)
		return -EPROTO;
	if (head.free_threaded)
		return -ENOTSUP;
	if (version == CP_PY_VERSION(3, 13)) {
		struct debug_offsets_313 d;

		if (size < sizeof(d))
			return -EINVAL;
		memcpy(&d, data, sizeof(d));
		return from_debug(out, version, &d.head, &d.interpreter_state.common, &d.thread_state,
				  &d.interpreter_frame, &d.code_object, &d.bytes_object,
				  &d.unicode_object);
	}
	if (version == CP_PY_VERSION(3, 14)) {
		struct debug_offsets_314 d;

		if (size < sizeof(d))
			return -EINVAL;
		memcpy(&d, data, sizeof(d));
		return from_debug(out, version, &d.head, &d.interpreter_state.common, &d.thread_state,
				  &d.interpreter_frame.common, &d.code_object.common,
				  &d.bytes_object, &d.unicode_object);
	}
	return -ENOTSUP;
}

int cp_py_layout__version_of_name(const char *name, uint32_t *version)
{
	const char *at;
	unsigned int minor = 0;
	int digits = 0;

	/* libpython3.12.so.1.0, libpython3.12d.so, python3.12 */
	at = name ? strstr(name, "python3.") : NULL;
	if (!at)
		return -ENOENT;
	for (at += 8; *at >= '0' && *at <= '9' && digits < 3; at++, digits++)
		minor = minor * 10 + (unsigned int)(*at - '0');
	if (!digits || (*at && *at != '.' && *at != 'd' && *at != 'm' && *at != 't'))
		return -ENOENT;
	*version = CP_PY_VERSION(3, minor);
	return 0;
}
