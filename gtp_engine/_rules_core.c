/* The compiled twin of the rules' steps the search takes on every ply (board.py and game.py hold the reference):
 *
 *   board_play(board, point, color)                      Board.play_unchecked
 *   board_illegal_reason(board, point, color, suicide)   Board.illegal_reason
 *   board_hash_after(board, point, color)                Board.hash_after
 *   game_play(state, point[, color])                     GameState.play_unchecked
 *   game_play_line(state, points)                        GameState.play_unchecked of each point, in turn
 *   game_illegal_reason(state, point[, color])           GameState.illegal_reason
 *   game_copy(state)                                     GameState.copy (the board's slots read at their offsets)
 *   position_root(state, ...), position_copy(position), position_play_line(position, points),
 *   position_illegal_reason(position, point), position_candidates(positions, point_of_flat, out)
 *                                                        the search positions of position.py (layout: _position.h)
 *
 * Each does exactly what its Python twin does, in the same order (which chain heads a merge keeps, which point a
 * ko bans), so that both leave the same board behind, array for array (tests/unit/test_rules_core.py). A board's
 * per-point arrays are read through the buffer protocol: colors a bytearray, chain_head, chain_next, chain_size and
 * chain_libs arrays of unsigned 16-bit ints, the Zobrist keys arrays of unsigned 64-bit ints. Everything else
 * (hash, ko point and colour, captures, stone counts, the game's move list and history) stays a Python attribute.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>
#include <string.h>
#include <stddef.h>
#include <stdlib.h>

#include "_position.h"

enum { EMPTY, BLACK, WHITE, EDGE };
#define PASS (-1)

static PyObject *s_colors, *s_chain_head, *s_chain_next, *s_chain_size, *s_chain_libs, *s_zobrist, *s_grid,
    *s_stride, *s_hash, *s_ko_point, *s_ko_color, *s_captures, *s_stone_count, *s_board, *s_to_play, *s_moves,
    *s_consecutive_passes, *s_max_stones, *s_history, *s_white_key, *s_rules, *s_ko, *s_suicide_allowed,
    *s_occupied, *s_suicide, *s_superko, *s_ko_reason, *s_setup;

/* One board's arrays, borrowed through the buffer protocol for the length of one call. */
typedef struct {
    Py_buffer buffers[7];
    int held;
    uint8_t *colors;
    uint16_t *head, *next, *size, *libs;
    const uint64_t *keys[3];  /* keys[BLACK], keys[WHITE]; keys[EMPTY] unused */
    Py_ssize_t n, stride;
} Board;

static void board_release(Board *b) {
    for (int i = 0; i < b->held; i++) PyBuffer_Release(&b->buffers[i]);
    b->held = 0;
}

/* Borrows obj's buffer of items of `itemsize` bytes and `format`, at least b->n of them. */
static void *borrow(Board *b, PyObject *obj, Py_ssize_t itemsize, const char *format, const char *name) {
    Py_buffer *view = &b->buffers[b->held];
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) return NULL;
    b->held++;
    const char *f = view->format ? view->format : "B";
    if (view->itemsize != itemsize || strcmp(f, format) != 0 || view->len / itemsize < b->n) {
        PyErr_Format(PyExc_TypeError, "board.%s must be an array('%s') of the board's array size", name, format);
        return NULL;
    }
    return view->buf;
}

static void *borrow_attr(Board *b, PyObject *board, PyObject *name, Py_ssize_t itemsize, const char *format) {
    PyObject *obj = PyObject_GetAttr(board, name);
    if (obj == NULL) return NULL;
    void *data = borrow(b, obj, itemsize, format, PyUnicode_AsUTF8(name));
    Py_DECREF(obj);  /* the board keeps it alive, and the held buffer keeps it from being resized */
    return data;
}

static int board_load(Board *b, PyObject *board) {
    b->held = 0;
    PyObject *grid = PyObject_GetAttr(board, s_grid);
    if (grid == NULL) return -1;
    PyObject *stride = PyObject_GetAttr(grid, s_stride);
    Py_DECREF(grid);
    if (stride == NULL) return -1;
    b->stride = PyLong_AsSsize_t(stride);
    Py_DECREF(stride);
    if (b->stride == -1 && PyErr_Occurred()) return -1;
    PyObject *colors = PyObject_GetAttr(board, s_colors);
    if (colors == NULL) return -1;
    if (!PyByteArray_Check(colors)) {
        Py_DECREF(colors);
        PyErr_SetString(PyExc_TypeError, "board.colors must be a bytearray");
        return -1;
    }
    b->n = PyByteArray_GET_SIZE(colors);
    b->colors = (uint8_t *)borrow(b, colors, 1, "B", "colors");
    Py_DECREF(colors);
    if (b->colors == NULL) goto fail;
    if ((b->head = borrow_attr(b, board, s_chain_head, 2, "H")) == NULL ||
        (b->next = borrow_attr(b, board, s_chain_next, 2, "H")) == NULL ||
        (b->size = borrow_attr(b, board, s_chain_size, 2, "H")) == NULL ||
        (b->libs = borrow_attr(b, board, s_chain_libs, 2, "H")) == NULL)
        goto fail;
    PyObject *zobrist = PyObject_GetAttr(board, s_zobrist);
    if (zobrist == NULL) goto fail;
    if (!PyTuple_Check(zobrist) || PyTuple_GET_SIZE(zobrist) != 3) {
        Py_DECREF(zobrist);
        PyErr_SetString(PyExc_TypeError, "board._zobrist must be a tuple of 3 key tables");
        goto fail;
    }
    b->keys[EMPTY] = NULL;
    for (int color = BLACK; color <= WHITE; color++) {
        b->keys[color] = borrow(b, PyTuple_GET_ITEM(zobrist, color), 8, "Q", "_zobrist");
        if (b->keys[color] == NULL) { Py_DECREF(zobrist); goto fail; }
    }
    Py_DECREF(zobrist);
    return 0;
fail:
    board_release(b);
    return -1;
}

