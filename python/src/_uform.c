/*  _uform.c: the `uform` Python package's extension, over the C ABI of include/uform/uform.h alone.
 *  One type, `Model`, wraps a model and a free list of contexts: each call borrows a context (made
 *  when none is idle), runs with the GIL released, and gives it back, so calls from several threads
 *  run at once over one copy of the weights. Inputs are checked here, before any pass, and raise
 *  TypeError or ValueError; a failure of the library raises uform.Error with its message.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "uform/uform.h"

static PyObject *uform_error_; /* uform.Error */

/* Raises uform.Error for a failed call, with the library's status name and message. */
static PyObject *uform_raise_(uform_status_t status, char const *message) {
    PyObject *text = PyUnicode_FromFormat("%s: %s", uform_status_name(status), message);
    PyObject *error = text ? PyObject_CallOneArg(uform_error_, text) : NULL;
    Py_XDECREF(text);
    if (!error) return NULL;
    PyObject *name = PyUnicode_FromString(uform_status_name(status));
    if (name) PyObject_SetAttrString(error, "status", name);
    Py_XDECREF(name);
    PyErr_SetObject(uform_error_, error);
    Py_DECREF(error);
    return NULL;
}

/* The message of the calling thread's last failure, copied before anything else can overwrite it. */
typedef struct uform_failure_t {
    uform_status_t status;
    char message[1024];
} uform_failure_t;

static void uform_note_(uform_failure_t *failure, uform_status_t status) {
    failure->status = status;
    if (status != uform_ok_k) snprintf(failure->message, sizeof(failure->message), "%s", uform_last_error());
}

typedef struct {
    PyObject_HEAD
    uform_model_t *model;
    uform_device_t device;
    uform_precision_t precision;
    size_t threads;
    uform_config_t config;
    uform_context_t **idle; /* contexts no call holds; guarded by the GIL */
    size_t idle_count, idle_capacity, busy;
    PyObject *path; /* str, or None for the untrained default */
    PyObject *origin;
} uform_model_object_t;

static int uform_check_open_(uform_model_object_t *self) {
    if (self->model) return 1;
    PyErr_SetString(PyExc_ValueError, "this uform.Model is closed");
    return 0;
}

/* Takes an idle context or makes one; the GIL is held on entry and exit, released while making it. */
static uform_context_t *uform_borrow_(uform_model_object_t *self) {
    if (!uform_check_open_(self)) return NULL; /* another thread may have closed it while inputs were read */
    if (self->idle_count) {
        self->busy++;
        return self->idle[--self->idle_count];
    }
    uform_context_t *context = NULL;
    uform_failure_t failure = {0};
    self->busy++; /* counted before the GIL goes, so close() sees it */
    Py_BEGIN_ALLOW_THREADS
    uform_note_(&failure, uform_context_create(self->model, self->device, self->threads, &context));
    Py_END_ALLOW_THREADS
    if (failure.status == uform_ok_k) return context;
    self->busy--;
    uform_raise_(failure.status, failure.message);
    return NULL;
}

static void uform_give_back_(uform_model_object_t *self, uform_context_t *context) {
    self->busy--;
    if (self->idle_count == self->idle_capacity) {
        size_t capacity = self->idle_capacity ? 2 * self->idle_capacity : 4;
        uform_context_t **idle = realloc(self->idle, capacity * sizeof(*idle));
        if (!idle) {
            uform_context_close(context); /* nowhere to keep it: the next call makes another */
            return;
        }
        self->idle = idle, self->idle_capacity = capacity;
    }
    self->idle[self->idle_count++] = context;
}

static void uform_release_(uform_model_object_t *self) {
    for (size_t i = 0; i < self->idle_count; ++i) uform_context_close(self->idle[i]);
    free(self->idle);
    self->idle = NULL, self->idle_count = self->idle_capacity = 0;
    uform_model_close(self->model);
    self->model = NULL;
}

static void uform_model_dealloc_(uform_model_object_t *self) {
    uform_release_(self);
    Py_XDECREF(self->path);
    Py_XDECREF(self->origin);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* (folder or None, origin) of the default model, as uform/_default.py finds it. */
static PyObject *uform_default_(void) {
    PyObject *resolver = PyImport_ImportModule("uform._default");
    if (!resolver) return NULL;
    PyObject *found = PyObject_CallMethod(resolver, "resolve", NULL);
    Py_DECREF(resolver);
    if (found && (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_RuntimeError, "uform._default.resolve() must return (path or None, origin)");
        return NULL;
    }
    return found;
}

static int uform_model_init_(uform_model_object_t *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"path", "device", "precision", "threads", NULL};
    PyObject *path = Py_None;
    char const *device = "cpu", *precision = "bf16";
    Py_ssize_t threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$ssn:Model", keywords, &path, &device, &precision, &threads))
        return -1;
    if (self->model) {
        PyErr_SetString(PyExc_RuntimeError, "uform.Model is already open; make a new one");
        return -1;
    }
    if (!strcmp(device, "cpu")) self->device = uform_device_cpu_k;
    else if (!strcmp(device, "cuda")) self->device = uform_device_cuda_k;
    else return PyErr_Format(PyExc_ValueError, "device is 'cpu' or 'cuda', not '%s'", device), -1;
    if (uform_precision_parse(precision, &self->precision) != uform_ok_k)
        return PyErr_Format(PyExc_ValueError, "precision is 'bf16', 'e4m3', 'int8' or 'f32', not '%s'", precision), -1;
    if (threads < 0) return PyErr_SetString(PyExc_ValueError, "threads is a count, 0 for all cores"), -1;
    self->threads = (size_t)threads;

    PyObject *directory = NULL, *origin = NULL;
    if (path == Py_None) {
        PyObject *found = uform_default_();
        if (!found) return -1;
        directory = Py_NewRef(PyTuple_GET_ITEM(found, 0)), origin = Py_NewRef(PyTuple_GET_ITEM(found, 1));
        Py_DECREF(found);
    } else {
        PyObject *bytes = NULL;
        if (!PyUnicode_FSConverter(path, &bytes)) return -1; /* TypeError for a non-path */
        Py_DECREF(bytes);
        directory = PyOS_FSPath(path);
        origin = PyUnicode_FromString("path");
    }
    if (!directory || !origin) return Py_XDECREF(directory), Py_XDECREF(origin), -1;

    uform_failure_t failure = {0};
    uform_model_t *model = NULL;
    if (directory == Py_None) {
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "uform.Model(): this build packages no trained default, so the model is the untrained 128x2 of "
                         "seed 0 (`uform init --tier 128x2 --seed 0`); pass path= or install from a clone that "
                         "holds the shipped models/default", 1) < 0)
            return Py_DECREF(directory), Py_DECREF(origin), -1;
        Py_BEGIN_ALLOW_THREADS
        uform_config_t config;
        uform_note_(&failure, uform_config_from_tier("128x2", &config));
        if (failure.status == uform_ok_k) uform_note_(&failure, uform_model_init(&config, 0, &model));
        Py_END_ALLOW_THREADS
    } else {
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(directory, &encoded)) return Py_DECREF(directory), Py_DECREF(origin), -1;
        char const *name = PyBytes_AS_STRING(encoded);
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, uform_model_open(name, &model));
        Py_END_ALLOW_THREADS
        Py_DECREF(encoded);
    }
    if (failure.status == uform_ok_k && self->precision != uform_precision_bf16_k)
        uform_note_(&failure, uform_model_set_precision(model, self->precision));
    if (failure.status != uform_ok_k) {
        uform_model_close(model);
        Py_DECREF(directory), Py_DECREF(origin);
        uform_raise_(failure.status, failure.message);
        return -1;
    }
    uform_model_config(model, &self->config);
    self->model = model;
    self->path = directory, self->origin = origin;
    uform_context_t *context = uform_borrow_(self); /* made now, so a device that cannot run fails here */
    if (!context) {
        uform_release_(self);
        return -1;
    }
    uform_give_back_(self, context);
    return 0;
}

