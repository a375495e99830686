// The "neuron" PJRT C API plugin: NeuronCore devices whose compile step is our backend compiler and
// whose execute step is our emulator, both in Python (neuron_customcall.pjrt.service).
//
// Why C++ holds buffers and devices but Python compiles and runs: the frameworks (jaxlib,
// torch_xla) only speak the PJRT C API, and they run inside a Python process, so the plugin asks
// the service module for the work it already knows how to do. Every call into Python takes the GIL
// with PyGILState_Ensure, which works from any thread, with or without the GIL already held by
// the caller; nothing in this file waits for another thread while holding the GIL, and all events
// are complete when handed out, so no call can deadlock on the plugin's side.
//
// Buffers live in host memory as NumPy arrays owned (one reference each) by the PJRT_Buffer: an
// execute hands the arrays themselves to the emulator and keeps its result arrays as the outputs,
// so nothing is copied between a framework's buffers and the emulator, and a Python reference kept
// anywhere keeps the memory alive (no dangling views). Host transfers are one memcpy each way.
//
// Every slot of the function table is filled: the calls we do not support return a PJRT error
// naming the call (kUnimplemented), never a null pointer.
#define PY_SSIZE_T_CLEAN  // the "#" formats of PyArg_ParseTuple take Py_ssize_t lengths
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "pjrt_abi.h"

namespace {

using namespace abi;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------
}  // namespace

struct abi::Error {
  ErrorCode code;
  std::string message;
};

namespace {

Error* MakeError(ErrorCode code, std::string message) {
  return new Error{code, "neuron: " + std::move(message)};
}

const char* const kSlotNames[] = {
#define NPJRT_NAME(n) "PJRT_" #n,
    NPJRT_API_NAMES(NPJRT_NAME)
#undef NPJRT_NAME
};

template <int N>
Error* Unsupported(void*) {
  return MakeError(kUnimplemented, std::string(kSlotNames[N]) +
                                       " is not supported by the neuron PJRT plugin");
}

void ErrorDestroy(ErrorDestroyArgs* a) { delete a->error; }

void ErrorMessage(ErrorMessageArgs* a) {
  a->message = a->error->message.data();
  a->message_size = a->error->message.size();
}

Error* ErrorGetCode(ErrorGetCodeArgs* a) {
  a->code = a->error->code;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The Python side: one module, reached under the GIL from any thread.
// ---------------------------------------------------------------------------------------------

// Set by an atexit handler (registered when the service is imported, so it runs before jax's own
// exit handlers destroy clients and buffers): from then on the plugin never takes the GIL. A thread
// that waits for the GIL while the interpreter finalises is ended by CPython with pthread_exit,
// which kills the process from a C++ thread ("terminate called without an active exception");
// releases at exit therefore leak their arrays instead, and compile/execute return an error.
std::atomic<bool> g_exiting{false};

bool PythonUsable() { return !g_exiting.load() && Py_IsInitialized() && !_Py_IsFinalizing(); }

PyObject* OnPythonExit(PyObject*, PyObject*) {
  g_exiting = true;
  Py_RETURN_NONE;
}

PyMethodDef kOnPythonExit = {"neuron_pjrt_at_exit", OnPythonExit, METH_NOARGS,
                             "Stops the neuron PJRT plugin from entering Python at interpreter exit."};

class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

// A strong reference released under the GIL.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(PyObject* o) : o_(o) {}  // steals
  PyRef(PyRef&& other) noexcept : o_(other.o_) { other.o_ = nullptr; }
  PyRef& operator=(PyRef&& other) noexcept {
    std::swap(o_, other.o_);
    return *this;
  }
  PyRef(const PyRef&) = delete;
  ~PyRef() { Reset(); }
  // Caller need not hold the GIL.
  void Reset() {
    if (o_ == nullptr) return;
    if (PythonUsable()) {
      Gil gil;
      Py_DECREF(o_);
    }
    o_ = nullptr;
  }
  // Caller holds the GIL.
  void ResetLocked() {
    Py_XDECREF(o_);
    o_ = nullptr;
  }
  PyObject* get() const { return o_; }
  // Hands the reference over to the caller.
  PyObject* release() {
    PyObject* o = o_;
    o_ = nullptr;
    return o;
  }
  explicit operator bool() const { return o_ != nullptr; }

 private:
  PyObject* o_ = nullptr;
};

PyObject* g_service = nullptr;  // neuron_customcall.pjrt.service, imported once (GIL held)

// The pending Python exception as a PJRT error (GIL held). The service formats it (kernel name,
// user's source line) and chooses the code; a failure of that formatting still gives the text.
Error* ErrorFromPython(const char* what) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string message = std::string(what) + " failed";
  ErrorCode code = kInternal;
  PyObject* formatted = nullptr;
  if (g_service != nullptr && value != nullptr) {
    formatted = PyObject_CallMethod(g_service, "describe_error", "O", value);
  }
  if (formatted != nullptr && PyTuple_Check(formatted) && PyTuple_Size(formatted) == 2) {
    long c = PyLong_AsLong(PyTuple_GetItem(formatted, 0));
    const char* text = PyUnicode_AsUTF8(PyTuple_GetItem(formatted, 1));
    if (c > 0 && c <= 16) code = static_cast<ErrorCode>(c);
    if (text != nullptr) message = text;
  } else if (value != nullptr) {
    PyErr_Clear();
    PyObject* s = PyObject_Str(value);
    const char* text = s ? PyUnicode_AsUTF8(s) : nullptr;
    if (text != nullptr) message += std::string(": ") + text;
    Py_XDECREF(s);
  }
  PyErr_Clear();
  Py_XDECREF(formatted);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return new Error{code, message};
}

// Imports the service (GIL held). nullptr on success.
Error* EnsureService() {
  if (g_service != nullptr) return nullptr;
  g_service = PyImport_ImportModule("neuron_customcall.pjrt.service");
  if (g_service == nullptr) return ErrorFromPython("importing neuron_customcall.pjrt.service");
  PyRef atexit(PyImport_ImportModule("atexit"));
  PyRef hook(PyCFunction_New(&kOnPythonExit, nullptr));
  PyRef done(atexit && hook ? PyObject_CallMethod(atexit.get(), "register", "O", hook.get()) : nullptr);
  atexit.ResetLocked();
  hook.ResetLocked();
  if (!done) return ErrorFromPython("registering the neuron PJRT plugin's exit handler");
  done.ResetLocked();
  return nullptr;
}

Error* RequirePython() {
  if (g_exiting.load() || (Py_IsInitialized() && _Py_IsFinalizing())) {
    return MakeError(kFailedPrecondition, "the Python interpreter is exiting; the neuron device no longer runs programs");
  }
  if (!Py_IsInitialized()) {
    return MakeError(kFailedPrecondition,
                     "the neuron PJRT plugin runs inside a Python process (its compiler and "
                     "emulator are Python); no interpreter is running");
  }
  return nullptr;
}

// Element sizes in bits as buffers hold them, by BufferType (0: not an array type we hold).
// Sub-byte types (s4, u4, s2, u2, f4e2m1fn) take one byte per element, unpacked: the layout of
// ml_dtypes' arrays, of the host buffers jaxlib hands over and of the emulator's values.
int ElementBits(BufferType t) {
  switch (t) {
    case kPred: case kS8: case kU8: case kF8E5M2: case kF8E4M3FN: case kF8E4M3B11FNUZ:
    case kF8E5M2FNUZ: case kF8E4M3FNUZ: case kF8E4M3: case kF8E3M4: case kF8E8M0FNU:
    case kS4: case kU4: case kS2: case kU2: case kF4E2M1FN:
      return 8;
    case kS16: case kU16: case kF16: case kBF16:
      return 16;
    case kS32: case kU32: case kF32:
      return 32;
    case kS64: case kU64: case kF64: case kC64:
      return 64;
    case kC128:
      return 128;
    default:
      return 0;  // sub-byte, token, invalid
  }
}

std::string Join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Events: complete when handed out, or completed later (a zero-copy host buffer's "done").
// ---------------------------------------------------------------------------------------------
}  // namespace

struct abi::Event {
  // Held by the framework's handle and, for a zero-copy host buffer's "done", by the HostLoan
  // that completes it later: the framework may destroy its handle before then.
  std::atomic<int> refs{1};
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::unique_ptr<Error> error;
  std::vector<std::pair<OnReadyCallback, void*>> callbacks;

  void Set(Error* e) {
    std::vector<std::pair<OnReadyCallback, void*>> todo;
    {
      std::lock_guard<std::mutex> l(mu);
      if (ready) return;
      ready = true;
      error.reset(e);
      todo.swap(callbacks);
    }
    cv.notify_all();
    for (auto& [cb, arg] : todo) cb(CopyError(), arg);
  }
  Error* CopyError() {
    return error ? new Error(*error) : nullptr;
  }
  void Unref() {
    if (refs.fetch_sub(1) == 1) delete this;
  }
};

