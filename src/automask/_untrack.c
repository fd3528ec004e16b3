/* automask._untrack: gc_pause.untrack as a C function, built with the compiled engine
 * (setup.py, AUTOMASK_COMPILE=1). The pure package calls the same CPython function through
 * ctypes, at about 300 ns a call against 25 ns here; a mask or a compile untracks each
 * object it keeps (regex nodes, parse states, cache entries: ten calls per token on
 * MaskBench), see gc_pause.py. */
#include <Python.h>

static PyObject *
untrack(PyObject *module, PyObject *obj)
{
    if (PyObject_IS_GC(obj))  /* an object without a GC header is never tracked */
        PyObject_GC_UnTrack(obj);  /* (no-op where it is already untracked) */
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"untrack", untrack, METH_O,
     "untrack(obj): stop the cyclic garbage collector tracking obj (see automask.gc_pause)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "automask._untrack", NULL, 0, methods,
};

PyMODINIT_FUNC
PyInit__untrack(void)
{
    return PyModule_Create(&module);
}
