/* The compiled twin of rollout.candidates_python (rollout.py holds the reference and the terms):
 *
 *   candidates(board, color, last, previous, vocabulary, offsets, flat, indices)
 *
 * writes the flat indices of color's candidates on board into flat (int64, in flat order) and their feature
 * indices into the matching rows of indices (int64, C-contiguous [area, 8], the groups of rollout.GROUPS in order,
 * each offset by offsets[group]), and returns how many there are. vocabulary is the policy's sorted canonical
 * pattern codes (int64). Every value is an integer, and tests/unit/test_rollout.py holds them to the reference's,
 * value for value. The board's arrays are read through the buffer protocol, as _rules_core.c reads them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { EMPTY, BLACK, WHITE, EDGE };
enum { GROUPS = 8, MAX_DISTANCE = 17, MAX_LINE = 4 };
#define PASS (-1)
#define MAX_ARRAY 1024 /* array size of the largest board, 25x25: (25 + 2) * 26 + 1 = 703 */

/* Cell codes of the 3x3 pattern (rollout._CELL): 0 empty, 1-3 own stone with 1, 2, 3+ liberties, 4-6 opponent
 * stone with 1, 2, 3+ liberties, 7 edge. */
enum { CELL_EMPTY = 0, CELL_OWN_1 = 1, CELL_OWN_2 = 2, CELL_OWN_3 = 3, CELL_OPP_1 = 4, CELL_OPP_2 = 5, CELL_EDGE = 7 };
static const int64_t CAPTURE_BUCKETS[8] = {0, 1, 2, 3, 3, 3, 3, 4};
static const int OFFSETS8[8][2] = {{-1, -1}, {-1, 0}, {-1, 1}, {0, -1}, {0, 1}, {1, -1}, {1, 0}, {1, 1}};
static const int DIAGONALS[4] = {0, 2, 5, 7}; /* the cells of OFFSETS8 that are diagonal */
static int permutations[8][8];                /* rollout._PERMUTATIONS */

static PyObject *s_grid, *s_width, *s_height, *s_stride, *s_colors, *s_chain_head, *s_chain_next, *s_chain_size,
    *s_ko_point, *s_ko_color;

typedef struct {
    Py_buffer views[8]; /* colors, chain_head, chain_next, chain_size, vocabulary, offsets, flat, indices */
    int held;
} Views;

static void views_release(Views *v) {
    for (int i = 0; i < v->held; i++) PyBuffer_Release(&v->views[i]);
    v->held = 0;
}

/* Borrows obj's buffer of at least `count` items of `itemsize` bytes and `format` ("B" for bytes). */
static const void *borrow(Views *v, PyObject *obj, Py_ssize_t itemsize, const char *format, Py_ssize_t count,
                          int writable, const char *name) {
    Py_buffer *view = &v->views[v->held];
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return NULL;
    v->held++;
    const char *f = view->format ? view->format : "B";
    int integer64 = itemsize == 8 && (strcmp(f, "q") == 0 || strcmp(f, "l") == 0 || strcmp(f, "<q") == 0 ||
                                      strcmp(f, "<l") == 0 || strcmp(f, "=q") == 0);
    if (view->itemsize != itemsize || (itemsize != 8 && strcmp(f, format) != 0) || (itemsize == 8 && !integer64) ||
        view->len / itemsize < count) {
        PyErr_Format(PyExc_TypeError, "%s must be a buffer of at least %zd items of format '%s'", name, count,
                     format);
        return NULL;
    }
    return view->buf;
}

static const void *borrow_attr(Views *v, PyObject *obj, PyObject *name, Py_ssize_t itemsize, const char *format,
                               Py_ssize_t count) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return NULL;
    const void *data = borrow(v, value, itemsize, format, count, 0, PyUnicode_AsUTF8(name));
    Py_DECREF(value); /* the board keeps it alive for the call */
    return data;
}