/* One input of encode(): a text, or an image as encoded bytes or pixels. */
typedef struct uform_input_t {
    int is_image;
    uform_text_t text;
    uform_image_t image;
    uform_pixels_t decoded;  /* read from a path here; freed after the call */
    uint8_t *converted;      /* RGB pixels widened to RGBA; freed after the call */
    PyObject *kept;          /* a dict's image object, held so that no other thread can free it mid-call */
} uform_input_t;

static char const *const uform_input_kinds_ =
    "a str, bytes (an encoded PNG, JPEG or WebP), a dict {'image': path or bytes}, or a uint8 array of HxWx3 or HxWx4 pixels";

/* Pixels from a uint8 array: RGBA rows are used where they lie, RGB ones are widened into a copy. */
static int uform_pixels_from_array_(PyArrayObject *array, Py_ssize_t index, uform_input_t *input) {
    int channels = PyArray_NDIM(array) == 3 ? (int)PyArray_DIM(array, 2) : 0;
    if (PyArray_TYPE(array) != NPY_UINT8 || (channels != 3 && channels != 4)) {
        PyObject *shape = PyObject_GetAttrString((PyObject *)array, "shape");
        if (shape)
            PyErr_Format(PyExc_TypeError, "input %zd: an image array must be uint8 of shape HxWx3 or HxWx4, not %s of "
                                          "shape %R (texts go as str)", index, PyArray_DESCR(array)->typeobj->tp_name, shape);
        Py_XDECREF(shape);
        return 0;
    }
    size_t height = (size_t)PyArray_DIM(array, 0), width = (size_t)PyArray_DIM(array, 1);
    if (!height || !width) {
        PyErr_Format(PyExc_ValueError, "input %zd: the image array is empty (%zux%zu pixels)", index, height, width);
        return 0;
    }
    npy_intp const *strides = PyArray_STRIDES(array);
    input->is_image = 1;
    if (channels == 4 && strides[2] == 1 && strides[1] == 4 && strides[0] >= (npy_intp)(4 * width)) {
        input->image.pixels = (uform_pixels_t){PyArray_DATA(array), height, width, (size_t)strides[0]};
        return 1;
    }
    input->converted = malloc(height * width * 4);
    if (!input->converted) return PyErr_NoMemory(), 0;
    char const *base = PyArray_DATA(array);
    for (size_t y = 0; y < height; ++y)
        for (size_t x = 0; x < width; ++x)
            for (int c = 0; c < 4; ++c)
                input->converted[(y * width + x) * 4 + c] =
                    c < channels ? *(uint8_t const *)(base + y * strides[0] + x * strides[1] + c * strides[2]) : 255;
    input->image.pixels = (uform_pixels_t){input->converted, height, width, 4 * width};
    return 1;
}

/* Reads one input; the objects it points into stay alive in the caller's tuple. */
static int uform_input_read_(PyObject *item, Py_ssize_t index, uform_input_t *input) {
    if (PyUnicode_Check(item)) {
        Py_ssize_t length = 0;
        char const *data = PyUnicode_AsUTF8AndSize(item, &length);
        if (!data) return 0;
        if (!length) {
            PyErr_Format(PyExc_ValueError, "input %zd is an empty text: nothing to encode", index);
            return 0;
        }
        input->text = (uform_text_t){(uint8_t const *)data, (size_t)length};
        return 1;
    }
    if (PyBytes_Check(item)) {
        if (!PyBytes_GET_SIZE(item)) {
            PyErr_Format(PyExc_ValueError, "input %zd is empty bytes: not an image", index);
            return 0;
        }
        input->is_image = 1;
        input->image.data = PyBytes_AS_STRING(item), input->image.size = (size_t)PyBytes_GET_SIZE(item);
        return 1;
    }
    if (PyArray_Check(item)) return uform_pixels_from_array_((PyArrayObject *)item, index, input);
    if (PyDict_Check(item)) {
        PyObject *image = PyDict_GetItemString(item, "image");
        if (!image || PyDict_Size(item) != 1) {
            PyErr_Format(PyExc_TypeError, "input %zd: a dict input is {'image': path or bytes}", index);
            return 0;
        }
        input->kept = Py_NewRef(image);
        if (PyBytes_Check(image) || PyArray_Check(image)) return uform_input_read_(image, index, input);
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(image, &encoded)) return 0;
        uform_failure_t failure = {0};
        char const *path = PyBytes_AS_STRING(encoded);
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, uform_image_read(path, &input->decoded));
        Py_END_ALLOW_THREADS
        Py_DECREF(encoded);
        if (failure.status != uform_ok_k) return uform_raise_(failure.status, failure.message), 0;
        input->is_image = 1;
        input->image.pixels = input->decoded;
        return 1;
    }
    PyErr_Format(PyExc_TypeError, "input %zd is %s; each input is %s", index, Py_TYPE(item)->tp_name, uform_input_kinds_);
    return 0;
}

