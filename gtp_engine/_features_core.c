/* The compiled twin of the spatial planes of features.encode (features.py holds the reference and the terms):
 *
 *   spatial_planes(states, symmetries, table, planes)
 *
 * writes planes[i] (float32, C-contiguous [B, C, area], C the 15 channels of feature set version 1) for states[i],
 * transformed by symmetries[i] through the rows of `table` (symmetry.permutation_table: output flat j reads the
 * point at original flat table[s][j]); symmetries None is the identity for every position and table is then
 * ignored. Liberties are counted exactly, as the reference counts them: every empty point adds one liberty to each
 * distinct chain among its neighbours. Every value written is 0.0 or 1.0, and tests/unit/test_features.py holds
 * the result to the reference's, value for value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { EMPTY, BLACK, WHITE, EDGE };
enum { ON_BOARD, OWN, OPPONENT, OWN_LIBERTIES, OPPONENT_LIBERTIES = 6, KO_BAN = 9, LAST_MOVE = 10, CHANNELS = 15 };
#define HISTORY 5
#define PASS (-1)
#define MAX_ARRAY 1024 /* array size of the largest board, 25x25: (25 + 2) * 26 + 1 = 703 */

static PyObject *s_board, *s_to_play, *s_moves, *s_colors, *s_chain_head, *s_ko_point, *s_ko_color, *s_grid,
    *s_width, *s_height;

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

/* The source flat of output flat j, and the marks (bit 0 ko ban, bit 1 + k the move k + 1 ago) per source flat. */
static int encode_one(PyObject *state, long sym, const int64_t *table, Py_ssize_t rows, Py_ssize_t width,
                      Py_ssize_t height, float *out) {
    const Py_ssize_t area = width * height, stride = width + 1, n = (height + 2) * stride + 1;
    long to_play, ko_point, ko_color;
    if (sym < 0 || sym >= rows) {
        PyErr_Format(PyExc_ValueError, "symmetry %ld has no row in the permutation table", sym);
        return -1;
    }
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
    const uint8_t *c = colors_view.buf;
    const uint16_t *h = head_view.buf;
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
    for (Py_ssize_t j = 0; j < area; j++) {
        Py_ssize_t flat = table ? (Py_ssize_t)table[sym * area + j] : j;
        Py_ssize_t p = (flat / width + 1) * stride + flat % width;
        float planes[CHANNELS] = {1.0f};
        uint8_t color = c[p];
        if (color == BLACK || color == WHITE) {
            int own = color == to_play;
            planes[own ? OWN : OPPONENT] = 1.0f;
            uint16_t libs = liberties[h[p]];
            if (libs > 0) planes[(own ? OWN_LIBERTIES : OPPONENT_LIBERTIES) + (libs < 3 ? libs : 3) - 1] = 1.0f;
        }
        for (int bit = 0; bit <= HISTORY; bit++)
            if (marks[p] & (1u << bit)) planes[KO_BAN + bit] = 1.0f;
        for (int channel = 0; channel < CHANNELS; channel++) out[channel * area + j] = planes[channel];
    }
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
    PyObject *board = PyObject_GetAttr(PySequence_Fast_GET_ITEM(states, 0), s_board);
    PyObject *grid = board == NULL ? NULL : PyObject_GetAttr(board, s_grid);
    Py_XDECREF(board);
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
        if (borrow(args[2], &table_view, PyBUF_SIMPLE, "q", 8, "table") < 0) {
            PyErr_Clear();
            if (borrow(args[2], &table_view, PyBUF_SIMPLE, "l", 8, "table") < 0) goto release_planes;
        }
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

static PyMethodDef methods[] = {
    {"spatial_planes", (PyCFunction)(void (*)(void))py_spatial_planes, METH_FASTCALL,
     "spatial_planes(states, symmetries, table, planes): the spatial planes of features.encode"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_features_core", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__features_core(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_board, "board"}, {&s_to_play, "to_play"}, {&s_moves, "moves"}, {&s_colors, "colors"},
        {&s_chain_head, "chain_head"}, {&s_ko_point, "ko_point"}, {&s_ko_color, "ko_color"}, {&s_grid, "grid"},
        {&s_width, "width"}, {&s_height, "height"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
