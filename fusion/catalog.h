/*
 * catalog.h - what a kernel computes, for fusion code generation.
 *
 * A catalog maps kernel names (exact, or a glob pattern: mangled names from
 * a captured graph and demangled names from a trace both match) to a small
 * operator description: the kernel's parameters by position (which one is
 * which tensor, size or scalar), its shape as rows x cols, and a list of
 * statements over one element i = row * cols + col:
 *
 *   out    BUF[i] = EXPR        elementwise store (BUF a f32* parameter)
 *   reduce NAME OP EXPR         row reduction (sum | mean | max | min) of EXPR
 *                               over the row's cols; NAME is usable by the
 *                               statements after it
 *   let NAME EXPR               a per-row value (no [i] or [col] loads), computed
 *                               once per row as the kernel computes it once
 *   dot NAME W X K              NAME = sum over c < K of W[i * K + c] * X[c]: a
 *                               matrix-vector product, one output element i per
 *                               warp (a GEMV), summed in the kernel's lane order
 *
 * EXPR is a C-like expression over numbers, scalar parameters, loads
 * BUF[i] / BUF[col] / BUF[row] (broadcasts), i/row/col/rows/cols, earlier
 * reductions, a fixed list of functions (expf, tanhf, rsqrtf, gelu_tanh...),
 * + - * / %, comparisons, && || !, and ?:. The text format is specified in
 * fusion/FUSION.md.
 *
 * The reader parses untrusted text: every length and count is bounded by
 * the KP_FX_MAX_* limits, and errors name the file, line and field
 * ("cat.kpcat:12: kernel 'ln': field 'out': unknown name 'q'"). The parse
 * entry point is pure (buffer in, catalog out) so that it can be fuzzed.
 *
 * Ownership: a catalog owns everything it points to; kp_fx_catalog_free
 * releases it. Nothing in it is executable: code generation re-emits
 * expressions from the checked tree, never from the input text.
 */
#ifndef KP_FUSION_CATALOG_H
#define KP_FUSION_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"
#include "../common/strbuf.h"

#define KP_FX_MAX_FILE_BYTES  (1u << 20)
#define KP_FX_MAX_LINE        1024
#define KP_FX_MAX_NAME        31      /* identifiers and kernel names */
#define KP_FX_MAX_PATTERN     255
#define KP_FX_MAX_KERNELS     1024
#define KP_FX_MAX_PATTERNS    8       /* match lines per kernel */
#define KP_FX_MAX_PARAMS      32
#define KP_FX_MAX_STMTS       16
#define KP_FX_MAX_NODES       256     /* expression nodes per kernel */
#define KP_FX_MAX_DEPTH       48      /* expression nesting */

/* Parameter types. Tensors hold f32 or f16 elements; all arithmetic is f32
 * (an f16 load widens, an f16 store rounds to nearest even). */
enum kp_fx_type {
	KP_FX_PTR_F32 = 1,   /* "f32*": 8 bytes */
	KP_FX_I32,           /* "i32": 4 bytes */
	KP_FX_I64,           /* "i64": 8 bytes */
	KP_FX_F32,           /* "f32": 4 bytes, scalar */
	KP_FX_PTR_F16,       /* "f16*": 8 bytes, IEEE binary16 elements */
	KP_FX_PTR_I32,       /* "i32*": 8 bytes, read as NAME[0] only (a device scalar) */
};

/* 1 for the tensor (pointer) types. */
#define KP_FX_IS_TENSOR(t) ((t) == KP_FX_PTR_F32 || (t) == KP_FX_PTR_F16 || (t) == KP_FX_PTR_I32)
#define KP_FX_MAX_LAYOUT_VEC 16

/* Expression node kinds. */
enum kp_fx_node_kind {
	KP_FX_N_NUM = 1,     /* text: the literal as it will be emitted */
	KP_FX_N_SCALAR,      /* a: parameter index */
	KP_FX_N_LOAD,        /* a: parameter index, b: enum kp_fx_index */
	KP_FX_N_RED,         /* a: statement index of the reduction */
	KP_FX_N_INDEX,       /* a: enum kp_fx_index (i, row, col) or rows/cols */
	KP_FX_N_CALL,        /* a: function index, args in b, c, d (-1: none) */
	KP_FX_N_UNARY,       /* op: '-' or '!', a: operand */
	KP_FX_N_BINARY,      /* op: token (see catalog_read.c), a, b */
	KP_FX_N_COND,        /* a ? b : c */
};

enum kp_fx_index { KP_FX_I = 0, KP_FX_ROW, KP_FX_COL, KP_FX_ROWS, KP_FX_COLS,
		   KP_FX_ZERO /* loads only: BUF[0] */ };

struct kp_fx_node {
	int kind;            /* enum kp_fx_node_kind */
	int op;
	int a, b, c, d;
	char text[24];       /* KP_FX_N_NUM only */
};

enum kp_fx_stmt_kind { KP_FX_S_OUT = 1, KP_FX_S_REDUCE, KP_FX_S_LET, KP_FX_S_DOT };
enum kp_fx_red_op { KP_FX_R_SUM = 1, KP_FX_R_MEAN, KP_FX_R_MAX, KP_FX_R_MIN };