static int get_long(PyObject *obj, PyObject *name, long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_long(PyObject *obj, PyObject *name, long value) {
    PyObject *boxed = PyLong_FromLong(value);
    if (boxed == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, boxed);
    Py_DECREF(boxed);
    return rc;
}

static int get_hash(PyObject *obj, PyObject *name, uint64_t *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    return (*out == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_hash(PyObject *obj, PyObject *name, uint64_t value) {
    PyObject *boxed = PyLong_FromUnsignedLongLong(value);
    if (boxed == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, boxed);
    Py_DECREF(boxed);
    return rc;
}

static int check_point(const Board *b, long point) {
    if (point < 0 || point >= b->n || b->colors[point] == EDGE) {
        long width = (long)b->stride - 1, height = (long)((b->n - 1) / b->stride) - 2;
        PyErr_Format(PyExc_ValueError, "point %ld is not on a %ldx%ld board", point, width, height);
        return -1;
    }
    return 0;
}

static int check_color(long color) {
    if (color != BLACK && color != WHITE) {
        PyErr_Format(PyExc_ValueError, "color %ld is neither black (1) nor white (2)", color);
        return -1;
    }
    return 0;
}

/* Board._merge: joins the chains headed by a and b under the head of the larger one (a on a tie). */
static uint16_t merge(Board *b, uint16_t a, uint16_t c) {
    uint16_t *head = b->head, *next = b->next;
    if (b->size[a] < b->size[c]) { uint16_t t = a; a = c; c = t; }
    uint16_t s = c;
    do {
        head[s] = a;
        s = next[s];
    } while (s != c);
    uint16_t t = next[a];
    next[a] = next[c];
    next[c] = t;
    b->size[a] += b->size[c];
    b->libs[a] += b->libs[c];
    return a;
}

/* Board._remove_chain, less the stone count: returns the chain's hash, to be xored into the board's. */
static uint64_t remove_chain(Board *b, uint16_t h, int color) {
    uint8_t *colors = b->colors;
    uint16_t *head = b->head, *next = b->next;
    const uint64_t *keys = b->keys[color];
    const Py_ssize_t d[4] = {-b->stride, -1, 1, b->stride};
    uint64_t hash = 0;
    uint16_t s = h;
    do {
        colors[s] = EMPTY;
        hash ^= keys[s];
        s = next[s];
    } while (s != h);
    s = h;
    do {
        for (int i = 0; i < 4; i++) {
            uint8_t c = colors[s + d[i]];
            if (c != EMPTY && c != EDGE) b->libs[head[s + d[i]]] += 1;
        }
        head[s] = 0;
        s = next[s];
    } while (s != h);
    return hash;
}

/* What Board.play_unchecked changes besides the arrays. */
typedef struct {
    uint64_t hash_change;
    long stones[3];    /* stone count changes by colour */
    long captures[3];  /* capture count changes by colour */
    long ko_point, ko_color;
} PlayResult;

/* Board.play_unchecked on the arrays of a legal, non-pass move. */
static void play_stone(Board *b, long point, int color, PlayResult *r) {
    uint8_t *colors = b->colors;
    uint16_t *head = b->head, *size = b->size, *libs = b->libs;
    const Py_ssize_t d[4] = {-b->stride, -1, 1, b->stride};
    int opp = 3 - color;
    memset(r, 0, sizeof *r);
    r->ko_point = PASS;
    colors[point] = (uint8_t)color;
    r->hash_change = b->keys[color][point];
    r->stones[color] = 1;
    head[point] = (uint16_t)point;
    b->next[point] = (uint16_t)point;
    size[point] = 1;
    libs[point] = 0;
    uint16_t mine = (uint16_t)point;
    int own_libs = 0, capturing = 0;
    for (int i = 0; i < 4; i++) {
        Py_ssize_t n = point + d[i];
        int c = colors[n];
        if (c == EMPTY) {
            own_libs++;
        } else if (c == color) {
            uint16_t h = head[n];
            libs[h]--;
            if (h != mine) mine = merge(b, mine, h);
        } else if (c == opp) {
            uint16_t h = head[n];
            libs[h]--;
            if (!libs[h]) capturing = 1;
        }
    }
    libs[mine] += own_libs;
    if (capturing) {
        long captured = 0, captured_point = PASS;
        for (int i = 0; i < 4; i++) {
            Py_ssize_t n = point + d[i];
            if (colors[n] == opp) {
                uint16_t h = head[n];
                if (libs[h] == 0) {
                    captured += size[h];
                    captured_point = n;
                    r->hash_change ^= remove_chain(b, h, opp);
                }
            }
        }
        r->captures[color] = captured;
        r->stones[opp] = -captured;
        if (captured == 1 && size[mine] == 1 && libs[mine] == 1) {
            r->ko_point = captured_point;
            r->ko_color = opp;
        }
    } else if (libs[mine] == 0) {  /* suicide, only reached when the rules allow it */
        long lost = size[mine];
        r->captures[opp] = lost;
        r->stones[color] -= lost;
        r->hash_change ^= remove_chain(b, mine, color);
    }
}

/* Reads list[color] for BLACK and WHITE into values[1..2] (a list of ints indexed by colour); *list_out keeps the
   list, to be written back. */
static int read_pair(PyObject *obj, PyObject *name, long values[3], PyObject **list_out) {
    PyObject *list = PyObject_GetAttr(obj, name);
    if (list == NULL) return -1;
    if (!PyList_Check(list) || PyList_GET_SIZE(list) < 3) {
        Py_DECREF(list);
        PyErr_Format(PyExc_TypeError, "%U must be a list indexed by colour", name);
        return -1;
    }
    for (int c = BLACK; c <= WHITE; c++) {
        values[c] = PyLong_AsLong(PyList_GET_ITEM(list, c));
        if (values[c] == -1 && PyErr_Occurred()) { Py_DECREF(list); return -1; }
    }
    *list_out = list;
    return 0;
}

static int write_pair(PyObject *list, const long values[3]) {
    for (int c = BLACK; c <= WHITE; c++) {
        PyObject *boxed = PyLong_FromLong(values[c]);
        if (boxed == NULL || PyList_SetItem(list, c, boxed) < 0) return -1;
    }
    return 0;
}

/* A board's Python attributes beside its arrays (hash, ko, captures, stone counts): read once before its moves are
   played and written back once after them. */
typedef struct {
    uint64_t hash;
    long ko_point, ko_color, captures[3], stones[3];
    PyObject *captures_list, *stones_list;
} Counts;

static void counts_release(Counts *c) {
    Py_CLEAR(c->captures_list);
    Py_CLEAR(c->stones_list);
}

static int counts_read(PyObject *board, Counts *c) {
    c->captures_list = c->stones_list = NULL;
    if (get_hash(board, s_hash, &c->hash) < 0 || get_long(board, s_ko_point, &c->ko_point) < 0 ||
        get_long(board, s_ko_color, &c->ko_color) < 0 ||
        read_pair(board, s_captures, c->captures, &c->captures_list) < 0 ||
        read_pair(board, s_stone_count, c->stones, &c->stones_list) < 0) {
        counts_release(c);
        return -1;
    }
    return 0;
}

static int counts_write(PyObject *board, const Counts *c) {
    if (write_pair(c->captures_list, c->captures) < 0 || write_pair(c->stones_list, c->stones) < 0 ||
        set_hash(board, s_hash, c->hash) < 0 || set_long(board, s_ko_point, c->ko_point) < 0)
        return -1;
    return set_long(board, s_ko_color, c->ko_color);
}

/* Board.play_unchecked on loaded arrays and counts; -1 with an exception for a point it cannot play. */
static int play_point(Board *b, Counts *c, long point, long color) {
    if (point == PASS) {
        c->ko_point = PASS;
        return 0;
    }
    if (check_color(color) < 0 || check_point(b, point) < 0) return -1;
    if (b->colors[point] != EMPTY) {
        PyErr_Format(PyExc_ValueError, "play_unchecked on the occupied point %ld", point);
        return -1;
    }
    PlayResult r;
    play_stone(b, point, (int)color, &r);
    c->hash ^= r.hash_change;
    for (int k = BLACK; k <= WHITE; k++) {
        c->stones[k] += r.stones[k];
        c->captures[k] += r.captures[k];
    }
    c->ko_point = r.ko_point;
    if (r.ko_point != PASS) c->ko_color = r.ko_color;
    return 0;
}

/* Board.illegal_reason on loaded arrays: NULL (legal), or one of the interned reasons. */
static PyObject *illegal_reason(const Board *b, long point, int color, int allow_suicide, long ko_point,
                                long ko_color) {
    const uint8_t *colors = b->colors;
    const uint16_t *head = b->head, *libs = b->libs;
    if (colors[point] != EMPTY) return s_occupied;
    if (point == ko_point && color == ko_color) return s_ko_reason;
    const Py_ssize_t nb[4] = {point - b->stride, point - 1, point + 1, point + b->stride};
    for (int i = 0; i < 4; i++)
        if (colors[nb[i]] == EMPTY) return NULL;
    int opp = 3 - color;
    for (int i = 0; i < 4; i++) {
        int c = colors[nb[i]];
        if (c == opp || c == color) {
            uint16_t h = head[nb[i]];
            int edges = 0;
            for (int j = 0; j < 4; j++)
                if (head[nb[j]] == h && colors[nb[j]] == c) edges++;
            if (c == opp) {
                if (libs[h] == edges) return NULL;  /* captures */
            } else if (libs[h] > edges) {
                return NULL;  /* joins a chain that keeps a liberty */
            }
        }
    }
    int joins_own_chain = 0;  /* a lone stone's suicide is illegal under every rule set */
    for (int i = 0; i < 4; i++)
        if (colors[nb[i]] == color) joins_own_chain = 1;
    return allow_suicide && joins_own_chain ? NULL : s_suicide;
}

static uint64_t chain_hash(const Board *b, uint16_t h, int color) {
    uint64_t value = 0;
    uint16_t s = h;
    do {
        value ^= b->keys[color][s];
        s = b->next[s];
    } while (s != h);
    return value;
}

/* Board.hash_after for a legal move at an on-board point. */
static uint64_t hash_after(const Board *b, uint64_t hash, long point, int color) {
    const uint8_t *colors = b->colors;
    const uint16_t *head = b->head, *libs = b->libs;
    const Py_ssize_t nb[4] = {point - b->stride, point - 1, point + 1, point + b->stride};
    uint64_t result = hash ^ b->keys[color][point];
    int opp = 3 - color, seen_count = 0, own_count = 0, has_liberty = 0;
    uint16_t seen[4], own_chains[4];
    for (int i = 0; i < 4; i++) {
        int c = colors[nb[i]];
        if (c == EMPTY) {
            has_liberty = 1;
        } else if (c == opp || c == color) {
            uint16_t h = head[nb[i]];
            int repeated = 0;
            for (int j = 0; j < seen_count; j++) repeated |= seen[j] == h;
            if (repeated) continue;
            seen[seen_count++] = h;
            int edges = 0;
            for (int j = 0; j < 4; j++)
                if (colors[nb[j]] == c && head[nb[j]] == h) edges++;
            if (c == opp) {
                if (libs[h] == edges) {
                    result ^= chain_hash(b, h, opp);
                    has_liberty = 1;
                }
            } else {
                own_chains[own_count++] = h;
                if (libs[h] > edges) has_liberty = 1;
            }
        }
    }
    if (!has_liberty) {  /* suicide: the stone and every chain it joined leave the board */
        result ^= b->keys[color][point];
        for (int j = 0; j < own_count; j++) result ^= chain_hash(b, own_chains[j], color);
    }
    return result;
}

static int parse_long(PyObject *obj, long *out) {
    *out = PyLong_AsLong(obj);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* board_play(board, point, color) */
static PyObject *py_board_play(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long point, color;
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "board_play(board, point, color)"); return NULL; }
    if (parse_long(args[1], &point) < 0 || parse_long(args[2], &color) < 0) return NULL;
    Board b;
    Counts c;
    if (board_load(&b, args[0]) < 0) return NULL;
    if (counts_read(args[0], &c) < 0) { board_release(&b); return NULL; }
    int rc = play_point(&b, &c, point, color);
    board_release(&b);
    if (rc == 0) rc = counts_write(args[0], &c);
    counts_release(&c);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* board_illegal_reason(board, point, color, allow_suicide) */
static PyObject *py_board_illegal_reason(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long point, color, ko_point, ko_color;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "board_illegal_reason(board, point, color, allow_suicide)");
        return NULL;
    }
    PyObject *board = args[0];
    if (parse_long(args[1], &point) < 0 || parse_long(args[2], &color) < 0) return NULL;
    int allow_suicide = PyObject_IsTrue(args[3]);
    if (allow_suicide < 0) return NULL;
    if (point == PASS) Py_RETURN_NONE;
    if (check_color(color) < 0 || get_long(board, s_ko_point, &ko_point) < 0 ||
        get_long(board, s_ko_color, &ko_color) < 0)
        return NULL;
    Board b;
    if (board_load(&b, board) < 0) return NULL;
    if (check_point(&b, point) < 0) { board_release(&b); return NULL; }
    PyObject *reason = illegal_reason(&b, point, (int)color, allow_suicide, ko_point, ko_color);
    board_release(&b);
    if (reason == NULL) Py_RETURN_NONE;
    Py_INCREF(reason);
    return reason;
}

/* board_hash_after(board, point, color) */
static PyObject *py_board_hash_after(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long point, color;
    uint64_t hash;
    if (nargs != 3) { PyErr_SetString(PyExc_TypeError, "board_hash_after(board, point, color)"); return NULL; }
    PyObject *board = args[0];
    if (parse_long(args[1], &point) < 0 || parse_long(args[2], &color) < 0 || get_hash(board, s_hash, &hash) < 0)
        return NULL;
    if (point == PASS) return PyLong_FromUnsignedLongLong(hash);
    if (check_color(color) < 0) return NULL;
    Board b;
    if (board_load(&b, board) < 0) return NULL;
    if (check_point(&b, point) < 0) { board_release(&b); return NULL; }
    uint64_t result = hash_after(&b, hash, point, (int)color);
    board_release(&b);
    return PyLong_FromUnsignedLongLong(result);
}

/* GameState._superko_possible: a move that removes no stone of its own repeats a board only if its colour once had
   more stones (`most`) than it will have now (`stones` + 1); only a suicide removes its own. */
static int superko_possible(int allow_suicide, long stones, long most) {
    return allow_suicide || stones + 1 <= most;
}

/* The colour argument of the game functions: the side to move when absent or None. */
static int game_color(PyObject *state, PyObject *const *args, Py_ssize_t nargs, long *color) {
    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "expected (state, point[, color])");
        return -1;
    }
    if (nargs == 3 && args[2] != Py_None) return parse_long(args[2], color);
    return get_long(state, s_to_play, color);
}