static void uform_inputs_free_(uform_input_t *inputs, size_t count) {
    for (size_t i = 0; inputs && i < count; ++i) {
        if (inputs[i].decoded.rgba) uform_pixels_free(&inputs[i].decoded);
        free(inputs[i].converted);
        Py_XDECREF(inputs[i].kept);
    }
    free(inputs);
}

/* A tuple of the inputs: a snapshot, so another thread changing the caller's list cannot move them. */
static PyObject *uform_inputs_tuple_(PyObject *inputs, char const *what) {
    if (PyUnicode_Check(inputs) || PyBytes_Check(inputs) || PyDict_Check(inputs) || PyArray_Check(inputs))
        return PyTuple_Pack(1, inputs);
    if (!PyList_Check(inputs) && !PyTuple_Check(inputs)) {
        PyErr_Format(PyExc_TypeError, "%s are a list or tuple of inputs, or one input, not %s", what, Py_TYPE(inputs)->tp_name);
        return NULL;
    }
    PyObject *tuple = PySequence_Tuple(inputs);
    if (tuple && !PyTuple_GET_SIZE(tuple)) {
        Py_DECREF(tuple);
        PyErr_Format(PyExc_ValueError, "%s are empty: nothing to encode", what);
        return NULL;
    }
    return tuple;
}

/* The embedding width asked for: None for the widest, else one of the model's Matryoshka widths. */
static int uform_width_(uform_model_object_t *self, PyObject *value, size_t *width) {
    uform_config_t const *config = &self->config;
    *width = config->embedding_widths[config->embedding_widths_count - 1];
    if (value == Py_None) return 1;
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "width is an int or None, not %s", Py_TYPE(value)->tp_name);
        return 0;
    }
    long long asked = PyLong_AsLongLong(value);
    if (asked == -1 && PyErr_Occurred()) return 0;
    for (size_t i = 0; i < config->embedding_widths_count; ++i)
        if ((long long)config->embedding_widths[i] == asked) return *width = (size_t)asked, 1;
    PyObject *widths = PyList_New(0);
    for (size_t i = 0; widths && i < config->embedding_widths_count; ++i) {
        PyObject *number = PyLong_FromSize_t(config->embedding_widths[i]);
        if (number) PyList_Append(widths, number);
        Py_XDECREF(number);
    }
    if (widths) PyErr_Format(PyExc_ValueError, "width %lld is not one of this model's Matryoshka widths %R", asked, widths);
    Py_XDECREF(widths);
    return 0;
}

/* Fills `ranges` (allocated here) from a calibration: a path to a `uform calibrate` file, or a
 * mapping with "minimums" and "maximums" of `width` numbers each. */
static int uform_ranges_read_(PyObject *calibration, size_t width, uform_ranges_t *ranges) {
    PyObject *mapping = NULL;
    if (PyUnicode_Check(calibration) || PyBytes_Check(calibration) || PyObject_HasAttrString(calibration, "__fspath__")) {
        PyObject *io = PyImport_ImportModule("io"), *json = PyImport_ImportModule("json");
        PyObject *file = io ? PyObject_CallMethod(io, "open", "Os", calibration, "rb") : NULL;
        mapping = file ? PyObject_CallMethod(json, "load", "O", file) : NULL;
        if (file) Py_XDECREF(PyObject_CallMethod(file, "close", NULL));
        Py_XDECREF(file), Py_XDECREF(io), Py_XDECREF(json);
        if (!mapping) return 0;
    } else if (PyMapping_Check(calibration)) {
        mapping = Py_NewRef(calibration);
    } else {
        PyErr_Format(PyExc_TypeError, "calibration is a path to a `uform calibrate` file or a dict with 'minimums' and "
                                      "'maximums', not %s", Py_TYPE(calibration)->tp_name);
        return 0;
    }
    PyObject *names[2] = {PyUnicode_FromString("minimums"), PyUnicode_FromString("maximums")};
    float *columns[2] = {malloc(width * sizeof(float)), malloc(width * sizeof(float))};
    int good = names[0] && names[1] && columns[0] && columns[1];
    if (!good && !PyErr_Occurred()) PyErr_NoMemory();
    for (int side = 0; good && side < 2; ++side) {
        PyObject *values = PyMapping_Check(mapping) ? PyObject_GetItem(mapping, names[side]) : NULL;
        PyArrayObject *array = values ? (PyArrayObject *)PyArray_FROMANY(values, NPY_FLOAT32, 1, 1, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST) : NULL;
        if (!values || !array) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "calibration needs '%U' as a list of numbers", names[side]);
            good = 0;
        } else if ((size_t)PyArray_DIM(array, 0) != width) {
            PyErr_Format(PyExc_ValueError, "calibration holds ranges of width %zd; the embeddings are %zu wide (width=)",
                         PyArray_DIM(array, 0), width);
            good = 0;
        } else {
            memcpy(columns[side], PyArray_DATA(array), width * sizeof(float));
        }
        Py_XDECREF(array), Py_XDECREF(values);
    }
    Py_XDECREF(names[0]), Py_XDECREF(names[1]), Py_DECREF(mapping);
    if (!good) return free(columns[0]), free(columns[1]), 0;
    *ranges = (uform_ranges_t){columns[0], columns[1], width};
    return 1;
}

/* Embeds inputs[first, first + count) into rows of `embeddings`, texts and images each in one call. */
static uform_status_t uform_encode_batch_(uform_context_t *context, uform_input_t const *inputs, size_t count, size_t width,
                                          float *embeddings, float *scratch, uform_text_t *texts, uform_image_t *images,
                                          size_t *truncated) {
    size_t text_count = 0, image_count = 0;
    for (size_t i = 0; i < count; ++i)
        if (inputs[i].is_image) images[image_count++] = inputs[i].image;
        else texts[text_count++] = inputs[i].text;
    size_t cut = 0; /* the verbs set their count; the batches add theirs up */
    uform_status_t status = uform_ok_k;
    if (!image_count) status = uform_context_encode(context, texts, text_count, width, embeddings, &cut);
    else if (!text_count) status = uform_context_encode_images(context, images, image_count, width, embeddings);
    *truncated += cut;
    if (!image_count || !text_count) return status;
    status = uform_context_encode(context, texts, text_count, width, scratch, &cut);
    if (status == uform_ok_k) status = uform_context_encode_images(context, images, image_count, width, scratch + text_count * width);
    for (size_t i = 0, t = 0, m = text_count; status == uform_ok_k && i < count; ++i)
        memcpy(embeddings + i * width, scratch + (inputs[i].is_image ? m++ : t++) * width, width * sizeof(float));
    *truncated += cut;
    return status;
}

