/* The compiled twin of features.encode and features.position_key (features.py holds the reference and the terms):
 *
 *   spatial_planes(states, symmetries, table, planes)   encode's spatial planes
 *   global_inputs(states, out)                          features.global_inputs
 *   position_key(state)                                 features.position_key, the same tuple
 *   decode(policy_logits, value_logits, ownership, symmetries, inverse, table, policy, value, owned)
 *                                                       features.decode into policy, value and owned
 *
 * writes planes[i] (float32, C-contiguous [B, C, area], C the 15 channels of feature set version 1) for states[i],
 * transformed by symmetries[i] through the rows of `table` (symmetry.permutation_table: output flat j reads the
 * point at original flat table[s][j]); symmetries None is the identity for every position and table is then
 * ignored. Liberties are counted exactly, as the reference counts them: every empty point adds one liberty to each
 * distinct chain among its neighbours. Every value written is 0.0 or 1.0, and tests/unit/test_features.py holds
 * the result to the reference's, value for value. decode's softmaxes are computed in float32 as the reference's
 * are, but summed in another order: the test holds them to it within a few units in the last place.
 * Each state may also be a compiled search position (position.py, layout in _position.h), read from its fields: the
 * same planes, global inputs and key as the GameState it stands for (tests/unit/test_position.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "_position.h"

enum { EMPTY, BLACK, WHITE, EDGE };
enum { ON_BOARD, OWN, OPPONENT, OWN_LIBERTIES, OPPONENT_LIBERTIES = 6, KO_BAN = 9, LAST_MOVE = 10, CHANNELS = 15 };
#define HISTORY 5
#define GLOBALS 8
#define SCALE 20.0 /* features._SCALE: points per unit of the score-like inputs */
#define PASS (-1)
#define MAX_ARRAY 1024 /* array size of the largest board, 25x25: (25 + 2) * 26 + 1 = 703 */

_Static_assert(POSITION_HISTORY == HISTORY, "a search position keeps the recent moves the planes read");
static PyTypeObject *position_type;  /* _rules_core.Position, NULL where that twin is not built */
static PyObject *s_board, *s_to_play, *s_moves, *s_colors, *s_chain_head, *s_ko_point, *s_ko_color, *s_grid,
    *s_width, *s_height, *s_rules, *s_scoring, *s_ko, *s_suicide_allowed, *s_bonus, *s_komi, *s_handicap_stones,
    *s_captures, *s_hash;