/* GameState.play_unchecked of points[0..count) in turn, the first for `color` and each next for the other side. The
   board's arrays are borrowed once and its counts and the game's written back once at the end; what was played
   before a refused point stays played. */
static PyObject *play_moves(PyObject *state, PyObject *const *points, Py_ssize_t count, long color) {
    PyObject *board = NULL, *moves = NULL, *history = NULL, *most_list = NULL, *result = NULL;
    long passes, most[3] = {0};
    uint64_t white_key;
    Board b;
    Counts c = {0};
    b.held = 0;
    if (count == 0) Py_RETURN_NONE;
    if ((board = PyObject_GetAttr(state, s_board)) == NULL || get_long(state, s_consecutive_passes, &passes) < 0 ||
        get_hash(state, s_white_key, &white_key) < 0 || read_pair(state, s_max_stones, most, &most_list) < 0 ||
        counts_read(board, &c) < 0 || board_load(&b, board) < 0)
        goto done;
    if ((moves = PyObject_GetAttr(state, s_moves)) == NULL || (history = PyObject_GetAttr(state, s_history)) == NULL)
        goto done;
    if (!PyList_Check(moves) || !PyList_Check(history)) {
        PyErr_SetString(PyExc_TypeError, "state.moves and state._history must be lists");
        goto done;
    }
    int failed = 0;
    for (Py_ssize_t i = 0; i < count && !failed; i++) {
        long point;
        if (parse_long(points[i], &point) < 0 || play_point(&b, &c, point, color) < 0) {
            failed = 1;
            break;
        }
        if (point == PASS) {
            passes++;
        } else {
            passes = 0;
            if (c.stones[color] > most[color]) most[color] = c.stones[color];  /* GameState._max_stones */
        }
        PyObject *color_obj = PyLong_FromLong(color), *move = NULL, *key = NULL;
        if (color_obj != NULL) move = PyTuple_Pack(2, color_obj, points[i]);
        Py_XDECREF(color_obj);
        if (move != NULL) key = PyLong_FromUnsignedLongLong(color == BLACK ? c.hash ^ white_key : c.hash);
        if (key == NULL || PyList_Append(moves, move) < 0 || PyList_Append(history, key) < 0) failed = 1;
        Py_XDECREF(move);
        Py_XDECREF(key);
        color = color == BLACK ? WHITE : BLACK;
    }
    /* A refused point's error waits while the moves before it are written back: the C API must not run with an
       exception set (it may clear or replace it, and the call then returned NULL with none set). */
    PyObject *error_type = NULL, *error_value = NULL, *error_traceback = NULL;
    if (failed) PyErr_Fetch(&error_type, &error_value, &error_traceback);
    int written = counts_write(board, &c) == 0 && write_pair(most_list, most) == 0 &&
                  set_long(state, s_to_play, color) == 0 && set_long(state, s_consecutive_passes, passes) == 0;
    if (failed && written) {
        PyErr_Restore(error_type, error_value, error_traceback);
    } else {  /* nothing refused, or the write-back's own error is the one to report */
        Py_XDECREF(error_type);
        Py_XDECREF(error_value);
        Py_XDECREF(error_traceback);
    }
    if (failed || !written)
        goto done;
    result = Py_None;
    Py_INCREF(result);
done:
    board_release(&b);
    counts_release(&c);
    Py_XDECREF(board);
    Py_XDECREF(moves);
    Py_XDECREF(history);
    Py_XDECREF(most_list);
    return result;
}