static PyObject *uform_model_encode_(uform_model_object_t *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"inputs", "batch_size", "width", "normalize", "output_precision", "calibration",
                               "show_progress", NULL};
    PyObject *given = NULL, *width_value = Py_None, *calibration = Py_None;
    Py_ssize_t batch_size = 256;
    int normalize = 1, show_progress = 0;
    char const *precision_name = "float32";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$nOpsOp:encode", keywords, &given, &batch_size, &width_value,
                                     &normalize, &precision_name, &calibration, &show_progress))
        return NULL;
    if (!uform_check_open_(self)) return NULL;
    size_t width;
    if (!uform_width_(self, width_value, &width)) return NULL;
    if (batch_size < 1) return PyErr_Format(PyExc_ValueError, "batch_size is at least 1, not %zd", batch_size);
    if (!normalize)
        return PyErr_Format(PyExc_ValueError, "normalize=False is not offered: the C ABI returns L2-normalized Matryoshka "
                                              "embeddings (each width renormalized) only");
    uform_output_precision_t precision;
    if (uform_output_precision_parse(precision_name, &precision) != uform_ok_k)
        return PyErr_Format(PyExc_ValueError, "output_precision is 'float32', 'int8', 'uint8', 'binary' or 'ubinary', not '%s'",
                            precision_name);
    int integers = precision == uform_output_int8_k || precision == uform_output_uint8_k;
    if (calibration != Py_None && !integers)
        return PyErr_Format(PyExc_ValueError, "calibration holds int8/uint8 ranges; output_precision '%s' takes none",
                            precision_name);

    PyObject *tuple = uform_inputs_tuple_(given, "inputs");
    if (!tuple) return NULL;
    size_t count = (size_t)PyTuple_GET_SIZE(tuple), batch = (size_t)batch_size < count ? (size_t)batch_size : count;
    uform_input_t *inputs = calloc(count, sizeof(uform_input_t));
    uform_text_t *texts = malloc(batch * sizeof(uform_text_t));
    uform_image_t *images = malloc(batch * sizeof(uform_image_t));
    float *scratch = malloc(batch * width * sizeof(float));
    uform_ranges_t ranges = {0};
    PyArrayObject *floats = NULL, *output = NULL;
    uform_context_t *context = NULL;
    int good = inputs && texts && images && scratch;
    if (!good) PyErr_NoMemory();
    for (size_t i = 0; good && i < count; ++i) good = uform_input_read_(PyTuple_GET_ITEM(tuple, i), (Py_ssize_t)i, &inputs[i]);
    if (good && calibration != Py_None) good = uform_ranges_read_(calibration, width, &ranges);
    npy_intp shape[2] = {(npy_intp)count, (npy_intp)width};
    if (good) good = (floats = (PyArrayObject *)PyArray_SimpleNew(2, shape, NPY_FLOAT32)) != NULL;
    if (good) good = (context = uform_borrow_(self)) != NULL;

    uform_failure_t failure = {0};
    size_t truncated = 0;
    float *rows = good ? PyArray_DATA(floats) : NULL;
    for (size_t first = 0; good && first < count; first += batch) {
        size_t size = count - first < batch ? count - first : batch;
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, uform_encode_batch_(context, inputs + first, size, width, rows + first * width, scratch,
                                                  texts, images, &truncated));
        Py_END_ALLOW_THREADS
        if (failure.status != uform_ok_k) good = 0, uform_raise_(failure.status, failure.message);
        else if (show_progress) PySys_FormatStderr("\ruform encode: %zu/%zu", first + size, count);
        if (good && PyErr_CheckSignals() < 0) good = 0;
    }
    if (show_progress && good) PySys_WriteStderr("\n");
    if (context) uform_give_back_(self, context);

    if (good && precision != uform_output_float32_k) {
        size_t bytes = 0;
        uform_output_bytes(precision, width, &bytes);
        npy_intp packed[2] = {(npy_intp)count, (npy_intp)bytes};
        int signed_ = precision == uform_output_int8_k || precision == uform_output_binary_k;
        good = (output = (PyArrayObject *)PyArray_SimpleNew(2, packed, signed_ ? NPY_INT8 : NPY_UINT8)) != NULL;
        if (good && integers && !ranges.minimums) { /* as the CLI: the ranges of the inputs themselves */
            ranges = (uform_ranges_t){malloc(width * sizeof(float)), malloc(width * sizeof(float)), width};
            if (!ranges.minimums || !ranges.maximums) good = 0, PyErr_NoMemory();
            else uform_note_(&failure, uform_calibrate(rows, count, width, &ranges));
        }
        if (good && failure.status == uform_ok_k)
            uform_note_(&failure, uform_quantize(rows, count, width, precision, integers ? &ranges : NULL, PyArray_DATA(output)));
        if (good && failure.status != uform_ok_k) good = 0, uform_raise_(failure.status, failure.message);
    }
    if (good && truncated) {
        if (PyErr_WarnFormat(PyExc_UserWarning, 1, "uform encode: %zu of %zu texts were longer than a row (%zu bytes) and "
                                                   "were cut", truncated, count, self->config.columns) < 0)
            good = 0;
    }
    uform_inputs_free_(inputs, count);
    free(texts), free(images), free(scratch), free(ranges.minimums), free(ranges.maximums);
    Py_DECREF(tuple);
    if (!good) return Py_XDECREF(floats), Py_XDECREF(output), NULL;
    if (output) return Py_DECREF(floats), (PyObject *)output;
    return (PyObject *)floats;
}

/* The query and documents of maxsim() and rerank(), checked; `tuple` keeps the documents alive. */
static int uform_rerank_inputs_(PyObject *query, PyObject *documents, uform_text_t *query_text, PyObject **tuple,
                                uform_text_t **texts) {
    Py_ssize_t length = 0;
    if (!PyUnicode_Check(query)) return PyErr_Format(PyExc_TypeError, "query is a str, not %s", Py_TYPE(query)->tp_name), 0;
    char const *data = PyUnicode_AsUTF8AndSize(query, &length);
    if (!data) return 0;
    if (!length) return PyErr_SetString(PyExc_ValueError, "the query is empty"), 0;
    *query_text = (uform_text_t){(uint8_t const *)data, (size_t)length};
    if (PyUnicode_Check(documents) || (!PyList_Check(documents) && !PyTuple_Check(documents)))
        return PyErr_Format(PyExc_TypeError, "documents are a list or tuple of str, not %s", Py_TYPE(documents)->tp_name), 0;
    if (!(*tuple = PySequence_Tuple(documents))) return 0;
    Py_ssize_t count = PyTuple_GET_SIZE(*tuple);
    if (!count) return PyErr_SetString(PyExc_ValueError, "documents are empty: nothing to score"), 0;
    if (!(*texts = malloc((size_t)count * sizeof(uform_text_t)))) return PyErr_NoMemory(), 0;
    for (Py_ssize_t i = 0; i < count; ++i) {
        PyObject *item = PyTuple_GET_ITEM(*tuple, i);
        if (!PyUnicode_Check(item))
            return PyErr_Format(PyExc_TypeError, "document %zd is %s; documents are str", i, Py_TYPE(item)->tp_name), 0;
        if (!(data = PyUnicode_AsUTF8AndSize(item, &length))) return 0;
        if (!length) return PyErr_Format(PyExc_ValueError, "document %zd is empty: nothing to score", i), 0;
        (*texts)[i] = (uform_text_t){(uint8_t const *)data, (size_t)length};
    }
    return 1;
}

