/* The compiled inner loop of the tree search: select, select_root, descend, backup, expand, candidates (see
 * gtp_engine/tree_core.py), and the fields of a tree node (NodeFields, the base of mcts.Node).
 *
 * Each function does exactly what its Python twin in tree_core.py does, with the arithmetic in the same order, so
 * that both grow the same tree bit for bit (tests/unit/test_tree_core.py). Both work on mcts.Node objects; here
 * their fields are read and written in the C struct below, with no attribute lookups and no boxed numbers. Edge
 * statistics are node.stats, a C-contiguous float64 array of shape (6, capacity): N, W, W2, V, S, S2. Priors are
 * node.prior, float64, contiguous. The rare steps (a new node, a terminal position, an illegal edge, growing the
 * statistics) call back into Python. The records a call is given, tree_core.PuctParams and Hooks, are read by field
 * name, once per call, so that no order of their fields binds this file.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

enum { ROW_N, ROW_W, ROW_W2, ROW_V, ROW_S, ROW_S2, ROWS };

static PyObject *s_allocate, *s_consecutive_passes, *s_board, *s_colors;
enum { EMPTY_COLOR = 0 };  /* board.EMPTY */

/* tree_core.PuctParams, read by field name (parse_params) once per call. */
typedef struct {
    double c_puct, c_puct_log, c_puct_base, fpu_reduction, virtual_loss;
} Params;

static const struct { const char *name; size_t offset; } PARAM_FIELDS[] = {
    {"c_puct", offsetof(Params, c_puct)},
    {"c_puct_log", offsetof(Params, c_puct_log)},
    {"c_puct_base", offsetof(Params, c_puct_base)},
    {"fpu_reduction", offsetof(Params, fpu_reduction)},
    {"virtual_loss", offsetof(Params, virtual_loss)},
};
enum { PARAMS = sizeof(PARAM_FIELDS) / sizeof(PARAM_FIELDS[0]) };
static PyObject *s_params[PARAMS];  /* PARAM_FIELDS' names, interned */

/* tree_core.Hooks, read by field name once per gather call into an array indexed thus (descend takes its own first
 * five as arguments, in this order). */
enum {
    HOOK_NODE_TYPE, HOOK_MAKE_TERMINAL, HOOK_DROP_EDGE, HOOK_PLAY_LINE, HOOK_ILLEGAL_REASON, HOOK_COPY_STATE, HOOKS
};
static const char *const HOOK_FIELDS[HOOKS] = {"node_type", "make_terminal", "drop_edge", "play_line",
                                               "illegal_reason", "copy_state"};
static PyObject *s_hooks[HOOKS];  /* HOOK_FIELDS, interned */

/* tree_core.NodeFields: the fields of a node, as mcts.Node's docstring and tree_core's reference define them. The
 * type is not tracked by the garbage collector for its own fields: a tree holds no reference cycles (children are
 * referenced by their parent only). */
typedef struct {
    PyObject_HEAD
    PyObject *moves, *prior, *stats, *children, *ownership, *ownership_sum;
    PyObject *rows[ROWS];  /* stats' rows as arrays (N, W, ...), made when Python first reads one; reset with stats */
    double *stats_data, *prior_data;  /* their data once checked (node_stats, node_prior); NULL again when replaced */
    Py_ssize_t stats_capacity, prior_count;
    Py_ssize_t tried, visits, ownership_count;
    double tried_prior, nsum, net_v, net_u, net_s;
    char terminal;
} NodeObject;

static PyTypeObject NodeType;

/* obj as a node, or NULL with a TypeError. */
static NodeObject *as_node(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, &NodeType)) {
        PyErr_SetString(PyExc_TypeError, "tree nodes must be mcts.Node objects");
        return NULL;
    }
    return (NodeObject *)obj;
}

static PyArrayObject *checked_array(PyObject *obj, int nd, int type, const char *what);

static void set_stats(NodeObject *node, PyObject *stats) {
    Py_INCREF(stats);
    Py_SETREF(node->stats, stats);
    node->stats_data = NULL;
    for (int r = 0; r < ROWS; r++) Py_CLEAR(node->rows[r]);
}

static void set_prior(NodeObject *node, PyObject *prior) {
    Py_INCREF(prior);
    Py_SETREF(node->prior, prior);
    node->prior_data = NULL;
}

static PyObject *node_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwargs)) {
    NodeObject *node = (NodeObject *)type->tp_alloc(type, 0);
    if (node == NULL) return NULL;
    PyObject **fields[] = {&node->moves, &node->prior, &node->stats, &node->ownership, &node->ownership_sum};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        Py_INCREF(Py_None);
        *fields[i] = Py_None;
    }
    node->children = PyDict_New();
    if (node->children == NULL) { Py_DECREF(node); return NULL; }
    return (PyObject *)node;
}

static void node_dealloc(NodeObject *node) {
    Py_XDECREF(node->moves);
    Py_XDECREF(node->prior);
    Py_XDECREF(node->stats);
    Py_XDECREF(node->children);
    Py_XDECREF(node->ownership);
    Py_XDECREF(node->ownership_sum);
    for (int r = 0; r < ROWS; r++) Py_XDECREF(node->rows[r]);
    Py_TYPE(node)->tp_free((PyObject *)node);
}

/* stats, prior: the object field at offset `closure` (their setters differ: each drops its own checked data). */
static PyObject *node_get_field(NodeObject *node, void *closure) {
    PyObject *value = *(PyObject **)((char *)node + (intptr_t)closure);
    Py_INCREF(value);
    return value;
}

static int node_set_stats(NodeObject *node, PyObject *value, void *Py_UNUSED(closure)) {
    set_stats(node, value == NULL ? Py_None : value);
    return 0;
}

static int node_set_prior(NodeObject *node, PyObject *value, void *Py_UNUSED(closure)) {
    set_prior(node, value == NULL ? Py_None : value);
    return 0;
}

/* N, W, W2, V, S, S2: row `closure` of stats (None without stats), made once per stats array. */
static PyObject *node_get_row(NodeObject *node, void *closure) {
    int row = (int)(intptr_t)closure;
    if (node->stats == Py_None) Py_RETURN_NONE;
    if (node->rows[row] == NULL) {
        node->rows[row] = PySequence_GetItem(node->stats, row);
        if (node->rows[row] == NULL) return NULL;
    }
    Py_INCREF(node->rows[row]);
    return node->rows[row];
}