/* game_play(state, point[, color]): GameState.play_unchecked */
static PyObject *py_game_play(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long color;
    if (game_color(args[0], args, nargs, &color) < 0) return NULL;
    return play_moves(args[0], args + 1, 1, color);
}

/* game_play_line(state, points): GameState.play_unchecked of each point in turn, each for the side to move. */
static PyObject *py_game_play_line(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long to_play;
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "game_play_line(state, points)"); return NULL; }
    PyObject *points = PySequence_Fast(args[1], "points must be a sequence");
    if (points == NULL) return NULL;
    PyObject *result = get_long(args[0], s_to_play, &to_play) < 0 ? NULL :
        play_moves(args[0], PySequence_Fast_ITEMS(points), PySequence_Fast_GET_SIZE(points), to_play);
    Py_DECREF(points);
    return result;
}

/* game_illegal_reason(state, point[, color]): GameState.illegal_reason */
static PyObject *py_game_illegal_reason(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    long point, color, ko_point, ko_color;
    PyObject *state = args[0], *reason = NULL;
    if (game_color(state, args, nargs, &color) < 0 || parse_long(args[1], &point) < 0) return NULL;
    PyObject *rules = PyObject_GetAttr(state, s_rules);
    if (rules == NULL) return NULL;
    PyObject *ko = PyObject_GetAttr(rules, s_ko), *suicide_obj = PyObject_GetAttr(rules, s_suicide_allowed);
    Py_DECREF(rules);
    int simple_ko = ko != NULL && PyUnicode_Check(ko) && PyUnicode_CompareWithASCIIString(ko, "simple") == 0;
    int allow_suicide = suicide_obj == NULL ? -1 : PyObject_IsTrue(suicide_obj);
    Py_XDECREF(ko);
    Py_XDECREF(suicide_obj);
    if (ko == NULL || allow_suicide < 0) return NULL;
    if (point == PASS) Py_RETURN_NONE;
    if (check_color(color) < 0) return NULL;
    PyObject *board = PyObject_GetAttr(state, s_board);
    if (board == NULL) return NULL;
    Board b;
    if (get_long(board, s_ko_point, &ko_point) < 0 || get_long(board, s_ko_color, &ko_color) < 0 ||
        board_load(&b, board) < 0) {
        Py_DECREF(board);
        return NULL;
    }
    if (check_point(&b, point) < 0) goto done;
    reason = illegal_reason(&b, point, (int)color, allow_suicide, ko_point, ko_color);
    if (reason != NULL || simple_ko) {
        if (reason == NULL) reason = Py_None;
        Py_INCREF(reason);
        goto done;
    }
    long stones = 0, most = 0;
    PyObject *counts = PyObject_GetAttr(board, s_stone_count), *max_stones = PyObject_GetAttr(state, s_max_stones);
    if (counts != NULL && max_stones != NULL) {
        stones = PyLong_AsLong(PyList_GetItem(counts, color));
        if (!PyErr_Occurred()) most = PyLong_AsLong(PyList_GetItem(max_stones, color));
    }
    Py_XDECREF(counts);
    Py_XDECREF(max_stones);
    if (PyErr_Occurred()) goto done;
    if (!superko_possible(allow_suicide, stones, most)) {
        reason = Py_None;
        Py_INCREF(reason);
        goto done;
    }
    uint64_t hash, white_key;
    if (get_hash(board, s_hash, &hash) < 0 || get_hash(state, s_white_key, &white_key) < 0) goto done;
    uint64_t key = hash_after(&b, hash, point, (int)color);
    if (color == BLACK) key ^= white_key;  /* the key of the position with White to move */
    PyObject *key_obj = PyLong_FromUnsignedLongLong(key), *history = PyObject_GetAttr(state, s_history);
    int repeats = key_obj == NULL || history == NULL ? -1 : PySequence_Contains(history, key_obj);
    Py_XDECREF(key_obj);
    Py_XDECREF(history);
    if (repeats < 0) goto done;
    reason = repeats ? s_superko : Py_None;
    Py_INCREF(reason);
done:
    board_release(&b);
    Py_DECREF(board);
    return reason;
}