struct kp_fx_stmt {
	int kind;            /* enum kp_fx_stmt_kind */
	int param;           /* KP_FX_S_OUT: the f32* parameter stored to */
	int red_op;          /* KP_FX_S_REDUCE: enum kp_fx_red_op */
	char name[KP_FX_MAX_NAME + 1];   /* KP_FX_S_REDUCE, KP_FX_S_LET: its name */
	int expr;            /* root node index */
};

/* A shape term: parameter value, constant, or the launch's grid.x/y or block.x. */
enum kp_fx_term_kind { KP_FX_T_PARAM = 1, KP_FX_T_CONST, KP_FX_T_GRIDX, KP_FX_T_GRIDY,
		       KP_FX_T_BLOCKX };

struct kp_fx_shape {
	int kind[2];         /* enum kp_fx_term_kind; kind[1] 0 when op is 0 */
	int64_t v[2];        /* parameter index or constant */
	int op;              /* 0, '/' or '*' */
};

struct kp_fx_param {
	char name[KP_FX_MAX_NAME + 1];
	int type;            /* enum kp_fx_type; 0 while undeclared */
	int is_const;        /* "const": a tensor is read-only and nothing the kernel
				may run concurrently with writes it (weights); a
				scalar's captured value may be compiled in */
};

struct kp_fx_kernel {
	char name[KP_FX_MAX_NAME + 1];
	int line;                              /* where it starts (messages) */
	size_t n_match;
	char *match[KP_FX_MAX_PATTERNS];       /* glob patterns, no whitespace */
	size_t n_params;
	struct kp_fx_param params[KP_FX_MAX_PARAMS];
	struct kp_fx_shape rows, cols;
	size_t n_stmts;
	struct kp_fx_stmt stmts[KP_FX_MAX_STMTS];
	size_t n_nodes;
	struct kp_fx_node *nodes;              /* KP_FX_MAX_NODES at most */
	int has_reduce;
	/* "layout BLOCK VEC" (0, 0 when absent): the kernel's own thread layout
	 * for a row, BLOCK threads each taking VEC consecutive columns per
	 * step; a fused reduction that follows it sums in the same order */
	int layout_block, layout_vec;
	/* "stride N" (0 when absent): elements between rows of the [i]
	 * tensors, so that i = row * N + col (rows padded past cols) */
	int64_t stride;
	/* "dot NAME W X K" (dot_k 0 when absent; always the first statement):
	 * parameters of the matrix (K elements per output element, 16-byte
	 * aligned rows) and the vector; each lane of a warp takes 16 bytes of
	 * consecutive columns per step of 32 x 16 bytes, sums them in column
	 * order with fmaf, then the lanes by xor shuffles (16, 8, 4, 2, 1) */
	int dot_w, dot_x;
	int64_t dot_k;
};

struct kp_fx_catalog {
	size_t n_kernels;
	struct kp_fx_kernel *kernels;
};

/*
 * Parse a catalog held in buf[0..len). name is for messages. Returns a new
 * catalog (kp_fx_catalog_free) or NULL with err filled: KP_EFORMAT naming
 * "name:LINE: field: expected ..., found ...", KP_ENOMEM.
 */
struct kp_fx_catalog *kp_fx_catalog_parse(const char *buf, size_t len, const char *name,
					  struct kp_err *err);
/* Read and parse the file at path (at most KP_FX_MAX_FILE_BYTES). */
struct kp_fx_catalog *kp_fx_catalog_load(const char *path, struct kp_err *err);
/* Append src's kernels to dst (src is emptied and may be freed). 0 or KP_ENOMEM. */
int kp_fx_catalog_merge(struct kp_fx_catalog *dst, struct kp_fx_catalog *src,
			struct kp_err *err);
void kp_fx_catalog_free(struct kp_fx_catalog *cat);

/* The first kernel (in file order) one of whose patterns matches name; NULL when none. */
const struct kp_fx_kernel *kp_fx_catalog_find(const struct kp_fx_catalog *cat,
					      const char *name);

/* 1 when glob pattern (*, ?, [...] as fnmatch) matches name. */
int kp_fx_glob(const char *pattern, const char *name);

/*
 * 1 when visit returns non-zero for node x of k or any node below it (all
 * operands and branches); x < 0 is no node. Walks the whole tree when visit
 * always returns 0 (to collect).
 */
int kp_fx_expr_any(const struct kp_fx_kernel *k, int x,
		   int (*visit)(const struct kp_fx_node *nd, void *ctx), void *ctx);

/*
 * A kp_fx_expr_any visitor: 1 for a node that depends on how elements split
 * into rows (a [col] or [row] load; row, col, rows or cols).
 */
int kp_fx_split_node(const struct kp_fx_node *nd, void *ctx);

/* Bytes of a parameter of type t (8 or 4); 0 for an unknown type. */
int kp_fx_type_size(int t);
/* C spelling used in generated code ("float *", "int", ...). */
const char *kp_fx_type_c(int t);
/* Name of a function index (KP_FX_N_CALL .a) and its arity. */
const char *kp_fx_func_name(int f);
int kp_fx_func_arity(int f);
/* Spelling of a binary/unary operator token. */
const char *kp_fx_op_name(int op);

#endif