static PyGetSetDef node_getset[] = {
    {"stats", (getter)node_get_field, (setter)node_set_stats, "edge statistics, float64 (6, capacity)",
     (void *)(intptr_t)offsetof(NodeObject, stats)},
    {"prior", (getter)node_get_field, (setter)node_set_prior, "the edges' priors, float64, falling",
     (void *)(intptr_t)offsetof(NodeObject, prior)},
    {"N", (getter)node_get_row, NULL, "visits per edge (a row of stats)", (void *)(intptr_t)ROW_N},
    {"W", (getter)node_get_row, NULL, "utility sums", (void *)(intptr_t)ROW_W},
    {"W2", (getter)node_get_row, NULL, "sums of squared utilities", (void *)(intptr_t)ROW_W2},
    {"V", (getter)node_get_row, NULL, "value sums", (void *)(intptr_t)ROW_V},
    {"S", (getter)node_get_row, NULL, "score sums", (void *)(intptr_t)ROW_S},
    {"S2", (getter)node_get_row, NULL, "sums of squared scores", (void *)(intptr_t)ROW_S2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef node_members[] = {
    {"moves", T_OBJECT, offsetof(NodeObject, moves), 0, NULL},
    {"children", T_OBJECT, offsetof(NodeObject, children), 0, NULL},
    {"ownership", T_OBJECT, offsetof(NodeObject, ownership), 0, NULL},
    {"ownership_sum", T_OBJECT, offsetof(NodeObject, ownership_sum), 0, NULL},
    {"tried", T_PYSSIZET, offsetof(NodeObject, tried), 0, NULL},
    {"visits", T_PYSSIZET, offsetof(NodeObject, visits), 0, NULL},
    {"ownership_count", T_PYSSIZET, offsetof(NodeObject, ownership_count), 0, NULL},
    {"tried_prior", T_DOUBLE, offsetof(NodeObject, tried_prior), 0, NULL},
    {"nsum", T_DOUBLE, offsetof(NodeObject, nsum), 0, NULL},
    {"net_v", T_DOUBLE, offsetof(NodeObject, net_v), 0, NULL},
    {"net_u", T_DOUBLE, offsetof(NodeObject, net_u), 0, NULL},
    {"net_s", T_DOUBLE, offsetof(NodeObject, net_s), 0, NULL},
    {"terminal", T_BOOL, offsetof(NodeObject, terminal), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gtp_engine._tree_core.NodeFields",
    .tp_doc = "The fields of a search tree node (tree_core.NodeFields, compiled); mcts.Node adds its methods.",
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = node_new,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_members = node_members,
    .tp_getset = node_getset,
};

/* A float64 C-contiguous writable numpy array's data and its number of elements (borrowed from the array). */
static double *float64_data(PyObject *array, Py_ssize_t *count) {
    if (!PyArray_Check(array) || PyArray_TYPE((PyArrayObject *)array) != NPY_DOUBLE ||
        !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)array) || !PyArray_ISWRITEABLE((PyArrayObject *)array)) {
        PyErr_SetString(PyExc_TypeError, "tree statistics and priors must be writable contiguous float64 arrays");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)array;  /* the size without PyArray_SIZE's general product (a hot path) */
    *count = PyArray_NDIM(a) == 1 ? PyArray_DIM(a, 0) : PyArray_NDIM(a) == 2 ? PyArray_DIM(a, 0) * PyArray_DIM(a, 1)
                                                                             : PyArray_SIZE(a);
    return (double *)PyArray_DATA((PyArrayObject *)array);
}

/* The node's statistics (N, W, ... rows of `capacity` each), or NULL with an exception. Checked once per array:
 * every ply of every descent reads them. */
static double *node_stats(NodeObject *node, Py_ssize_t *capacity) {
    if (node->stats_data == NULL) {
        Py_ssize_t count;
        if ((node->stats_data = float64_data(node->stats, &count)) == NULL) return NULL;
        node->stats_capacity = count / ROWS;
    }
    *capacity = node->stats_capacity;
    return node->stats_data;
}

/* The node's priors and their number, or NULL with an exception; checked once per array, as node_stats. */
static double *node_prior(NodeObject *node, Py_ssize_t *count) {
    if (node->prior_data == NULL && (node->prior_data = float64_data(node->prior, &node->prior_count)) == NULL)
        return NULL;
    *count = node->prior_count;
    return node->prior_data;
}

/* The number of the node's edges (its moves), or -1 with an exception. */
static Py_ssize_t edge_count(NodeObject *node) {
    if (!PyTuple_Check(node->moves)) {
        PyErr_SetString(PyExc_TypeError, "an expanded node's moves must be a tuple");
        return -1;
    }
    return PyTuple_GET_SIZE(node->moves);
}

static int get_ssize(PyObject *obj, PyObject *name, Py_ssize_t *out) {
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL) return -1;
    *out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Fills p from the fields of params (a tree_core.PuctParams) read by name; -1 with an exception set. */
static int parse_params(PyObject *params, Params *p) {
    for (int i = 0; i < PARAMS; i++) {
        PyObject *value = PyObject_GetAttr(params, s_params[i]);
        if (value == NULL) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError))
                PyErr_Format(PyExc_TypeError, "params: a tree_core.PuctParams, not %.100s (no %s)",
                             Py_TYPE(params)->tp_name, PARAM_FIELDS[i].name);
            return -1;
        }
        double number = PyFloat_AsDouble(value);
        Py_DECREF(value);
        if (number == -1.0 && PyErr_Occurred()) return -1;
        *(double *)((char *)p + PARAM_FIELDS[i].offset) = number;
    }
    return 0;
}

