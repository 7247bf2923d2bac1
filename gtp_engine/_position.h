/* The layout of a search position (position.py holds the terms): _rules_core.c defines the types and plays on them,
 * _features_core.c encodes them and makes their keys. Both include this header, so that both read one layout.
 *
 * A position is the root's board and counts plus the line of moves played from the root, in one object: its board
 * arrays follow its fields in the same allocation (PyObject_VAR_HEAD, ob_size the bytes of the arrays), the line's
 * moves are one buffer, and what every position of a search shares (the grid, the Zobrist keys, the root's superko
 * history, the rules' numbers) is its context.
 */
#ifndef GTP_ENGINE_POSITION_H
#define GTP_ENGINE_POSITION_H

#include <Python.h>
#include <stdint.h>

#define POSITION_HISTORY 5 /* features.HISTORY: the recent moves a position keeps */
#define POSITION_NO_MOVE (-2) /* a recent move before the game's first */

typedef struct {
    PyObject_HEAD
    PyObject *grid;        /* the board's Grid */
    PyObject *root_state;  /* the GameState the search's positions descend from; never changed */
    PyObject *ko_name;     /* rules.ko as bytes: the tail of a position key */
    PyObject *zobrist;     /* the board's Zobrist key arrays, kept alive for keys[] */
    Py_buffer key_views[2];
    int held;              /* key_views held */
    const uint64_t *keys[3];  /* keys[BLACK], keys[WHITE] */
    uint64_t white_key;    /* GameState._white_key */
    uint64_t *history;     /* the root's superko history (GameState._history), sorted */
    Py_ssize_t history_len;
    Py_ssize_t n, stride, width, height;
    int territory, simple_ko, situational_ko, allow_suicide;
    double white_compensation;  /* komi plus White's handicap bonus: the compensation with White to move */
} PositionContext;

typedef struct {
    uint64_t key;   /* the superko key of the position after the move */
    long point;
} LineMove;

typedef struct {
    PyObject_VAR_HEAD
    PositionContext *ctx;
    long to_play, consecutive_passes;
    uint64_t hash;
    long ko_point, ko_color;
    long captures[3], stones[3], most[3];  /* by colour; most: GameState._max_stones */
    Py_ssize_t move_count;                 /* the game's moves: the root's and the line's */
    long recent[POSITION_HISTORY];         /* recent[k]: the point of the move k + 1 ago, PASS, or POSITION_NO_MOVE */
    LineMove *line;
    Py_ssize_t line_len, line_cap;
    uint8_t *colors;
    uint16_t *head, *next, *size, *libs;
    uint16_t arrays[1];  /* head, next, size, libs (n each), then colors (n bytes) */
} PositionObject;

#endif