/* The board's slots that copy_board copies (the others, the grid and the Zobrist keys among them, are shared):
 * Board.copy's list. Their offsets in a board of type board_type, found once in the type's slot members. */
static const char *const COPIED_SLOTS[] = {"colors", "chain_head", "chain_next", "chain_size", "chain_libs",
                                           "captures", "stone_count"};
enum { MAX_SLOTS = 32 };
static PyTypeObject *board_type;
static Py_ssize_t slot_offsets[MAX_SLOTS], slot_count;
static char slot_copied[MAX_SLOTS];

static int find_slots(PyTypeObject *type) {
    PyMemberDef *members = type->tp_members;
    slot_count = 0;
    for (PyMemberDef *m = members; m != NULL && m->name != NULL; m++) {
        if (m->type != T_OBJECT_EX || slot_count == MAX_SLOTS || type->tp_dictoffset != 0) {
            PyErr_SetString(PyExc_TypeError, "game_copy: the board must be a Board with its __slots__ only");
            return -1;
        }
        slot_offsets[slot_count] = m->offset;
        slot_copied[slot_count] = 0;
        for (size_t k = 0; k < sizeof COPIED_SLOTS / sizeof COPIED_SLOTS[0]; k++)
            if (strcmp(m->name, COPIED_SLOTS[k]) == 0) slot_copied[slot_count] = 1;
        slot_count++;
    }
    board_type = type;
    return 0;
}

/* Board.copy, slot by slot. */
static PyObject *copy_board(PyObject *board) {
    PyTypeObject *type = Py_TYPE(board);
    if (type != board_type && find_slots(type) < 0) return NULL;
    PyObject *other = type->tp_alloc(type, 0);
    if (other == NULL) return NULL;
    for (Py_ssize_t i = 0; i < slot_count; i++) {
        PyObject *value = *(PyObject **)((char *)board + slot_offsets[i]);
        if (value == NULL) continue;  /* an unset slot stays unset */
        if (slot_copied[i]) {
            value = PySequence_GetSlice(value, 0, PY_SSIZE_T_MAX);
            if (value == NULL) { Py_DECREF(other); return NULL; }
        } else {
            Py_INCREF(value);
        }
        *(PyObject **)((char *)other + slot_offsets[i]) = value;
    }
    return other;
}

static PyObject *empty_args;

/* game_copy(state): GameState.copy. */
static PyObject *py_game_copy(PyObject *Py_UNUSED(module), PyObject *state) {
    PyTypeObject *type = Py_TYPE(state);
    PyObject *own = PyObject_GenericGetDict(state, NULL);
    PyObject *fields = own ? PyDict_Copy(own) : NULL, *other = NULL;
    Py_XDECREF(own);
    if (fields == NULL) return NULL;
    PyObject *const lists[] = {s_moves, s_setup, s_history, s_max_stones};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        PyObject *list = PyDict_GetItemWithError(fields, lists[k]);  /* borrowed */
        if (list == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, lists[k]);
            goto done;
        }
        PyObject *copy = PySequence_GetSlice(list, 0, PY_SSIZE_T_MAX);
        int stored = copy == NULL ? -1 : PyDict_SetItem(fields, lists[k], copy);
        Py_XDECREF(copy);
        if (stored < 0) goto done;
    }
    PyObject *board = PyDict_GetItemWithError(fields, s_board);  /* borrowed */
    if (board == NULL) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, s_board);
        goto done;
    }
    PyObject *board_copy = copy_board(board);
    int stored = board_copy == NULL ? -1 : PyDict_SetItem(fields, s_board, board_copy);
    Py_XDECREF(board_copy);
    if (stored < 0) goto done;
    other = type->tp_new(type, empty_args, NULL);
    if (other != NULL && PyObject_GenericSetDict(other, fields, NULL) < 0) Py_CLEAR(other);
done:
    Py_DECREF(fields);
    return other;
}

/* ---- search positions (position.py; the layout in _position.h) ------------------------------------------- */

static PyTypeObject PositionContextType, PositionType;

static void context_dealloc(PositionContext *ctx) {
    for (int i = 0; i < ctx->held; i++) PyBuffer_Release(&ctx->key_views[i]);
    PyMem_Free(ctx->history);
    Py_XDECREF(ctx->grid);
    Py_XDECREF(ctx->root_state);
    Py_XDECREF(ctx->ko_name);
    Py_XDECREF(ctx->zobrist);
    Py_TYPE(ctx)->tp_free((PyObject *)ctx);
}

static PyTypeObject PositionContextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gtp_engine._rules_core.PositionContext",
    .tp_basicsize = sizeof(PositionContext),
    .tp_dealloc = (destructor)context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What every position of one search shares (see _position.h).",
};

static Py_ssize_t arrays_bytes(Py_ssize_t n) { return 8 * n + n; }

static PositionObject *position_alloc(PositionContext *ctx) {
    PositionObject *p = PyObject_NewVar(PositionObject, &PositionType, arrays_bytes(ctx->n));
    if (p == NULL) return NULL;
    Py_INCREF(ctx);
    p->ctx = ctx;
    p->line = NULL;
    p->line_len = p->line_cap = 0;
    Py_ssize_t n = ctx->n;
    p->head = p->arrays;
    p->next = p->head + n;
    p->size = p->next + n;
    p->libs = p->size + n;
    p->colors = (uint8_t *)(p->libs + n);
    return p;
}