/* tree_core.select: the edge of an expanded node with the highest PUCT score; -1 with an exception set. */
static Py_ssize_t select_edge(NodeObject *node, const Params *p) {
    Py_ssize_t k = node->tried, capacity, n_priors, n_moves = edge_count(node);
    if (n_moves < 0) return -1;
    double *stats = node_stats(node, &capacity), *prior = stats ? node_prior(node, &n_priors) : NULL;
    if (stats == NULL || prior == NULL) return -1;
    if (n_priors < n_moves) { PyErr_SetString(PyExc_ValueError, "fewer priors than moves"); return -1; }
    const double *N = stats + ROW_N * capacity, *W = stats + ROW_W * capacity;

    double nsum = node->nsum, base = p->c_puct_base;
    double coef = (p->c_puct + p->c_puct_log * log((nsum + base) / base)) * sqrt(nsum);
    Py_ssize_t best = -1;
    double best_score = -INFINITY;
    for (Py_ssize_t i = 0; i < k; i++) {
        double n = N[i];
        if (n == 0.0) {  /* pending without virtual loss: its score is NaN, which wins */
            best = i;
            best_score = NAN;
            break;
        }
        double score = W[i] / n + coef * prior[i] / (1.0 + n);
        if (score > best_score) {
            best = i;
            best_score = score;
        }
    }
    if (k >= n_moves) return best;
    double next_prior = prior[k];
    double fpu = node->net_u - p->fpu_reduction * sqrt(node->tried_prior);
    if (!(fpu + coef * next_prior > best_score)) return best;
    if (k == capacity) {
        Py_ssize_t grown = 2 * k < n_moves ? 2 * k : n_moves;
        PyObject *size = PyLong_FromSsize_t(grown);
        if (size == NULL) return -1;
        PyObject *r = PyObject_CallMethodOneArg((PyObject *)node, s_allocate, size);
        Py_DECREF(size);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    node->tried = k + 1;
    node->tried_prior += next_prior;
    return k;
}

/* Adds `delta` to row `row` of edge `edge` of node's statistics. */
static int add_stat(NodeObject *node, Py_ssize_t edge, const double *delta, int rows) {
    Py_ssize_t capacity;
    double *stats = node_stats(node, &capacity);
    if (stats == NULL) return -1;
    if (edge < 0 || edge >= capacity) {
        PyErr_SetString(PyExc_IndexError, "edge without statistics");
        return -1;
    }
    for (int r = 0; r < rows; r++) stats[r * capacity + edge] += delta[r];
    return 0;
}

static double read_n(NodeObject *node, Py_ssize_t edge, int *error) {
    Py_ssize_t capacity;
    double *stats = node_stats(node, &capacity);
    if (stats == NULL) { *error = 1; return 0.0; }
    return stats[ROW_N * capacity + edge];
}

/* tree_core.select_root: the root's edge; -1 with an exception set. */
static Py_ssize_t select_root_edge(NodeObject *root, PyObject *prior_arg, PyObject *excluded_arg, double forced_k,
                                   double fpu_reduction, const Params *p) {
    double nsum = root->nsum, net_u = root->net_u;
    Py_ssize_t n_edges = edge_count(root);
    if (n_edges < 0) return -1;
    Py_ssize_t capacity, n_own, n_prior = 0;
    double *stats = node_stats(root, &capacity), *own = stats ? node_prior(root, &n_own) : NULL;
    if (stats == NULL || own == NULL) return -1;
    double *prior = prior_arg == Py_None ? own : float64_data(prior_arg, &n_prior);
    if (prior == NULL) return -1;
    if (prior_arg == Py_None) n_prior = n_own;
    const npy_bool *excluded = NULL;
    if (excluded_arg != Py_None) {
        PyArrayObject *a = (PyArrayObject *)excluded_arg;
        if (!PyArray_Check(excluded_arg) || PyArray_TYPE(a) != NPY_BOOL || !PyArray_IS_C_CONTIGUOUS(a) ||
            PyArray_SIZE(a) < n_edges) {
            PyErr_SetString(PyExc_TypeError, "excluded must be a contiguous bool array, one per root edge");
            return -1;
        }
        excluded = (const npy_bool *)PyArray_DATA(a);
    }
    if (capacity < n_edges || n_own < n_edges || n_prior < n_edges || n_edges == 0) {
        PyErr_SetString(PyExc_ValueError, "the root needs statistics and priors for every edge");
        return -1;
    }
    const double *N = stats + ROW_N * capacity, *W = stats + ROW_W * capacity;
    double visited_prior = 0.0;
    int any_short = 0;
    for (Py_ssize_t i = 0; i < n_edges; i++) {
        visited_prior += N[i] > 0.0 ? own[i] : 0.0;
        if (forced_k > 0.0 && !(excluded && excluded[i]) && N[i] < sqrt(forced_k * prior[i] * nsum)) any_short = 1;
    }
    double fpu = net_u - fpu_reduction * sqrt(visited_prior);
    double base = p->c_puct_base;
    double coef = (p->c_puct + p->c_puct_log * log((nsum + base) / base)) * sqrt(nsum);
    Py_ssize_t best = 0;
    double best_score = 0.0;
    for (Py_ssize_t i = 0; i < n_edges; i++) {
        double n = N[i];
        double score = (n > 0.0 ? W[i] / (n > 1e-9 ? n : 1e-9) : fpu) + coef * prior[i] / (1.0 + n);
        if ((excluded && excluded[i]) || (any_short && !(n < sqrt(forced_k * prior[i] * nsum)))) score = -INFINITY;
        if (isnan(score)) return i;  /* numpy's argmax takes the first NaN */
        if (i == 0 || score > best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

/* select_root(root, prior, excluded, forced_k, fpu_reduction, params) -> edge: see tree_core.select_root. */
static PyObject *py_select_root(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "select_root(root, prior, excluded, forced_k, fpu_reduction, params)");
        return NULL;
    }
    NodeObject *root = as_node(args[0]);
    double forced_k = PyFloat_AsDouble(args[3]), fpu_reduction = PyFloat_AsDouble(args[4]);
    Params p;
    if (root == NULL || PyErr_Occurred() || parse_params(args[5], &p) < 0) return NULL;
    Py_ssize_t edge = select_root_edge(root, args[1], args[2], forced_k, fpu_reduction, &p);
    return edge < 0 ? NULL : PyLong_FromSsize_t(edge);
}

static PyObject *py_select(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    Params p;
    if (nargs != 2) { PyErr_SetString(PyExc_TypeError, "select(node, params)"); return NULL; }
    NodeObject *node = as_node(args[0]);
    if (node == NULL || parse_params(args[1], &p) < 0) return NULL;
    Py_ssize_t edge = select_edge(node, &p);
    return edge < 0 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(edge);
}

/* Takes a new node and its parent's children dict out of the garbage collector's watch. A tree holds no reference
 * cycles (a node references only its children, its arrays and its moves), so the collector has nothing to find in it;
 * watched, a large tree made every full collection walk all of it (a few percent of a 9x9 search). */
static void untrack(PyObject *children, PyObject *child) {
    if (PyObject_GC_IsTracked(child)) PyObject_GC_UnTrack(child);
    if (PyObject_GC_IsTracked(children)) PyObject_GC_UnTrack(children);
}

/* Plays the moves of `line` on state with play_line(state, line) and empties it. */
static int play_pending(PyObject *play_line, PyObject *state, PyObject *line) {
    if (PyList_GET_SIZE(line) == 0) return 0;
    PyObject *call_args[2] = {state, line};
    PyObject *r = PyObject_Vectorcall(play_line, call_args, 2, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return PyList_SetSlice(line, 0, PyList_GET_SIZE(line), NULL);
}

/* tree_core.descend from the root `node` by its `edge`; hooks: node_type, make_terminal, drop_edge, play_line,
 * illegal_reason, indexed by HOOK_*. A new (leaf, path) tuple, or NULL with an exception set. */
static PyObject *descend_from(NodeObject *node, PyObject *state, Py_ssize_t edge, const Params *params,
                              PyObject *const *hooks) {
    PyObject *node_type = hooks[HOOK_NODE_TYPE], *make_terminal = hooks[HOOK_MAKE_TERMINAL],
             *drop_edge = hooks[HOOK_DROP_EDGE], *play_line = hooks[HOOK_PLAY_LINE],
             *illegal = hooks[HOOK_ILLEGAL_REASON];
    const Params p = *params;
    const double vl = p.virtual_loss;
    const double loss[2] = {vl, -vl};
    PyObject *path = PyList_New(0), *line = PyList_New(0), *r;
    if (path == NULL || line == NULL) goto fail;
    for (;;) {
        /* add_stat checks the edge against the statistics, which never outnumber the moves read below */
        if (edge_count(node) < 0 || add_stat(node, edge, loss, 2) < 0) goto fail;
        node->nsum += vl;
        PyObject *key = PyLong_FromSsize_t(edge);
        if (key == NULL) goto fail;
        if (PyList_Append(path, (PyObject *)node) < 0 || PyList_Append(path, key) < 0) { Py_DECREF(key); goto fail; }
        if (PyList_Append(line, PyTuple_GET_ITEM(node->moves, edge)) < 0) { Py_DECREF(key); goto fail; }
        PyObject *children = node->children;
        if (!PyDict_Check(children)) {
            PyErr_SetString(PyExc_TypeError, "a node's children must be a dict");
            Py_DECREF(key);
            goto fail;
        }
        PyObject *child = PyDict_GetItemWithError(children, key);  /* borrowed */
        if (child == NULL) {
            if (PyErr_Occurred()) { Py_DECREF(key); goto fail; }
            Py_INCREF(children);  /* held across the call into Python that makes the child */
            child = PyObject_CallNoArgs(node_type);
            int stored = child == NULL ? -1 : as_node(child) == NULL ? -1 : PyDict_SetItem(children, key, child);
            if (stored == 0) untrack(children, child);
            Py_DECREF(children);
            Py_DECREF(key);
            if (stored < 0) { Py_XDECREF(child); goto fail; }
            Py_ssize_t passes;
            if (play_pending(play_line, state, line) < 0 || get_ssize(state, s_consecutive_passes, &passes) < 0) {
                Py_DECREF(child);
                goto fail;
            }
            if (passes >= 2) {
                r = PyObject_CallFunctionObjArgs(make_terminal, child, state, NULL);
                if (r == NULL) { Py_DECREF(child); goto fail; }
                Py_DECREF(r);
            }
            PyObject *result = PyTuple_Pack(2, child, path);
            Py_DECREF(child);
            Py_DECREF(path);
            Py_DECREF(line);
            return result;
        }
        Py_DECREF(key);
        if (as_node(child) == NULL) goto fail;
        if (((NodeObject *)child)->moves == Py_None) {  /* pending in this batch, or terminal */
            if (play_pending(play_line, state, line) < 0) goto fail;
            PyObject *result = PyTuple_Pack(2, child, path);
            Py_DECREF(path);
            Py_DECREF(line);
            return result;
        }
        node = (NodeObject *)child;  /* kept alive by its parent's children dict */
        for (;;) {  /* lazy legality: a first try of an illegal edge is dropped, and the node selects again */
            edge = select_edge(node, &p);
            if (edge < 0) goto fail;
            int error = 0;
            double n = read_n(node, edge, &error);
            if (error) goto fail;
            if (n != 0.0) break;
            if (play_pending(play_line, state, line) < 0) goto fail;  /* the board at this node */
            PyObject *candidate = PyTuple_GET_ITEM(node->moves, edge);
            Py_INCREF(candidate);  /* held across the call into Python */
            PyObject *illegal_args[2] = {state, candidate};
            PyObject *reason = PyObject_Vectorcall(illegal, illegal_args, 2, NULL);
            Py_DECREF(candidate);
            if (reason == NULL) goto fail;
            int legal = reason == Py_None;
            Py_DECREF(reason);
            if (legal) break;
            PyObject *index = PyLong_FromSsize_t(edge);
            if (index == NULL) goto fail;
            r = PyObject_CallFunctionObjArgs(drop_edge, (PyObject *)node, index, NULL);
            Py_DECREF(index);
            if (r == NULL) goto fail;
            Py_DECREF(r);
        }
    }
fail:
    Py_XDECREF(path);
    Py_XDECREF(line);
    return NULL;
}

/* descend(root, state, edge, params, node_type, make_terminal, drop_edge, play_line, illegal_reason) -> (leaf, path):
   see tree_core.descend. */
static PyObject *py_descend(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "descend(root, state, edge, params, node_type, make_terminal, drop_edge, "
                                         "play_line, illegal_reason)");
        return NULL;
    }
    NodeObject *root = as_node(args[0]);
    Params p;
    if (root == NULL || parse_params(args[3], &p) < 0) return NULL;
    Py_ssize_t edge = PyLong_AsSsize_t(args[2]);
    if (edge == -1 && PyErr_Occurred()) return NULL;
    return descend_from(root, args[1], edge, &p, args + 4);
}

/* Node.add_ownership: node.ownership_sum (float64, made on first use) += ownership; node.ownership_count += 1. */
static int add_ownership(PyObject *obj, const double *ownership, Py_ssize_t area) {
    NodeObject *node = as_node(obj);
    if (node == NULL) return -1;
    if (node->ownership_sum == Py_None) {
        npy_intp dims[1] = {area};
        PyObject *sum = PyArray_ZEROS(1, dims, NPY_DOUBLE, 0);
        if (sum == NULL) return -1;
        Py_SETREF(node->ownership_sum, sum);
    }
    Py_ssize_t count;
    double *sum = float64_data(node->ownership_sum, &count);
    if (sum == NULL) return -1;
    if (count != area) {
        PyErr_SetString(PyExc_ValueError, "ownership of another board size than the node's sum");
        return -1;
    }
    for (Py_ssize_t i = 0; i < area; i++) sum[i] += ownership[i];
    node->ownership_count++;
    return 0;
}

/* tree_core.backup; 0, or -1 with an exception set. */
static int back_up_one(NodeObject *leaf, PyObject *path, double vl, double v, double u, double s, PyObject *owned_obj,
                       Py_ssize_t depth) {
    if (!PyList_Check(path) || PyList_GET_SIZE(path) % 2) {
        PyErr_SetString(PyExc_TypeError, "path must be a list of nodes and edges, [node, edge, node, edge, ...]");
        return -1;
    }
    PyArrayObject *owned = (PyArrayObject *)owned_obj;
    if (!PyArray_Check(owned_obj) || PyArray_TYPE(owned) != NPY_DOUBLE || !PyArray_IS_C_CONTIGUOUS(owned)) {
        PyErr_SetString(PyExc_TypeError, "ownership must be a contiguous float64 array");
        return -1;
    }
    const double *ownership = (const double *)PyArray_DATA(owned);
    Py_ssize_t area = PyArray_SIZE(owned);
    leaf->visits++;
    /* One column of increments per player: the leaf's parent is its player's opponent. */
    const double theirs[ROWS] = {1.0 - vl, -u + vl, u * u, -v, -s, s * s};
    const double ours[ROWS] = {1.0 - vl, u + vl, u * u, v, s, s * s};
    int flipped = 1;
    for (Py_ssize_t i = PyList_GET_SIZE(path) - 2; i >= 0; i -= 2) {
        NodeObject *node = as_node(PyList_GET_ITEM(path, i));
        Py_ssize_t edge = node == NULL ? -1 : PyLong_AsSsize_t(PyList_GET_ITEM(path, i + 1));
        if (edge == -1 && PyErr_Occurred()) return -1;
        if (add_stat(node, edge, flipped ? theirs : ours, ROWS) < 0) return -1;
        node->nsum += 1.0 - vl;
        node->visits++;
        flipped = !flipped;
    }
    Py_ssize_t length = PyList_GET_SIZE(path) / 2;  /* plies */
    for (Py_ssize_t i = 0; i < length && i <= depth; i++)
        if (add_ownership(PyList_GET_ITEM(path, 2 * i), ownership, area) < 0) return -1;
    if (length <= depth && add_ownership((PyObject *)leaf, ownership, area) < 0) return -1;
    return 0;
}

/* backup(leaf, path, virtual_loss, v, u, s, ownership, ownership_depth): see tree_core.backup. */
static PyObject *py_backup(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "backup(leaf, path, virtual_loss, v, u, s, ownership, ownership_depth)");
        return NULL;
    }
    NodeObject *leaf = as_node(args[0]);
    double vl = PyFloat_AsDouble(args[2]), v = PyFloat_AsDouble(args[3]), u = PyFloat_AsDouble(args[4]),
           s = PyFloat_AsDouble(args[5]);
    Py_ssize_t depth = PyLong_AsSsize_t(args[7]);
    if (leaf == NULL || PyErr_Occurred()) return NULL;
    if (back_up_one(leaf, args[1], vl, v, u, s, args[6], depth) < 0) return NULL;
    Py_RETURN_NONE;
}

