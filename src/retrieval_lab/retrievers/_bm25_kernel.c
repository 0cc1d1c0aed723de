/* The compiled loops of BM25 (retrievers/bm25.py): the postings' codec and the search of one query.
 *
 * Compiled when the package is installed (pyproject.toml, tool.setuptools.ext-modules), so a search loads no
 * compiler (numba's cost 149 MiB at 1M passages: lab notes, 2026-12-05). Arrays arrive through the buffer
 * protocol; bm25.py checks their dtypes, and every index read here is checked against its buffer's length, so a
 * damaged index is an error, never a read out of bounds.
 *
 * Postings format (retrieval-lab-bm25-index/2): term t's postings are the bytes postings[offsets[t]:offsets[t+1]],
 * df[t] entries in row order, each the LEB128 varint of (gap << 1 | (tf != 1)), followed by the varint of tf when
 * tf != 1; gap is the row minus the previous row of the term (the first: the row itself). 1.7 bytes a posting
 * on MS MARCO-shaped passages, against 5 for an int32 row and a uint8 tf.
 *
 * Arithmetic: a posting's impact is tf * idf / (norm + tf) * repeats in double, in that order (the NumPy path's
 * _impacts, operation for operation), added to the document's sum term by term in plan order from 0. Built with
 * -ffp-contract=off and without fast-math: no fused multiply-add, no reordering, the same bits as NumPy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *at, *end;
} Reader;

/* The next varint, or -1 when the bytes end inside it or it holds more than 63 bits (a damaged stream). */
static inline int64_t next_varint(Reader *r) {
    uint64_t value = 0;
    for (int shift = 0; shift < 63 && r->at < r->end; shift += 7) {
        uint8_t byte = *r->at++;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80))
            return (int64_t)value;
    }
    return -1;
}

static inline uint8_t *put_varint(uint8_t *out, uint64_t value) {
    while (value >= 0x80) {
        *out++ = (uint8_t)(value | 0x80);
        value >>= 7;
    }
    *out++ = (uint8_t)value;
    return out;
}

static inline size_t varint_size(uint64_t value) {
    size_t n = 1;
    while (value >= 0x80) {
        value >>= 7;
        n++;
    }
    return n;
}

/* The next posting of a term, (row, tf) from the previous row; 0, or -1 on a damaged stream. */
static inline int next_posting(Reader *r, int64_t *row, int64_t *tf, int first) {
    int64_t v = next_varint(r);
    if (v < 0)
        return -1;
    int64_t gap = v >> 1;
    if (!first && gap < 1)
        return -1;
    *row = first ? gap : *row + gap;
    if (v & 1) {
        *tf = next_varint(r);
        if (*tf < 2)
            return -1;
    } else {
        *tf = 1;
    }
    return 0;
}

/* A term's postings as a Reader, or -1 when the term or its offsets are out of range. */
static inline int term_reader(const int64_t *offsets, Py_ssize_t n_terms, const uint8_t *stream, Py_ssize_t size,
                              int64_t term, Reader *r) {
    if (term < 0 || term >= n_terms)
        return -1;
    int64_t a = offsets[term], b = offsets[term + 1];
    if (a < 0 || b < a || b > size)
        return -1;
    r->at = stream + a;
    r->end = stream + b;
    return 0;
}