static void position_dealloc(PositionObject *p) {
    Py_XDECREF(p->ctx);
    PyMem_Free(p->line);
    PyObject_Free(p);
}

/* The position's arrays as a Board for the rules' steps above (nothing borrowed: nothing to release). */
static void position_board(PositionObject *p, Board *b) {
    b->held = 0;
    b->colors = p->colors;
    b->head = p->head;
    b->next = p->next;
    b->size = p->size;
    b->libs = p->libs;
    b->keys[EMPTY] = NULL;
    b->keys[BLACK] = p->ctx->keys[BLACK];
    b->keys[WHITE] = p->ctx->keys[WHITE];
    b->n = p->ctx->n;
    b->stride = p->ctx->stride;
}

/* The position's counts as a Counts for play_point (no Python lists: nothing to release), and back. */
static void position_get_counts(const PositionObject *p, Counts *c) {
    memset(c, 0, sizeof *c);
    c->hash = p->hash;
    c->ko_point = p->ko_point;
    c->ko_color = p->ko_color;
    memcpy(c->captures, p->captures, sizeof c->captures);
    memcpy(c->stones, p->stones, sizeof c->stones);
}

static void position_set_counts(PositionObject *p, const Counts *c) {
    p->hash = c->hash;
    p->ko_point = c->ko_point;
    p->ko_color = c->ko_color;
    memcpy(p->captures, c->captures, sizeof p->captures);
    memcpy(p->stones, c->stones, sizeof p->stones);
}

static int compare_keys(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* position_root(state, white_compensation, territory, ko_name, simple_ko, situational_ko, allow_suicide): the search
   position of a GameState, with a new context; the rules' numbers come from position.py. */
static PyObject *py_position_root(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyBytes_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "position_root(state, white_compensation, territory, ko_name: bytes, "
                                         "simple_ko, situational_ko, allow_suicide)");
        return NULL;
    }
    PyObject *state = args[0], *board = NULL, *moves = NULL, *history = NULL, *most_list = NULL;
    PositionContext *ctx = NULL;
    PositionObject *p = NULL, *result = NULL;
    Board b;
    b.held = 0;
    Counts c = {0};
    long to_play, passes, most[3] = {0};
    double white = PyFloat_AsDouble(args[1]);
    int flags[4];
    for (int i = 0; i < 4; i++) flags[i] = PyObject_IsTrue(args[i == 0 ? 2 : i + 3]);
    if ((white == -1.0 && PyErr_Occurred()) || flags[0] < 0 || flags[1] < 0 || flags[2] < 0 || flags[3] < 0)
        return NULL;
    if ((board = PyObject_GetAttr(state, s_board)) == NULL || get_long(state, s_to_play, &to_play) < 0 ||
        get_long(state, s_consecutive_passes, &passes) < 0 || read_pair(state, s_max_stones, most, &most_list) < 0 ||
        counts_read(board, &c) < 0 || board_load(&b, board) < 0)
        goto done;
    if (check_color(to_play) < 0) goto done;
    if ((moves = PyObject_GetAttr(state, s_moves)) == NULL || (history = PyObject_GetAttr(state, s_history)) == NULL)
        goto done;
    if (!PyList_Check(moves) || !PyList_Check(history)) {
        PyErr_SetString(PyExc_TypeError, "state.moves and state._history must be lists");
        goto done;
    }
    ctx = PyObject_New(PositionContext, &PositionContextType);
    if (ctx == NULL) goto done;
    ctx->grid = ctx->root_state = ctx->ko_name = ctx->zobrist = NULL;
    ctx->held = 0;
    ctx->history = NULL;
    ctx->history_len = 0;
    ctx->n = b.n;
    ctx->stride = b.stride;
    ctx->width = b.stride - 1;
    ctx->height = (b.n - 1) / b.stride - 2;
    ctx->white_compensation = white;
    ctx->territory = flags[0];
    ctx->simple_ko = flags[1];
    ctx->situational_ko = flags[2];
    ctx->allow_suicide = flags[3];
    Py_INCREF(state);
    ctx->root_state = state;
    Py_INCREF(args[3]);
    ctx->ko_name = args[3];
    if ((ctx->grid = PyObject_GetAttr(board, s_grid)) == NULL || get_hash(state, s_white_key, &ctx->white_key) < 0 ||
        (ctx->zobrist = PyObject_GetAttr(board, s_zobrist)) == NULL)
        goto done;
    if (!PyTuple_Check(ctx->zobrist) || PyTuple_GET_SIZE(ctx->zobrist) < 3) {
        PyErr_SetString(PyExc_TypeError, "board._zobrist must be a tuple of key arrays indexed by colour");
        goto done;
    }
    ctx->keys[EMPTY] = NULL;
    for (int color = BLACK; color <= WHITE; color++) {
        Py_buffer *view = &ctx->key_views[ctx->held];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(ctx->zobrist, color), view, PyBUF_SIMPLE) < 0) goto done;
        ctx->held++;
        if (view->len < 8 * b.n) {
            PyErr_SetString(PyExc_TypeError, "board._zobrist: a key array shorter than the board");
            goto done;
        }
        ctx->keys[color] = view->buf;
    }
    Py_ssize_t count = PyList_GET_SIZE(history);
    ctx->history = PyMem_Malloc(sizeof(uint64_t) * (size_t)(count ? count : 1));
    if (ctx->history == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < count; i++) {
        ctx->history[i] = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(history, i));
        if (ctx->history[i] == (uint64_t)-1 && PyErr_Occurred()) goto done;
    }
    qsort(ctx->history, (size_t)count, sizeof(uint64_t), compare_keys);
    ctx->history_len = count;

    if ((p = position_alloc(ctx)) == NULL) goto done;
    Py_ssize_t n = b.n;
    memcpy(p->colors, b.colors, (size_t)n);
    memcpy(p->head, b.head, 2 * (size_t)n);
    memcpy(p->next, b.next, 2 * (size_t)n);
    memcpy(p->size, b.size, 2 * (size_t)n);
    memcpy(p->libs, b.libs, 2 * (size_t)n);
    p->to_play = to_play;
    p->consecutive_passes = passes;
    position_set_counts(p, &c);
    for (int k = 0; k < 3; k++) p->most[k] = most[k];
    Py_ssize_t played = PyList_GET_SIZE(moves);
    p->move_count = played;
    for (Py_ssize_t k = 0; k < POSITION_HISTORY; k++) {
        p->recent[k] = POSITION_NO_MOVE;
        if (k >= played) continue;
        PyObject *move = PyList_GET_ITEM(moves, played - 1 - k);
        if (!PyTuple_Check(move) || PyTuple_GET_SIZE(move) != 2) {
            PyErr_SetString(PyExc_ValueError, "state.moves must hold (color, point) pairs");
            goto done;
        }
        if (parse_long(PyTuple_GET_ITEM(move, 1), &p->recent[k]) < 0) goto done;
    }
    result = p;
    p = NULL;