/* gather(root, root_state, size, root_selection, params, hooks, in_flight, selected, leaves, states, plies): see
 * tree_core.gather. */
static PyObject *py_gather(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "gather(root, root_state, size, root_selection, params, hooks, in_flight, "
                                         "selected, leaves, states, plies)");
        return NULL;
    }
    NodeObject *root = as_node(args[0]);
    PyObject *root_state = args[1], *selection = args[3], *hooks = args[5], *in_flight = args[6],
             *selected = args[7], *leaves = args[8], *states = args[9], *plies = args[10];
    Py_ssize_t size = PyLong_AsSsize_t(args[2]);
    Params p;
    if (root == NULL || (size == -1 && PyErr_Occurred()) || parse_params(args[4], &p) < 0) return NULL;
    if (!PyTuple_Check(selection) || PyTuple_GET_SIZE(selection) != 4 || !PyDict_Check(in_flight) ||
        !PyList_Check(selected) || !PyList_Check(leaves) || !PyList_Check(states) || !PyList_Check(plies)) {
        PyErr_SetString(PyExc_TypeError, "gather: root_selection a 4-tuple, in_flight a dict, and lists to fill");
        return NULL;
    }
    PyObject *prior = PyTuple_GET_ITEM(selection, 0), *excluded = PyTuple_GET_ITEM(selection, 1);
    double forced_k = PyFloat_AsDouble(PyTuple_GET_ITEM(selection, 2)),
           fpu_reduction = PyFloat_AsDouble(PyTuple_GET_ITEM(selection, 3));
    if (PyErr_Occurred()) return NULL;
    PyObject *hook[HOOKS] = {NULL}, *result = NULL;
    for (int h = 0; h < HOOKS; h++) {
        if ((hook[h] = PyObject_GetAttr(hooks, s_hooks[h])) != NULL) continue;
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Format(PyExc_TypeError, "hooks: a tree_core.Hooks, not %.100s (no %s)", Py_TYPE(hooks)->tp_name,
                         HOOK_FIELDS[h]);
        goto done;
    }
    const Py_ssize_t first_new = PyList_GET_SIZE(leaves);  /* the leaves from here on are this call's ("mine") */
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *state = PyObject_CallOneArg(hook[HOOK_COPY_STATE], root_state);
        if (state == NULL) goto done;
        Py_ssize_t edge = select_root_edge(root, prior, excluded, forced_k, fpu_reduction, &p);
        PyObject *pair = edge < 0 ? NULL : descend_from(root, state, edge, &p, hook);
        if (pair == NULL) { Py_DECREF(state); goto done; }
        PyObject *leaf = PyTuple_GET_ITEM(pair, 0), *path = PyTuple_GET_ITEM(pair, 1);
        int failed = 0;
        if (!((NodeObject *)leaf)->terminal) {
            int mine = 0;
            for (Py_ssize_t j = first_new; j < PyList_GET_SIZE(leaves) && !mine; j++)
                mine = PyList_GET_ITEM(leaves, j) == leaf;
            if (!mine) {
                PyObject *key = PyLong_FromVoidPtr(leaf);  /* id(leaf) */
                PyObject *waiting = key ? PyDict_GetItemWithError(in_flight, key) : NULL;  /* borrowed */
                if (key == NULL || (waiting == NULL && PyErr_Occurred())) {
                    failed = 1;
                } else if (waiting != NULL) {  /* pending in an earlier batch: one more selection awaits it */
                    Py_ssize_t count = PyLong_AsSsize_t(waiting);
                    PyObject *more = count == -1 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(count + 1);
                    failed = more == NULL || PyDict_SetItem(in_flight, key, more) < 0;
                    Py_XDECREF(more);
                } else {
                    PyObject *ply = PyLong_FromSsize_t(PyList_GET_SIZE(path) / 2 + 1);
                    failed = ply == NULL || PyList_Append(leaves, leaf) < 0 || PyList_Append(states, state) < 0 ||
                             PyList_Append(plies, ply) < 0;
                    Py_XDECREF(ply);
                }
                Py_XDECREF(key);
            }
        }
        failed = failed || PyList_Append(selected, pair) < 0;
        Py_DECREF(pair);
        Py_DECREF(state);
        if (failed) goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int h = 0; h < HOOKS; h++) Py_XDECREF(hook[h]);
    return result;
}