namespace {

Event* ReadyEvent(Error* e = nullptr) {
  Event* ev = new Event;
  ev->Set(e);
  return ev;
}

Error* EventDestroy(EventArgs* a) {
  a->event->Unref();
  return nullptr;
}

Error* EventIsReady(EventIsReadyArgs* a) {
  std::lock_guard<std::mutex> l(a->event->mu);
  a->is_ready = a->event->ready;
  return nullptr;
}

Error* EventError(EventArgs* a) {
  std::lock_guard<std::mutex> l(a->event->mu);
  return a->event->CopyError();
}

Error* EventAwait(EventArgs* a) {
  std::unique_lock<std::mutex> l(a->event->mu);
  a->event->cv.wait(l, [&] { return a->event->ready; });
  return a->event->CopyError();
}

Error* EventOnReady(EventOnReadyArgs* a) {
  Event* ev = a->event;
  {
    std::lock_guard<std::mutex> l(ev->mu);
    if (!ev->ready) {
      ev->callbacks.emplace_back(a->callback, a->user_arg);
      return nullptr;
    }
  }
  a->callback(ev->CopyError(), a->user_arg);
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Client, devices, memories
// ---------------------------------------------------------------------------------------------
}  // namespace

struct abi::Memory {
  int id = 0;
  Device* device = nullptr;
  std::string kind = "device";
  std::string debug_string, to_string;
};

struct abi::Device {
  int id = 0;             // global id (over every process of the world)
  int hardware_id = 0;    // the NeuronCore's index on the host (NEURON_RT_VISIBLE_CORES); -1: another process's
  int process_index = 0;  // the process that owns it
  bool addressable = true;
  Client* client = nullptr;
  Memory memory;
  Memory* memory_list[1] = {nullptr};  // PJRT_Device_AddressableMemories: its one memory space
  std::string kind, debug_string, to_string;
  int64_t hbm_bytes = 0;  // bytes_limit: the core's share of its chip's HBM (the platform's; service.client_info)
  std::vector<NamedValue> attributes;
  std::vector<std::string> attribute_strings;
  std::atomic<int64_t> bytes_in_use{0};
  std::atomic<int64_t> peak_bytes_in_use{0};
  std::atomic<int64_t> num_allocs{0};
  std::atomic<int64_t> largest_alloc{0};
  void Account(int64_t delta) {
    int64_t now = bytes_in_use += delta;
    if (delta > 0) {
      ++num_allocs;
      int64_t peak = peak_bytes_in_use.load();
      while (now > peak && !peak_bytes_in_use.compare_exchange_weak(peak, now)) {}
      int64_t largest = largest_alloc.load();
      while (delta > largest && !largest_alloc.compare_exchange_weak(largest, delta)) {}
    }
  }
};

struct abi::Client {
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device*> devices;      // every device of the world, by global id
  std::vector<Device*> addressable;  // this process's
  std::vector<Memory*> memories;     // this process's devices' memories
  int process_index = 0;
  std::string platform_name = "neuron";
  std::string platform_version;
};

namespace {

NamedValue StringValue(const char* name, const std::string& value) {
  NamedValue v{};
  v.struct_size = sizeof(NamedValue);
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = kString;
  v.string_value = value.data();
  v.value_size = value.size();
  return v;
}

NamedValue IntValue(const char* name, int64_t value) {
  NamedValue v{};
  v.struct_size = sizeof(NamedValue);
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = kInt64;
  v.int64_value = value;
  v.value_size = 1;
  return v;
}

// The client's create options as a Python dict (GIL held): integers, strings, booleans, floats.
PyObject* OptionsDict(const NamedValue* options, size_t n) {
  PyObject* dict = PyDict_New();
  if (dict == nullptr) return nullptr;
  for (size_t i = 0; i < n; ++i) {
    const NamedValue& v = options[i];
    PyObject* value = nullptr;
    switch (v.type) {
      case kInt64: value = PyLong_FromLongLong(v.int64_value); break;
      case kString: value = PyUnicode_FromStringAndSize(v.string_value, static_cast<Py_ssize_t>(v.value_size)); break;
      case kBool: value = PyBool_FromLong(v.bool_value); break;
      case kFloat: value = PyFloat_FromDouble(v.float_value); break;
      default: continue;  // int64 lists: none the plugin reads
    }
    PyObject* key = value ? PyUnicode_FromStringAndSize(v.name, static_cast<Py_ssize_t>(v.name_size)) : nullptr;
    int failed = key == nullptr || PyDict_SetItem(dict, key, value) != 0;
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (failed) {
      Py_DECREF(dict);
      return nullptr;
    }
  }
  return dict;
}

// Asks the service for the devices of this process's world: a list of (global id, process index,
// hardware id, kind); this process's own are addressable.
// ---------------------------------------------------------------------------------------------
// The framework's key-value store, offered to Python (neuron_customcall/distributed/kv_store.py)
// as three functions over bytes. The callbacks block (a get waits for the key), so the GIL is
// released around them. They stay valid while the framework's client lives: ClientDestroy of the
// client that brought them clears them, and a later call is an error naming that.
// ---------------------------------------------------------------------------------------------

struct KvStore {
  KvGetFn get = nullptr;
  void* get_arg = nullptr;
  KvPutFn put = nullptr;
  void* put_arg = nullptr;
  KvTryGetFn try_get = nullptr;
  void* try_get_arg = nullptr;
  const Client* owner = nullptr;
};
std::mutex g_kv_mutex;
KvStore g_kv;

Error* KvCallbackError(ErrorCode code, const char* message, size_t message_size) {
  return new Error{code, std::string(message, message_size)};
}
CallbackErrorFn g_kv_callback_error = &KvCallbackError;

KvStore CurrentKv() {
  std::lock_guard<std::mutex> lock(g_kv_mutex);
  return g_kv;
}

// A failed callback as a Python exception (GIL held): TimeoutError for an expired wait, KeyError
// for a missing key, RuntimeError otherwise, with the store's message.
PyObject* RaiseKvError(Error* e, const char* what, const std::string& key) {
  std::string text = std::string("the framework's key-value store: ") + what + " '" + key + "': " + e->message;
  PyObject* type = e->code == kDeadlineExceeded ? PyExc_TimeoutError : e->code == kNotFound ? PyExc_KeyError
                                                                                               : PyExc_RuntimeError;
  delete e;
  PyErr_SetString(type, text.c_str());
  return nullptr;
}

PyObject* KvGone() {
  PyErr_SetString(PyExc_RuntimeError, "the framework's key-value store is gone (its client was destroyed)");
  return nullptr;
}

PyObject* KvGet(PyObject*, PyObject* args) {
  const char* key;
  Py_ssize_t key_size;
  int timeout_ms;
  if (!PyArg_ParseTuple(args, "y#i", &key, &key_size, &timeout_ms)) return nullptr;
  KvStore kv = CurrentKv();
  if (kv.get == nullptr) return KvGone();
  KvGetArgs a{};
  a.struct_size = sizeof(a);
  a.key = key;
  a.key_size = static_cast<size_t>(key_size);
  a.timeout_in_ms = timeout_ms;
  a.callback_error = &g_kv_callback_error;
  a.user_arg = kv.get_arg;
  Error* e;
  Py_BEGIN_ALLOW_THREADS e = kv.get(&a);
  Py_END_ALLOW_THREADS
  if (e != nullptr) return RaiseKvError(e, "get", std::string(key, key_size));
  PyObject* value = PyBytes_FromStringAndSize(a.value, static_cast<Py_ssize_t>(a.value_size));
  if (a.value_deleter_callback != nullptr) a.value_deleter_callback(a.value);
  return value;
}

PyObject* KvTryGet(PyObject*, PyObject* args) {
  const char* key;
  Py_ssize_t key_size;
  if (!PyArg_ParseTuple(args, "y#", &key, &key_size)) return nullptr;
  KvStore kv = CurrentKv();
  if (kv.try_get == nullptr) {
    if (kv.get == nullptr) return KvGone();
    PyErr_SetString(PyExc_NotImplementedError, "the framework's key-value store has no try-get");
    return nullptr;
  }
  KvTryGetArgs a{};
  a.struct_size = sizeof(a);
  a.key = key;
  a.key_size = static_cast<size_t>(key_size);
  a.callback_error = &g_kv_callback_error;
  a.user_arg = kv.try_get_arg;
  Error* e;
  Py_BEGIN_ALLOW_THREADS e = kv.try_get(&a);
  Py_END_ALLOW_THREADS
  if (e != nullptr && e->code == kNotFound) {
    delete e;
    Py_RETURN_NONE;
  }
  if (e != nullptr) return RaiseKvError(e, "try-get", std::string(key, key_size));
  PyObject* value = PyBytes_FromStringAndSize(a.value, static_cast<Py_ssize_t>(a.value_size));
  if (a.value_deleter_callback != nullptr) a.value_deleter_callback(a.value);
  return value;
}

PyObject* KvPut(PyObject*, PyObject* args) {
  const char *key, *value;
  Py_ssize_t key_size, value_size;
  if (!PyArg_ParseTuple(args, "y#y#", &key, &key_size, &value, &value_size)) return nullptr;
  KvStore kv = CurrentKv();
  if (kv.put == nullptr) return KvGone();
  KvPutArgs a{};
  a.struct_size = sizeof(a);
  a.key = key;
  a.key_size = static_cast<size_t>(key_size);
  a.value = value;
  a.value_size = static_cast<size_t>(value_size);
  a.callback_error = &g_kv_callback_error;
  a.user_arg = kv.put_arg;
  Error* e;
  Py_BEGIN_ALLOW_THREADS e = kv.put(&a);
  Py_END_ALLOW_THREADS
  if (e != nullptr) return RaiseKvError(e, "put", std::string(key, key_size));
  Py_RETURN_NONE;
}

PyMethodDef kKvGet = {"neuron_pjrt_kv_get", KvGet, METH_VARARGS, "kv_get(key: bytes, timeout_ms: int) -> bytes"};
PyMethodDef kKvTryGet = {"neuron_pjrt_kv_try_get", KvTryGet, METH_VARARGS, "kv_try_get(key: bytes) -> bytes | None"};
PyMethodDef kKvPut = {"neuron_pjrt_kv_put", KvPut, METH_VARARGS, "kv_put(key: bytes, value: bytes) -> None"};

// (get, put, try_get or None) when the framework passed a store, else None (GIL held).
PyObject* KvFunctions(const ClientCreateArgs* a) {
  bool has_try_get = a->struct_size >= offsetof(ClientCreateArgs, kv_try_get_user_arg) + sizeof(void*) &&
                     a->kv_try_get_callback != nullptr;
  if (a->kv_get_callback == nullptr || a->kv_put_callback == nullptr) Py_RETURN_NONE;
  PyObject* get = PyCFunction_New(&kKvGet, nullptr);
  PyObject* put = PyCFunction_New(&kKvPut, nullptr);
  PyObject* try_get = has_try_get ? PyCFunction_New(&kKvTryGet, nullptr) : (Py_INCREF(Py_None), Py_None);
  if (get == nullptr || put == nullptr || try_get == nullptr) {
    Py_XDECREF(get);
    Py_XDECREF(put);
    Py_XDECREF(try_get);
    return nullptr;
  }
  return Py_BuildValue("(NNN)", get, put, try_get);
}

// owner nullptr: the client being created (set once it exists)
void KeepKv(const ClientCreateArgs* a) {
  if (a->kv_get_callback == nullptr || a->kv_put_callback == nullptr) return;
  bool has_try_get = a->struct_size >= offsetof(ClientCreateArgs, kv_try_get_user_arg) + sizeof(void*);
  std::lock_guard<std::mutex> lock(g_kv_mutex);
  g_kv = KvStore{a->kv_get_callback, a->kv_get_user_arg, a->kv_put_callback, a->kv_put_user_arg,
                 has_try_get ? a->kv_try_get_callback : nullptr, has_try_get ? a->kv_try_get_user_arg : nullptr,
                 nullptr};
}

void ForgetKv(const Client* client) {
  std::lock_guard<std::mutex> lock(g_kv_mutex);
  if (g_kv.owner == client && g_kv.get != nullptr) g_kv = KvStore{};
}

Error* CreateClient(const ClientCreateArgs* a, Client** out) {
  if (Error* e = RequirePython()) return e;
  Gil gil;
  if (Error* e = EnsureService()) return e;
  PyRef options(OptionsDict(a->create_options, a->num_options));
  if (!options) return ErrorFromPython("reading the client's create options");
  PyRef kv(KvFunctions(a));
  if (!kv) return ErrorFromPython("offering the framework's key-value store");
  KeepKv(a);  // usable from here: client_info may already rendezvous through them
  PyRef info(PyObject_CallMethod(g_service, "client_info", "OO", options.get(), kv.get()));
  options.ResetLocked();
  kv.ResetLocked();
  if (!info) return ErrorFromPython("client_info");
  auto client = std::make_unique<Client>();
  PyObject* version = PyDict_GetItemString(info.get(), "platform_version");
  PyObject* process = PyDict_GetItemString(info.get(), "process_index");
  PyObject* devices = PyDict_GetItemString(info.get(), "devices");
  // the platform's chip (emulator/platforms.py): logical cores a chip, HBM bytes a core
  PyObject* per_chip = PyDict_GetItemString(info.get(), "cores_per_chip");
  PyObject* hbm = PyDict_GetItemString(info.get(), "hbm_bytes_per_core");
  if (version == nullptr || process == nullptr || devices == nullptr || !PyList_Check(devices) ||
      per_chip == nullptr || hbm == nullptr) {
    return MakeError(kInternal, "client_info returned a malformed description");
  }
  client->platform_version = PyUnicode_AsUTF8(version);
  client->process_index = static_cast<int>(PyLong_AsLong(process));
  const int cores_per_chip = static_cast<int>(PyLong_AsLong(per_chip));
  const int64_t hbm_bytes = static_cast<int64_t>(PyLong_AsLongLong(hbm));
  if (cores_per_chip < 1) return MakeError(kInternal, "client_info: malformed cores_per_chip");
  Py_ssize_t n = PyList_Size(devices);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* dev = PyList_GetItem(devices, i);  // (global id, process index, hardware id, kind)
    if (!PyTuple_Check(dev) || PyTuple_Size(dev) != 4) return MakeError(kInternal, "client_info: malformed device");
    auto d = std::make_unique<Device>();
    d->id = static_cast<int>(PyLong_AsLong(PyTuple_GetItem(dev, 0)));
    d->process_index = static_cast<int>(PyLong_AsLong(PyTuple_GetItem(dev, 1)));
    d->hardware_id = static_cast<int>(PyLong_AsLong(PyTuple_GetItem(dev, 2)));
    const char* kind = PyUnicode_AsUTF8(PyTuple_GetItem(dev, 3));
    if (kind == nullptr || d->id != static_cast<int>(i)) return MakeError(kInternal, "client_info: malformed device");
    d->kind = kind;
    d->hbm_bytes = hbm_bytes;
    d->addressable = d->process_index == client->process_index;
    d->client = client.get();
    std::string where = d->addressable ? "core=" + std::to_string(d->hardware_id)
                                       : "process=" + std::to_string(d->process_index);
    d->debug_string = "NeuronCore(id=" + std::to_string(d->id) + ", " + where + ", kind=" + d->kind + ")";
    d->to_string = "NeuronDevice(id=" + std::to_string(d->id) + ")";
    d->memory.id = d->id;
    d->memory.device = d.get();
    d->memory.debug_string = "device memory of NeuronCore " + std::to_string(d->id) + " (HBM, host-emulated)";
    d->memory.to_string = "MEMORY_SPACE(device, id=" + std::to_string(d->id) + ")";
    d->memory_list[0] = &d->memory;
    d->attribute_strings = {d->kind};
    int hw = d->addressable ? d->hardware_id : 0;
    d->attributes = {IntValue("core_on_chip", hw % cores_per_chip),
                     IntValue("chip_id", hw / cores_per_chip),
                     IntValue("neuron_core_index", d->hardware_id),
                     StringValue("neuron_core_version", d->attribute_strings[0])};
    client->devices.push_back(d.get());
    if (d->addressable) {
      client->addressable.push_back(d.get());
      client->memories.push_back(&d->memory);
    }
    client->owned.push_back(std::move(d));
  }
  if (PyErr_Occurred()) return ErrorFromPython("client_info");
  if (client->addressable.empty()) {
    return MakeError(kFailedPrecondition, "no NeuronCore is visible (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES)");
  }
  {
    std::lock_guard<std::mutex> lock(g_kv_mutex);
    if (g_kv.owner == nullptr && g_kv.get == a->kv_get_callback) g_kv.owner = client.get();
  }
  *out = client.release();
  return nullptr;
}

Error* ClientCreate(ClientCreateArgs* a) {
  Error* e = CreateClient(a, &a->client);
  if (e != nullptr) ForgetKv(nullptr);
  return e;
}

Error* ClientDestroy(ClientArgs* a) {
  ForgetKv(a->client);
  delete a->client;
  return nullptr;
}

Error* ClientPlatformName(ClientStringArgs* a) {
  a->value = a->client->platform_name.data();
  a->value_size = a->client->platform_name.size();
  return nullptr;
}

Error* ClientPlatformVersion(ClientStringArgs* a) {
  a->value = a->client->platform_version.data();
  a->value_size = a->client->platform_version.size();
  return nullptr;
}

// jaxlib reports the processes it sees alive (after jax.distributed.initialize) and aborts the
// process if this fails. A peer that dies is detected where it matters, in the collective that
// waits for it (gloo's closed connection, NEURON_RT_EXEC_TIMEOUT), so the report is taken as is.
Error* ClientUpdateGlobalProcessInfo(ClientUpdateGlobalProcessInfoArgs*) { return nullptr; }

Error* ClientProcessIndex(ClientProcessIndexArgs* a) {
  a->process_index = a->client->process_index;
  return nullptr;
}

Error* ClientDevices(ClientDevicesArgs* a) {
  a->devices = a->client->devices.data();
  a->num_devices = a->client->devices.size();
  return nullptr;
}

Error* ClientAddressableDevices(ClientDevicesArgs* a) {
  a->devices = a->client->addressable.data();
  a->num_devices = a->client->addressable.size();
  return nullptr;
}

Error* ClientLookupDevice(ClientLookupDeviceArgs* a) {
  for (Device* d : a->client->devices) {
    if (d->id == a->id) {
      a->device = d;
      return nullptr;
    }
  }
  return MakeError(kInvalidArgument, "no NeuronCore device with id " + std::to_string(a->id));
}

Error* ClientLookupAddressableDevice(ClientLookupDeviceArgs* a) {
  for (Device* d : a->client->addressable) {
    if (d->hardware_id == a->id) {
      a->device = d;
      return nullptr;
    }
  }
  return MakeError(kInvalidArgument, "no NeuronCore with local hardware id " + std::to_string(a->id));
}

Error* ClientMemories(ClientMemoriesArgs* a) {
  a->memories = a->client->memories.data();
  a->num_memories = a->client->memories.size();
  return nullptr;
}

Error* ClientDefaultDeviceAssignment(ClientDefaultDeviceAssignmentArgs* a) {
  size_t need = static_cast<size_t>(a->num_replicas) * a->num_partitions;
  if (need > a->client->devices.size()) {
    return MakeError(kInvalidArgument, std::to_string(a->num_replicas) + " replicas x " +
                                           std::to_string(a->num_partitions) + " partitions need " +
                                           std::to_string(need) + " NeuronCores; the world has " +
                                           std::to_string(a->client->devices.size()));
  }
  // This process's devices first: a program of as many devices as it has runs here alone.
  std::vector<Device*> order(a->client->addressable);
  for (Device* d : a->client->devices) {
    if (!d->addressable) order.push_back(d);
  }
  for (size_t i = 0; i < need && i < a->default_assignment_size; ++i) a->default_assignment[i] = order[i]->id;
  return nullptr;
}

// Device descriptions are the devices.
Error* DescId(DescIntArgs* a) {
  a->value = a->description->id;
  return nullptr;
}
Error* DescProcessIndex(DescIntArgs* a) {
  a->value = a->description->process_index;
  return nullptr;
}
Error* DescAttributes(DescAttributesArgs* a) {
  a->attributes = a->description->attributes.data();
  a->num_attributes = a->description->attributes.size();
  return nullptr;
}
Error* DescKind(DescStringArgs* a) {
  a->value = a->description->kind.data();
  a->value_size = a->description->kind.size();
  return nullptr;
}
Error* DescDebugString(DescStringArgs* a) {
  a->value = a->description->debug_string.data();
  a->value_size = a->description->debug_string.size();
  return nullptr;
}
Error* DescToString(DescStringArgs* a) {
  a->value = a->description->to_string.data();
  a->value_size = a->description->to_string.size();
  return nullptr;
}
Error* DeviceGetDescription(DeviceGetDescriptionArgs* a) {
  a->description = a->device;
  return nullptr;
}
Error* DeviceIsAddressable(DeviceIsAddressableArgs* a) {
  a->is_addressable = a->device->addressable;
  return nullptr;
}
Error* DeviceLocalHardwareId(DeviceIntArgs* a) {
  a->value = a->device->hardware_id;
  return nullptr;
}
Error* DeviceMemories(DeviceMemoriesArgs* a) {
  // One memory space per core (none reachable from here for another process's core).
  a->memories = a->device->memory_list;
  a->num_memories = a->device->addressable ? 1 : 0;
  return nullptr;
}
Error* DeviceDefaultMemory(DeviceDefaultMemoryArgs* a) {
  a->memory = &a->device->memory;
  return nullptr;
}
Error* DeviceMemoryStats(DeviceMemoryStatsArgs* a) {
  Device* d = a->device;
  a->bytes_in_use = d->bytes_in_use.load();
  a->peak_bytes_in_use = {d->peak_bytes_in_use.load(), true};
  a->num_allocs = {d->num_allocs.load(), true};
  a->largest_alloc_size = {d->largest_alloc.load(), true};
  // torch_xla's get_memory_info reads bytes_limit whether set or not: it is the core's share of
  // its chip's HBM (trn1: 32 GiB for two NeuronCore-v2; trn2 LNC=2: one 24 GiB bank), and unset
  // values are zero.
  a->bytes_limit = {d->hbm_bytes, true};
  auto unset = [](OptionalStat* s) {  // field by field: never the padding after is_set
    s->value = 0;
    s->is_set = false;
  };
  for (OptionalStat* s : {&a->bytes_reserved, &a->peak_bytes_reserved, &a->bytes_reservable_limit,
                          &a->largest_free_block_bytes}) {
    unset(s);
  }
  // The pool fields are the newest: written only when the caller's struct has them (its
  // struct_size ends at peak_pool_bytes_is_set, before the padding).
  if (a->struct_size > offsetof(DeviceMemoryStatsArgs, pool_bytes)) unset(&a->pool_bytes);
  if (a->struct_size > offsetof(DeviceMemoryStatsArgs, peak_pool_bytes)) unset(&a->peak_pool_bytes);
  return nullptr;
}

Error* MemoryId(MemoryIntArgs* a) {
  a->value = a->memory->id;
  return nullptr;
}
Error* MemoryKindId(MemoryIntArgs* a) {
  a->value = 0;
  return nullptr;
}
Error* MemoryKind(MemoryStringArgs* a) {
  a->value = a->memory->kind.data();
  a->value_size = a->memory->kind.size();
  return nullptr;
}
Error* MemoryDebugString(MemoryStringArgs* a) {
  a->value = a->memory->debug_string.data();
  a->value_size = a->memory->debug_string.size();
  return nullptr;
}
Error* MemoryToString(MemoryStringArgs* a) {
  a->value = a->memory->to_string.data();
  a->value_size = a->memory->to_string.size();
  return nullptr;
}
Error* MemoryDevices(MemoryDevicesArgs* a) {
  Device* d = a->memory->device;
  a->devices = &d->client->devices[d->id];
  a->num_devices = 1;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Buffers: a NumPy array (one reference) in host memory, on one device.
// ---------------------------------------------------------------------------------------------
}  // namespace

struct abi::Buffer {
  Device* device = nullptr;
  BufferType type = kInvalid;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // row-major, for GetMemoryLayout
  size_t nbytes = 0;
  std::mutex mu;
  PyRef array;          // the data; empty once deleted
  char* data = nullptr; // the array's data pointer (C-contiguous)
  bool deleted = false;
  std::atomic<int> external_refs{0};