static int get_long(PyObject *obj, PyObject *name, long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Borrows a C-contiguous buffer of `format` items; -1 with an exception when obj has none of that kind. */
static int borrow(PyObject *obj, Py_buffer *view, int flags, const char *format, Py_ssize_t itemsize,
                  const char *what) {
    if (PyObject_GetBuffer(obj, view, flags | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (f[0] == '<' || f[0] == '=' || f[0] == '@') f++;
    if (view->itemsize != itemsize || strcmp(f, format) != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s must hold '%s' items", what, format);
        return -1;
    }
    return 0;
}

/* The int64 table of a buffer ('q' or 'l' items, both 8 bytes); -1 with an exception otherwise. */
static int borrow_int64(PyObject *obj, Py_buffer *view, const char *what) {
    if (borrow(obj, view, PyBUF_SIMPLE, "q", 8, what) == 0) return 0;
    PyErr_Clear();
    return borrow(obj, view, PyBUF_SIMPLE, "l", 8, what);
}

/* The planes of one position from its arrays: colours, chain heads, the side to move, and the marks per point (bit 0
   the ko ban, bit 1 + k the move k + 1 ago). */
static void encode_arrays(const uint8_t *c, const uint16_t *h, long to_play, const uint8_t *marks, long sym,
                          const int64_t *table, Py_ssize_t width, Py_ssize_t height, float *out) {
    const Py_ssize_t area = width * height, stride = width + 1, n = (height + 2) * stride + 1;
    uint16_t liberties[MAX_ARRAY];
    memset(liberties, 0, sizeof(uint16_t) * (size_t)n);
    for (Py_ssize_t row = 0; row < height; row++) {
        for (Py_ssize_t p = (row + 1) * stride, end = p + width; p < end; p++) {
            if (c[p] != EMPTY) continue;
            uint16_t seen[4];
            int distinct = 0;
            const Py_ssize_t around[4] = {p - stride, p - 1, p + 1, p + stride};
            for (int i = 0; i < 4; i++) {
                uint8_t color = c[around[i]];
                if (color != BLACK && color != WHITE) continue;
                uint16_t chain = h[around[i]];
                int repeated = 0;
                for (int j = 0; j < distinct; j++) repeated |= seen[j] == chain;
                if (!repeated) {
                    seen[distinct++] = chain;
                    liberties[chain]++;
                }
            }
        }
    }
    memset(out, 0, sizeof(float) * (size_t)(CHANNELS * area));  /* then only the ones are written */
    for (Py_ssize_t j = 0; j < area; j++) {
        Py_ssize_t flat = table ? (Py_ssize_t)table[sym * area + j] : j;
        Py_ssize_t p = (flat / width + 1) * stride + flat % width;
        out[ON_BOARD * area + j] = 1.0f;
        uint8_t color = c[p];
        if (color == BLACK || color == WHITE) {
            int own = color == to_play;
            out[(own ? OWN : OPPONENT) * area + j] = 1.0f;
            uint16_t libs = liberties[h[p]];
            if (libs > 0) out[((own ? OWN_LIBERTIES : OPPONENT_LIBERTIES) + (libs < 3 ? libs : 3) - 1) * area + j] = 1.0f;
        }
        for (int bit = 0; marks[p] >> bit; bit++)
            if (marks[p] & (1u << bit)) out[(KO_BAN + bit) * area + j] = 1.0f;
    }
}

/* encode_arrays for a search position (_position.h). */
static int encode_position(const PositionObject *pos, long sym, const int64_t *table, Py_ssize_t width,
                           Py_ssize_t height, float *out) {
    const Py_ssize_t n = (height + 2) * (width + 1) + 1;
    if (pos->ctx->n != n) {
        PyErr_SetString(PyExc_ValueError, "a board of another size than the batch's first");
        return -1;
    }
    uint8_t marks[MAX_ARRAY];
    memset(marks, 0, (size_t)n);
    if (pos->ko_point != PASS && pos->ko_color == pos->to_play) marks[pos->ko_point] |= 1;
    for (int k = 0; k < HISTORY; k++)
        if (pos->recent[k] >= 0) marks[pos->recent[k]] |= (uint8_t)(2u << k);
    encode_arrays(pos->colors, pos->head, pos->to_play, marks, sym, table, width, height, out);
    return 0;
}

static int encode_one(PyObject *state, long sym, const int64_t *table, Py_ssize_t rows, Py_ssize_t width,
                      Py_ssize_t height, float *out) {
    const Py_ssize_t n = (height + 2) * (width + 1) + 1;
    long to_play, ko_point, ko_color;
    if (sym < 0 || sym >= rows) {
        PyErr_Format(PyExc_ValueError, "symmetry %ld has no row in the permutation table", sym);
        return -1;
    }
    if (Py_TYPE(state) == position_type)
        return encode_position((PositionObject *)state, sym, table, width, height, out);
    PyObject *board = PyObject_GetAttr(state, s_board);
    if (board == NULL) return -1;
    if (get_long(state, s_to_play, &to_play) < 0 || get_long(board, s_ko_point, &ko_point) < 0 ||
        get_long(board, s_ko_color, &ko_color) < 0) {
        Py_DECREF(board);
        return -1;
    }
    uint8_t marks[MAX_ARRAY];
    memset(marks, 0, (size_t)n);
    if (ko_point != PASS && ko_color == to_play && ko_point > 0 && ko_point < n) marks[ko_point] |= 1;
    PyObject *moves = PyObject_GetAttr(state, s_moves);
    if (moves == NULL || !PyList_Check(moves)) {
        if (moves != NULL) PyErr_SetString(PyExc_TypeError, "state.moves must be a list");
        Py_XDECREF(moves);
        Py_DECREF(board);
        return -1;
    }
    Py_ssize_t count = PyList_GET_SIZE(moves);
    for (Py_ssize_t k = 0; k < HISTORY && k < count; k++) {
        PyObject *move = PyList_GET_ITEM(moves, count - 1 - k);
        long point = PyTuple_Check(move) && PyTuple_GET_SIZE(move) == 2 ? PyLong_AsLong(PyTuple_GET_ITEM(move, 1)) : -2;
        if (point == -2 || (point == -1 && PyErr_Occurred()) || point < PASS || point >= n) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "state.moves must hold (color, point) pairs");
            Py_DECREF(moves);
            Py_DECREF(board);
            return -1;
        }
        if (point != PASS) marks[point] |= (uint8_t)(2u << k);
    }
    Py_DECREF(moves);

    Py_buffer colors_view, head_view;
    PyObject *colors = PyObject_GetAttr(board, s_colors), *head = PyObject_GetAttr(board, s_chain_head);
    Py_DECREF(board);
    int rc = -1;
    if (colors == NULL || head == NULL) goto release_objects;
    if (borrow(colors, &colors_view, PyBUF_SIMPLE, "B", 1, "board.colors") < 0) goto release_objects;
    if (borrow(head, &head_view, PyBUF_SIMPLE, "H", 2, "board.chain_head") < 0) goto release_colors;
    if (colors_view.len != n || head_view.len != 2 * n) {
        PyErr_SetString(PyExc_ValueError, "a board of another size than the batch's first");
        goto release_head;
    }
    encode_arrays(colors_view.buf, head_view.buf, to_play, marks, sym, table, width, height, out);
    rc = 0;
release_head:
    PyBuffer_Release(&head_view);
release_colors:
    PyBuffer_Release(&colors_view);
release_objects:
    Py_XDECREF(colors);
    Py_XDECREF(head);
    return rc;
}

/* spatial_planes(states, symmetries, table, planes) */
static PyObject *py_spatial_planes(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "spatial_planes(states, symmetries, table, planes)");
        return NULL;
    }
    PyObject *states = PySequence_Fast(args[0], "states must be a sequence"), *symmetries = args[1];
    if (states == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(states);
    long width, height;
    Py_buffer planes_view, table_view = {0};
    const int64_t *table = NULL;
    Py_ssize_t rows = 1;
    PyObject *result = NULL;
    if (count == 0) {
        PyErr_SetString(PyExc_ValueError, "no states to encode");
        goto done;
    }
    PyObject *grid = PyObject_GetAttr(PySequence_Fast_GET_ITEM(states, 0), s_grid);
    int sized = grid != NULL && get_long(grid, s_width, &width) == 0 && get_long(grid, s_height, &height) == 0;
    Py_XDECREF(grid);
    if (!sized) goto done;
    Py_ssize_t area = width * height;
    if ((height + 2) * (width + 1) + 1 > MAX_ARRAY) {
        PyErr_Format(PyExc_ValueError, "a %ldx%ld board is larger than the largest the engine plays", width, height);
        goto done;
    }
    if (borrow(args[3], &planes_view, PyBUF_WRITABLE, "f", 4, "planes") < 0) goto done;
    if (planes_view.len != (Py_ssize_t)sizeof(float) * count * CHANNELS * area) {
        PyErr_Format(PyExc_ValueError, "planes must be float32 [%zd, %d, %zd]", count, CHANNELS, area);
        goto release_planes;
    }
    if (symmetries != Py_None) {
        if (borrow_int64(args[2], &table_view, "table") < 0) goto release_planes;
        table = table_view.buf;
        rows = table_view.len / (8 * area);
        if (PySequence_Length(symmetries) != count) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "one symmetry per state");
            goto release_table;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        long sym = 0;
        if (table) {
            PyObject *item = PySequence_GetItem(symmetries, i);
            if (item == NULL) goto release_table;
            sym = PyLong_AsLong(item);
            Py_DECREF(item);
            if (sym == -1 && PyErr_Occurred()) goto release_table;
        }
        float *out = (float *)planes_view.buf + i * CHANNELS * area;
        if (encode_one(PySequence_Fast_GET_ITEM(states, i), sym, table, rows, width, height, out) < 0)
            goto release_table;
    }
    result = Py_None;
    Py_INCREF(result);