/* take_evaluations(leaves, value, score, ownership, score_utility, score_scale, in_flight, awaited) -> evaluated: see
 * tree_core.take_evaluations. */
static PyObject *py_take_evaluations(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "take_evaluations(leaves, value, score, ownership, score_utility, "
                                         "score_scale, in_flight, awaited)");
        return NULL;
    }
    PyObject *leaves = args[0], *in_flight = args[6], *awaited = args[7];
    PyArrayObject *value = checked_array(args[1], 1, NPY_DOUBLE, "value"),
                  *score = value ? checked_array(args[2], 1, NPY_DOUBLE, "score") : NULL,
                  *ownership = score ? checked_array(args[3], 2, NPY_DOUBLE, "ownership") : NULL;
    double weight = PyFloat_AsDouble(args[4]), scale = PyFloat_AsDouble(args[5]);
    if (ownership == NULL || PyErr_Occurred()) return NULL;
    if (!PyList_Check(leaves) || !PyDict_Check(in_flight) || !PyDict_Check(awaited)) {
        PyErr_SetString(PyExc_TypeError, "take_evaluations: leaves a list, in_flight and awaited dicts");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(leaves);
    if (PyArray_DIM(value, 0) != count || PyArray_DIM(score, 0) != count || PyArray_DIM(ownership, 0) != count) {
        PyErr_SetString(PyExc_ValueError, "take_evaluations: one value, score and ownership row per leaf");
        return NULL;
    }
    PyObject *evaluated = PyDict_New();
    if (evaluated == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        NodeObject *leaf = as_node(PyList_GET_ITEM(leaves, i));
        if (leaf == NULL) goto fail;
        double v = ((const double *)PyArray_DATA(value))[i], s = ((const double *)PyArray_DATA(score))[i];
        double u = v + weight * tanh(s / scale);
        leaf->net_v = v;
        leaf->net_s = s;
        leaf->net_u = u;
        PyObject *key = PyLong_FromVoidPtr(leaf), *row = PySequence_GetItem((PyObject *)ownership, i);
        PyObject *result = Py_BuildValue("(ddd)", v, u, s);
        PyObject *entry = result && row ? PyTuple_Pack(2, result, row) : NULL;
        int failed = key == NULL || entry == NULL || PyDict_SetItem(evaluated, key, entry) < 0;
        PyObject *waiting = failed ? NULL : PyDict_GetItemWithError(in_flight, key);  /* borrowed */
        if (!failed && waiting == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            failed = 1;
        }
        if (!failed) {
            Py_INCREF(waiting);
            int awaits = PyObject_IsTrue(waiting);
            failed = awaits < 0 || PyDict_DelItem(in_flight, key) < 0;
            if (!failed && awaits) {  /* [(v, u, s), ownership row, selections waiting] */
                PyObject *later = PyList_New(3);
                if (later == NULL) {
                    failed = 1;
                } else {
                    Py_INCREF(result);
                    Py_INCREF(row);
                    Py_INCREF(waiting);
                    PyList_SET_ITEM(later, 0, result);
                    PyList_SET_ITEM(later, 1, row);
                    PyList_SET_ITEM(later, 2, waiting);
                    failed = PyDict_SetItem(awaited, key, later) < 0;
                    Py_DECREF(later);
                }
            }
            Py_DECREF(waiting);
        }
        Py_XDECREF(key);
        Py_XDECREF(row);
        Py_XDECREF(result);
        Py_XDECREF(entry);
        if (failed) goto fail;
    }
    return evaluated;
fail:
    Py_DECREF(evaluated);
    return NULL;
}