  ~Buffer() {
    external_refs = 0;  // the handle is gone: nobody can read the memory through it any more
    Release();
    PyRef drop;
    {
      std::lock_guard<std::mutex> l(mu);
      drop = std::move(array);
    }
    drop.Reset();
  }
  // Deleted or donated: the buffer is unusable at once, but its memory stays while a framework
  // holds an external reference (jax's zero-copy NumPy view of it) and goes with the last one.
  void Release() {
    PyRef drop;
    {
      std::lock_guard<std::mutex> l(mu);
      if (deleted) return;
      deleted = true;
      if (external_refs.load() == 0) {
        data = nullptr;
        drop = std::move(array);
      }
    }
    if (device != nullptr) device->Account(-static_cast<int64_t>(nbytes));
    drop.Reset();
  }
  void DropExternalRef() {
    PyRef drop;
    {
      std::lock_guard<std::mutex> l(mu);
      if (external_refs.fetch_sub(1) == 1 && deleted) {
        data = nullptr;
        drop = std::move(array);
      }
    }
    drop.Reset();
  }
};

namespace {

void SetLayout(Buffer* b) {
  b->minor_to_major.resize(b->dims.size());
  for (size_t i = 0; i < b->dims.size(); ++i) b->minor_to_major[i] = static_cast<int64_t>(b->dims.size() - 1 - i);
}

// A new buffer holding `array` (GIL held; steals the reference). The array must be C-contiguous
// with the given type and dims: the service guarantees it, and we check the byte size.
Error* WrapArray(PyObject* array, Device* device, BufferType type, std::vector<int64_t> dims, Buffer** out) {
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS) != 0) {
    Py_DECREF(array);
    return ErrorFromPython("taking a result array's memory");
  }
  auto b = std::make_unique<Buffer>();
  b->device = device;
  b->type = type;
  b->dims = std::move(dims);
  int64_t elements = 1;
  for (int64_t d : b->dims) elements *= d;
  b->nbytes = static_cast<size_t>(elements) * (ElementBits(type) / 8);
  if (static_cast<size_t>(view.len) != b->nbytes) {
    PyBuffer_Release(&view);
    Py_DECREF(array);
    return MakeError(kInternal, "an array of " + std::to_string(view.len) + " bytes for a buffer of " +
                                    std::to_string(b->nbytes) + " bytes [" + Join(b->dims) + "]");
  }
  b->data = static_cast<char*>(view.buf);
  PyBuffer_Release(&view);  // the array itself keeps the memory
  b->array = PyRef(array);
  SetLayout(b.get());
  device->Account(static_cast<int64_t>(b->nbytes));
  *out = b.release();
  return nullptr;
}