/* MaxSim scores (`symmetric`: uform_rerank_symmetric's; `fuse` >= 0: uform_rerank_gated's at that weight and
 * gate) as a new float32 array, or NULL with an exception; `tuple` receives the documents. */
static PyArrayObject *uform_scores_(uform_model_object_t *self, PyObject *query, PyObject *documents, int symmetric,
                                    double fuse, size_t gate, PyObject **tuple) {
    if (!uform_check_open_(self)) return NULL;
    uform_text_t query_text, *texts = NULL;
    PyArrayObject *scores = NULL;
    uform_context_t *context = NULL;
    int good = uform_rerank_inputs_(query, documents, &query_text, tuple, &texts);
    npy_intp count = good ? PyTuple_GET_SIZE(*tuple) : 0;
    if (good) good = (scores = (PyArrayObject *)PyArray_SimpleNew(1, &count, NPY_FLOAT32)) != NULL;
    if (good) good = (context = uform_borrow_(self)) != NULL;
    uform_failure_t failure = {0};
    size_t truncated = 0;
    if (good) {
        float *out = PyArray_DATA(scores);
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, fuse >= 0    ? uform_context_rerank_gated(context, query_text, texts, (size_t)count, fuse, gate, out,
                                                                        &truncated)
                              : symmetric ? uform_context_rerank_symmetric(context, query_text, texts, (size_t)count, out, &truncated)
                                          : uform_context_rerank(context, query_text, texts, (size_t)count, out, &truncated));
        Py_END_ALLOW_THREADS
        uform_give_back_(self, context);
        if (failure.status != uform_ok_k) good = 0, uform_raise_(failure.status, failure.message);
    }
    if (good && truncated &&
        PyErr_WarnFormat(PyExc_UserWarning, 1, "uform rerank: %zu texts (the query counted) were longer than a row (%zu "
                                               "bytes) and were cut", truncated, self->config.columns) < 0)
        good = 0;
    free(texts);
    if (!good) Py_CLEAR(scores);
    return scores;
}

static PyObject *uform_model_maxsim_(uform_model_object_t *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"query", "documents", "symmetric", NULL};
    PyObject *query, *documents, *tuple = NULL;
    int symmetric = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$p:maxsim", keywords, &query, &documents, &symmetric)) return NULL;
    PyArrayObject *scores = uform_scores_(self, query, documents, symmetric, -1, 0, &tuple);
    Py_XDECREF(tuple);
    return (PyObject *)scores;
}

static PyObject *uform_model_colbert_(uform_model_object_t *self, PyObject *args) {
    PyObject *given;
    if (!PyArg_ParseTuple(args, "O:colbert", &given)) return NULL;
    if (!uform_check_open_(self)) return NULL;
    int single = PyUnicode_Check(given);
    if (!single && !PyList_Check(given) && !PyTuple_Check(given))
        return PyErr_Format(PyExc_TypeError, "text is a str or a list or tuple of str, not %s", Py_TYPE(given)->tp_name);
    PyObject *tuple = single ? PyTuple_Pack(1, given) : PySequence_Tuple(given); /* keeps the texts alive */
    if (!tuple) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(tuple);
    uform_text_t *texts = count ? malloc((size_t)count * sizeof(uform_text_t)) : NULL;
    size_t *offsets = malloc(((size_t)count + 1) * sizeof(size_t)), total = 0, cut = 0;
    PyObject *result = NULL;
    PyArrayObject *vectors = NULL;
    int good = offsets && (texts || !count);
    if (!good) PyErr_NoMemory();
    for (Py_ssize_t i = 0; good && i < count; ++i) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        Py_ssize_t length = 0;
        char const *data = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &length) : NULL;
        if (!PyUnicode_Check(item)) PyErr_Format(PyExc_TypeError, "text %zd is %s; texts are str", i, Py_TYPE(item)->tp_name);
        else if (data && !length) PyErr_Format(PyExc_ValueError, single ? "the text is empty" : "text %zd is empty", i);
        good = data && length;
        if (good) texts[i] = (uform_text_t){(uint8_t const *)data, (size_t)length};
        if (good) total += (size_t)length < self->config.columns ? (size_t)length : self->config.columns;
        if (good) cut += (size_t)length > self->config.columns;
    }
    if (good) {
        npy_intp shape[2] = {(npy_intp)total, (npy_intp)self->config.colbert_width};
        good = (vectors = (PyArrayObject *)PyArray_SimpleNew(2, shape, NPY_FLOAT32)) != NULL;
    }
    uform_context_t *context = good && count ? uform_borrow_(self) : NULL;
    if (context) {
        uform_failure_t failure = {0};
        float *out = PyArray_DATA(vectors);
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, uform_context_colbert_many(context, texts, (size_t)count, out, total, offsets));
        Py_END_ALLOW_THREADS
        uform_give_back_(self, context);
        if (failure.status != uform_ok_k) good = 0, uform_raise_(failure.status, failure.message);
    } else if (good && count) good = 0; /* uform_borrow_ raised */
    if (good && cut &&
        PyErr_WarnFormat(PyExc_UserWarning, 1, "uform colbert: %zu texts were longer than a row (%zu bytes) and were cut", cut,
                         self->config.columns) < 0)
        good = 0;
    if (good && single) result = (PyObject *)vectors, vectors = NULL;
    else if (good) { /* a view of the one array a text */
        result = PyList_New(count);
        for (Py_ssize_t i = 0; result && i < count; ++i) {
            PyObject *slice = PySlice_New(PyLong_FromSize_t(offsets[i]), PyLong_FromSize_t(offsets[i + 1]), NULL);
            PyObject *view = slice ? PyObject_GetItem((PyObject *)vectors, slice) : NULL;
            Py_XDECREF(slice);
            if (!view) Py_CLEAR(result);
            else PyList_SET_ITEM(result, i, view);
        }
    }
    Py_XDECREF(vectors), Py_DECREF(tuple);
    free(texts), free(offsets);
    return result;
}