/* A selection's result for back_up: the (v, u, s) tuple's numbers; 0, or -1 with an exception set. */
static int read_result(PyObject *result, double *v, double *u, double *s) {
    if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 3) {
        PyErr_SetString(PyExc_TypeError, "a leaf's result must be a tuple (v, u, s)");
        return -1;
    }
    *v = PyFloat_AsDouble(PyTuple_GET_ITEM(result, 0));
    *u = PyFloat_AsDouble(PyTuple_GET_ITEM(result, 1));
    *s = PyFloat_AsDouble(PyTuple_GET_ITEM(result, 2));
    return PyErr_Occurred() ? -1 : 0;
}

/* One selection of back_up: its leaf's result and ownership, then its backup; 0, or -1 with an exception set. */
static int back_up_selection(PyObject *pair, PyObject *evaluated, PyObject *awaited, double vl, Py_ssize_t depth) {
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_SetString(PyExc_TypeError, "a selection must be a tuple (leaf, path)");
        return -1;
    }
    NodeObject *leaf = as_node(PyTuple_GET_ITEM(pair, 0));
    PyObject *path = PyTuple_GET_ITEM(pair, 1);
    if (leaf == NULL) return -1;
    if (leaf->terminal)
        return back_up_one(leaf, path, vl, leaf->net_v, leaf->net_u, leaf->net_s, leaf->ownership, depth);
    PyObject *key = PyLong_FromVoidPtr(leaf);  /* id(leaf) */
    if (key == NULL) return -1;
    PyObject *entry = PyDict_GetItemWithError(evaluated, key);  /* borrowed */
    int status = -1;
    double v, u, s;
    if (entry != NULL) {
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
            PyErr_SetString(PyExc_TypeError, "an evaluated entry must be a tuple (result, ownership)");
        } else if (read_result(PyTuple_GET_ITEM(entry, 0), &v, &u, &s) == 0) {
            status = back_up_one(leaf, path, vl, v, u, s, PyTuple_GET_ITEM(entry, 1), depth);
        }
    } else if (!PyErr_Occurred()) {  /* awaited: [result, ownership, selections left] */
        entry = PyDict_GetItemWithError(awaited, key);
        if (entry == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
        } else if (!PyList_Check(entry) || PyList_GET_SIZE(entry) != 3) {
            PyErr_SetString(PyExc_TypeError, "an awaited entry must be a list [result, ownership, selections]");
        } else {
            Py_INCREF(entry);  /* held while it may leave awaited */
            Py_ssize_t left = PyLong_AsSsize_t(PyList_GET_ITEM(entry, 2)) - 1;
            PyObject *count = left == -2 && PyErr_Occurred() ? NULL : PyLong_FromSsize_t(left);
            if (count != NULL && PyList_SetItem(entry, 2, count) == 0 &&
                (left != 0 || PyDict_DelItem(awaited, key) == 0) &&
                read_result(PyList_GET_ITEM(entry, 0), &v, &u, &s) == 0)
                status = back_up_one(leaf, path, vl, v, u, s, PyList_GET_ITEM(entry, 1), depth);
            Py_DECREF(entry);
        }
    }
    Py_DECREF(key);
    return status;
}