done:
    board_release(&b);
    counts_release(&c);
    Py_XDECREF(board);
    Py_XDECREF(moves);
    Py_XDECREF(history);
    Py_XDECREF(most_list);
    Py_XDECREF(ctx);
    Py_XDECREF(p);
    return (PyObject *)result;
}

static PositionObject *as_position(PyObject *obj) {
    if (Py_TYPE(obj) != &PositionType) {
        PyErr_Format(PyExc_TypeError, "expected a search position, not %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return (PositionObject *)obj;
}

/* position_copy(position): an independent copy, sharing the context. */
static PyObject *py_position_copy(PyObject *Py_UNUSED(module), PyObject *obj) {
    PositionObject *p = as_position(obj);
    if (p == NULL) return NULL;
    PositionObject *q = position_alloc(p->ctx);
    if (q == NULL) return NULL;
    size_t fields = offsetof(PositionObject, line) - offsetof(PositionObject, to_play);
    memcpy(&q->to_play, &p->to_play, fields);
    memcpy(q->arrays, p->arrays, (size_t)arrays_bytes(p->ctx->n));
    if (p->line_len) {
        q->line = PyMem_Malloc(sizeof(LineMove) * (size_t)p->line_cap);
        if (q->line == NULL) { Py_DECREF(q); return PyErr_NoMemory(); }
        memcpy(q->line, p->line, sizeof(LineMove) * (size_t)p->line_len);
        q->line_len = p->line_len;
        q->line_cap = p->line_cap;
    }
    return (PyObject *)q;
}

/* Plays `point` for the side to move, as GameState.play_unchecked; -1 with an exception for a point it cannot play. */
static int position_play(PositionObject *p, long point) {
    Board b;
    position_board(p, &b);
    Counts c;
    position_get_counts(p, &c);
    long color = p->to_play;
    if (play_point(&b, &c, point, color) < 0) return -1;
    if (p->line_len == p->line_cap) {
        Py_ssize_t cap = p->line_cap ? 2 * p->line_cap : 16;
        LineMove *line = PyMem_Realloc(p->line, sizeof(LineMove) * (size_t)cap);
        if (line == NULL) { PyErr_NoMemory(); return -1; }
        p->line = line;
        p->line_cap = cap;
    }
    position_set_counts(p, &c);
    if (point == PASS) {
        p->consecutive_passes++;
    } else {
        p->consecutive_passes = 0;
        if (p->stones[color] > p->most[color]) p->most[color] = p->stones[color];
    }
    LineMove *move = &p->line[p->line_len++];
    move->point = point;
    move->key = color == BLACK ? p->hash ^ p->ctx->white_key : p->hash;
    memmove(p->recent + 1, p->recent, sizeof(long) * (POSITION_HISTORY - 1));
    p->recent[0] = point;
    p->move_count++;
    p->to_play = color == BLACK ? WHITE : BLACK;
    return 0;
}

/* position_play_line(position, points): position_play of each point in turn; what was played before a refused
   point stays played. */
static PyObject *py_position_play_line(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "position_play_line(position, points)"); return NULL; }
    PositionObject *p = as_position(args[0]);
    if (p == NULL) return NULL;
    PyObject *points = PySequence_Fast(args[1], "points must be a sequence");
    if (points == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(points);
    PyObject **items = PySequence_Fast_ITEMS(points);
    for (Py_ssize_t i = 0; i < count; i++) {
        long point;
        if (parse_long(items[i], &point) < 0 || position_play(p, point) < 0) {
            Py_DECREF(points);
            return NULL;
        }
    }
    Py_DECREF(points);
    Py_RETURN_NONE;
}

static int in_sorted(const uint64_t *keys, Py_ssize_t count, uint64_t key) {
    Py_ssize_t low = 0, high = count;
    while (low < high) {
        Py_ssize_t mid = low + (high - low) / 2;
        if (keys[mid] < key) low = mid + 1;
        else high = mid;
    }
    return low < count && keys[low] == key;
}

/* position_illegal_reason(position, point): GameState.illegal_reason for the side to move, step for step. */
static PyObject *py_position_illegal_reason(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "position_illegal_reason(position, point)"); return NULL; }
    PositionObject *p = as_position(args[0]);
    long point;
    if (p == NULL || parse_long(args[1], &point) < 0) return NULL;
    if (point == PASS) Py_RETURN_NONE;
    const PositionContext *ctx = p->ctx;
    Board b;
    position_board(p, &b);
    if (check_point(&b, point) < 0) return NULL;
    int color = (int)p->to_play;
    PyObject *reason = illegal_reason(&b, point, color, ctx->allow_suicide, p->ko_point, p->ko_color);
    if (reason == NULL && !ctx->simple_ko && superko_possible(ctx->allow_suicide, p->stones[color], p->most[color])) {
        uint64_t key = hash_after(&b, p->hash, point, color);
        if (color == BLACK) key ^= ctx->white_key;
        int repeats = in_sorted(ctx->history, ctx->history_len, key);
        for (Py_ssize_t i = 0; i < p->line_len && !repeats; i++) repeats = p->line[i].key == key;
        if (repeats) reason = s_superko;
    }
    if (reason == NULL) reason = Py_None;
    Py_INCREF(reason);
    return reason;
}

/* position_candidates(positions, point_of_flat, out): tree_core.candidates for search positions: out[i, j] whether
   point_of_flat[j] is empty in positions[i] (pass, the last column, always). */
static PyObject *py_position_candidates(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "position_candidates(positions, point_of_flat, out)");
        return NULL;
    }
    PyObject *positions = PySequence_Fast(args[0], "positions must be a sequence");
    if (positions == NULL) return NULL;
    Py_buffer points, out;
    if (PyObject_GetBuffer(args[1], &points, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        Py_DECREF(positions);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&points);
        Py_DECREF(positions);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(positions), width = points.len / 8;
    if (points.itemsize != 8 || out.itemsize != 1 || out.len != count * width || width < 1) {
        PyErr_SetString(PyExc_ValueError, "position_candidates: int64 points and a bool row of out per position");
        goto done;
    }
    const int64_t *point_of = points.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        PositionObject *p = as_position(PySequence_Fast_GET_ITEM(positions, i));
        if (p == NULL) goto done;
        uint8_t *row = (uint8_t *)out.buf + i * width;
        for (Py_ssize_t j = 0; j < width - 1; j++) {
            int64_t q = point_of[j];
            if (q < 0 || q >= p->ctx->n) {
                PyErr_SetString(PyExc_ValueError, "position_candidates: a point off the board");
                goto done;
            }
            row[j] = p->colors[q] == EMPTY;
        }
        row[width - 1] = 1;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&points);
    PyBuffer_Release(&out);
    Py_DECREF(positions);
    return result;
}