release_table:
    if (table) PyBuffer_Release(&table_view);
release_planes:
    PyBuffer_Release(&planes_view);
done:
    Py_DECREF(states);
    return result;
}

/* What the global inputs and the position key read of a state's rules and counts (features.py's helpers). */
typedef struct {
    double compensation;  /* _compensation: komi and white's handicap bonus under area scoring, side to move's view */
    int territory, simple_ko, situational_ko, suicide;
    long prisoner_balance;  /* _prisoner_balance */
    long ko_ban;            /* _ko_ban */
    PyObject *ko;           /* rules.ko, a new reference */
} StateRules;

static int read_rules(PyObject *state, long to_play, StateRules *out) {
    out->ko = NULL;
    PyObject *rules = PyObject_GetAttr(state, s_rules);
    if (rules == NULL) return -1;
    PyObject *scoring = PyObject_GetAttr(rules, s_scoring), *ko = PyObject_GetAttr(rules, s_ko),
             *suicide = PyObject_GetAttr(rules, s_suicide_allowed), *bonus = PyObject_GetAttr(rules, s_bonus);
    Py_DECREF(rules);
    int rc = -1;
    if (scoring == NULL || ko == NULL || suicide == NULL || bonus == NULL) goto done;
    if (!PyUnicode_Check(scoring) || !PyUnicode_Check(ko) || !PyUnicode_Check(bonus)) {
        PyErr_SetString(PyExc_TypeError, "rules.scoring, ko and white_handicap_bonus must be strings");
        goto done;
    }
    out->territory = PyUnicode_CompareWithASCIIString(scoring, "territory") == 0;
    out->simple_ko = PyUnicode_CompareWithASCIIString(ko, "simple") == 0;
    out->situational_ko = PyUnicode_CompareWithASCIIString(ko, "situational") == 0;
    if ((out->suicide = PyObject_IsTrue(suicide)) < 0) goto done;
    PyObject *komi_obj = PyObject_GetAttr(state, s_komi);
    if (komi_obj == NULL) goto done;
    double points = PyFloat_AsDouble(komi_obj);
    Py_DECREF(komi_obj);
    long handicap;
    if ((points == -1.0 && PyErr_Occurred()) || get_long(state, s_handicap_stones, &handicap) < 0) goto done;
    if (handicap > 0 && PyUnicode_CompareWithASCIIString(scoring, "area") == 0) {
        if (PyUnicode_CompareWithASCIIString(bonus, "N") == 0) points += handicap;
        else if (PyUnicode_CompareWithASCIIString(bonus, "N-1") == 0) points += handicap - 1;
        else if (PyUnicode_CompareWithASCIIString(bonus, "0") != 0) {
            PyErr_SetString(PyExc_ValueError, "unknown white_handicap_bonus");
            goto done;
        }
    }
    out->compensation = to_play == WHITE ? points : -points;
    PyObject *board = PyObject_GetAttr(state, s_board);
    if (board == NULL) goto done;
    long ko_point = PASS, ko_color = EMPTY;
    int ok = get_long(board, s_ko_point, &ko_point) == 0 && get_long(board, s_ko_color, &ko_color) == 0;
    out->ko_ban = ko_color == to_play ? ko_point : PASS;
    PyObject *captures = ok ? PyObject_GetAttr(board, s_captures) : NULL;
    Py_DECREF(board);
    if (captures == NULL) goto done;
    if (!PyList_Check(captures) || PyList_GET_SIZE(captures) < 3 || to_play < BLACK || to_play > WHITE) {
        Py_DECREF(captures);
        PyErr_SetString(PyExc_TypeError, "board.captures must be a list indexed by colour");
        goto done;
    }
    long own = PyLong_AsLong(PyList_GET_ITEM(captures, to_play)),
         other = PyLong_AsLong(PyList_GET_ITEM(captures, BLACK + WHITE - to_play));
    Py_DECREF(captures);
    if (PyErr_Occurred()) goto done;
    out->prisoner_balance = own - other;
    out->ko = ko;
    Py_INCREF(ko);
    rc = 0;
done:
    Py_XDECREF(scoring);
    Py_XDECREF(ko);
    Py_XDECREF(suicide);
    Py_XDECREF(bonus);
    return rc;
}