static int read_buffer(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *name) {
    if (PyObject_GetBuffer(object, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, not a whole number of %zd-byte items", name, view->len, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#define ITEMS(view, type) ((Py_ssize_t)((view).len / (Py_ssize_t)sizeof(type)))

/* ------------------------------------------------------------------------------------------------ encode */

static inline uint64_t tf_at(const void *tf, int itemsize, Py_ssize_t i) {
    switch (itemsize) {
    case 1: return ((const uint8_t *)tf)[i];
    case 2: return ((const uint16_t *)tf)[i];
    default: return ((const uint32_t *)tf)[i];
    }
}

static inline uint64_t code_of(int64_t row, int64_t previous, int first, uint64_t tf) {
    return ((uint64_t)(first ? row : row - previous) << 1) | (tf != 1);
}

PyDoc_STRVAR(encode_doc, "encode(indptr, docs, tf, tf_itemsize, offsets) -> bytearray\n\n"
             "The CSR postings (int64 indptr, int32 rows rising within each term, tf of 1, 2 or 4 bytes) as the\n"
             "varint stream; each term's start written into offsets (int64, one more than the terms).");

static PyObject *encode(PyObject *self, PyObject *args) {
    PyObject *o_indptr, *o_docs, *o_tf, *o_offsets;
    int itemsize;
    if (!PyArg_ParseTuple(args, "OOOiO", &o_indptr, &o_docs, &o_tf, &itemsize, &o_offsets))
        return NULL;
    if (itemsize != 1 && itemsize != 2 && itemsize != 4)
        return PyErr_Format(PyExc_ValueError, "tf items of %d bytes: expected 1, 2 or 4", itemsize);
    Py_buffer indptr, docs, tf, offsets;
    PyObject *out = NULL;  /* before the first goto: every exit returns it */
    if (read_buffer(o_indptr, &indptr, 8, 0, "indptr") < 0)
        return NULL;
    if (read_buffer(o_docs, &docs, 4, 0, "docs") < 0)
        goto fail_indptr;
    if (read_buffer(o_tf, &tf, itemsize, 0, "tf") < 0)
        goto fail_docs;
    if (read_buffer(o_offsets, &offsets, 8, 1, "offsets") < 0)
        goto fail_tf;
    const int64_t *ptr = indptr.buf;
    const int32_t *rows = docs.buf;
    int64_t *starts = offsets.buf;
    Py_ssize_t n_terms = ITEMS(indptr, int64_t) - 1, n_postings = ITEMS(docs, int32_t);
    if (n_terms < 0 || ITEMS(offsets, int64_t) != n_terms + 1 || tf.len / itemsize != n_postings ||
        ptr[0] != 0 || ptr[n_terms] != n_postings) {
        PyErr_SetString(PyExc_ValueError, "encode: indptr, docs, tf and offsets do not fit together");
        goto done;
    }
    size_t total = 0;
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        starts[t] = (int64_t)total;
        if (ptr[t + 1] < ptr[t]) {
            PyErr_SetString(PyExc_ValueError, "encode: indptr falls");
            goto done;
        }
        for (int64_t p = ptr[t]; p < ptr[t + 1]; p++) {
            uint64_t f = tf_at(tf.buf, itemsize, p);
            int first = p == ptr[t];
            if (rows[p] < 0 || (!first && rows[p] <= rows[p - 1]) || f < 1) {
                PyErr_SetString(PyExc_ValueError, "encode: rows not rising within a term, or a tf below 1");
                goto done;
            }
            total += varint_size(code_of(rows[p], first ? 0 : rows[p - 1], first, f)) + (f != 1 ? varint_size(f) : 0);
        }
    }
    starts[n_terms] = (int64_t)total;
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto done;
    uint8_t *at = (uint8_t *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t t = 0; t < n_terms; t++) {
        for (int64_t p = ptr[t]; p < ptr[t + 1]; p++) {
            uint64_t f = tf_at(tf.buf, itemsize, p);
            int first = p == ptr[t];
            at = put_varint(at, code_of(rows[p], first ? 0 : rows[p - 1], first, f));
            if (f != 1)
                at = put_varint(at, f);
        }
    }
done:
    PyBuffer_Release(&offsets);
fail_tf:
    PyBuffer_Release(&tf);
fail_docs:
    PyBuffer_Release(&docs);
fail_indptr:
    PyBuffer_Release(&indptr);
    return out;
}

/* ------------------------------------------------------------------------------------------------ check, decode */

PyDoc_STRVAR(check_doc, "check(offsets, postings, df, documents) -> (array, problem) | None\n\n"
             "Every term's postings decoded once: None when each holds df[t] rows rising within 0..documents-1 and\n"
             "ends where the next term starts; otherwise the array found wrong (\"offsets\" or \"postings\") and\n"
             "what is wrong, with the first damaged term.");

static PyObject *check(PyObject *self, PyObject *args) {
    PyObject *o_offsets, *o_stream, *o_df;
    Py_ssize_t documents;
    if (!PyArg_ParseTuple(args, "OOOn", &o_offsets, &o_stream, &o_df, &documents))
        return NULL;
    Py_buffer offsets, stream, df;
    if (read_buffer(o_offsets, &offsets, 8, 0, "offsets") < 0)
        return NULL;
    if (read_buffer(o_stream, &stream, 1, 0, "postings") < 0) {
        PyBuffer_Release(&offsets);
        return NULL;
    }
    if (read_buffer(o_df, &df, 4, 0, "df") < 0) {
        PyBuffer_Release(&stream);
        PyBuffer_Release(&offsets);
        return NULL;
    }
    const int64_t *starts = offsets.buf;
    const uint32_t *counts = df.buf;
    Py_ssize_t n_terms = ITEMS(df, uint32_t), bad = -1;
    const char *why = NULL, *array = "postings";
    Py_BEGIN_ALLOW_THREADS
    if (ITEMS(offsets, int64_t) != n_terms + 1 || starts[0] != 0 || starts[n_terms] != stream.len) {
        why = "offsets do not run from 0 to the postings' size";
        array = "offsets";
    } else {
        for (Py_ssize_t t = 0; t < n_terms && why == NULL; t++) {
            Reader r;
            int64_t row = 0, tf = 0;
            if (term_reader(starts, n_terms, stream.buf, stream.len, t, &r) < 0) {
                why = "offsets fall";
                array = "offsets";
            } else {
                for (uint32_t p = 0; p < counts[t]; p++) {
                    if (next_posting(&r, &row, &tf, p == 0) < 0 || row >= documents) {
                        why = "postings that do not decode to df.npy's count of rows rising within the documents";
                        break;
                    }
                }
                if (why == NULL && r.at != r.end)
                    why = "postings longer than df.npy says";
            }
            if (why != NULL)
                bad = t;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&df);
    PyBuffer_Release(&stream);
    PyBuffer_Release(&offsets);
    if (why == NULL)
        Py_RETURN_NONE;
    if (bad < 0)
        return Py_BuildValue("(ss)", array, why);
    return Py_BuildValue("(sN)", array, PyUnicode_FromFormat("%s (term %zd)", why, bad));
}

PyDoc_STRVAR(decode_doc, "decode(offsets, postings, df, terms, rows, tf) -> None\n\n"
             "The postings of terms (int64), one after the other, into rows (int32) and tf (uint32), each as long as\n"
             "the terms' df together.");

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *o_offsets, *o_stream, *o_df, *o_terms, *o_rows, *o_tf;
    if (!PyArg_ParseTuple(args, "OOOOOO", &o_offsets, &o_stream, &o_df, &o_terms, &o_rows, &o_tf))
        return NULL;
    Py_buffer b[6];
    PyObject *objects[6] = {o_offsets, o_stream, o_df, o_terms, o_rows, o_tf};
    const Py_ssize_t sizes[6] = {8, 1, 4, 8, 4, 4};
    const char *names[6] = {"offsets", "postings", "df", "terms", "rows", "tf"};
    int held = 0;
    for (; held < 6; held++)
        if (read_buffer(objects[held], &b[held], sizes[held], held >= 4, names[held]) < 0)
            break;
    PyObject *result = NULL;
    if (held == 6) {
        const int64_t *starts = b[0].buf, *terms = b[3].buf;
        const uint32_t *counts = b[2].buf;
        int32_t *rows = b[4].buf;
        uint32_t *tfs = b[5].buf;
        Py_ssize_t n_terms = ITEMS(b[2], uint32_t), room = ITEMS(b[4], int32_t), at = 0;
        int damaged = ITEMS(b[0], int64_t) != n_terms + 1 || ITEMS(b[5], uint32_t) != room;
        for (Py_ssize_t j = 0; j < ITEMS(b[3], int64_t) && !damaged; j++) {
            Reader r;
            int64_t row = 0, tf = 0;
            if (term_reader(starts, n_terms, b[1].buf, b[1].len, terms[j], &r) < 0 || at + counts[terms[j]] > room) {
                damaged = 1;
                break;
            }
            for (uint32_t p = 0; p < counts[terms[j]]; p++, at++) {
                if (next_posting(&r, &row, &tf, p == 0) < 0 || row > INT32_MAX || tf > UINT32_MAX) {
                    damaged = 1;
                    break;
                }
                rows[at] = (int32_t)row;
                tfs[at] = (uint32_t)tf;
            }
        }
        if (damaged || at != room)
            PyErr_SetString(PyExc_ValueError, "decode: the postings do not fit their df or the arrays given");
        else
            result = Py_NewRef(Py_None);
    }
    while (held-- > 0)
        PyBuffer_Release(&b[held]);
    return result;
}

/* ------------------------------------------------------------------------------------------------ search */

/* The k-th smallest of values[0..m) (0-based), reordering them: Hoare's selection, the middle as pivot. */
static double select_kth(double *values, Py_ssize_t m, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = m - 1;
    while (lo < hi) {
        double pivot = values[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (values[i] < pivot)
                i++;
            while (values[j] > pivot)
                j--;
            if (i <= j) {
                double t = values[i];
                values[i++] = values[j];
                values[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return values[k];
}

/* The first m candidates cut to those reaching the depth-th best value (ties kept); that value in *cut. The
 * depth-th best is selected on a copy (rare: only when the room fills); -1 when the copy cannot be made. */
static Py_ssize_t keep_best(int32_t *rows, double *values, Py_ssize_t m, Py_ssize_t depth, double *cut) {
    double *copy = malloc((size_t)m * sizeof(double));
    if (copy == NULL)
        return -1;
    memcpy(copy, values, (size_t)m * sizeof(double));
    *cut = select_kth(copy, m, m - depth);
    free(copy);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < m; i++) {
        if (values[i] >= *cut) {
            rows[kept] = rows[i];
            values[kept] = values[i];
            kept++;
        }
    }
    return kept;
}

typedef struct {
    const int64_t *starts;
    const uint8_t *stream;
    const uint32_t *df;
    const double *norm, *idfs, *repeats;
    const void *codes;
    int code_size;
    const int64_t *terms;
    double *sums, *values;
    int32_t *rows;
    Py_ssize_t n_terms, size, n_docs, n_query, depth, room;
} Search;

/* Candidates found (>= 0); -1: the room filled with ties (the caller retries with more); -2: a damaged stream or
 * a term out of range; -3: out of memory. sums is left all zero whatever happens. */
static Py_ssize_t search(Search *s) {
    Py_ssize_t status = 0;
    Reader r = {NULL, NULL};
    for (Py_ssize_t j = 0; j < s->n_query; j++)  /* every term in range before any sum moves */
        if (term_reader(s->starts, s->n_terms, s->stream, s->size, s->terms[j], &r) < 0)
            return -2;
    for (Py_ssize_t j = 0; j < s->n_query; j++) {
        int64_t row = 0, tf = 0;
        term_reader(s->starts, s->n_terms, s->stream, s->size, s->terms[j], &r);
        double idf = s->idfs[j], repeat = s->repeats[j];
        uint32_t count = s->df[s->terms[j]];
        /* a document's norm is norm[codes[row]]: its length's place among the distinct lengths (one loop per
         * width of the codes, the switch outside the loop) */
#define SUM_POSTINGS(CODE_T)                                                                                       \
        for (uint32_t p = 0; p < count; p++) {                                                                     \
            if (next_posting(&r, &row, &tf, p == 0) < 0 || row >= s->n_docs) {                                     \
                status = -2;                                                                                       \
                break;                                                                                             \
            }                                                                                                      \
            double f = (double)tf;                                                                                 \
            s->sums[row] += f * idf / (s->norm[((const CODE_T *)s->codes)[row]] + f) * repeat;                     \
        }
        switch (s->code_size) {
        case 1: SUM_POSTINGS(uint8_t) break;
        case 2: SUM_POSTINGS(uint16_t) break;
        default: SUM_POSTINGS(uint32_t) break;
        }
#undef SUM_POSTINGS
        if (status < 0) {
            memset(s->sums, 0, (size_t)s->n_docs * sizeof(double));
            return status;
        }
    }
    /* the terms by their postings, fewest first, ties in plan order (an insertion sort: a query has few terms) */
    Py_ssize_t *order = malloc((size_t)(s->n_query ? s->n_query : 1) * sizeof(Py_ssize_t));
    if (order == NULL) {
        memset(s->sums, 0, (size_t)s->n_docs * sizeof(double));
        return -3;
    }
    for (Py_ssize_t j = 0; j < s->n_query; j++) {
        Py_ssize_t k = j;
        uint32_t length = s->df[s->terms[j]];
        while (k > 0 && s->df[s->terms[order[k - 1]]] > length) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = j;
    }
    /* each document read back where its postings are, and its sum cleared; the rarest terms' first, whose
     * documents score highest: the cut rises early and few of the others are kept */
    Py_ssize_t found = 0;
    double cut = 0.0;
    int full = 0;
    for (Py_ssize_t i = 0; i < s->n_query; i++) {
        Py_ssize_t j = order[i];
        int64_t row = 0, tf = 0;
        term_reader(s->starts, s->n_terms, s->stream, s->size, s->terms[j], &r);  /* checked above */
        for (uint32_t p = 0; p < s->df[s->terms[j]]; p++) {
            next_posting(&r, &row, &tf, p == 0);  /* decoded above without error */
            double value = s->sums[row];
            s->sums[row] = 0.0;
            if (value >= cut && value > 0.0 && !full) {  /* mostly false at its first test once the cut has risen */
                if (found == s->room && found > s->depth) {  /* full: keep the depth best so far; the cut rises */
                    found = keep_best(s->rows, s->values, found, s->depth, &cut);
                    if (found < 0)
                        status = -3;
                    full = found == s->room || found < 0;
                }
                if (found == s->room && !full) {  /* room = N < depth, all of them in: no other can come, */
                    status = -2;                  /* unless a row repeats; the sums are still cleared */
                    full = 1;
                }
                if (value >= cut && !full) {
                    s->rows[found] = (int32_t)row;
                    s->values[found] = value;
                    found++;
                }
            }
        }
    }
    free(order);
    if (status < 0)
        return status;
    if (full)
        return -1;
    if (found > s->depth) {
        found = keep_best(s->rows, s->values, found, s->depth, &cut);
        if (found < 0)
            return -3;
    }
    return found;
}

PyDoc_STRVAR(top_rows_doc, "top_rows(offsets, postings, df, norm, codes, code_size, terms, idfs, repeats, depth, sums,\n"
             "rows, values)\n\n"
             "Sum the postings of terms (int64) into sums (float64 [N], all zero, left all zero), a document's norm\n"
             "norm[codes[row]] (codes: [N] unsigned of code_size bytes, each below len(norm): the caller's promise,\n"
             "not checked per posting), and write into rows\n"
             "(int32) / values (float64) every document whose sum reaches the depth-th best (ties too): their count,\n"
             "or -1 when rows ran full of ties (the caller retries with more room). Impacts must be positive: a sum\n"
             "of 0 is an unmet document. The GIL is released while it runs.");

static PyObject *top_rows(PyObject *self, PyObject *args) {
    PyObject *o[12];
    Py_ssize_t depth;
    int code_size;
    if (!PyArg_ParseTuple(args, "OOOOOiOOOnOOO", &o[0], &o[1], &o[2], &o[3], &o[11], &code_size, &o[4], &o[5],
                          &o[6], &depth, &o[8], &o[9], &o[10]))
        return NULL;
    if (code_size != 1 && code_size != 2 && code_size != 4)
        return PyErr_Format(PyExc_ValueError, "codes of %d bytes: expected 1, 2 or 4", code_size);
    o[7] = NULL;
    Py_buffer b[12];
    const Py_ssize_t sizes[12] = {8, 1, 4, 8, 8, 8, 8, 0, 8, 4, 8, code_size};
    const char *names[12] = {"offsets", "postings", "df", "norm", "terms", "idfs", "repeats", "", "sums", "rows",
                             "values", "codes"};
    int held = 0, ok = 1;
    for (; held < 12; held++) {
        if (held == 7)
            continue;
        if (read_buffer(o[held], &b[held], sizes[held], held >= 8 && held <= 10, names[held]) < 0) {
            ok = 0;
            break;
        }
    }
    PyObject *result = NULL;
    if (ok) {
        Search s = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, b[5].buf, b[6].buf, b[11].buf, code_size, b[4].buf,
                    b[8].buf, b[10].buf, b[9].buf, ITEMS(b[2], uint32_t), b[1].len, ITEMS(b[8], double),
                    ITEMS(b[4], int64_t), depth, ITEMS(b[9], int32_t)};
        if (ITEMS(b[0], int64_t) != s.n_terms + 1 || b[11].len / code_size != s.n_docs ||
            ITEMS(b[5], double) != s.n_query || ITEMS(b[6], double) != s.n_query ||
            ITEMS(b[10], double) != s.room || depth < 1 || s.room < (depth < s.n_docs ? depth : s.n_docs)) {
            /* room for depth candidates, or for every document when there are fewer */
            PyErr_SetString(PyExc_ValueError, "top_rows: the arrays do not fit together (or room < min(depth, N))");
        } else {
            Py_ssize_t found;
            Py_BEGIN_ALLOW_THREADS
            found = search(&s);
            Py_END_ALLOW_THREADS
            if (found == -2)
                PyErr_SetString(PyExc_ValueError, "top_rows: damaged postings, or a term outside the index");
            else if (found == -3)
                PyErr_NoMemory();
            else
                result = PyLong_FromSsize_t(found);
        }
    }
    while (held-- > 0)
        if (held != 7)
            PyBuffer_Release(&b[held]);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {"check", check, METH_VARARGS, check_doc},
    {"decode", decode, METH_VARARGS, decode_doc},
    {"top_rows", top_rows, METH_VARARGS, top_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bm25_kernel",
                                    "BM25's postings codec and search loop (compiled at install).", -1, methods};

PyMODINIT_FUNC PyInit__bm25_kernel(void) { return PyModule_Create(&module); }