static PyObject *position_get_grid(PositionObject *p, void *Py_UNUSED(closure)) {
    Py_INCREF(p->ctx->grid);
    return p->ctx->grid;
}

static PyObject *position_get_root_state(PositionObject *p, void *Py_UNUSED(closure)) {
    Py_INCREF(p->ctx->root_state);
    return p->ctx->root_state;
}

static PyObject *position_get_line(PositionObject *p, void *Py_UNUSED(closure)) {
    PyObject *line = PyTuple_New(p->line_len);
    if (line == NULL) return NULL;
    for (Py_ssize_t i = 0; i < p->line_len; i++) {
        PyObject *point = PyLong_FromLong(p->line[i].point);
        if (point == NULL) { Py_DECREF(line); return NULL; }
        PyTuple_SET_ITEM(line, i, point);
    }
    return line;
}

static PyObject *position_get_hash(PositionObject *p, void *Py_UNUSED(closure)) {
    return PyLong_FromUnsignedLongLong(p->hash);
}

static PyObject *position_get_move_number(PositionObject *p, void *Py_UNUSED(closure)) {
    return PyLong_FromSsize_t(p->move_count);
}

static PyObject *position_get_captures(PositionObject *p, void *Py_UNUSED(closure)) {
    return Py_BuildValue("[lll]", p->captures[0], p->captures[BLACK], p->captures[WHITE]);
}

static PyGetSetDef position_getset[] = {
    {"grid", (getter)position_get_grid, NULL, "the board's Grid", NULL},
    {"root_state", (getter)position_get_root_state, NULL, "the GameState the line is played from", NULL},
    {"line", (getter)position_get_line, NULL, "the points played from the root, in order", NULL},
    {"hash", (getter)position_get_hash, NULL, "the board's Zobrist hash (Board.hash)", NULL},
    {"move_number", (getter)position_get_move_number, NULL, "the game's moves: the root's and the line's", NULL},
    {"captures", (getter)position_get_captures, NULL, "stones captured, indexed by the capturing colour "
     "(Board.captures)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef position_members[] = {
    {"to_play", T_LONG, offsetof(PositionObject, to_play), READONLY, "the side to move"},
    {"consecutive_passes", T_LONG, offsetof(PositionObject, consecutive_passes), READONLY,
     "passes at the end of the game's moves"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject PositionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gtp_engine._rules_core.Position",
    .tp_basicsize = offsetof(PositionObject, arrays),
    .tp_itemsize = 1,
    .tp_dealloc = (destructor)position_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A search position (position.py): the root's board and counts after a line of moves.",
    .tp_getset = position_getset,
    .tp_members = position_members,
};

static PyMethodDef methods[] = {
    {"board_play", (PyCFunction)(void (*)(void))py_board_play, METH_FASTCALL,
     "board_play(board, point, color): Board.play_unchecked"},
    {"board_illegal_reason", (PyCFunction)(void (*)(void))py_board_illegal_reason, METH_FASTCALL,
     "board_illegal_reason(board, point, color, allow_suicide): Board.illegal_reason"},
    {"board_hash_after", (PyCFunction)(void (*)(void))py_board_hash_after, METH_FASTCALL,
     "board_hash_after(board, point, color): Board.hash_after"},
    {"game_play", (PyCFunction)(void (*)(void))py_game_play, METH_FASTCALL,
     "game_play(state, point[, color]): GameState.play_unchecked"},
    {"game_play_line", (PyCFunction)(void (*)(void))py_game_play_line, METH_FASTCALL,
     "game_play_line(state, points): GameState.play_unchecked of each point in turn"},
    {"game_illegal_reason", (PyCFunction)(void (*)(void))py_game_illegal_reason, METH_FASTCALL,
     "game_illegal_reason(state, point[, color]): GameState.illegal_reason"},
    {"game_copy", (PyCFunction)py_game_copy, METH_O, "game_copy(state): GameState.copy"},
    {"position_root", (PyCFunction)(void (*)(void))py_position_root, METH_FASTCALL,
     "position_root(state, white_compensation, territory, ko_name, simple_ko, situational_ko, allow_suicide): "
     "the search position of a GameState"},
    {"position_copy", (PyCFunction)py_position_copy, METH_O, "position_copy(position): a copy"},
    {"position_play_line", (PyCFunction)(void (*)(void))py_position_play_line, METH_FASTCALL,
     "position_play_line(position, points): each point played in turn for the side to move"},
    {"position_illegal_reason", (PyCFunction)(void (*)(void))py_position_illegal_reason, METH_FASTCALL,
     "position_illegal_reason(position, point): GameState.illegal_reason for the side to move"},
    {"position_candidates", (PyCFunction)(void (*)(void))py_position_candidates, METH_FASTCALL,
     "position_candidates(positions, point_of_flat, out): tree_core.candidates for search positions"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rules_core", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rules_core(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_colors, "colors"}, {&s_chain_head, "chain_head"}, {&s_chain_next, "chain_next"},
        {&s_chain_size, "chain_size"}, {&s_chain_libs, "chain_libs"}, {&s_zobrist, "_zobrist"}, {&s_grid, "grid"},
        {&s_stride, "stride"}, {&s_hash, "hash"}, {&s_ko_point, "ko_point"}, {&s_ko_color, "ko_color"},
        {&s_captures, "captures"}, {&s_stone_count, "stone_count"}, {&s_board, "board"}, {&s_to_play, "to_play"},
        {&s_moves, "moves"}, {&s_consecutive_passes, "consecutive_passes"}, {&s_max_stones, "_max_stones"},
        {&s_history, "_history"}, {&s_white_key, "_white_key"}, {&s_rules, "_rules"}, {&s_ko, "ko"},
        {&s_suicide_allowed, "suicide_allowed"}, {&s_occupied, "occupied"}, {&s_suicide, "suicide"},
        {&s_superko, "superko"}, {&s_ko_reason, "ko"}, {&s_setup, "setup"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return NULL;
    }
    if ((empty_args = PyTuple_New(0)) == NULL) return NULL;
    if (PyType_Ready(&PositionContextType) < 0 || PyType_Ready(&PositionType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&PositionType);
    if (PyModule_AddObject(m, "Position", (PyObject *)&PositionType) < 0) {
        Py_DECREF(&PositionType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