/* The point of the move `ago` moves back (1: the last), PASS for a pass, or -2 before the first move. */
static int recent_point(PyObject *moves, Py_ssize_t ago, long *point) {
    Py_ssize_t count = PyList_GET_SIZE(moves);
    *point = -2;
    if (ago > count) return 0;
    PyObject *move = PyList_GET_ITEM(moves, count - ago);
    if (!PyTuple_Check(move) || PyTuple_GET_SIZE(move) != 2) {
        PyErr_SetString(PyExc_ValueError, "state.moves must hold (color, point) pairs");
        return -1;
    }
    *point = PyLong_AsLong(PyTuple_GET_ITEM(move, 1));
    return (*point == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* The compensation and prisoner balance of a search position, from the side to move's view. */
static double position_compensation(const PositionObject *pos) {
    return pos->to_play == WHITE ? pos->ctx->white_compensation : -pos->ctx->white_compensation;
}

static long position_prisoner_balance(const PositionObject *pos) {
    return pos->captures[pos->to_play] - pos->captures[BLACK + WHITE - pos->to_play];
}

/* The global inputs of a search position into row[0..GLOBALS). */
static void position_globals(const PositionObject *pos, float *row) {
    const PositionContext *ctx = pos->ctx;
    row[0] = (float)(position_compensation(pos) / SCALE);
    row[1] = (float)ctx->territory;
    row[2] = ctx->territory ? (float)((double)position_prisoner_balance(pos) / SCALE) : 0.0f;
    row[3] = (float)ctx->simple_ko;
    row[4] = (float)ctx->situational_ko;
    row[5] = (float)ctx->allow_suicide;
    row[6] = (float)(pos->recent[0] == PASS);
    row[7] = (float)(pos->recent[1] == PASS);
}

/* global_inputs(states, out): out[i] (float32 [B, 8]) the global inputs of states[i], as features.global_inputs. */
static PyObject *py_global_inputs(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "global_inputs(states, out)"); return NULL; }
    PyObject *states = PySequence_Fast(args[0], "states must be a sequence");
    if (states == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(states);
    Py_buffer view;
    if (borrow(args[1], &view, PyBUF_WRITABLE, "f", 4, "out") < 0) { Py_DECREF(states); return NULL; }
    PyObject *result = NULL;
    if (view.len != (Py_ssize_t)sizeof(float) * GLOBALS * count) {
        PyErr_Format(PyExc_ValueError, "out must be float32 [%zd, %d]", count, GLOBALS);
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *state = PySequence_Fast_GET_ITEM(states, i), *moves;
        long to_play, last, before;
        StateRules r;
        if (Py_TYPE(state) == position_type) {
            position_globals((PositionObject *)state, (float *)view.buf + i * GLOBALS);
            continue;
        }
        if (get_long(state, s_to_play, &to_play) < 0 || read_rules(state, to_play, &r) < 0) goto done;
        Py_DECREF(r.ko);
        if ((moves = PyObject_GetAttr(state, s_moves)) == NULL) goto done;
        int ok = PyList_Check(moves) && recent_point(moves, 1, &last) == 0 && recent_point(moves, 2, &before) == 0;
        if (!PyList_Check(moves)) PyErr_SetString(PyExc_TypeError, "state.moves must be a list");
        Py_DECREF(moves);
        if (!ok) goto done;
        float *row = (float *)view.buf + i * GLOBALS;
        row[0] = (float)(r.compensation / SCALE);
        row[1] = (float)r.territory;
        row[2] = r.territory ? (float)((double)r.prisoner_balance / SCALE) : 0.0f;
        row[3] = (float)r.simple_ko;
        row[4] = (float)r.situational_ko;
        row[5] = (float)r.suicide;
        row[6] = (float)(last == PASS);
        row[7] = (float)(before == PASS);
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    Py_DECREF(states);
    return result;
}

/* Writes `value`'s low `bytes` bytes at *at, little-endian first, and moves *at past them (struct's "<" codes). */
static void put(unsigned char **at, unsigned long long value, int bytes) {
    for (int i = 0; i < bytes; i++) *(*at)++ = (unsigned char)(value >> (8 * i));
}

enum { KEY_FIXED = 2 + 2 + 8 + 1 + 4 + 1 + 4 * HISTORY + 8 + 1 + 8 + 1 };  /* features._KEY.size */

/* position_key for a search position: the bytes of the same position as a GameState. */
static PyObject *search_position_key(const PositionObject *pos) {
    const PositionContext *ctx = pos->ctx;
    unsigned char key[KEY_FIXED], *at = key;
    put(&at, (unsigned long long)ctx->width, 2);
    put(&at, (unsigned long long)ctx->height, 2);
    put(&at, pos->hash, 8);
    put(&at, (unsigned long long)pos->to_play, 1);
    put(&at, (unsigned long long)(long long)(pos->ko_color == pos->to_play ? pos->ko_point : PASS), 4);
    int recent = pos->move_count < HISTORY ? (int)pos->move_count : HISTORY;
    put(&at, (unsigned long long)recent, 1);
    for (int k = 0; k < HISTORY; k++)  /* the oldest first, padded with 0 */
        put(&at, (unsigned long long)(long long)(k < recent ? pos->recent[recent - 1 - k] : 0L), 4);
    double compensation = position_compensation(pos);
    unsigned long long bits;
    memcpy(&bits, &compensation, 8);
    put(&at, bits, 8);
    put(&at, (unsigned long long)ctx->territory, 1);
    put(&at, (unsigned long long)(long long)(ctx->territory ? position_prisoner_balance(pos) : 0L), 8);
    put(&at, (unsigned long long)ctx->allow_suicide, 1);
    Py_ssize_t ko_length = PyBytes_GET_SIZE(ctx->ko_name);
    PyObject *result = PyBytes_FromStringAndSize(NULL, KEY_FIXED + ko_length);
    if (result == NULL) return NULL;
    memcpy(PyBytes_AS_STRING(result), key, KEY_FIXED);
    memcpy(PyBytes_AS_STRING(result) + KEY_FIXED, PyBytes_AS_STRING(ctx->ko_name), (size_t)ko_length);
    return result;
}

/* position_key(state): features.position_key, the same bytes. */
static PyObject *py_position_key(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 1) { PyErr_SetString(PyExc_TypeError, "position_key(state)"); return NULL; }
    if (Py_TYPE(args[0]) == position_type) return search_position_key((PositionObject *)args[0]);
    PyObject *state = args[0], *board = NULL, *grid = NULL, *moves = NULL, *result = NULL;
    long to_play, width, height;
    StateRules r = {0};
    if (get_long(state, s_to_play, &to_play) < 0 || read_rules(state, to_play, &r) < 0) return NULL;
    if ((board = PyObject_GetAttr(state, s_board)) == NULL || (grid = PyObject_GetAttr(board, s_grid)) == NULL ||
        (moves = PyObject_GetAttr(state, s_moves)) == NULL || get_long(grid, s_width, &width) < 0 ||
        get_long(grid, s_height, &height) < 0)
        goto done;
    if (!PyList_Check(moves)) { PyErr_SetString(PyExc_TypeError, "state.moves must be a list"); goto done; }
    PyObject *hash_obj = PyObject_GetAttr(board, s_hash);
    unsigned long long hash = hash_obj ? PyLong_AsUnsignedLongLong(hash_obj) : 0;
    Py_XDECREF(hash_obj);
    if (hash_obj == NULL || PyErr_Occurred()) goto done;
    Py_ssize_t ko_length;
    const char *ko = PyUnicode_AsUTF8AndSize(r.ko, &ko_length);
    if (ko == NULL) goto done;
    unsigned char key[KEY_FIXED + 64], *at = key;
    if (ko_length > 64) { PyErr_SetString(PyExc_ValueError, "rules.ko is too long"); goto done; }
    put(&at, (unsigned long long)width, 2);
    put(&at, (unsigned long long)height, 2);
    put(&at, hash, 8);
    put(&at, (unsigned long long)to_play, 1);
    put(&at, (unsigned long long)(long long)r.ko_ban, 4);
    Py_ssize_t count = PyList_GET_SIZE(moves), first = count > HISTORY ? count - HISTORY : 0;
    put(&at, (unsigned long long)(count - first), 1);
    for (Py_ssize_t k = 0; k < HISTORY; k++) {
        long point = 0;  /* padding past the recent moves */
        if (first + k < count) {
            PyObject *move = PyList_GET_ITEM(moves, first + k);
            if (!PyTuple_Check(move) || PyTuple_GET_SIZE(move) != 2) {
                PyErr_SetString(PyExc_ValueError, "state.moves must hold (color, point) pairs");
                goto done;
            }
            point = PyLong_AsLong(PyTuple_GET_ITEM(move, 1));
            if (point == -1 && PyErr_Occurred()) goto done;
        }
        put(&at, (unsigned long long)(long long)point, 4);
    }
    unsigned long long compensation;
    memcpy(&compensation, &r.compensation, 8);
    put(&at, compensation, 8);
    put(&at, (unsigned long long)r.territory, 1);
    put(&at, (unsigned long long)(long long)(r.territory ? r.prisoner_balance : 0L), 8);
    put(&at, (unsigned long long)r.suicide, 1);
    memcpy(at, ko, (size_t)ko_length);
    result = PyBytes_FromStringAndSize((const char *)key, (Py_ssize_t)(at - key) + ko_length);
done:
    Py_XDECREF(r.ko);
    Py_XDECREF(board);
    Py_XDECREF(grid);
    Py_XDECREF(moves);
    return result;
}

/* decode(policy_logits, value_logits, ownership, symmetries, inverse, table, policy, value, owned) */
static PyObject *py_decode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "decode(policy_logits, value_logits, ownership, symmetries, inverse, table, policy, value, "
                        "owned)");
        return NULL;
    }
    Py_buffer in[3], out[3], syms = {0}, inverse = {0}, table = {0};
    const char *in_names[3] = {"policy_logits", "value_logits", "ownership"};
    const char *out_names[3] = {"policy", "value", "owned"};
    int held_in = 0, held_out = 0, with_syms = args[3] != Py_None;
    PyObject *result = NULL;
    for (; held_in < 3; held_in++)
        if (borrow(args[held_in], &in[held_in], PyBUF_SIMPLE, "f", 4, in_names[held_in]) < 0) goto done;
    for (; held_out < 3; held_out++)
        if (borrow(args[6 + held_out], &out[held_out], PyBUF_WRITABLE, "f", 4, out_names[held_out]) < 0) goto done;
    const Py_ssize_t count = in[1].len / (3 * 4);
    const Py_ssize_t moves = count ? in[0].len / (4 * count) : 0, area = moves - 1;
    if (count == 0 || in[1].len != 12 * count || in[0].len != 4 * count * moves || area < 1 || moves > MAX_ARRAY
        || in[2].len != 4 * count * area || out[0].len != in[0].len || out[1].len != 4 * count
        || out[2].len != in[2].len) {
        PyErr_SetString(PyExc_ValueError, "decode needs policy logits [B, A + 1], value logits [B, 3], ownership "
                                          "[B, A] and outputs of the same shapes (value [B])");
        goto done;
    }
    Py_ssize_t kinds = 0;
    if (with_syms) {
        if (borrow_int64(args[3], &syms, "symmetries") < 0) goto done;
        if (borrow_int64(args[4], &inverse, "inverse") < 0) goto done;
        if (borrow_int64(args[5], &table, "table") < 0) goto done;
        kinds = table.len / (8 * area);
        if (syms.len != 8 * count || table.len != 8 * kinds * area) {
            PyErr_SetString(PyExc_ValueError, "one symmetry per position, and a table of rows of the board's area");
            goto done;
        }
    }
    const float *logits = in[0].buf, *wdl = in[1].buf, *ownership = in[2].buf;
    float *policy = out[0].buf, *value = out[1].buf, *owned = out[2].buf;
    float exps[MAX_ARRAY];
    for (Py_ssize_t b = 0; b < count; b++) {
        const float *x = logits + b * moves;
        const int64_t *row = NULL;
        if (with_syms) {
            int64_t s = ((const int64_t *)syms.buf)[b];
            int64_t k = s >= 0 && s < inverse.len / 8 ? ((const int64_t *)inverse.buf)[s] : -1;
            if (k < 0 || k >= kinds) {
                PyErr_Format(PyExc_ValueError, "symmetry %lld has no row in the permutation table", (long long)s);
                goto done;
            }
            row = (const int64_t *)table.buf + k * area;
        }
        float top = x[0];
        for (Py_ssize_t j = 1; j < moves; j++) top = x[j] > top ? x[j] : top;
        float sum = 0.0f;
        for (Py_ssize_t j = 0; j < moves; j++) sum += exps[j] = expf(x[j] - top);
        float *p = policy + b * moves, *o = owned + b * area;
        const float *own = ownership + b * area;
        for (Py_ssize_t j = 0; j < area; j++) {
            Py_ssize_t from = row ? (Py_ssize_t)row[j] : j;
            p[j] = exps[from] / sum;
            o[j] = own[from];
        }
        p[area] = exps[area] / sum;
        const float *v = wdl + 3 * b;
        float m = v[0] > v[1] ? v[0] : v[1];
        m = v[2] > m ? v[2] : m;
        float win = expf(v[0] - m), loss = expf(v[1] - m), draw = expf(v[2] - m);
        float total = win + loss + draw;
        value[b] = win / total - loss / total;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < held_in; i++) PyBuffer_Release(&in[i]);
    for (int i = 0; i < held_out; i++) PyBuffer_Release(&out[i]);
    if (syms.obj) PyBuffer_Release(&syms);
    if (inverse.obj) PyBuffer_Release(&inverse);
    if (table.obj) PyBuffer_Release(&table);
    return result;
}