/* back_up(selected, evaluated, awaited, virtual_loss, ownership_depth): see tree_core.back_up. */
static PyObject *py_back_up(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "back_up(selected, evaluated, awaited, virtual_loss, ownership_depth)");
        return NULL;
    }
    PyObject *selected = args[0], *evaluated = args[1], *awaited = args[2];
    double vl = PyFloat_AsDouble(args[3]);
    Py_ssize_t depth = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (!PyList_Check(selected) || !PyDict_Check(evaluated) || !PyDict_Check(awaited)) {
        PyErr_SetString(PyExc_TypeError, "back_up: selected a list, evaluated and awaited dicts");
        return NULL;
    }
    for (Py_ssize_t n = PyList_GET_SIZE(selected); n > 0; n = PyList_GET_SIZE(selected)) {
        PyObject *pair = PyList_GET_ITEM(selected, n - 1);
        Py_INCREF(pair);  /* selected.pop() */
        if (PyList_SetSlice(selected, n - 1, n, NULL) < 0) { Py_DECREF(pair); return NULL; }
        int status = back_up_selection(pair, evaluated, awaited, vl, depth);
        Py_DECREF(pair);
        if (status < 0) return NULL;
    }
    Py_RETURN_NONE;
}

typedef struct {
    double prior;
    Py_ssize_t flat;
} Ranked;

enum { SORT_RUN = 16 };  /* sort_by_falling_prior sorts runs this long by insertion, then merges them */

/* Sorts ranked[0..n), which lists the edges in flat order, by falling prior, equal priors kept in flat order:
 * numpy's stable argsort of -prior. A stable merge sort with its comparisons inline; qsort's comparator calls made
 * it most of a 19x19 leaf's expansion. tmp has room for n more. */
static void sort_by_falling_prior(Ranked *ranked, Ranked *tmp, Py_ssize_t n) {
    for (Py_ssize_t lo = 0; lo < n; lo += SORT_RUN) {
        Py_ssize_t hi = lo + SORT_RUN < n ? lo + SORT_RUN : n;
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            Ranked edge = ranked[i];
            Py_ssize_t j = i;
            for (; j > lo && ranked[j - 1].prior < edge.prior; j--) ranked[j] = ranked[j - 1];
            ranked[j] = edge;
        }
    }
    Ranked *from = ranked, *to = tmp;
    for (Py_ssize_t width = SORT_RUN; width < n; width *= 2) {
        for (Py_ssize_t lo = 0; lo < n; lo += 2 * width) {
            Py_ssize_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            Py_ssize_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) to[k++] = from[j].prior > from[i].prior ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < hi) to[k++] = from[j++];
        }
        Ranked *swap = from;
        from = to;
        to = swap;
    }
    if (from != ranked) memcpy(ranked, from, sizeof(Ranked) * (size_t)n);
}

/* A new C-contiguous array of `nd` dimensions of `type` from obj, or NULL with a TypeError naming it. */
static PyArrayObject *checked_array(PyObject *obj, int nd, int type, const char *what) {
    PyArrayObject *a = (PyArrayObject *)obj;
    if (!PyArray_Check(obj) || PyArray_NDIM(a) != nd || PyArray_TYPE(a) != type || !PyArray_IS_C_CONTIGUOUS(a)) {
        PyErr_Format(PyExc_TypeError, "%s has the wrong type, shape or layout", what);
        return NULL;
    }
    return a;
}

enum { POINT_CACHE = 4096 };  /* board points below this have one shared Python int (a 25x25 board's are below 800) */
static PyObject *point_cache[POINT_CACHE];

/* A new reference to the Python int for a board point. Ints above 256 are not shared by Python itself: without the
 * cache a 19x19 leaf made some 200 new ones for its moves, in time and in the tree's memory. */
static PyObject *point_object(int64_t point) {
    if (point < 0 || point >= POINT_CACHE) return PyLong_FromLongLong(point);
    if (point_cache[point] == NULL && (point_cache[point] = PyLong_FromLongLong(point)) == NULL) return NULL;
    Py_INCREF(point_cache[point]);
    return point_cache[point];
}

/* Gives one new leaf its moves, priors and first statistics (what tree_core.expand does for one row). */
static int expand_leaf(PyObject *obj, const Ranked *ranked, Py_ssize_t count, double total, const int64_t *points,
                       Py_ssize_t initial_edges) {
    NodeObject *leaf = as_node(obj);
    if (leaf == NULL) return -1;
    npy_intp edges = count;
    PyObject *moves = PyTuple_New(count), *prior = PyArray_SimpleNew(1, &edges, NPY_DOUBLE);
    if (moves == NULL || prior == NULL) goto fail;
    double *p = (double *)PyArray_DATA((PyArrayObject *)prior);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *point = point_object(points[ranked[k].flat]);
        if (point == NULL) goto fail;
        PyTuple_SET_ITEM(moves, k, point);
        p[k] = total > 1e-12 ? ranked[k].prior / total : 1.0 / (double)count;
    }
    npy_intp shape[2] = {ROWS, initial_edges < count ? initial_edges : count};
    PyObject *stats = PyArray_ZEROS(2, shape, NPY_DOUBLE, 0);
    if (stats == NULL) goto fail;
    PyObject_GC_UnTrack(moves);  /* board points only: nothing for the collector (see untrack) */
    Py_SETREF(leaf->moves, moves);
    set_prior(leaf, prior);
    Py_DECREF(prior);
    set_stats(leaf, stats);
    Py_DECREF(stats);
    return 0;
fail:
    Py_XDECREF(moves);
    Py_XDECREF(prior);
    return -1;
}