typedef struct {
    float score;
    Py_ssize_t index;
} uform_ranked_t;

/* Higher scores first; ties keep the documents' order. */
static int uform_ranked_order_(void const *left, void const *right) {
    uform_ranked_t const *a = left, *b = right;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

static PyObject *uform_model_rerank_(uform_model_object_t *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"query", "documents", "top_k", "fuse", "fuse_gate", NULL};
    PyObject *query, *documents, *top_value = Py_None, *fuse_value = Py_None, *gate_value = Py_None, *tuple = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$OO:rerank", keywords, &query, &documents, &top_value, &fuse_value,
                                     &gate_value))
        return NULL;
    double fuse = -1;
    if (fuse_value != Py_None) {
        if (!PyFloat_Check(fuse_value) && (!PyLong_Check(fuse_value) || PyBool_Check(fuse_value)))
            return PyErr_Format(PyExc_TypeError, "fuse is a float or None, not %s", Py_TYPE(fuse_value)->tp_name);
        fuse = PyFloat_AsDouble(fuse_value);
        if (fuse == -1 && PyErr_Occurred()) return NULL;
        if (!(fuse > 0 && fuse <= 1)) return PyErr_Format(PyExc_ValueError, "fuse is a weight in (0, 1], not %g", fuse);
    }
    Py_ssize_t gate = 0;
    if (gate_value != Py_None) {
        if (!PyLong_Check(gate_value) || PyBool_Check(gate_value))
            return PyErr_Format(PyExc_TypeError, "fuse_gate is an int or None, not %s", Py_TYPE(gate_value)->tp_name);
        gate = PyLong_AsSsize_t(gate_value);
        if (gate == -1 && PyErr_Occurred()) return NULL;
        if (gate < 0 || gate > 1 << 20) return PyErr_Format(PyExc_ValueError, "fuse_gate is 0 to 1048576 bytes, not %zd", gate);
        if (gate && fuse < 0) return PyErr_Format(PyExc_ValueError, "fuse_gate needs fuse");
    }
    Py_ssize_t top_k = -1;
    if (top_value != Py_None) {
        if (!PyLong_Check(top_value) || PyBool_Check(top_value))
            return PyErr_Format(PyExc_TypeError, "top_k is an int or None, not %s", Py_TYPE(top_value)->tp_name);
        top_k = PyLong_AsSsize_t(top_value);
        if (top_k == -1 && PyErr_Occurred()) return NULL;
        if (top_k < 1) return PyErr_Format(PyExc_ValueError, "top_k is at least 1, not %zd", top_k);
    }
    PyArrayObject *scores = uform_scores_(self, query, documents, 0, fuse, (size_t)gate, &tuple);
    if (!scores) return Py_XDECREF(tuple), NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(tuple);
    uform_ranked_t *ranked = malloc((size_t)count * sizeof(uform_ranked_t));
    PyObject *results = ranked ? PyList_New(0) : PyErr_NoMemory();
    float const *values = PyArray_DATA(scores);
    for (Py_ssize_t i = 0; ranked && i < count; ++i) ranked[i] = (uform_ranked_t){values[i], i};
    if (ranked) qsort(ranked, (size_t)count, sizeof(uform_ranked_t), uform_ranked_order_);
    Py_ssize_t kept = top_k < 0 || top_k > count ? count : top_k;
    for (Py_ssize_t i = 0; results && i < kept; ++i) {
        PyObject *row = Py_BuildValue("{s:n,s:d,s:O}", "index", ranked[i].index, "score", (double)ranked[i].score, "text",
                                      PyTuple_GET_ITEM(tuple, ranked[i].index));
        if (!row || PyList_Append(results, row) < 0) Py_CLEAR(results);
        Py_XDECREF(row);
    }
    free(ranked);
    Py_DECREF(scores), Py_DECREF(tuple);
    return results;
}

static PyObject *uform_sizes_(size_t const *values, size_t count) {
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list && i < count; ++i) {
        PyObject *number = PyLong_FromSize_t(values[i]);
        if (!number) return Py_DECREF(list), NULL;
        PyList_SET_ITEM(list, (Py_ssize_t)i, number);
    }
    return list;
}

static PyObject *uform_model_info_(uform_model_object_t *self, void *closure) {
    if (!uform_check_open_(self)) return NULL;
    uform_config_t const *config = &self->config;
    char device_name[512] = "";
    if (uform_device_name(self->device, device_name, sizeof(device_name)) != uform_ok_k) device_name[0] = 0;
    PyObject *heads = PyList_New(0), *modalities = PyList_New(0);
    char const *head_names[] = {"pool", "rerank", "mlm"};
    for (size_t i = 0; heads && i < 3; ++i)
        if (uform_model_has_head(self->model, head_names[i])) {
            PyObject *name = PyUnicode_FromString(head_names[i]);
            if (!name || PyList_Append(heads, name) < 0) Py_CLEAR(heads);
            Py_XDECREF(name);
        }
    char const *modality_names[] = {"text", "image"};
    for (size_t i = 0; modalities && i < 2; ++i)
        if (!i || uform_model_has_head(self->model, "vision")) {
            PyObject *name = PyUnicode_FromString(modality_names[i]);
            if (!name || PyList_Append(modalities, name) < 0) Py_CLEAR(modalities);
            Py_XDECREF(name);
        }
    PyObject *widths = uform_sizes_(config->embedding_widths, config->embedding_widths_count);
    PyObject *info = heads && modalities && widths
                         ? Py_BuildValue("{s:s,s:n,s:n,s:n,s:n,s:O,s:n,s:n,s:n,s:O,s:O,s:s,s:s,s:s,s:O,s:O,s:s}", "tier",
                                         config->tier, "dims", (Py_ssize_t)config->embedding_widths[config->embedding_widths_count - 1],
                                         "width", (Py_ssize_t)config->width, "depth", (Py_ssize_t)config->depth, "heads",
                                         (Py_ssize_t)config->heads, "widths", widths, "colbert_width",
                                         (Py_ssize_t)config->colbert_width, "columns", (Py_ssize_t)config->columns,
                                         "parameters", (Py_ssize_t)uform_config_parameters(config), "heads_present", heads,
                                         "modalities", modalities, "device",
                                         self->device == uform_device_cuda_k ? "cuda" : "cpu", "device_name", device_name,
                                         "precision", uform_precision_name(self->precision), "path",
                                         self->path, "origin", self->origin, "version", uform_version())
                         : NULL;
    Py_XDECREF(heads), Py_XDECREF(modalities), Py_XDECREF(widths);
    return info;
}

