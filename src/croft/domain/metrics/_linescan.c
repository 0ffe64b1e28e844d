/* croft.domain.metrics._linescan: the lines of a /metrics body that may hold wanted samples, found
 * in one pass over the text (croft scale reads 20 and more bodies a poll; str.find per name and
 * label value walked each several times).
 *
 * starts(text, names, needles) -> list[int] | None
 *     text: str. names: tuple of str. needles: a tuple with one entry per name, None or a tuple of
 *     str. The start of every line of text (0, and each index after a '\n') that, after blanks
 *     (whitespace other than '\n', as str.isspace has it), starts with one of names followed by a
 *     character that cannot continue a metric name ([a-zA-Z0-9_:]) or by the text's end; for a name
 *     with needles, only the lines that also contain one of them. In text order. None when the text
 *     is not of 1-byte kind (latin-1): the caller then reads it the Python way
 *     (croft.domain.metrics.exposition._candidates). A needle with a character above 255 cannot be
 *     in such a text and is left out.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static unsigned char blank[256];     /* whitespace but '\n' */
static unsigned char name_char[256]; /* [a-zA-Z0-9_:] */

typedef struct {
    const char *ptr;
    Py_ssize_t len;
} text_span;

typedef struct {
    text_span name;
    Py_ssize_t first_needle, needles; /* into the needle array; needles == -1: no rule */
} wanted;

static int latin1(PyObject *text, text_span *out) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "starts: names and needles must be str");
        return -1;
    }
    if (PyUnicode_READY(text) < 0) return -1;
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND) return 0;
    out->ptr = (const char *)PyUnicode_1BYTE_DATA(text);
    out->len = PyUnicode_GET_LENGTH(text);
    return 1;
}

static int contains(const char *line, Py_ssize_t len, const text_span *needle) {
    if (needle->len == 0) return 1;
    return memmem(line, (size_t)len, needle->ptr, (size_t)needle->len) != NULL;
}

static PyObject *starts(PyObject *self, PyObject *args) {
    PyObject *text_obj, *names_obj, *needles_obj;
    if (!PyArg_ParseTuple(args, "UO!O!", &text_obj, &PyTuple_Type, &names_obj, &PyTuple_Type, &needles_obj))
        return NULL;
    text_span text;
    int kind = latin1(text_obj, &text);
    if (kind < 0) return NULL;
    if (kind == 0) Py_RETURN_NONE;
    Py_ssize_t count = PyTuple_GET_SIZE(names_obj);
    if (PyTuple_GET_SIZE(needles_obj) != count) {
        PyErr_SetString(PyExc_ValueError, "starts: one needles entry per name");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *rule = PyTuple_GET_ITEM(needles_obj, i);
        if (rule != Py_None) {
            if (!PyTuple_Check(rule)) {
                PyErr_SetString(PyExc_TypeError, "starts: needles entries are None or tuples of str");
                return NULL;
            }
            total += PyTuple_GET_SIZE(rule);
        }
    }
    wanted *want = PyMem_Calloc((size_t)count + 1, sizeof(wanted));
    text_span *needle = PyMem_Calloc((size_t)total + 1, sizeof(text_span));
    PyObject *out = NULL;
    if (!want || !needle) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t used = 0, kept = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        text_span name;
        int ok = latin1(PyTuple_GET_ITEM(names_obj, i), &name);
        if (ok < 0) goto done;
        if (ok == 0 || name.len == 0) continue; /* cannot start a line of a 1-byte text */
        PyObject *rule = PyTuple_GET_ITEM(needles_obj, i);
        want[kept].name = name;
        want[kept].first_needle = used;
        want[kept].needles = -1;
        if (rule != Py_None) {
            want[kept].needles = 0;
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(rule); j++) {
                int fits = latin1(PyTuple_GET_ITEM(rule, j), &needle[used]);
                if (fits < 0) goto done;
                if (fits) {
                    used++;
                    want[kept].needles++;
                }
            }
        }
        kept++;
    }
    out = PyList_New(0);
    if (!out) goto done;
    const char *base = text.ptr, *end = text.ptr + text.len;
    for (const char *line = base; line <= end;) {
        const char *stop = memchr(line, '\n', (size_t)(end - line));
        if (!stop) stop = end;
        const char *at = line;
        while (at < stop && blank[(unsigned char)*at]) at++;
        for (Py_ssize_t i = 0; i < kept; i++) {
            const text_span *name = &want[i].name;
            if (stop - at < name->len || memcmp(at, name->ptr, (size_t)name->len) != 0) continue;
            if (at + name->len < end && name_char[(unsigned char)at[name->len]]) continue;
            int keep = want[i].needles < 0;
            for (Py_ssize_t j = 0; !keep && j < want[i].needles; j++)
                keep = contains(line, stop - line, &needle[want[i].first_needle + j]);
            if (!keep) continue;
            PyObject *index = PyLong_FromSsize_t(line - base);
            if (!index || PyList_Append(out, index) < 0) {
                Py_XDECREF(index);
                Py_CLEAR(out);
                goto done;
            }
            Py_DECREF(index);
            break;
        }
        line = stop + 1;
    }
done:
    PyMem_Free(want);
    PyMem_Free(needle);
    return out;
}

static PyMethodDef methods[] = {
    {"starts", starts, METH_VARARGS, "The starts of the lines that may hold wanted samples."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__linescan(void) {
    for (int c = 0; c < 256; c++) {
        blank[c] = c != '\n' && Py_UNICODE_ISSPACE((Py_UCS4)c);
        name_char[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                       c == ':';
    }
    return PyModule_Create(&module);
}