/* expand(leaves, policy, mask, point_of_flat, initial_edges): see tree_core.expand. */
static PyObject *py_expand(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "expand(leaves, policy, mask, point_of_flat, initial_edges)");
        return NULL;
    }
    PyObject *leaves = PySequence_Fast(args[0], "leaves must be a sequence");
    if (leaves == NULL) return NULL;
    PyArrayObject *prior = checked_array(args[1], 2, NPY_FLOAT, "policy"),
                  *mask = prior ? checked_array(args[2], 2, NPY_BOOL, "mask") : NULL,
                  *points = mask ? checked_array(args[3], 1, NPY_INT64, "point_of_flat") : NULL;
    Py_ssize_t initial_edges = PyLong_AsSsize_t(args[4]);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(leaves);
    Ranked *ranked = NULL;
    if (points == NULL || PyErr_Occurred()) goto fail;
    Py_ssize_t width = PyArray_DIM(prior, 1);
    if (PyArray_DIM(prior, 0) != count || PyArray_DIM(mask, 0) != count || PyArray_DIM(mask, 1) != width ||
        PyArray_DIM(points, 0) != width || initial_edges < 1) {
        PyErr_SetString(PyExc_ValueError, "expand: one row of policy and mask per leaf, one point per column");
        goto fail;
    }
    ranked = PyMem_Malloc(sizeof(Ranked) * 2 * (size_t)(width > 0 ? width : 1));  /* the edges, and room to merge */
    if (ranked == NULL) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < count; i++) {
        const float *row = (const float *)PyArray_DATA(prior) + i * width;
        const npy_bool *legal = (const npy_bool *)PyArray_DATA(mask) + i * width;
        Py_ssize_t edges = 0;
        double total = 0.0;  /* over the mask, added in flat order, as np.cumsum */
        for (Py_ssize_t j = 0; j < width; j++) {
            if (!legal[j]) continue;
            total += (double)row[j];
            ranked[edges].prior = row[j];
            ranked[edges++].flat = j;
        }
        if (edges == 0) {
            PyErr_SetString(PyExc_ValueError, "expand: a leaf without a move");
            goto fail;
        }
        if (total > 1e-12) sort_by_falling_prior(ranked, ranked + width, edges);
        if (expand_leaf(PySequence_Fast_GET_ITEM(leaves, i), ranked, edges, total,
                        (const int64_t *)PyArray_DATA(points), initial_edges) < 0)
            goto fail;
    }
    PyMem_Free(ranked);
    Py_DECREF(leaves);
    Py_RETURN_NONE;
fail:
    PyMem_Free(ranked);
    Py_DECREF(leaves);
    return NULL;
}

/* candidates(states, point_of_flat, out): see tree_core.candidates. */
static PyObject *py_candidates(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "candidates(states, point_of_flat, out)");
        return NULL;
    }
    PyObject *states = PySequence_Fast(args[0], "states must be a sequence");
    if (states == NULL) return NULL;
    PyArrayObject *points = checked_array(args[1], 1, NPY_INT64, "point_of_flat"),
                  *out = points ? checked_array(args[2], 2, NPY_BOOL, "out") : NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(states);
    if (out == NULL) goto fail;
    Py_ssize_t width = PyArray_DIM(points, 0);
    if (PyArray_DIM(out, 0) != count || PyArray_DIM(out, 1) != width || width < 1 || !PyArray_ISWRITEABLE(out)) {
        PyErr_SetString(PyExc_ValueError, "candidates: a writable row of out per state, one column per point");
        goto fail;
    }
    const int64_t *point_of = (const int64_t *)PyArray_DATA(points);
    for (Py_ssize_t i = 0; i < count; i++) {
        npy_bool *row = (npy_bool *)PyArray_DATA(out) + i * width;
        PyObject *board = PyObject_GetAttr(PySequence_Fast_GET_ITEM(states, i), s_board);
        PyObject *colors = board ? PyObject_GetAttr(board, s_colors) : NULL;
        Py_XDECREF(board);
        if (colors == NULL) goto fail;
        if (!PyByteArray_Check(colors)) {
            Py_DECREF(colors);
            PyErr_SetString(PyExc_TypeError, "board.colors must be a bytearray");
            goto fail;
        }
        const uint8_t *c = (const uint8_t *)PyByteArray_AS_STRING(colors);
        Py_ssize_t size = PyByteArray_GET_SIZE(colors);
        for (Py_ssize_t j = 0; j < width - 1; j++) {
            int64_t p = point_of[j];
            if (p < 0 || p >= size) {
                Py_DECREF(colors);
                PyErr_SetString(PyExc_ValueError, "candidates: a point off the board");
                goto fail;
            }
            row[j] = c[p] == EMPTY_COLOR;
        }
        row[width - 1] = 1;  /* pass */
        Py_DECREF(colors);
    }
    Py_DECREF(states);
    Py_RETURN_NONE;
fail:
    Py_DECREF(states);
    return NULL;
}

static PyMethodDef methods[] = {
    {"select", (PyCFunction)(void (*)(void))py_select, METH_FASTCALL, "select(node, params) -> edge"},
    {"select_root", (PyCFunction)(void (*)(void))py_select_root, METH_FASTCALL,
     "select_root(root, prior, excluded, forced_k, fpu_reduction, params) -> edge"},
    {"descend", (PyCFunction)(void (*)(void))py_descend, METH_FASTCALL,
     "descend(root, state, edge, params, node_type, make_terminal, drop_edge, play_line, illegal_reason) -> (leaf, path)"},
    {"backup", (PyCFunction)(void (*)(void))py_backup, METH_FASTCALL,
     "backup(leaf, path, virtual_loss, v, u, s, ownership, ownership_depth)"},
    {"expand", (PyCFunction)(void (*)(void))py_expand, METH_FASTCALL,
     "expand(leaves, policy, mask, point_of_flat, initial_edges)"},
    {"candidates", (PyCFunction)(void (*)(void))py_candidates, METH_FASTCALL,
     "candidates(states, point_of_flat, out)"},
    {"gather", (PyCFunction)(void (*)(void))py_gather, METH_FASTCALL,
     "gather(root, root_state, size, root_selection, params, hooks, in_flight, selected, leaves, states, plies)"},
    {"take_evaluations", (PyCFunction)(void (*)(void))py_take_evaluations, METH_FASTCALL,
     "take_evaluations(leaves, value, score, ownership, score_utility, score_scale, in_flight, awaited) -> evaluated"},
    {"back_up", (PyCFunction)(void (*)(void))py_back_up, METH_FASTCALL,
     "back_up(selected, evaluated, awaited, virtual_loss, ownership_depth)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tree_core", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tree_core(void) {
    s_allocate = PyUnicode_InternFromString("_allocate");
    s_consecutive_passes = PyUnicode_InternFromString("consecutive_passes");
    s_board = PyUnicode_InternFromString("board");
    s_colors = PyUnicode_InternFromString("colors");
    if (s_allocate == NULL || s_consecutive_passes == NULL || s_board == NULL || s_colors == NULL) return NULL;
    for (int i = 0; i < PARAMS; i++)
        if ((s_params[i] = PyUnicode_InternFromString(PARAM_FIELDS[i].name)) == NULL) return NULL;
    for (int h = 0; h < HOOKS; h++)
        if ((s_hooks[h] = PyUnicode_InternFromString(HOOK_FIELDS[h])) == NULL) return NULL;
    import_array();
    if (PyType_Ready(&NodeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&NodeType);
    if (PyModule_AddObject(m, "NodeFields", (PyObject *)&NodeType) < 0) {
        Py_DECREF(&NodeType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