static PyObject *uform_model_close_(uform_model_object_t *self, PyObject *unused) {
    if (self->busy)
        return PyErr_Format(PyExc_RuntimeError, "close(): %zu calls still run on this model in other threads", self->busy);
    uform_release_(self);
    Py_RETURN_NONE;
}

static PyObject *uform_model_enter_(uform_model_object_t *self, PyObject *unused) {
    if (!uform_check_open_(self)) return NULL;
    return Py_NewRef(self);
}

static PyObject *uform_model_exit_(uform_model_object_t *self, PyObject *args) { return uform_model_close_(self, NULL); }

static PyObject *uform_model_closed_(uform_model_object_t *self, void *closure) { return PyBool_FromLong(!self->model); }

static PyObject *uform_model_repr_(uform_model_object_t *self) {
    if (!self->model) return PyUnicode_FromString("<uform.Model closed>");
    return PyUnicode_FromFormat("<uform.Model %s, %s, %s, %R>", self->config.tier,
                                self->device == uform_device_cuda_k ? "cuda" : "cpu",
                                uform_precision_name(self->precision), self->path);
}

PyDoc_STRVAR(uform_encode_doc_,
             "encode(inputs, *, batch_size=256, width=None, normalize=True, output_precision='float32', calibration=None, "
             "show_progress=False)\n--\n\n"
             "Embeds texts and images into one space: a 2D array, one row per input, in input order.\n\n"
             "inputs: a str or a list/tuple of inputs; each a str (UTF-8 bytes, cut to a row), bytes (an encoded PNG, JPEG\n"
             "or WebP), {'image': path or bytes}, or a uint8 array of HxWx4 (used in place) or HxWx3 pixels. Images need\n"
             "a model with the vision frontend.\n"
             "width: a Matryoshka width of the model (info['widths']); None for the widest.\n"
             "normalize: rows are always L2-normalized (at the truncated width); False is refused.\n"
             "output_precision: 'float32' (float32 array), 'int8' / 'uint8' (one byte a dimension, from calibration\n"
             "ranges), 'binary' / 'ubinary' (sign bits packed, (width + 7) // 8 bytes a row), as `uform encode\n"
             "--output-precision` gives them.\n"
             "calibration: int8/uint8 ranges, a path to a `uform calibrate` file or a dict with 'minimums' and\n"
             "'maximums'; None takes each dimension's range over these inputs, as the CLI does.\n"
             "Runs with the GIL released; raises TypeError or ValueError for bad inputs, uform.Error for the library's\n"
             "failures (a broken image, a device error), and warns when texts were cut.");

PyDoc_STRVAR(uform_maxsim_doc_, "maxsim(query, documents, *, symmetric=False)\n--\n\n"
                                "MaxSim of each document against the query (a float32 array): the sum over the query's\n"
                                "bytes of the best cosine among the document's bytes, from the rerank head. Same\n"
                                "scores as `uform rerank`. symmetric=True: the mean over the shorter text's bytes of\n"
                                "each byte's best cosine among the other's, on the cosine's scale (`uform rerank --fuse`).");

PyDoc_STRVAR(uform_colbert_doc_, "colbert(text)\n--\n\n"
                                 "The text's per-byte ColBERT vectors from the rerank head: a float32 array [cells,\n"
                                 "colbert_width], each row L2-normalized, one row a byte (at most a row of the model's\n"
                                 "columns; longer texts are cut, with a warning); for a list of texts, a list of such arrays\n"
                                 "(one pass over many, uform_colbert_many). Store them and score pairs later with\n"
                                 "uform.maxsim_vectors, so a document scored against many queries is encoded once.");

PyDoc_STRVAR(uform_rerank_doc_, "rerank(query, documents, top_k=None, *, fuse=None, fuse_gate=None)\n--\n\n"
                                "Documents ranked by MaxSim against the query, best first (ties keep their order):\n"
                                "a list of {'index', 'score', 'text'}, the top_k best or all of them. fuse=W ranks by\n"
                                "(1 - W) pooled cosine + W symmetric MaxSim instead, as `uform rerank --fuse W`\n"
                                "(0.5 ranks best on the shipped model's dev pairs); fuse_gate=L then ranks a document\n"
                                "shorter than L bytes, for a query shorter too, by its cosine alone (`--fuse-gate L`).");