static int long_attr(PyObject *obj, PyObject *name, long *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static long clip(long value, long low, long high) { return value < low ? low : value > high ? high : value; }

/* The liberties of color's chain through point once played there, up to 2 (rollout._liberties_after): the empty
 * neighbours, the liberties of the own chains next to it, and the points of opponent neighbours in atari. */
static int liberties_after(const uint8_t *colors, const uint16_t *next, const int *libs, long point, int color,
                           const long directions[4]) {
    static uint32_t stamp[MAX_ARRAY], now;
    int count = 0;
    if (++now == 0) {
        memset(stamp, 0, sizeof stamp);
        now = 1;
    }
    stamp[point] = now;
    for (int k = 0; k < 4 && count < 2; k++) {
        long q = point + directions[k];
        int c = colors[q];
        if (c == EMPTY || (c != EDGE && c != color && libs[q] == 1)) {
            if (stamp[q] != now) stamp[q] = now, count++;
        } else if (c == color) {
            long s = q; /* every stone of the chain, round its circular list: their empty neighbours */
            do {
                for (int j = 0; j < 4 && count < 2; j++) {
                    long r = s + directions[j];
                    if (colors[r] == EMPTY && stamp[r] != now) stamp[r] = now, count++;
                }
                s = next[s];
            } while (s != q && count < 2);
        }
    }
    return count;
}

static int64_t pattern_id(const int64_t *vocabulary, Py_ssize_t size, int64_t code) {
    Py_ssize_t low = 0, high = size;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (vocabulary[middle] < code) low = middle + 1;
        else high = middle;
    }
    return (low < size && vocabulary[low] == code) ? low : size;
}