// Buffers live on this process's devices only: another process's core holds its own.
Error* RequireAddressable(Device* device) {
  if (device == nullptr || device->addressable) return nullptr;
  return MakeError(kInvalidArgument, "a buffer on " + device->to_string + ", a NeuronCore of process " +
                                         std::to_string(device->process_index) + ": this process (" +
                                         std::to_string(device->client->process_index) +
                                         ") holds buffers on its own NeuronCores only");
}

// ---------------------------------------------------------------------------------------------
// Zero-copy host buffers (kImmutableZeroCopy): the framework's host memory, lent to a buffer.
// ---------------------------------------------------------------------------------------------

// A Python object standing for the lent memory: it exports it (read-only) through the buffer
// protocol, the buffer's NumPy array is made on it and every array derived from it (an
// execute's result may be its argument itself) keeps it alive. Its dealloc, when the last of them
// goes, completes done_with_host_buffer: only then may the framework free or reuse the memory.
struct HostLoan {
  PyObject_HEAD
  void* data;
  Py_ssize_t size;
  Event* done;  // one reference
};

int HostLoanGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  auto* loan = reinterpret_cast<HostLoan*>(self);
  return PyBuffer_FillInfo(view, self, loan->data, loan->size, /*readonly=*/1, flags);
}

void HostLoanDealloc(PyObject* self) {
  auto* loan = reinterpret_cast<HostLoan*>(self);
  if (loan->done != nullptr) {
    loan->done->Set(nullptr);  // runs the framework's callback (jax drops its NumPy array)
    loan->done->Unref();
  }
  PyObject_Free(self);
}

PyBufferProcs kHostLoanBuffer = {HostLoanGetBuffer, nullptr};

PyTypeObject* HostLoanType() {  // GIL held
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "neuron_pjrt.HostLoan";
    t.tp_basicsize = sizeof(HostLoan);
    t.tp_dealloc = HostLoanDealloc;
    t.tp_as_buffer = &kHostLoanBuffer;
    t.tp_flags = Py_TPFLAGS_DEFAULT;
    t.tp_doc = "A framework's host memory lent to a neuron PJRT buffer (kImmutableZeroCopy).";
    return t;
  }();
  static bool ready = PyType_Ready(&type) == 0;
  return ready ? &type : nullptr;
}

// Host buffers are lent rather than copied only when 64-byte aligned, the rule of jaxlib's
// XLA:CPU: the same NumPy arrays are lent to both devices (and copied for both otherwise).
constexpr uintptr_t kZeroCopyAlignment = 64;

// A buffer on the framework's memory itself (GIL held); `done` completes when nothing uses it.
Error* LendHostMemory(Device* device, const ClientBufferFromHostArgs* a, size_t nbytes, Buffer** out,
                      Event** done) {
  PyTypeObject* type = HostLoanType();
  if (type == nullptr) return ErrorFromPython("creating the host-memory loan type");
  auto* loan = PyObject_New(HostLoan, type);
  if (loan == nullptr) return ErrorFromPython("lending host memory");
  loan->data = const_cast<void*>(a->data);
  loan->size = static_cast<Py_ssize_t>(nbytes);
  loan->done = new Event;  // refs: the loan's and, below, the framework's
  *done = loan->done;
  ++loan->done->refs;
  PyRef owner(reinterpret_cast<PyObject*>(loan));
  PyRef shape(PyTuple_New(static_cast<Py_ssize_t>(a->num_dims)));
  for (size_t i = 0; i < a->num_dims; ++i) PyTuple_SET_ITEM(shape.get(), i, PyLong_FromLongLong(a->dims[i]));
  PyObject* array = PyObject_CallMethod(g_service, "host_array", "OiO", owner.get(), static_cast<int>(a->type),
                                        shape.get());
  owner.ResetLocked();  // the array holds the loan now (or, on error, the loan completes `done`)
  shape.ResetLocked();
  if (array == nullptr) {
    (*done)->Unref();
    *done = nullptr;
    return ErrorFromPython("lending host memory");
  }
  return WrapArray(array, device, a->type, std::vector<int64_t>(a->dims, a->dims + a->num_dims), out);
}

// A fresh array for `dims` of `type` (GIL held).
Error* NewBuffer(Device* device, BufferType type, const int64_t* dims, size_t num_dims, Buffer** out) {
  if (Error* e = RequireAddressable(device)) return e;
  if (ElementBits(type) == 0) {
    return MakeError(kUnimplemented, "element type " + std::to_string(static_cast<int>(type)) +
                                         " (PJRT_Buffer_Type) is not supported by the neuron device");
  }
  std::vector<int64_t> shape(dims, dims + num_dims);
  PyRef pyshape(PyTuple_New(static_cast<Py_ssize_t>(num_dims)));
  for (size_t i = 0; i < num_dims; ++i) PyTuple_SET_ITEM(pyshape.get(), i, PyLong_FromLongLong(dims[i]));
  PyObject* array = PyObject_CallMethod(g_service, "new_array", "iO", static_cast<int>(type), pyshape.get());
  pyshape.ResetLocked();
  if (array == nullptr) return ErrorFromPython("allocating a buffer");
  return WrapArray(array, device, type, std::move(shape), out);
}

Device* DeviceOf(Client* client, Device* device, Memory* memory) {
  if (device != nullptr) return device;
  if (memory != nullptr) return memory->device;
  return client->addressable.front();
}

// Copies a strided host array into dense row-major memory.
void CopyStrided(char* dst, const char* src, const int64_t* dims, const int64_t* strides, size_t rank,
                 size_t elem) {
  if (rank == 0) {
    std::memcpy(dst, src, elem);
    return;
  }
  int64_t inner = 1;
  for (size_t i = 1; i < rank; ++i) inner *= dims[i];
  for (int64_t i = 0; i < dims[0]; ++i) {
    CopyStrided(dst + i * inner * elem, src + i * strides[0], dims + 1, strides + 1, rank - 1, elem);
  }
}

bool IsDefaultLayout(const MemoryLayout* layout, size_t rank, size_t elem, const int64_t* dims) {
  if (layout == nullptr) return true;
  if (layout->type == kTiled) {
    if (layout->tiled.num_tiles != 0) return false;
    if (layout->tiled.minor_to_major_size != rank) return false;
    for (size_t i = 0; i < rank; ++i) {
      if (layout->tiled.minor_to_major[i] != static_cast<int64_t>(rank - 1 - i)) return false;
    }
    return true;
  }
  if (layout->strides.num_byte_strides != rank) return false;
  int64_t stride = static_cast<int64_t>(elem);
  for (size_t i = rank; i-- > 0;) {
    if (dims[i] > 1 && layout->strides.byte_strides[i] != stride) return false;
    stride *= dims[i];
  }
  return true;
}