static PyMethodDef uform_model_methods_[] = {
    {"encode", (PyCFunction)(void (*)(void))uform_model_encode_, METH_VARARGS | METH_KEYWORDS, uform_encode_doc_},
    {"maxsim", (PyCFunction)(void (*)(void))uform_model_maxsim_, METH_VARARGS | METH_KEYWORDS, uform_maxsim_doc_},
    {"colbert", (PyCFunction)uform_model_colbert_, METH_VARARGS, uform_colbert_doc_},
    {"rerank", (PyCFunction)(void (*)(void))uform_model_rerank_, METH_VARARGS | METH_KEYWORDS, uform_rerank_doc_},
    {"close", (PyCFunction)uform_model_close_, METH_NOARGS,
     "close()\n--\n\nFrees the weights and contexts; later calls raise ValueError. Refused while another thread's call runs."},
    {"__enter__", (PyCFunction)uform_model_enter_, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)uform_model_exit_, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef uform_model_getset_[] = {
    {"info", (getter)uform_model_info_, NULL,
     "The configuration as a dict: tier, dims (the widest embedding), widths (the Matryoshka widths), width, depth,\n"
     "heads, colbert_width, columns (bytes a row), parameters, heads_present, modalities, device, device_name,\n"
     "precision, path, origin, version.", NULL},
    {"closed", (getter)uform_model_closed_, NULL, "Whether close() has run.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(uform_model_doc_,
             "Model(path=None, *, device='cpu', precision='bf16', threads=0)\n--\n\n"
             "A UForm encoder opened from a checkpoint folder (one holding model.safetensors, or the sharded\n"
             "layout: model.safetensors.index.json and its shards).\n\n"
             "path: the folder; None opens the folder of env UFORM_MODEL, else the default this package was built with\n"
             "(the demo embedder where scripts/setup.sh trained one before the build), else the untrained 128x2 of seed 0,\n"
             "with a warning; info['origin'] says which.\n"
             "device: 'cpu' or 'cuda' (a library built with the CUDA backend and a GPU; else uform.Error says why).\n"
             "precision: 'bf16' (products with BF16 inputs, Float32 accumulation) or 'f32' (CPU only).\n"
             "threads: host threads a call uses, 0 for all cores.\n\n"
             "Thread-safe: the weights are loaded once; each call borrows a context of its own (made on first need,\n"
             "then reused), so calls from several threads run at once, each with `threads` threads. close() is\n"
             "refused while a call runs; a closed model raises ValueError. Also a context manager.");

static PyTypeObject uform_model_type_ = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "uform.Model",
    .tp_basicsize = sizeof(uform_model_object_t),
    .tp_dealloc = (destructor)uform_model_dealloc_,
    .tp_repr = (reprfunc)uform_model_repr_,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = uform_model_doc_,
    .tp_methods = uform_model_methods_,
    .tp_getset = uform_model_getset_,
    .tp_init = (initproc)uform_model_init_,
    .tp_new = PyType_GenericNew,
};

static PyObject *uform_calibrate_(PyObject *module, PyObject *args) {
    PyObject *given;
    if (!PyArg_ParseTuple(args, "O:calibrate", &given)) return NULL;
    PyArrayObject *embeddings = (PyArrayObject *)PyArray_FROMANY(given, NPY_FLOAT32, 2, 2, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    if (!embeddings) return NULL;
    size_t count = (size_t)PyArray_DIM(embeddings, 0), width = (size_t)PyArray_DIM(embeddings, 1);
    npy_intp shape = (npy_intp)width;
    PyArrayObject *minimums = (PyArrayObject *)PyArray_SimpleNew(1, &shape, NPY_FLOAT32);
    PyArrayObject *maximums = (PyArrayObject *)PyArray_SimpleNew(1, &shape, NPY_FLOAT32);
    PyObject *result = NULL;
    if (minimums && maximums) {
        uform_ranges_t ranges = {PyArray_DATA(minimums), PyArray_DATA(maximums), width};
        uform_failure_t failure = {0};
        float const *rows = PyArray_DATA(embeddings);
        Py_BEGIN_ALLOW_THREADS
        uform_note_(&failure, uform_calibrate(rows, count, width, &ranges));
        Py_END_ALLOW_THREADS
        if (failure.status != uform_ok_k) uform_raise_(failure.status, failure.message);
        else result = Py_BuildValue("{s:n,s:n,s:O,s:O}", "width", (Py_ssize_t)width, "count", (Py_ssize_t)count,
                                    "minimums", minimums, "maximums", maximums);
    }
    Py_XDECREF(minimums), Py_XDECREF(maximums), Py_DECREF(embeddings);
    return result;
}

static PyObject *uform_maxsim_vectors_(PyObject *module, PyObject *args, PyObject *kwargs) {
    (void)module;
    static char *keywords[] = {"query", "document", "symmetric", NULL};
    PyObject *query_given, *document_given;
    int symmetric = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$p:maxsim_vectors", keywords, &query_given, &document_given, &symmetric))
        return NULL;
    PyArrayObject *query = (PyArrayObject *)PyArray_FROMANY(query_given, NPY_FLOAT32, 2, 2, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    if (!query) return NULL;
    PyArrayObject *document = (PyArrayObject *)PyArray_FROMANY(document_given, NPY_FLOAT32, 2, 2, NPY_ARRAY_CARRAY | NPY_ARRAY_FORCECAST);
    if (!document) return Py_DECREF(query), NULL;
    PyObject *result = NULL;
    size_t width = (size_t)PyArray_DIM(query, 1);
    if ((size_t)PyArray_DIM(document, 1) != width)
        PyErr_Format(PyExc_ValueError, "the query's vectors are %zu wide and the document's %zd: both come from one model's colbert()",
                     width, (Py_ssize_t)PyArray_DIM(document, 1));
    else if (!PyArray_DIM(query, 0) || !PyArray_DIM(document, 0) || !width)
        PyErr_SetString(PyExc_ValueError, "the query and the document each need at least one vector of nonzero width");
    else {
        float score = 0;
        uform_failure_t failure = {0};
        uform_note_(&failure, uform_maxsim(PyArray_DATA(query), (size_t)PyArray_DIM(query, 0), PyArray_DATA(document),
                                           (size_t)PyArray_DIM(document, 0), width, symmetric, &score));
        if (failure.status != uform_ok_k) uform_raise_(failure.status, failure.message);
        else result = PyFloat_FromDouble(score);
    }
    Py_DECREF(query), Py_DECREF(document);
    return result;
}

static PyMethodDef uform_functions_[] = {
    {"maxsim_vectors", (PyCFunction)(void (*)(void))uform_maxsim_vectors_, METH_VARARGS | METH_KEYWORDS,
     "maxsim_vectors(query, document, *, symmetric=False)\n--\n\nMaxSim of stored ColBERT vectors (Model.colbert's, float32\n"
     "[cells, colbert_width]): the sum over the query's rows of each one's best dot product among the document's, as\n"
     "Model.maxsim scores the texts; symmetric=True the mean from the shorter side, as maxsim(symmetric=True)."},
    {"calibrate", uform_calibrate_, METH_VARARGS,
     "calibrate(embeddings)\n--\n\nint8/uint8 ranges of float32 embeddings (count x width): {'width', 'count',\n"
     "'minimums', 'maximums'}, each dimension's minimum and maximum, as `uform calibrate` writes them; pass it\n"
     "to encode(calibration=...)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef uform_module_ = {
    PyModuleDef_HEAD_INIT, "uform._uform", "The C extension of the uform package, over libuform's C ABI.", -1,
    uform_functions_,
};

PyMODINIT_FUNC PyInit__uform(void) {
    import_array();
    if (PyType_Ready(&uform_model_type_) < 0) return NULL;
    PyObject *module = PyModule_Create(&uform_module_);
    if (!module) return NULL;
    uform_error_ = PyErr_NewExceptionWithDoc("uform.Error", "A failure of the UForm library: the message is the C library's "
                                             "(uform_last_error), `status` its status name.", PyExc_RuntimeError, NULL);
    if (!uform_error_ || PyModule_AddObjectRef(module, "Error", uform_error_) < 0 ||
        PyModule_AddObjectRef(module, "Model", (PyObject *)&uform_model_type_) < 0 ||
        PyModule_AddStringConstant(module, "library_version", uform_version()) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