static PyObject *py_candidates(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "candidates(board, color, last, previous, vocabulary, offsets, flat, indices)");
        return NULL;
    }
    PyObject *board = args[0];
    long color = PyLong_AsLong(args[1]), last = PyLong_AsLong(args[2]), previous = PyLong_AsLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (color != BLACK && color != WHITE) {
        PyErr_Format(PyExc_ValueError, "color must be BLACK or WHITE, got %ld", color);
        return NULL;
    }
    long width, height, stride, ko_point, ko_color;
    PyObject *grid = PyObject_GetAttr(board, s_grid);
    if (grid == NULL) return NULL;
    int failed = long_attr(grid, s_width, &width) || long_attr(grid, s_height, &height) ||
                 long_attr(grid, s_stride, &stride);
    Py_DECREF(grid);
    if (failed || long_attr(board, s_ko_point, &ko_point) || long_attr(board, s_ko_color, &ko_color)) return NULL;
    long n = (height + 2) * stride + 1, area = width * height;
    if (n > MAX_ARRAY) {
        PyErr_Format(PyExc_ValueError, "a %ldx%ld board is larger than this twin's arrays", width, height);
        return NULL;
    }
    for (int k = 0; k < 2; k++) {
        long point = k == 0 ? last : previous;
        if (point != PASS && (point < 0 || point >= n)) {
            PyErr_Format(PyExc_ValueError, "move %ld is off the board", point);
            return NULL;
        }
    }

    Views v = {.held = 0};
    const uint8_t *colors = borrow_attr(&v, board, s_colors, 1, "B", n);
    const uint16_t *head = colors ? borrow_attr(&v, board, s_chain_head, 2, "H", n) : NULL;
    const uint16_t *next = head ? borrow_attr(&v, board, s_chain_next, 2, "H", n) : NULL;
    const uint16_t *size = next ? borrow_attr(&v, board, s_chain_size, 2, "H", n) : NULL;
    const int64_t *vocabulary = size ? borrow(&v, args[4], 8, "q", 0, 0, "vocabulary") : NULL;
    Py_ssize_t vocabulary_size = vocabulary ? v.views[v.held - 1].len / 8 : 0;
    const int64_t *offsets = vocabulary ? borrow(&v, args[5], 8, "q", GROUPS, 0, "offsets") : NULL;
    int64_t *flat_out = offsets ? (int64_t *)borrow(&v, args[6], 8, "q", area, 1, "flat") : NULL;
    int64_t *indices = flat_out ? (int64_t *)borrow(&v, args[7], 8, "q", area * GROUPS, 1, "indices") : NULL;
    if (indices == NULL) {
        views_release(&v);
        return NULL;
    }

    const long directions[4] = {-stride, -1, 1, stride}; /* coords.Grid.directions */
    /* Exact liberties by chain head: each empty point adds one to every distinct chain among its neighbours. */
    int by_head[MAX_ARRAY] = {0}, libs[MAX_ARRAY] = {0};
    for (long p = stride; p < n - stride; p++) {
        if (colors[p] != EMPTY) continue;
        uint16_t seen[4];
        int distinct = 0;
        for (int k = 0; k < 4; k++) {
            uint16_t h = head[p + directions[k]];
            int fresh = h != 0;
            for (int j = 0; j < distinct && fresh; j++) fresh = seen[j] != h;
            if (fresh) seen[distinct++] = h, by_head[h]++;
        }
    }
    uint8_t cell[MAX_ARRAY];
    int opponent = BLACK + WHITE - color;
    for (long p = 0; p < n; p++) {
        int c = colors[p];
        libs[p] = (c == BLACK || c == WHITE) ? by_head[head[p]] : 0;
        int l = libs[p] < 3 ? (libs[p] < 1 ? 1 : libs[p]) : 3;
        cell[p] = c == EMPTY ? CELL_EMPTY : c == EDGE ? CELL_EDGE : c == color ? l : CELL_OPP_1 - 1 + l;
    }
    long last_row = 0, last_col = 0, previous_row = 0, previous_col = 0;
    if (last != PASS) last_row = last / stride - 1, last_col = last % stride;
    if (previous != PASS) previous_row = previous / stride - 1, previous_col = previous % stride;

    long count = 0;
    for (long row = 0; row < height; row++) {
        for (long col = 0; col < width; col++) {
            long p = (row + 1) * stride + col;
            if (colors[p] != EMPTY) continue;
            int open = 0, capturing = 0, in_atari = 0, own_2 = 0, own_3 = 0, own = 0, atari = 0, walled = 1;
            for (int k = 0; k < 4; k++) {
                int d = cell[p + directions[k]];
                open += d == CELL_EMPTY;
                capturing += d == CELL_OPP_1;
                in_atari |= d == CELL_OWN_1;
                own_2 |= d == CELL_OWN_2;
                own_3 |= d == CELL_OWN_3;
                own |= d >= CELL_OWN_1 && d <= CELL_OWN_3;
                atari |= d == CELL_OPP_2;
                walled &= (d >= CELL_OWN_1 && d <= CELL_OWN_3) || d == CELL_EDGE;
            }
            int lower = open + capturing, few = lower <= 1 && !own_3;
            int after = few ? lower : 2;
            if (few && own_2) {
                after = liberties_after(colors, next, libs, p, color, directions);
            }
            long line = row < height - 1 - row ? row : height - 1 - row;
            long across = col < width - 1 - col ? col : width - 1 - col;
            line = across < line ? across : line;
            line = line < MAX_LINE ? line : MAX_LINE;
            if (walled) {
                int diagonal_opponents = 0;
                for (int k = 0; k < 4; k++) {
                    const int *o = OFFSETS8[DIAGONALS[k]];
                    diagonal_opponents += colors[clip(p + o[0] * stride + o[1], 0, n - 1)] == opponent;
                }
                if (diagonal_opponents <= (line == 0 ? 0 : 1)) continue; /* an own eye */
            }
            if (after < 1) continue;
            if (ko_point != PASS && ko_color == color && p == ko_point) continue;

            int64_t groups[GROUPS] = {0};
            if (capturing || in_atari) {
                uint16_t seen[4];
                int distinct = 0;
                long captured = 0, saved = 0;
                for (int k = 0; k < 4; k++) {
                    long q = p + directions[k];
                    int c = colors[q];
                    if ((c != BLACK && c != WHITE) || libs[q] != 1) continue;
                    int fresh = 1;
                    for (int j = 0; j < distinct && fresh; j++) fresh = seen[j] != head[q];
                    if (!fresh) continue;
                    seen[distinct++] = head[q];
                    if (c == color) saved += size[head[q]];
                    else captured += size[head[q]];
                }
                groups[1] = CAPTURE_BUCKETS[captured < 7 ? captured : 7];
                if (saved && after >= 2) groups[2] = saved == 1 ? 1 : 2;
            }
            if (last != PASS) {
                long dr = labs(row - last_row), dc = labs(col - last_col);
                groups[0] = (dr > dc ? dr : dc) == 1;
                groups[5] = dr + dc < MAX_DISTANCE ? dr + dc : MAX_DISTANCE;
            }
            if (previous != PASS) {
                long dr = labs(row - previous_row), dc = labs(col - previous_col);
                groups[6] = dr + dc < MAX_DISTANCE ? dr + dc : MAX_DISTANCE;
            }
            groups[3] = atari;
            groups[4] = after == 1 ? (own ? 2 : 1) : 0;
            groups[7] = line;

            int cells8[8];
            for (int k = 0; k < 8; k++) cells8[k] = cell[clip(p + OFFSETS8[k][0] * stride + OFFSETS8[k][1], 0, n - 1)];
            int64_t canonical = INT64_MAX;
            for (int t = 0; t < 8; t++) {
                int64_t code = 0;
                for (int k = 7; k >= 0; k--) code = code * 8 + cells8[permutations[t][k]];
                canonical = code < canonical ? code : canonical;
            }
            int64_t *row_out = indices + count * GROUPS;
            row_out[0] = pattern_id(vocabulary, vocabulary_size, canonical) + (vocabulary_size + 1) * groups[0] +
                         offsets[0];
            for (int j = 1; j < GROUPS; j++) row_out[j] = groups[j] + offsets[j];
            flat_out[count++] = row * width + col;
        }
    }
    views_release(&v);
    return PyLong_FromLong(count);
}