static PyMethodDef methods[] = {
    {"spatial_planes", (PyCFunction)(void (*)(void))py_spatial_planes, METH_FASTCALL,
     "spatial_planes(states, symmetries, table, planes): the spatial planes of features.encode"},
    {"global_inputs", (PyCFunction)(void (*)(void))py_global_inputs, METH_FASTCALL,
     "global_inputs(states, out): features.global_inputs into out"},
    {"position_key", (PyCFunction)(void (*)(void))py_position_key, METH_FASTCALL,
     "position_key(state): features.position_key"},
    {"decode", (PyCFunction)(void (*)(void))py_decode, METH_FASTCALL,
     "decode(policy_logits, value_logits, ownership, symmetries, inverse, table, policy, value, owned): "
     "features.decode into policy, value and owned"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_features_core", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__features_core(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_board, "board"}, {&s_to_play, "to_play"}, {&s_moves, "moves"}, {&s_colors, "colors"},
        {&s_chain_head, "chain_head"}, {&s_ko_point, "ko_point"}, {&s_ko_color, "ko_color"}, {&s_grid, "grid"},
        {&s_width, "width"}, {&s_height, "height"}, {&s_rules, "rules"}, {&s_scoring, "scoring"}, {&s_ko, "ko"},
        {&s_suicide_allowed, "suicide_allowed"}, {&s_bonus, "white_handicap_bonus"}, {&s_komi, "komi"},
        {&s_handicap_stones, "handicap_stones"}, {&s_captures, "captures"}, {&s_hash, "hash"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return NULL;
    }
    PyObject *rules = PyImport_ImportModule("gtp_engine._rules_core");
    if (rules == NULL) {
        PyErr_Clear();  /* that twin not built: no search positions to read */
    } else {
        PyObject *type = PyObject_GetAttrString(rules, "Position");
        Py_DECREF(rules);
        if (type == NULL) return NULL;
        if (!PyType_Check(type) || ((PyTypeObject *)type)->tp_basicsize != offsetof(PositionObject, arrays)) {
            Py_DECREF(type);
            PyErr_SetString(PyExc_ImportError, "_rules_core.Position was built from another _position.h");
            return NULL;
        }
        position_type = (PyTypeObject *)type;  /* kept for the life of the process */
    }
    return PyModule_Create(&module);
}