Error* ClientBufferFromHost(ClientBufferFromHostArgs* a) {
  size_t elem = ElementBits(a->type) / 8;
  if (elem == 0) {
    return MakeError(kUnimplemented, "element type " + std::to_string(static_cast<int>(a->type)) +
                                         " (PJRT_Buffer_Type) is not supported by the neuron device");
  }
  if (!IsDefaultLayout(a->device_layout, a->num_dims, elem, a->dims)) {
    return MakeError(kUnimplemented, "a device layout other than the dense row-major one is not supported "
                                     "(PJRT_Client_BufferFromHostBuffer device_layout)");
  }
  Device* device = DeviceOf(a->client, a->device, a->memory);
  bool dense = a->byte_strides == nullptr || a->num_byte_strides == 0;
  if (!dense) {
    MemoryLayout as_strides{};
    as_strides.type = kStrides;
    as_strides.strides.byte_strides = a->byte_strides;
    as_strides.strides.num_byte_strides = a->num_byte_strides;
    dense = IsDefaultLayout(&as_strides, a->num_dims, elem, a->dims);
  }
  size_t nbytes = elem;
  for (size_t i = 0; i < a->num_dims; ++i) nbytes *= static_cast<size_t>(a->dims[i]);
  // kImmutableZeroCopy (jax's NumPy arguments): the buffer is the caller's memory, which the
  // caller keeps alive and unchanged until done_with_host_buffer completes, when the last array
  // using it goes. kMutableZeroCopy is served the same way (we never write a buffer).
  // kImmutableUntilTransferCompletes (torch_xla) lets the caller reuse the memory once the
  // transfer is done, so it is copied, as are strided and unaligned host arrays.
  bool lend = dense && nbytes > 0 && reinterpret_cast<uintptr_t>(a->data) % kZeroCopyAlignment == 0 &&
              (a->host_buffer_semantics == kImmutableZeroCopy || a->host_buffer_semantics == kMutableZeroCopy);
  Buffer* b = nullptr;
  if (Error* e = RequirePython()) return e;
  {
    Gil gil;
    if (Error* e = EnsureService()) return e;
    if (Error* e = RequireAddressable(device)) return e;
    if (lend) {
      Event* done = nullptr;
      if (Error* e = LendHostMemory(device, a, nbytes, &b, &done)) {
        if (done != nullptr) done->Unref();
        return e;
      }
      a->done_with_host_buffer = done;
      a->buffer = b;
      return nullptr;
    }
    if (Error* e = NewBuffer(device, a->type, a->dims, a->num_dims, &b)) return e;
  }
  // The copy runs without the GIL (other Python threads keep running).
  if (dense) {
    if (b->nbytes) std::memcpy(b->data, a->data, b->nbytes);
  } else if (b->nbytes) {
    CopyStrided(b->data, static_cast<const char*>(a->data), a->dims, a->byte_strides, a->num_dims, elem);
  }
  a->done_with_host_buffer = ReadyEvent();
  a->buffer = b;
  return nullptr;
}

Error* ClientCreateUninitializedBuffer(ClientCreateUninitializedBufferArgs* a) {
  size_t elem = ElementBits(a->shape_element_type) / 8;
  if (elem != 0 && !IsDefaultLayout(a->shape_layout, a->shape_num_dims, elem, a->shape_dims)) {
    return MakeError(kUnimplemented, "a device layout other than the dense row-major one is not supported "
                                     "(PJRT_Client_CreateUninitializedBuffer)");
  }
  if (Error* e = RequirePython()) return e;
  Gil gil;
  if (Error* e = EnsureService()) return e;
  return NewBuffer(DeviceOf(a->client, a->device, a->memory), a->shape_element_type, a->shape_dims,
                   a->shape_num_dims, &a->buffer);
}

Error* Deleted(const char* what) {
  return MakeError(kFailedPrecondition, std::string(what) + ": the buffer has been deleted or donated");
}

Error* BufferDestroy(BufferArgs* a) {
  delete a->buffer;
  return nullptr;
}
Error* BufferDelete(BufferArgs* a) {
  a->buffer->Release();
  return nullptr;
}
Error* BufferIsDeleted(BufferBoolArgs* a) {
  std::lock_guard<std::mutex> l(a->buffer->mu);
  a->value = a->buffer->deleted;
  return nullptr;
}
// Buffers are host memory, so the frameworks may read them in place: jax then makes np.asarray
// of a result a read-only view of the buffer (no device-to-host copy), holding an external
// reference that keeps the memory alive past a delete or donation (Buffer::Release). Nothing can
// write through those views; DLPack stays refused by jaxlib and torch_xla for a "neuron" device.
Error* BufferIsOnCpu(BufferBoolArgs* a) {
  a->value = true;
  return nullptr;
}
Error* BufferElementType(BufferTypeArgs* a) {
  a->type = a->buffer->type;
  return nullptr;
}
Error* BufferDimensions(BufferDimsArgs* a) {
  a->dims = a->buffer->dims.data();
  a->num_dims = a->buffer->dims.size();
  return nullptr;
}
Error* BufferDynamicDims(BufferDynamicDimsArgs* a) {
  a->dynamic_dim_indices = nullptr;
  a->num_dynamic_dims = 0;
  return nullptr;
}
Error* BufferGetMemoryLayout(BufferLayoutArgs* a) {
  a->layout.struct_size = sizeof(MemoryLayout);
  a->layout.extension_start = nullptr;
  a->layout.type = kTiled;
  a->layout.tiled = MemoryLayoutTiled{};
  a->layout.tiled.struct_size = sizeof(MemoryLayoutTiled);
  a->layout.tiled.minor_to_major = a->buffer->minor_to_major.data();
  a->layout.tiled.minor_to_major_size = a->buffer->minor_to_major.size();
  a->layout.tiled.num_tiles = 0;
  return nullptr;
}
Error* BufferOnDeviceSize(BufferSizeArgs* a) {
  a->on_device_size_in_bytes = a->buffer->nbytes;
  return nullptr;
}
Error* BufferDevice(BufferDeviceArgs* a) {
  a->device = a->buffer->device;
  return nullptr;
}
Error* BufferMemory(BufferMemoryArgs* a) {
  a->memory = &a->buffer->device->memory;
  return nullptr;
}
Error* BufferReadyEvent(BufferReadyEventArgs* a) {
  a->event = ReadyEvent();
  return nullptr;
}
Error* BufferIncreaseExternalRefs(BufferArgs* a) {
  ++a->buffer->external_refs;
  return nullptr;
}
Error* BufferDecreaseExternalRefs(BufferArgs* a) {
  if (a->buffer->external_refs.load() <= 0) {
    return MakeError(kFailedPrecondition, "PJRT_Buffer_DecreaseExternalReferenceCount without a matching increase");
  }
  a->buffer->DropExternalRef();
  return nullptr;
}
Error* BufferUnsafePointer(BufferPointerArgs* a) {
  std::lock_guard<std::mutex> l(a->buffer->mu);
  if (a->buffer->deleted) return Deleted("PJRT_Buffer_UnsafePointer");
  a->buffer_pointer = reinterpret_cast<uintptr_t>(a->buffer->data);
  return nullptr;
}
Error* BufferOpaquePointer(BufferOpaquePointerArgs* a) {
  std::lock_guard<std::mutex> l(a->buffer->mu);
  if (a->buffer->deleted) return Deleted("PJRT_Buffer_OpaqueDeviceMemoryDataPointer");
  a->device_memory_ptr = a->buffer->data;
  return nullptr;
}

Error* BufferToHost(BufferToHostArgs* a) {
  Buffer* b = a->src;
  if (a->dst == nullptr) {  // size query
    a->dst_size = b->nbytes;
    return nullptr;
  }
  size_t elem = ElementBits(b->type) / 8;
  if (!IsDefaultLayout(a->host_layout, b->dims.size(), elem, b->dims.data())) {
    return MakeError(kUnimplemented, "PJRT_Buffer_ToHostBuffer into a host layout other than dense row-major");
  }
  if (a->dst_size < b->nbytes) {
    return MakeError(kInvalidArgument, "PJRT_Buffer_ToHostBuffer: destination of " + std::to_string(a->dst_size) +
                                           " bytes for a buffer of " + std::to_string(b->nbytes));
  }
  std::lock_guard<std::mutex> l(b->mu);
  if (b->deleted) return Deleted("PJRT_Buffer_ToHostBuffer");
  if (b->nbytes) std::memcpy(a->dst, b->data, b->nbytes);
  a->event = ReadyEvent();
  return nullptr;
}

Error* BufferCopyRawToHost(BufferCopyRawToHostArgs* a) {
  Buffer* b = a->buffer;
  if (a->offset < 0 || a->transfer_size < 0 || static_cast<size_t>(a->offset + a->transfer_size) > b->nbytes) {
    return MakeError(kInvalidArgument, "PJRT_Buffer_CopyRawToHost: range outside the buffer");
  }
  std::lock_guard<std::mutex> l(b->mu);
  if (b->deleted) return Deleted("PJRT_Buffer_CopyRawToHost");
  std::memcpy(a->dst, b->data + a->offset, static_cast<size_t>(a->transfer_size));
  a->event = ReadyEvent();
  return nullptr;
}

// Another device's buffer shares the (immutable) array: no copy.
Error* ShareToDevice(Buffer* b, Device* device, Buffer** out) {
  if (device == nullptr) return MakeError(kInvalidArgument, "copy to a null device");
  if (Error* e = RequireAddressable(device)) return e;
  if (Error* e = RequirePython()) return e;
  Gil gil;
  PyObject* array;
  {
    std::lock_guard<std::mutex> l(b->mu);
    if (b->deleted) return Deleted("PJRT_Buffer_CopyToDevice");
    array = b->array.get();
    Py_INCREF(array);
  }
  return WrapArray(array, device, b->type, b->dims, out);
}

Error* BufferCopyToDevice(BufferCopyToDeviceArgs* a) { return ShareToDevice(a->buffer, a->dst_device, &a->dst_buffer); }

Error* BufferCopyToMemory(BufferCopyToMemoryArgs* a) {
  if (a->dst_memory == nullptr) return MakeError(kInvalidArgument, "copy to a null memory space");
  return ShareToDevice(a->buffer, a->dst_memory->device, &a->dst_buffer);
}

// ---------------------------------------------------------------------------------------------
// Executables: compiled by the service; C++ keeps the metadata the frameworks query.
// ---------------------------------------------------------------------------------------------
}  // namespace

struct abi::Executable {
  PyRef program;  // service.Program
  Client* client = nullptr;
  std::string name, fingerprint, hlo_proto;
  std::string hlo_format = "hlo_with_config";
  size_t num_replicas = 1, num_partitions = 1;
  std::vector<BufferType> out_types;
  std::vector<std::vector<int64_t>> out_dims;
  std::vector<int64_t> flat_out_dims;
  std::vector<size_t> out_ranks;
  std::vector<std::string> out_kinds_storage;
  std::vector<const char*> out_kinds;
  std::vector<size_t> out_kind_sizes;
  std::mutex cost_mu;
  bool cost_loaded = false;
  std::vector<std::string> cost_names;
  std::vector<NamedValue> cost;
  std::vector<int64_t> donated;  // parameters the program may overwrite (input_output_alias)
  int64_t code_size = 0, argument_bytes = 0, output_bytes = 0, temp_bytes = 0;
  std::vector<Device*> devices;  // this process's devices of the device assignment
  std::vector<int> logical;      // their logical ids (positions in the assignment: replica * partitions + partition)
  std::vector<int> assignment;   // the assignment's global device ids, by logical id
};