/* rollout._symmetry_permutations: row t lists, for each cell k, the cell that symmetry t maps k to. */
static void make_permutations(void) {
    for (int t = 0; t < 8; t++) {
        for (int k = 0; k < 8; k++) {
            int r = OFFSETS8[k][0], c = OFFSETS8[k][1], mr, mc;
            switch (t) {
                case 0: mr = r, mc = c; break;
                case 1: mr = c, mc = r; break;
                case 2: mr = -r, mc = c; break;
                case 3: mr = r, mc = -c; break;
                case 4: mr = -r, mc = -c; break;
                case 5: mr = c, mc = -r; break;
                case 6: mr = -c, mc = r; break;
                default: mr = -c, mc = -r; break;
            }
            for (int j = 0; j < 8; j++)
                if (OFFSETS8[j][0] == mr && OFFSETS8[j][1] == mc) permutations[t][k] = j;
        }
    }
}

static PyMethodDef methods[] = {
    {"candidates", (PyCFunction)(void (*)(void))py_candidates, METH_FASTCALL,
     "candidates(board, color, last, previous, vocabulary, offsets, flat, indices) -> count"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rollout_core", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__rollout_core(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_grid, "grid"}, {&s_width, "width"}, {&s_height, "height"}, {&s_stride, "stride"},
        {&s_colors, "colors"}, {&s_chain_head, "chain_head"}, {&s_chain_next, "chain_next"},
        {&s_chain_size, "chain_size"},
        {&s_ko_point, "ko_point"}, {&s_ko_color, "ko_color"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return NULL;
    }
    make_permutations();
    return PyModule_Create(&module);
}