struct abi::LoadedExecutable {
  std::shared_ptr<Executable> exe;
  std::atomic<bool> deleted{false};
};

namespace {

// Reads the service's Program into C++ metadata (GIL held).
Error* FillExecutable(Executable* e) {
  PyObject* p = e->program.get();
  auto str_attr = [&](const char* name, std::string* out) -> bool {
    PyRef v(PyObject_GetAttrString(p, name));
    if (!v) return false;
    if (PyBytes_Check(v.get())) {
      out->assign(PyBytes_AsString(v.get()), PyBytes_Size(v.get()));
      return true;
    }
    const char* s = PyUnicode_AsUTF8(v.get());
    if (s == nullptr) return false;
    *out = s;
    return true;
  };
  auto int_attr = [&](const char* name, int64_t* out) -> bool {
    PyRef v(PyObject_GetAttrString(p, name));
    if (!v) return false;
    *out = PyLong_AsLongLong(v.get());
    return !PyErr_Occurred();
  };
  int64_t replicas = 1, partitions = 1;
  if (!str_attr("name", &e->name) || !str_attr("fingerprint", &e->fingerprint) ||
      !str_attr("optimized_program", &e->hlo_proto) || !int_attr("num_replicas", &replicas) ||
      !int_attr("num_partitions", &partitions) || !int_attr("code_size", &e->code_size) ||
      !int_attr("argument_bytes", &e->argument_bytes) || !int_attr("output_bytes", &e->output_bytes) ||
      !int_attr("temp_bytes", &e->temp_bytes)) {
    return ErrorFromPython("reading the compiled program");
  }
  e->num_replicas = static_cast<size_t>(replicas);
  e->num_partitions = static_cast<size_t>(partitions);
  PyRef outs(PyObject_GetAttrString(p, "outputs"));  // [(type code, dims tuple)]
  if (!outs || !PyList_Check(outs.get())) return ErrorFromPython("reading the program's outputs");
  for (Py_ssize_t i = 0; i < PyList_Size(outs.get()); ++i) {
    PyObject* o = PyList_GetItem(outs.get(), i);
    e->out_types.push_back(static_cast<BufferType>(PyLong_AsLong(PyTuple_GetItem(o, 0))));
    PyObject* dims = PyTuple_GetItem(o, 1);
    std::vector<int64_t> d;
    for (Py_ssize_t k = 0; k < PyTuple_Size(dims); ++k) d.push_back(PyLong_AsLongLong(PyTuple_GetItem(dims, k)));
    e->flat_out_dims.insert(e->flat_out_dims.end(), d.begin(), d.end());
    e->out_ranks.push_back(d.size());
    e->out_dims.push_back(std::move(d));
  }
  PyRef donated(PyObject_GetAttrString(p, "donated"));
  if (!donated || !PyList_Check(donated.get())) return ErrorFromPython("reading the program's donated parameters");
  for (Py_ssize_t i = 0; i < PyList_Size(donated.get()); ++i) {
    e->donated.push_back(PyLong_AsLongLong(PyList_GetItem(donated.get(), i)));
  }
  PyRef devs(PyObject_GetAttrString(p, "device_ids"));
  if (!devs || !PyList_Check(devs.get())) return ErrorFromPython("reading the program's devices");
  for (Py_ssize_t i = 0; i < PyList_Size(devs.get()); ++i) {
    long id = PyLong_AsLong(PyList_GetItem(devs.get(), i));
    if (id < 0 || static_cast<size_t>(id) >= e->client->devices.size()) {
      return MakeError(kInvalidArgument, "the device assignment names device " + std::to_string(id) +
                                             "; this process has " + std::to_string(e->client->devices.size()) +
                                             " NeuronCores");
    }
    Device* d = e->client->devices[id];
    e->assignment.push_back(d->id);
    if (!d->addressable) continue;  // another process runs it
    e->devices.push_back(d);
    e->logical.push_back(static_cast<int>(i));
  }
  if (e->devices.empty()) {
    return MakeError(kInvalidArgument, "the device assignment names only other processes' NeuronCores");
  }
  e->out_kinds_storage.assign(e->out_types.size(), "device");
  for (const std::string& k : e->out_kinds_storage) {
    e->out_kinds.push_back(k.data());
    e->out_kind_sizes.push_back(k.size());
  }
  if (PyErr_Occurred()) return ErrorFromPython("reading the compiled program");
  return nullptr;
}

Error* ClientCompile(ClientCompileArgs* a) {
  if (Error* e = RequirePython()) return e;
  Gil gil;
  if (Error* e = EnsureService()) return e;
  const Program* prog = a->program;
  PyRef code(PyBytes_FromStringAndSize(prog->code, static_cast<Py_ssize_t>(prog->code_size)));
  PyRef format(PyUnicode_FromStringAndSize(prog->format, static_cast<Py_ssize_t>(prog->format_size)));
  PyRef options(PyBytes_FromStringAndSize(a->compile_options, static_cast<Py_ssize_t>(a->compile_options_size)));
  PyObject* program = PyObject_CallMethod(g_service, "compile", "OOOi", code.get(), format.get(), options.get(),
                                          static_cast<int>(a->client->devices.size()));
  code.ResetLocked();
  format.ResetLocked();
  options.ResetLocked();
  if (program == nullptr) return ErrorFromPython("compiling for the neuron device");
  auto exe = std::make_shared<Executable>();
  exe->program = PyRef(program);
  exe->client = a->client;
  if (Error* e = FillExecutable(exe.get())) {
    exe->program.ResetLocked();
    return e;
  }
  auto* loaded = new LoadedExecutable;
  loaded->exe = std::move(exe);
  a->executable = loaded;
  return nullptr;
}

// PJRT_Executable handles given out by GetExecutable share the compiled program.
struct ExecutableHandle {
  std::shared_ptr<Executable> exe;
};

Executable* Exe(Executable* handle) { return reinterpret_cast<ExecutableHandle*>(handle)->exe.get(); }

Error* LoadedDestroy(LoadedArgs* a) {
  delete a->executable;
  return nullptr;
}
Error* LoadedDelete(LoadedArgs* a) {
  a->executable->deleted = true;
  return nullptr;
}
Error* LoadedIsDeleted(LoadedIsDeletedArgs* a) {
  a->is_deleted = a->executable->deleted;
  return nullptr;
}
Error* LoadedGetExecutable(LoadedGetExecutableArgs* a) {
  a->executable = reinterpret_cast<Executable*>(new ExecutableHandle{a->loaded_executable->exe});
  return nullptr;
}
Error* LoadedDevices(LoadedDevicesArgs* a) {
  a->devices = a->executable->exe->devices.data();
  a->num_devices = a->executable->exe->devices.size();
  return nullptr;
}
Error* LoadedFingerprint(LoadedStringArgs* a) {
  a->value = a->executable->exe->fingerprint.data();
  a->value_size = a->executable->exe->fingerprint.size();
  return nullptr;
}

Error* ExecutableDestroy(ExecutableArgs* a) {
  delete reinterpret_cast<ExecutableHandle*>(a->executable);
  return nullptr;
}
Error* ExecutableName(ExecutableStringArgs* a) {
  a->value = Exe(a->executable)->name.data();
  a->value_size = Exe(a->executable)->name.size();
  return nullptr;
}
Error* ExecutableFingerprint(ExecutableStringArgs* a) {
  a->value = Exe(a->executable)->fingerprint.data();
  a->value_size = Exe(a->executable)->fingerprint.size();
  return nullptr;
}
Error* ExecutableNumReplicas(ExecutableSizeArgs* a) {
  a->value = Exe(a->executable)->num_replicas;
  return nullptr;
}
Error* ExecutableNumPartitions(ExecutableSizeArgs* a) {
  a->value = Exe(a->executable)->num_partitions;
  return nullptr;
}
Error* ExecutableNumOutputs(ExecutableSizeArgs* a) {
  a->value = Exe(a->executable)->out_types.size();
  return nullptr;
}
Error* ExecutableCodeSize(ExecutableCodeSizeArgs* a) {
  a->size_in_bytes = Exe(a->executable)->code_size;
  return nullptr;
}
// Cost analysis runs the program once under the cost model (on seeded inputs), so it is computed
// on the first request only (the service caches it). No C++ lock is held while Python runs: a lock
// taken under the GIL and waited for by a GIL holder would deadlock.
Error* ExecutableCost(ExecutableCostArgs* a) {
  Executable* e = Exe(a->executable);
  {
    std::lock_guard<std::mutex> l(e->cost_mu);
    if (e->cost_loaded) {
      a->properties = e->cost.data();
      a->num_properties = e->cost.size();
      return nullptr;
    }
  }
  std::vector<std::pair<std::string, float>> values;
  if (Error* err = RequirePython()) return err;
  {
    Gil gil;
    PyRef cost(PyObject_CallMethod(e->program.get(), "cost_analysis", nullptr));  // [(name, float)]
    if (!cost || !PyList_Check(cost.get())) return ErrorFromPython("cost analysis");
    for (Py_ssize_t i = 0; i < PyList_Size(cost.get()); ++i) {
      PyObject* item = PyList_GetItem(cost.get(), i);
      const char* name = PyUnicode_AsUTF8(PyTuple_GetItem(item, 0));
      double value = PyFloat_AsDouble(PyTuple_GetItem(item, 1));
      if (name == nullptr || PyErr_Occurred()) return ErrorFromPython("cost analysis");
      values.emplace_back(name, static_cast<float>(value));
    }
  }
  std::lock_guard<std::mutex> l(e->cost_mu);
  if (!e->cost_loaded) {
    e->cost_names.reserve(values.size());  // stable storage for the names the values point to
    for (auto& [name, value] : values) {
      e->cost_names.push_back(name);
      NamedValue v{};
      v.struct_size = sizeof(NamedValue);
      v.name = e->cost_names.back().data();
      v.name_size = e->cost_names.back().size();
      v.type = kFloat;
      v.float_value = value;
      v.value_size = 1;
      e->cost.push_back(v);
    }
    e->cost_loaded = true;
  }
  a->properties = e->cost.data();
  a->num_properties = e->cost.size();
  return nullptr;
}

Error* ExecutableMemoryKinds(ExecutableMemoryKindsArgs* a) {
  Executable* e = Exe(a->executable);
  a->num_outputs = e->out_kinds.size();
  a->memory_kinds = e->out_kinds.data();
  a->memory_kind_sizes = e->out_kind_sizes.data();
  return nullptr;
}
Error* ExecutableOptimizedProgram(ExecutableOptimizedProgramArgs* a) {
  Executable* e = Exe(a->executable);
  Program* p = a->program;
  p->format = e->hlo_format.data();
  p->format_size = e->hlo_format.size();
  if (p->code == nullptr) {  // size query
    p->code_size = e->hlo_proto.size();
    return nullptr;
  }
  if (p->code_size < e->hlo_proto.size()) {
    return MakeError(kInvalidArgument, "PJRT_Executable_OptimizedProgram: buffer too small");
  }
  std::memcpy(p->code, e->hlo_proto.data(), e->hlo_proto.size());
  p->code_size = e->hlo_proto.size();
  return nullptr;
}
Error* ExecutableOutputTypes(ExecutableOutputTypesArgs* a) {
  Executable* e = Exe(a->executable);
  a->output_types = e->out_types.data();
  a->num_output_types = e->out_types.size();
  return nullptr;
}
Error* ExecutableOutputDims(ExecutableOutputDimsArgs* a) {
  Executable* e = Exe(a->executable);
  a->num_outputs = e->out_types.size();
  a->dims = e->flat_out_dims.data();
  a->dim_sizes = e->out_ranks.data();
  return nullptr;
}
Error* ExecutableMemoryStats(ExecutableMemoryStatsArgs* a) {
  Executable* e = Exe(a->executable);
  a->generated_code_size_in_bytes = e->code_size;
  a->argument_size_in_bytes = e->argument_bytes;
  a->output_size_in_bytes = e->output_bytes;
  a->alias_size_in_bytes = 0;
  a->temp_size_in_bytes = e->temp_bytes;
  a->host_generated_code_size_in_bytes = 0;
  a->host_argument_size_in_bytes = 0;
  a->host_output_size_in_bytes = 0;
  a->host_alias_size_in_bytes = 0;
  a->host_temp_size_in_bytes = 0;
  a->peak_memory_in_bytes = e->argument_bytes + e->output_bytes + e->temp_bytes;
  return nullptr;
}

// The argument arrays of one device's execute as a new Python list (GIL held).
Error* ArgumentList(Executable* e, Device* device, Buffer* const* args, size_t num_args, PyRef* out) {
  PyRef inputs(PyList_New(static_cast<Py_ssize_t>(num_args)));
  if (!inputs) return ErrorFromPython("building the argument list");
  for (size_t i = 0; i < num_args; ++i) {
    Buffer* b = args[i];
    std::lock_guard<std::mutex> l(b->mu);
    if (b->deleted) {
      return MakeError(kFailedPrecondition, "argument " + std::to_string(i) + " of " + e->name +
                                                " has been deleted or donated");
    }
    if (b->device != device) {
      return MakeError(kInvalidArgument, "argument " + std::to_string(i) + " of " + e->name + " is on " +
                                             b->device->to_string + ", the program runs on " + device->to_string);
    }
    PyObject* arr = b->array.get();
    Py_INCREF(arr);
    PyList_SET_ITEM(inputs.get(), i, arr);
  }
  *out = std::move(inputs);
  return nullptr;
}

// One device's result arrays (a Python list, GIL held) kept as its output buffers; none on error.
Error* WrapResults(Executable* e, Device* device, PyObject* results, Buffer** outs) {
  if (!PyList_Check(results) || static_cast<size_t>(PyList_Size(results)) != e->out_types.size()) {
    return MakeError(kInternal, "the program " + e->name + " returned a wrong number of outputs");
  }
  for (size_t k = 0; k < e->out_types.size(); ++k) {
    PyObject* arr = PyList_GetItem(results, static_cast<Py_ssize_t>(k));
    Py_INCREF(arr);
    if (Error* err = WrapArray(arr, device, e->out_types[k], e->out_dims[k], &outs[k])) {
      for (size_t j = 0; j < k; ++j) {
        delete outs[j];
        outs[j] = nullptr;
      }
      return err;
    }
  }
  return nullptr;
}

// Runs the program on one device (its logical id in the program, -1 when the assignment does not
// name it): the argument arrays in, the result arrays kept as buffers.
Error* RunOnDevice(Executable* e, Device* device, int logical, Buffer* const* args, size_t num_args, Buffer** outs) {
  if (Error* err = RequirePython()) return err;
  Gil gil;
  PyRef inputs;
  if (Error* err = ArgumentList(e, device, args, num_args, &inputs)) return err;
  PyRef results(PyObject_CallMethod(e->program.get(), "run", "Oii", inputs.get(), device->hardware_id, logical));
  inputs.ResetLocked();
  if (!results) return ErrorFromPython(("running " + e->name + " on " + device->to_string).c_str());
  return WrapResults(e, device, results.get(), outs);
}

// Runs this process's devices of a program of several (replicas x partitions) in ONE call into
// Python (Program.run_devices), which runs them concurrently: their collectives meet each other
// and, in a world of several processes, those of the other processes' devices.
Error* RunOnDevices(Executable* e, const std::vector<Device*>& devices, const std::vector<int>& logical,
                    Buffer* const* const* args, size_t num_args, Buffer** const* outs) {
  if (Error* err = RequirePython()) return err;
  Gil gil;
  PyRef lists(PyList_New(static_cast<Py_ssize_t>(devices.size())));
  PyRef cores(PyList_New(static_cast<Py_ssize_t>(devices.size())));
  PyRef ids(PyList_New(static_cast<Py_ssize_t>(devices.size())));
  if (!lists || !cores || !ids) return ErrorFromPython("building the argument lists");
  for (size_t d = 0; d < devices.size(); ++d) {
    PyRef inputs;
    if (Error* err = ArgumentList(e, devices[d], args[d], num_args, &inputs)) return err;
    PyList_SET_ITEM(lists.get(), d, inputs.release());
    PyList_SET_ITEM(cores.get(), d, PyLong_FromLong(devices[d]->hardware_id));
    PyList_SET_ITEM(ids.get(), d, PyLong_FromLong(logical[d]));
  }
  PyRef results(PyObject_CallMethod(e->program.get(), "run_devices", "OOO", lists.get(), cores.get(), ids.get()));
  lists.ResetLocked();
  cores.ResetLocked();
  ids.ResetLocked();
  if (!results) return ErrorFromPython(("running " + e->name + " on " + std::to_string(devices.size()) + " NeuronCores").c_str());
  if (!PyList_Check(results.get()) || static_cast<size_t>(PyList_Size(results.get())) != devices.size()) {
    return MakeError(kInternal, "the program " + e->name + " returned results for a wrong number of devices");
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    if (Error* err = WrapResults(e, devices[d], PyList_GetItem(results.get(), static_cast<Py_ssize_t>(d)), outs[d])) {
      for (size_t p = 0; p < d; ++p) {
        for (size_t k = 0; k < e->out_types.size(); ++k) {
          delete outs[p][k];
          outs[p][k] = nullptr;
        }
      }
      return err;
    }
  }
  return nullptr;
}

bool NonDonatable(const ExecuteOptions* options, int64_t index) {
  if (options == nullptr || options->non_donatable_input_indices == nullptr) return false;
  const int64_t* begin = options->non_donatable_input_indices;
  return std::find(begin, begin + options->num_non_donatable_input_indices, index) !=
         begin + options->num_non_donatable_input_indices;
}

Error* LoadedExecute(LoadedExecuteArgs* a) {
  LoadedExecutable* loaded = a->executable;
  if (loaded->deleted) return MakeError(kFailedPrecondition, "PJRT_LoadedExecutable_Execute: the executable was deleted");
  Executable* e = loaded->exe.get();
  std::vector<Device*> devices;
  std::vector<int> logical;
  if (a->execute_device != nullptr) {
    if (a->num_devices != 1) {
      return MakeError(kInvalidArgument, "execute_device set with " + std::to_string(a->num_devices) + " argument lists");
    }
    devices.push_back(a->execute_device);
    auto at = std::find(e->assignment.begin(), e->assignment.end(), a->execute_device->id);
    logical.push_back(at == e->assignment.end() ? -1 : static_cast<int>(at - e->assignment.begin()));
  } else {
    devices = e->devices;
    logical = e->logical;
    if (a->num_devices != devices.size()) {
      return MakeError(kInvalidArgument, "the program was compiled for " + std::to_string(devices.size()) +
                                             " device(s), Execute got " + std::to_string(a->num_devices) +
                                             " argument lists");
    }
  }
  if (a->options != nullptr && (a->options->num_send_ops != 0 || a->options->num_recv_ops != 0)) {
    return MakeError(kUnimplemented, "host send/recv callbacks (PJRT_ExecuteOptions send/recv) are not supported");
  }
  if (devices.size() == 1) {
    if (Error* err = RunOnDevice(e, devices[0], logical[0], a->argument_lists[0], a->num_args, a->output_lists[0])) {
      return err;
    }
  } else if (Error* err = RunOnDevices(e, devices, logical, a->argument_lists, a->num_args, a->output_lists)) {
    return err;
  }
  // Donated arguments are consumed, as on XLA:CPU: the framework sees them deleted. The results
  // never alias them (the emulator returns fresh arrays), so this only frees their memory.
  for (int64_t p : e->donated) {
    if (p < 0 || static_cast<size_t>(p) >= a->num_args || NonDonatable(a->options, p)) continue;
    for (size_t d = 0; d < devices.size(); ++d) a->argument_lists[d][p]->Release();
  }
  if (a->device_complete_events != nullptr) {
    for (size_t d = 0; d < devices.size(); ++d) a->device_complete_events[d] = ReadyEvent();
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Plugin
// ---------------------------------------------------------------------------------------------
std::vector<NamedValue>& PluginAttributeList() {
  static std::vector<NamedValue>* attrs = [] {
    static const std::string platform = "neuron";
    auto* v = new std::vector<NamedValue>{IntValue("xla_version", 2), StringValue("platform", platform)};
    return v;
  }();
  return *attrs;
}

Error* PluginInitialize(PluginInitializeArgs*) { return nullptr; }

Error* PluginAttributes(PluginAttributesArgs* a) {
  a->attributes = PluginAttributeList().data();
  a->num_attributes = PluginAttributeList().size();
  return nullptr;
}

template <typename Args>
Fn AsFn(Error* (*f)(Args*)) {
  return reinterpret_cast<Fn>(f);
}

template <int... N>
void FillUnsupported(Api& api, std::integer_sequence<int, N...>) {
  ((api.fns[N] = &Unsupported<N>), ...);
}

Api MakeApi() {
  Api api{};
  api.struct_size = sizeof(Api);
  api.extension_start = nullptr;
  api.pjrt_api_version.struct_size = sizeof(ApiVersion);
  api.pjrt_api_version.extension_start = nullptr;
  api.pjrt_api_version.major_version = kMajor;
  api.pjrt_api_version.minor_version = kMinor;
  FillUnsupported(api, std::make_integer_sequence<int, kNumSlots>{});
  api.fns[k_Error_Destroy] = reinterpret_cast<Fn>(reinterpret_cast<void (*)()>(&ErrorDestroy));
  api.fns[k_Error_Message] = reinterpret_cast<Fn>(reinterpret_cast<void (*)()>(&ErrorMessage));
  api.fns[k_Error_GetCode] = AsFn(&ErrorGetCode);
  api.fns[k_Plugin_Initialize] = AsFn(&PluginInitialize);
  api.fns[k_Plugin_Attributes] = AsFn(&PluginAttributes);
  api.fns[k_Event_Destroy] = AsFn(&EventDestroy);
  api.fns[k_Event_IsReady] = AsFn(&EventIsReady);
  api.fns[k_Event_Error] = AsFn(&EventError);
  api.fns[k_Event_Await] = AsFn(&EventAwait);
  api.fns[k_Event_OnReady] = AsFn(&EventOnReady);
  api.fns[k_Client_Create] = AsFn(&ClientCreate);
  api.fns[k_Client_Destroy] = AsFn(&ClientDestroy);
  api.fns[k_Client_PlatformName] = AsFn(&ClientPlatformName);
  api.fns[k_Client_ProcessIndex] = AsFn(&ClientProcessIndex);
  api.fns[k_Client_UpdateGlobalProcessInfo] = AsFn(&ClientUpdateGlobalProcessInfo);
  api.fns[k_Client_PlatformVersion] = AsFn(&ClientPlatformVersion);
  api.fns[k_Client_Devices] = AsFn(&ClientDevices);
  api.fns[k_Client_AddressableDevices] = AsFn(&ClientAddressableDevices);
  api.fns[k_Client_LookupDevice] = AsFn(&ClientLookupDevice);
  api.fns[k_Client_LookupAddressableDevice] = AsFn(&ClientLookupAddressableDevice);
  api.fns[k_Client_AddressableMemories] = AsFn(&ClientMemories);
  api.fns[k_Client_Compile] = AsFn(&ClientCompile);
  api.fns[k_Client_DefaultDeviceAssignment] = AsFn(&ClientDefaultDeviceAssignment);
  api.fns[k_Client_BufferFromHostBuffer] = AsFn(&ClientBufferFromHost);
  api.fns[k_Client_CreateUninitializedBuffer] = AsFn(&ClientCreateUninitializedBuffer);
  api.fns[k_DeviceDescription_Id] = AsFn(&DescId);
  api.fns[k_DeviceDescription_ProcessIndex] = AsFn(&DescProcessIndex);
  api.fns[k_DeviceDescription_Attributes] = AsFn(&DescAttributes);
  api.fns[k_DeviceDescription_Kind] = AsFn(&DescKind);
  api.fns[k_DeviceDescription_DebugString] = AsFn(&DescDebugString);
  api.fns[k_DeviceDescription_ToString] = AsFn(&DescToString);
  api.fns[k_Device_GetDescription] = AsFn(&DeviceGetDescription);
  api.fns[k_Device_IsAddressable] = AsFn(&DeviceIsAddressable);
  api.fns[k_Device_LocalHardwareId] = AsFn(&DeviceLocalHardwareId);
  api.fns[k_Device_AddressableMemories] = AsFn(&DeviceMemories);
  api.fns[k_Device_DefaultMemory] = AsFn(&DeviceDefaultMemory);
  api.fns[k_Device_MemoryStats] = AsFn(&DeviceMemoryStats);
  api.fns[k_Memory_Id] = AsFn(&MemoryId);
  api.fns[k_Memory_Kind] = AsFn(&MemoryKind);
  api.fns[k_Memory_Kind_Id] = AsFn(&MemoryKindId);
  api.fns[k_Memory_DebugString] = AsFn(&MemoryDebugString);
  api.fns[k_Memory_ToString] = AsFn(&MemoryToString);
  api.fns[k_Memory_AddressableByDevices] = AsFn(&MemoryDevices);
  api.fns[k_Executable_Destroy] = AsFn(&ExecutableDestroy);
  api.fns[k_Executable_Name] = AsFn(&ExecutableName);
  api.fns[k_Executable_NumReplicas] = AsFn(&ExecutableNumReplicas);
  api.fns[k_Executable_NumPartitions] = AsFn(&ExecutableNumPartitions);
  api.fns[k_Executable_NumOutputs] = AsFn(&ExecutableNumOutputs);
  api.fns[k_Executable_SizeOfGeneratedCodeInBytes] = AsFn(&ExecutableCodeSize);
  api.fns[k_Executable_GetCostAnalysis] = AsFn(&ExecutableCost);
  api.fns[k_Executable_OutputMemoryKinds] = AsFn(&ExecutableMemoryKinds);
  api.fns[k_Executable_OptimizedProgram] = AsFn(&ExecutableOptimizedProgram);
  api.fns[k_Executable_OutputElementTypes] = AsFn(&ExecutableOutputTypes);
  api.fns[k_Executable_OutputDimensions] = AsFn(&ExecutableOutputDims);
  api.fns[k_Executable_Fingerprint] = AsFn(&ExecutableFingerprint);
  api.fns[k_Executable_GetCompiledMemoryStats] = AsFn(&ExecutableMemoryStats);
  api.fns[k_LoadedExecutable_Destroy] = AsFn(&LoadedDestroy);
  api.fns[k_LoadedExecutable_GetExecutable] = AsFn(&LoadedGetExecutable);
  api.fns[k_LoadedExecutable_AddressableDevices] = AsFn(&LoadedDevices);
  api.fns[k_LoadedExecutable_Delete] = AsFn(&LoadedDelete);
  api.fns[k_LoadedExecutable_IsDeleted] = AsFn(&LoadedIsDeleted);
  api.fns[k_LoadedExecutable_Execute] = AsFn(&LoadedExecute);
  api.fns[k_LoadedExecutable_Fingerprint] = AsFn(&LoadedFingerprint);
  api.fns[k_Buffer_Destroy] = AsFn(&BufferDestroy);
  api.fns[k_Buffer_ElementType] = AsFn(&BufferElementType);
  api.fns[k_Buffer_Dimensions] = AsFn(&BufferDimensions);
  api.fns[k_Buffer_UnpaddedDimensions] = AsFn(&BufferDimensions);
  api.fns[k_Buffer_DynamicDimensionIndices] = AsFn(&BufferDynamicDims);
  api.fns[k_Buffer_GetMemoryLayout] = AsFn(&BufferGetMemoryLayout);
  api.fns[k_Buffer_OnDeviceSizeInBytes] = AsFn(&BufferOnDeviceSize);
  api.fns[k_Buffer_Device] = AsFn(&BufferDevice);
  api.fns[k_Buffer_Memory] = AsFn(&BufferMemory);
  api.fns[k_Buffer_Delete] = AsFn(&BufferDelete);
  api.fns[k_Buffer_IsDeleted] = AsFn(&BufferIsDeleted);
  api.fns[k_Buffer_CopyToDevice] = AsFn(&BufferCopyToDevice);
  api.fns[k_Buffer_CopyToMemory] = AsFn(&BufferCopyToMemory);
  api.fns[k_Buffer_ToHostBuffer] = AsFn(&BufferToHost);
  api.fns[k_Buffer_CopyRawToHost] = AsFn(&BufferCopyRawToHost);
  api.fns[k_Buffer_IsOnCpu] = AsFn(&BufferIsOnCpu);
  api.fns[k_Buffer_ReadyEvent] = AsFn(&BufferReadyEvent);
  api.fns[k_Buffer_UnsafePointer] = AsFn(&BufferUnsafePointer);
  api.fns[k_Buffer_IncreaseExternalReferenceCount] = AsFn(&BufferIncreaseExternalRefs);
  api.fns[k_Buffer_DecreaseExternalReferenceCount] = AsFn(&BufferDecreaseExternalRefs);
  api.fns[k_Buffer_OpaqueDeviceMemoryDataPointer] = AsFn(&BufferOpaquePointer);
  return api;
}

// The sizes the frameworks compare `struct_size` against (0.75).
static_assert(sizeof(Api) == 960, "PJRT_Api at 0.75: 115 functions");
static_assert(sizeof(NamedValue) == 56, "PJRT_NamedValue");
static_assert(sizeof(Program) == 48, "PJRT_Program");
static_assert(sizeof(MemoryLayout) == 80, "PJRT_Buffer_MemoryLayout");
static_assert(sizeof(ClientCreateArgs) == 88, "PJRT_Client_Create_Args");
static_assert(sizeof(KvGetArgs) == 80, "PJRT_KeyValueGetCallback_Args");
static_assert(sizeof(KvTryGetArgs) == 72, "PJRT_KeyValueTryGetCallback_Args");
static_assert(sizeof(KvPutArgs) == 64, "PJRT_KeyValuePutCallback_Args");
static_assert(sizeof(ClientCompileArgs) == 56, "PJRT_Client_Compile_Args");
static_assert(sizeof(ClientBufferFromHostArgs) == 120, "PJRT_Client_BufferFromHostBuffer_Args");
static_assert(sizeof(ClientCreateUninitializedBufferArgs) == 80, "PJRT_Client_CreateUninitializedBuffer_Args");
static_assert(sizeof(DescAttributesArgs) == 40, "PJRT_DeviceDescription_Attributes_Args");
static_assert(sizeof(DeviceMemoryStatsArgs) == 192, "PJRT_Device_MemoryStats_Args");
static_assert(sizeof(EventOnReadyArgs) == 40, "PJRT_Event_OnReady_Args");
static_assert(sizeof(ExecuteOptions) == 80, "PJRT_ExecuteOptions");
static_assert(sizeof(LoadedExecuteArgs) == 80, "PJRT_LoadedExecutable_Execute_Args");
static_assert(sizeof(ExecutableCostArgs) == 40, "PJRT_Executable_GetCostAnalysis_Args");
static_assert(sizeof(ExecutableOptimizedProgramArgs) == 32, "PJRT_Executable_OptimizedProgram_Args");
static_assert(sizeof(ExecutableOutputDimsArgs) == 48, "PJRT_Executable_OutputDimensions_Args");
static_assert(sizeof(ExecutableMemoryStatsArgs) == 112, "PJRT_Executable_GetCompiledMemoryStats_Args");
static_assert(sizeof(BufferLayoutArgs) == 104, "PJRT_Buffer_GetMemoryLayout_Args");
static_assert(sizeof(BufferToHostArgs) == 56, "PJRT_Buffer_ToHostBuffer_Args");

}  // namespace

extern "C" __attribute__((visibility("default"))) const Api* GetPjrtApi() {
  static const Api api = MakeApi();
  return &api;
}
