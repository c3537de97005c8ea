// vLLM v1's scheduler step in C++: sync or async scheduling, FCFS, no CPU tier (spec §7, §12).
//
// The same decisions as sim/sched/scheduler.py (the readable reference) in the configurations
// it covers; sim/sched/native_scheduler.py says which and falls back to the reference for the
// rest. Each request the scheduler holds has a C++ `ReqState` (tokens, progress, timings, block
// hashes) that the step reads and writes; nothing Python is read or written per running request
// per step, and a block an output token fills is hashed by the C++ hasher (requests with extra
// hash keys: by their Python hasher, then). The Python Request is brought up to date (`sync`)
// on rare events (admission, the first token, preemption, finish, abort) and whenever the
// scheduler hands it to Python code (its running and waiting lists, a step's scheduled,
// admitted, preempted, sampled and finished requests), so Python never reads a stale request
// through the scheduler. Python code runs once per step (the step's cache counters) and per
// admission (the lookup counters).
//
// Included by core.cpp inside its anonymous namespace, after CacheCore.

// A request attribute: its name, and where the slot sits in a request of the type whose
// slots were resolved (`slot_type`); -1 reads it through the generic attribute protocol.
struct Field {
    PyObject* name = nullptr;
    Py_ssize_t offset = -1;
};

struct SchedulerNames {
    Field all_token_ids;
    Field num_tokens;
    Field num_prompt_tokens;
    Field num_computed_tokens;
    Field status;
    Field is_prefill_chunk;
    Field num_preemptions;
    Field num_cached_tokens;
    Field first_scheduled_at;
    Field num_computed_prefill_tokens;
    Field planned_output_token_ids;
    Field max_tokens;
    Field last_token_at;
    Field first_token_at;
    Field finished_at;
    Field inter_token_latencies_s;
    Field block_hashes;
    Field block_hash_list;
    Field num_symbolic_tokens;
    Field trace_blocks;
    Field namespace_key;
    Field block_ids;
    Field trace_block_size;
    Field hash_keys;
    Field hasher;
    Field extend;
    Field frombytes;
    Field request_id;
    Field num_output_placeholders;
    Field num_in_flight_tokens;
    Field num_stale_output_tokens;
    Field skip_reading_prefix_cache;
    Field prefix_source;
    Field arrival_at;
    Field session_id;
    Field tenant;
};

SchedulerNames snames;
PyTypeObject* slot_type = nullptr;

void intern_scheduler_names() {
    snames.all_token_ids.name = PyUnicode_InternFromString("all_token_ids");
    snames.num_tokens.name = PyUnicode_InternFromString("num_tokens");
    snames.num_prompt_tokens.name = PyUnicode_InternFromString("num_prompt_tokens");
    snames.num_computed_tokens.name = PyUnicode_InternFromString("num_computed_tokens");
    snames.status.name = PyUnicode_InternFromString("status");
    snames.is_prefill_chunk.name = PyUnicode_InternFromString("is_prefill_chunk");
    snames.num_preemptions.name = PyUnicode_InternFromString("num_preemptions");
    snames.num_cached_tokens.name = PyUnicode_InternFromString("num_cached_tokens");
    snames.first_scheduled_at.name = PyUnicode_InternFromString("first_scheduled_at");
    snames.num_computed_prefill_tokens.name = PyUnicode_InternFromString("num_computed_prefill_tokens");
    snames.planned_output_token_ids.name = PyUnicode_InternFromString("planned_output_token_ids");
    snames.max_tokens.name = PyUnicode_InternFromString("max_tokens");
    snames.last_token_at.name = PyUnicode_InternFromString("last_token_at");
    snames.first_token_at.name = PyUnicode_InternFromString("first_token_at");
    snames.finished_at.name = PyUnicode_InternFromString("finished_at");
    snames.inter_token_latencies_s.name = PyUnicode_InternFromString("inter_token_latencies_s");
    snames.block_hashes.name = PyUnicode_InternFromString("block_hashes");
    snames.block_hash_list.name = PyUnicode_InternFromString("_block_hashes");
    snames.num_symbolic_tokens.name = PyUnicode_InternFromString("num_symbolic_tokens");
    snames.trace_blocks.name = PyUnicode_InternFromString("trace_blocks");
    snames.namespace_key.name = PyUnicode_InternFromString("namespace_key");
    snames.block_ids.name = PyUnicode_InternFromString("block_ids");
    snames.trace_block_size.name = PyUnicode_InternFromString("trace_block_size");
    snames.hash_keys.name = PyUnicode_InternFromString("hash_keys");
    snames.hasher.name = PyUnicode_InternFromString("_hasher");
    snames.extend.name = PyUnicode_InternFromString("extend");
    snames.frombytes.name = PyUnicode_InternFromString("frombytes");
    snames.request_id.name = PyUnicode_InternFromString("request_id");
    snames.num_output_placeholders.name = PyUnicode_InternFromString("num_output_placeholders");
    snames.num_in_flight_tokens.name = PyUnicode_InternFromString("num_in_flight_tokens");
    snames.num_stale_output_tokens.name = PyUnicode_InternFromString("num_stale_output_tokens");
    snames.skip_reading_prefix_cache.name = PyUnicode_InternFromString("skip_reading_prefix_cache");
    snames.prefix_source.name = PyUnicode_InternFromString("_prefix_source");
    snames.arrival_at.name = PyUnicode_InternFromString("arrival_at");
    snames.session_id.name = PyUnicode_InternFromString("session_id");
    snames.tenant.name = PyUnicode_InternFromString("tenant");
}

// Requests are slotted objects; reading and writing their slots directly skips the attribute
// lookup (type dicts, descriptors). Resolved for the first request type the scheduler sees;
// any other type goes through the generic protocol.
void resolve_slots(PyTypeObject* type) {
    if (slot_type != nullptr) return;
    slot_type = type;
    Field* all = reinterpret_cast<Field*>(&snames);
    for (size_t i = 0; i < sizeof(SchedulerNames) / sizeof(Field); ++i) {
        PyObject* descriptor = _PyType_Lookup(type, all[i].name);
        if (descriptor != nullptr && Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
            PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descriptor)->d_member;
            if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) {
                all[i].offset = member->offset;
            }
        }
    }
}

PyObject** slot(nb::handle object, const Field& field) {
    if (field.offset < 0 || Py_TYPE(object.ptr()) != slot_type) return nullptr;
    return reinterpret_cast<PyObject**>(reinterpret_cast<char*>(object.ptr()) + field.offset);
}

nb::object get(nb::handle object, const Field& field) {
    if (PyObject** place = slot(object, field); place != nullptr && *place != nullptr) {
        return nb::borrow(*place);
    }
    return attr(object, field.name);  // also raises the AttributeError of an unset slot
}

int64_t get_int(nb::handle object, const Field& field) {
    nb::object value = get(object, field);
    int64_t result = PyLong_AsLongLong(value.ptr());
    if (result == -1 && PyErr_Occurred()) throw nb::python_error();
    return result;
}

bool get_bool(nb::handle object, const Field& field) {
    int truth = PyObject_IsTrue(get(object, field).ptr());
    if (truth < 0) throw nb::python_error();
    return truth != 0;
}

// A time that may be None, as NaN.
double get_time(nb::handle object, const Field& field) {
    nb::object value = get(object, field);
    if (value.is_none()) return std::numeric_limits<double>::quiet_NaN();
    double result = PyFloat_AsDouble(value.ptr());
    if (result == -1.0 && PyErr_Occurred()) throw nb::python_error();
    return result;
}

void set_attr(nb::handle object, const Field& field, nb::handle value) {
    if (PyObject** place = slot(object, field); place != nullptr) {
        PyObject* old = *place;
        *place = Py_NewRef(value.ptr());
        Py_XDECREF(old);
        return;
    }
    if (PyObject_SetAttr(object.ptr(), field.name, value.ptr()) != 0) throw nb::python_error();
}

void set_int(nb::handle object, const Field& field, int64_t value) {
    set_attr(object, field, nb::steal(PyLong_FromLongLong(value)));
}

// A time that may be NaN, as None.
void set_time(nb::handle object, const Field& field, double value) {
    if (std::isnan(value)) {
        set_attr(object, field, nb::none());
    } else {
        set_attr(object, field, nb::steal(PyFloat_FromDouble(value)));
    }
}

// Whether a buffer's items are `Value`s (int64_t or double) in native byte order.
template <typename Value>
bool holds(const Py_buffer& view) {
    std::string_view format = view.format == nullptr ? "B" : view.format;
    if (view.itemsize != 8) return false;
    if constexpr (std::is_same_v<Value, double>) {
        return format == "d" || format == "<d" || format == "=d";
    } else {
        return format == "q" || format == "l" || format == "<q" || format == "<l" ||
               format == "=q" || format == "=l";
    }
}

// Append a sequence of int64 (or double): a buffer of them (array('q'), numpy) or Python
// numbers.
template <typename Value>
void read_numbers(nb::handle sequence, std::vector<Value>& out) {
    if (!PyList_Check(sequence.ptr()) && PyObject_CheckBuffer(sequence.ptr())) {
        Py_buffer view;
        if (PyObject_GetBuffer(sequence.ptr(), &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            bool matches = holds<Value>(view);
            if (matches) {
                const auto* items = static_cast<const Value*>(view.buf);
                out.insert(out.end(), items, items + view.len / 8);
            }
            PyBuffer_Release(&view);
            if (matches) return;
        } else {
            PyErr_Clear();
        }
    }
    nb::object items = nb::steal(PySequence_Fast(sequence.ptr(), "expected a sequence of numbers"));
    if (!items.is_valid()) throw nb::python_error();
    Py_ssize_t size = PySequence_Fast_GET_SIZE(items.ptr());
    PyObject** values = PySequence_Fast_ITEMS(items.ptr());
    for (Py_ssize_t i = 0; i < size; ++i) {
        Value value;
        if constexpr (std::is_same_v<Value, double>) {
            value = PyFloat_AsDouble(values[i]);
        } else {
            value = PyLong_AsLongLong(values[i]);
        }
        if (value == Value(-1) && PyErr_Occurred()) throw nb::python_error();
        out.push_back(value);
    }
}

// A sequence of int64 read in place when it is an int64 buffer (array('q'), numpy), else
// copied into `copy`; the buffer is held (so cannot be resized) while the span lives.
struct Int64Span {
    const int64_t* data = nullptr;
    size_t size = 0;

    Int64Span(nb::handle sequence, std::vector<int64_t>& copy) {
        if (!PyList_Check(sequence.ptr()) && PyObject_CheckBuffer(sequence.ptr())) {
            if (PyObject_GetBuffer(sequence.ptr(), &view_, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
                if (holds<int64_t>(view_)) {
                    data = static_cast<const int64_t*>(view_.buf);
                    size = size_t(view_.len / 8);
                    held_ = true;
                    return;
                }
                PyBuffer_Release(&view_);
            } else {
                PyErr_Clear();
            }
        }
        read_numbers(sequence, copy);
        data = copy.data();
        size = copy.size();
    }

    Int64Span(const Int64Span&) = delete;
    Int64Span& operator=(const Int64Span&) = delete;

    ~Int64Span() {
        if (held_) PyBuffer_Release(&view_);
    }

  private:
    Py_buffer view_{};
    bool held_ = false;
};

void call_method(nb::handle object, const Field& method, nb::handle argument) {
    PyObject* result = PyObject_CallMethodOneArg(object.ptr(), method.name, argument.ptr());
    if (result == nullptr) throw nb::python_error();
    Py_DECREF(result);
}

// Whether `sequence` is an array.array of `format` (one character, 8-byte items).
bool is_array_of(nb::handle sequence, char format) {
    if (std::strcmp(Py_TYPE(sequence.ptr())->tp_name, "array.array") != 0) return false;
    Py_buffer view;
    if (PyObject_GetBuffer(sequence.ptr(), &view, PyBUF_FORMAT) != 0) {
        PyErr_Clear();
        return false;
    }
    bool matches = view.itemsize == 8 && view.format != nullptr && view.format[0] == format &&
                   view.format[1] == '\0';
    PyBuffer_Release(&view);
    return matches;
}

nb::object to_python(int64_t value) { return nb::steal(PyLong_FromLongLong(value)); }
nb::object to_python(double value) { return nb::steal(PyFloat_FromDouble(value)); }

// Append values to an array('q') (int64) or array('d') (double) in one copy, or to any other
// sequence (a list) through `extend`.
template <typename Value>
void extend_with(nb::handle sequence, const Value* values, size_t count) {
    if (count == 0) return;
    if (is_array_of(sequence, std::is_same_v<Value, double> ? 'd' : 'q')) {
        // A read-only view of the values: frombytes copies them once, into the array.
        nb::object view = nb::steal(PyMemoryView_FromMemory(
            reinterpret_cast<char*>(const_cast<Value*>(values)), Py_ssize_t(count * sizeof(Value)),
            PyBUF_READ));
        if (!view.is_valid()) throw nb::python_error();
        call_method(sequence, snames.frombytes, view);
        return;
    }
    nb::list items;
    for (size_t i = 0; i < count; ++i) {
        if (PyList_Append(items.ptr(), to_python(values[i]).ptr()) != 0) throw nb::python_error();
    }
    call_method(sequence, snames.extend, items);
}

// The request states the scheduler distinguishes (RequestStatus); the Python objects are
// the RequestStatus members, set once (they live as long as the interpreter).
enum class Status : uint8_t { kWaiting, kRunning, kPreempted, kFinished, kAborted };

struct StatusObjects {
    PyObject* running = nullptr;
    PyObject* preempted = nullptr;
    PyObject* finished = nullptr;
};

StatusObjects status_objects;

// Vectors of requests the scheduler let go of (ReqState takes and gives them).
SparePool<double> spare_doubles;
SparePool<int64_t> spare_int64s;
SparePool<Digest> spare_digests;

// The block hashes of finished requests, each kept with its Python request, for a later
// request naming it as its prefix source (a session's next turn, whose prompt repeats this
// one's tokens): the hashes of the full blocks the two share are copied, not recomputed, as
// CacheRequest._identify_blocks copies them. A request no one else holds can be named by no
// later one: such are dropped whenever the kept ones have doubled.
class FinishedTurns {
  public:
    void keep(const nb::object& request, const NativeHasher* hasher,
              std::vector<Digest>&& hashes) {
        if (turns_.size() >= sweep_at_) {
            std::erase_if(turns_, [](const auto& entry) { return Py_REFCNT(entry.first) == 1; });
            sweep_at_ = std::max<size_t>(kMinSweep, 2 * turns_.size());
        }
        turns_.insert_or_assign(request.ptr(), Turn{request, hasher, std::move(hashes)});
    }

    // Fill `hashes` (empty) with those of the leading full blocks of `tokens` (from position
    // 0) that `source`, kept with hashes made by `hasher`, has too; `source` is let go.
    void take_shared(nb::handle source, const NativeHasher& hasher, const int64_t* tokens,
                     int64_t num_tokens, std::vector<Digest>& hashes) {
        auto found = turns_.find(source.ptr());
        if (found == turns_.end()) return;
        Turn turn = std::move(found->second);
        turns_.erase(found);
        if (turn.hasher != &hasher) return;
        std::vector<int64_t> copied;
        Int64Span source_tokens(get(source, snames.all_token_ids), copied);
        int64_t block_size = hasher.block_size();
        int64_t num_candidates = std::min({num_tokens, int64_t(source_tokens.size),
                                           int64_t(turn.hashes.size()) * block_size}) /
                                 block_size;
        // Most often the source's tokens all lead this prompt: one comparison of them all.
        size_t block_bytes = size_t(block_size) * sizeof(int64_t);
        int64_t num_shared = 0;
        if (num_candidates > 0 &&
            std::memcmp(tokens, source_tokens.data, size_t(num_candidates) * block_bytes) == 0) {
            num_shared = num_candidates;
        }
        while (num_shared < num_candidates &&
               std::memcmp(tokens + num_shared * block_size,
                           source_tokens.data + num_shared * block_size, block_bytes) == 0) {
            ++num_shared;
        }
        hashes.assign(turn.hashes.begin(), turn.hashes.begin() + num_shared);
        spare_digests.give(turn.hashes);
    }

  private:
    static constexpr size_t kMinSweep = 64;

    struct Turn {
        nb::object request;
        const NativeHasher* hasher;
        std::vector<Digest> hashes;
    };

    std::unordered_map<PyObject*, Turn> turns_;
    size_t sweep_at_ = kMinSweep;
};

// One request as the scheduler keeps it. What a step reads and writes comes first (one or
// two cache lines). Output tokens are counted per step and read from the planned outputs in
// place; they are written into `tokens` only when read with prompt tokens before them (the
// block the prompt ends in, filled by outputs).
struct ReqState {
    int64_t num_tokens_ = 0;  // prompt plus outputs so far
    int64_t num_prompt_tokens = 0;
    int64_t max_tokens = 0;
    int64_t num_computed_tokens = 0;
    int64_t num_output_placeholders = 0;
    int64_t num_in_flight_tokens = 0;
    int64_t num_stale_output_tokens = 0;
    double last_token_at = std::numeric_limits<double>::quiet_NaN();
    RequestBlocks* blocks = nullptr;  // its blocks in the cache core, while it holds some
    Status status = Status::kWaiting;
    bool is_prefill_chunk = false;
    int64_t num_hashes_ = 0;  // hashes.size(), read per step to see whether a block filled
    // Lazy decoding (SchedulerCore's LazyDecoders): the id of the first step the request
    // decodes in implicitly, -1 while it is stepped; its context in step s is lazy_offset + s.
    int64_t lazy_from = -1;
    int64_t lazy_offset = 0;
    int64_t running_rank = 0;  // running requests run in increasing rank (SchedulerCore::stepped_)
    std::vector<double> new_itls;  // inter-token latencies not yet in the Python request
    int64_t num_computed_prefill_tokens = 0;
    // The tokens from position token_offset on (the request's num_symbolic_tokens, as the
    // tokens of the blocks its trace block ids identify are never made; with the C++ hasher,
    // the end of the prompt's last full block), the first tokens.size() of them written.
    std::vector<int64_t> tokens;
    int64_t token_offset = 0;
    std::vector<int64_t> planned;  // planned_output_token_ids
    std::vector<Digest> hashes;
    NativeHasher* hasher = nullptr;  // null: blocks are hashed by the request's Python hasher
    bool symbolic = false;  // made from trace block ids (num_symbolic_tokens > 0)
    bool skip_reading_prefix_cache = false;
    bool stop_on_finish = false;  // the compiled step loop stops after the step finishing it
    int64_t num_cached_tokens = -1;
    int64_t num_preemptions = 0;
    double first_scheduled_at = std::numeric_limits<double>::quiet_NaN();
    double first_token_at = std::numeric_limits<double>::quiet_NaN();
    double finished_at = std::numeric_limits<double>::quiet_NaN();
    nb::object request;     // the Python Request
    nb::object request_id;  // its id, a str
    std::string id;
    // What the Python request already holds: tokens and its status (its hashes: as many as its
    // list holds).
    int64_t synced_tokens = 0;
    Status synced_status = Status::kWaiting;

    int64_t num_tokens() const { return num_tokens_; }
    int64_t num_output_tokens() const { return num_tokens_ - num_prompt_tokens; }
    bool is_finished() const { return status == Status::kFinished || status == Status::kAborted; }

    // Read a request the scheduler is given (add_request); the hashes of its prompt's blocks
    // its prefix source shares are taken from `finished` when kept there.
    ReqState(nb::handle object, FinishedTurns& finished)
        : new_itls(spare_doubles.take()),
          tokens(spare_int64s.take()),
          planned(spare_int64s.take()),
          hashes(spare_digests.take()),
          request(nb::borrow(object)) {
        request_id = get(object, snames.request_id);
        id = std::string(id_view(request_id));
        num_prompt_tokens = get_int(object, snames.num_prompt_tokens);
        max_tokens = get_int(object, snames.max_tokens);
        read_numbers(get(object, snames.planned_output_token_ids), planned);
        token_offset = get_int(object, snames.num_symbolic_tokens);
        symbolic = token_offset != 0;
        std::vector<int64_t> copied;  // the tokens, when they are not an int64 buffer
        Int64Span known(get(object, snames.all_token_ids), copied);
        num_tokens_ = synced_tokens = token_offset + int64_t(known.size);
        nb::object python_hasher = get(object, snames.hasher);
        NativeHasher* native = nullptr;
        if (nb::try_cast<NativeHasher*>(python_hasher, native) && native != nullptr &&
            native->hashes_natively(get(object, snames.hash_keys))) {
            hasher = native;
        }
        if (hasher != nullptr) {
            // Room for the hashes of every block the request can fill, and for its latencies:
            // decoding never grows these.
            int64_t max_num_tokens =
                std::max(num_tokens_, num_prompt_tokens + int64_t(planned.size()));
            hashes.reserve(size_t(max_num_tokens / hasher->block_size() + 1));
        }
        new_itls.reserve(planned.size());
        if (hasher != nullptr && get(object, snames.block_hash_list).is_none()) {
            identify_prompt_blocks(get(object, snames.trace_blocks), known.data, known.size,
                                   finished);
        } else {
            nb::object hash_objects = hash_list(object);
            Py_ssize_t num_hashes = PyList_GET_SIZE(hash_objects.ptr());
            hashes.reserve(size_t(num_hashes));
            for (Py_ssize_t i = 0; i < num_hashes; ++i) {
                hashes.push_back(digest_of(PyList_GET_ITEM(hash_objects.ptr(), i)));
            }
        }
        num_hashes_ = int64_t(hashes.size());
        // The C++ hasher reads only the tokens of blocks not hashed yet, and a sync only the
        // outputs: the tokens of hashed blocks are not kept (the Python hasher is given
        // the request's own tokens, from num_symbolic_tokens on).
        int64_t keep_from = token_offset;
        if (hasher != nullptr) {
            keep_from = std::clamp(num_hashes_ * hasher->block_size(), token_offset, num_tokens_);
        }
        tokens.assign(known.data + (keep_from - token_offset), known.data + known.size);
        token_offset = keep_from;
        skip_reading_prefix_cache = get_bool(object, snames.skip_reading_prefix_cache);
        nb::object status_object = get(object, snames.status);
        if (status_object.is(status_objects.running)) status = Status::kRunning;
        if (status_object.is(status_objects.preempted)) status = Status::kPreempted;
        synced_status = status;
        is_prefill_chunk = get_bool(object, snames.is_prefill_chunk);
        num_computed_tokens = get_int(object, snames.num_computed_tokens);
        num_computed_prefill_tokens = get_int(object, snames.num_computed_prefill_tokens);
        num_cached_tokens = get_int(object, snames.num_cached_tokens);
        num_preemptions = get_int(object, snames.num_preemptions);
        num_output_placeholders = get_int(object, snames.num_output_placeholders);
        num_in_flight_tokens = get_int(object, snames.num_in_flight_tokens);
        num_stale_output_tokens = get_int(object, snames.num_stale_output_tokens);
        first_scheduled_at = get_time(object, snames.first_scheduled_at);
        first_token_at = get_time(object, snames.first_token_at);
        last_token_at = get_time(object, snames.last_token_at);
    }

    ReqState(const ReqState&) = delete;
    ReqState& operator=(const ReqState&) = delete;

    ~ReqState() {
        spare_doubles.give(new_itls);
        spare_int64s.give(tokens);
        spare_int64s.give(planned);
        spare_digests.give(hashes);
    }

    // The hashes of a prompt whose Python request has made none (CacheRequest._identify_blocks),
    // computed here: the blocks its trace block ids identify, if any, or those its prefix
    // source shares, then its tokens' blocks.
    void identify_prompt_blocks(nb::handle blocks, const int64_t* known_tokens,
                                size_t num_known, FinishedTurns& finished) {
        if (blocks.is_none()) {
            nb::object source = get(request, snames.prefix_source);
            if (!source.is_none()) {
                finished.take_shared(source, *hasher, known_tokens, int64_t(num_known), hashes);
            }
            hasher->extend_digests(hashes, known_tokens, token_offset, num_tokens_);
            return;
        }
        std::vector<int64_t> block_ids;
        read_numbers(get(blocks, snames.block_ids), block_ids);
        if (std::any_of(block_ids.begin(), block_ids.end(), [](int64_t id) { return id < 0; })) {
            throw nb::value_error("a trace block id is negative");
        }
        nb::object key = get(blocks, snames.namespace_key);
        uint64_t namespace_key = PyLong_AsUnsignedLongLong(key.ptr());
        if (namespace_key == uint64_t(-1) && PyErr_Occurred()) throw nb::python_error();
        hasher->extend_trace_digests(hashes, namespace_key, block_ids,
                                     get_int(blocks, snames.trace_block_size), token_offset);
        hasher->extend_digests(hashes, known_tokens, token_offset, num_tokens_);
    }

    // The tokens at positions [from, num_tokens_) (from >= token_offset), contiguous: outputs
    // alone are the planned ones; else the outputs sampled since are written into `tokens`.
    const int64_t* tokens_from(int64_t from) {
        if (from >= num_prompt_tokens) return planned.data() + (from - num_prompt_tokens);
        int64_t written_to = token_offset + int64_t(tokens.size());
        if (written_to < num_tokens_) {
            tokens.insert(tokens.end(), planned.begin() + (written_to - num_prompt_tokens),
                          planned.begin() + (num_tokens_ - num_prompt_tokens));
        }
        return tokens.data() + (from - token_offset);
    }

    // Bring the Python request up to date.
    void sync() {
        nb::handle object = request;
        if (synced_tokens < num_tokens_) {
            extend_with(get(object, snames.all_token_ids), tokens_from(synced_tokens),
                        size_t(num_tokens_ - synced_tokens));
            set_int(object, snames.num_tokens, num_tokens_);  // a slot, kept with the tokens
            synced_tokens = num_tokens_;
        }
        sync_hashes();
        if (!new_itls.empty()) {
            extend_with(get(object, snames.inter_token_latencies_s), new_itls.data(),
                        new_itls.size());
            new_itls.clear();
        }
        if (status != synced_status && status != Status::kAborted) {
            PyObject* value = status == Status::kRunning     ? status_objects.running
                              : status == Status::kPreempted ? status_objects.preempted
                                                              : status_objects.finished;
            set_attr(object, snames.status, value);
            synced_status = status;
        }
        set_attr(object, snames.is_prefill_chunk, is_prefill_chunk ? Py_True : Py_False);
        set_int(object, snames.num_computed_tokens, num_computed_tokens);
        set_int(object, snames.num_computed_prefill_tokens, num_computed_prefill_tokens);
        set_int(object, snames.num_cached_tokens, num_cached_tokens);
        set_int(object, snames.num_preemptions, num_preemptions);
        set_int(object, snames.num_output_placeholders, num_output_placeholders);
        set_int(object, snames.num_in_flight_tokens, num_in_flight_tokens);
        set_int(object, snames.num_stale_output_tokens, num_stale_output_tokens);
        set_time(object, snames.first_scheduled_at, first_scheduled_at);
        set_time(object, snames.first_token_at, first_token_at);
        set_time(object, snames.last_token_at, last_token_at);
        if (!std::isnan(finished_at)) set_time(object, snames.finished_at, finished_at);
    }

    // Append the hashes the Python request's list lacks, if it has made its list (a request
    // made from trace block ids makes it when first read, from its own tokens).
    void sync_hashes() {
        nb::object hash_objects = get(request, snames.block_hash_list);
        if (hash_objects.is_none()) return;
        if (!PyList_Check(hash_objects.ptr())) throw nb::type_error("block hashes must be a list");
        for (size_t i = size_t(PyList_GET_SIZE(hash_objects.ptr())); i < hashes.size(); ++i) {
            if (PyList_Append(hash_objects.ptr(), digest_bytes(hashes[i]).ptr()) != 0) {
                throw nb::python_error();
            }
        }
    }

    // Sample the next `count` planned tokens; hash the blocks they fill, as
    // CacheRequest.append_output_token_ids does.
    void append_tokens(int64_t count, int64_t block_size) {
        if (num_output_tokens() + count > int64_t(planned.size())) {
            throw nb::index_error("no planned output token left to sample");
        }
        num_tokens_ += count;
        if (num_tokens_ < (num_hashes_ + 1) * block_size) return;  // fills no block
        if (hasher != nullptr) {
            int64_t from = num_hashes_ * block_size;
            hasher->extend_digests(hashes, tokens_from(from), from, num_tokens_);
            num_hashes_ = int64_t(hashes.size());
            return;
        }
        // Extra hash keys: the request's Python hasher extends its Python list.
        sync();
        nb::object hash_objects = hash_list(request);
        get(request, snames.hasher)
            .attr(snames.extend.name)(hash_objects, get(request, snames.all_token_ids),
                                      get(request, snames.hash_keys), token_offset);
        for (Py_ssize_t i = Py_ssize_t(hashes.size()); i < PyList_GET_SIZE(hash_objects.ptr()); ++i) {
            hashes.push_back(digest_of(PyList_GET_ITEM(hash_objects.ptr(), i)));
        }
        num_hashes_ = int64_t(hashes.size());
    }

    HashSpan hash_span() const { return HashSpan::of(hashes); }
};

// A request's state is shared by the scheduler's queues and the steps in flight, and touched
// only with the GIL held: with libstdc++ its reference counts take plain increments, not the
// atomic ones std::shared_ptr uses once the process has threads (about 1.6 % of the engine
// bench's hour went to them).
#if defined(__GLIBCXX__)
using State = std::__shared_ptr<ReqState, __gnu_cxx::_S_single>;
template <class... Args>
State make_state(Args&&... args) {
    return std::__make_shared<ReqState, __gnu_cxx::_S_single>(std::forward<Args>(args)...);
}
#else
using State = std::shared_ptr<ReqState>;
template <class... Args>
State make_state(Args&&... args) {
    return std::make_shared<ReqState>(std::forward<Args>(args)...);
}
#endif

// Loops over a step's requests fetch the lines a request's step reads a few requests ahead:
// its state's first lines, then (the state loaded by then) its held blocks and where its next
// inter-token latency goes, so the cache misses of consecutive requests overlap.
void prefetch_ahead(const std::vector<State>& states, size_t index) {
    constexpr size_t kAhead = 4;
    if (index + 2 * kAhead < states.size()) {
        const char* state = reinterpret_cast<const char*>(states[index + 2 * kAhead].get());
        __builtin_prefetch(state);
        __builtin_prefetch(state + 64);
    }
    if (index + kAhead < states.size()) {
        const ReqState& state = *states[index + kAhead];
        if (state.blocks != nullptr) __builtin_prefetch(state.blocks);
        __builtin_prefetch(state.new_itls.data() + state.new_itls.size());
    }
}

// Python views of requests: each brought up to date first.
nb::list synced_list(const std::vector<State>& states) {
    nb::list out;
    for (const State& state : states) {
        state->sync();
        out.append(state->request);
    }
    return out;
}

// The integer settings the scheduler reads (SchedulerConfig's fields).
struct SchedulerLimits {
    int64_t max_num_batched_tokens;
    int64_t max_num_admitted_seqs;
    int64_t max_model_len;
    bool enable_chunked_prefill;
    int64_t long_prefill_token_threshold;
    bool long_prefill_token_threshold_adaptive;
    bool scheduler_reserve_full_isl;
    int64_t prefill_schedule_interval;
    bool async_scheduling;
};

// One step's batch: requests in scheduling order and the batch shape the cost model reads.
struct StepOutput {
    std::vector<State> scheduled;
    std::vector<int64_t> num_scheduled;
    std::vector<uint8_t> partial;  // the request's chunk stops short of its sequence end
    std::vector<int64_t> prefill_new_tokens;
    std::vector<int64_t> prefill_context_tokens;
    std::vector<int64_t> decode_context_lens;
    std::vector<State> preempted;
    // Admissions in order: the request, its tokens already in KV (the prefix hit), resumed.
    std::vector<std::tuple<State, int64_t, bool>> admitted;
    nb::object admission_type;  // sim.sched.Admission, built when Python reads `admitted`
    int64_t total_num_scheduled_tokens = 0;
    bool carries_prefill = false;
    // With lazy decoding: the step's id, and its implicit decodes (not in `scheduled`), their
    // total context and the longest of them (-1 with none).
    int64_t step_id = -1;
    int64_t num_lazy_decodes = 0;
    int64_t lazy_kv_tokens = 0;
    int64_t lazy_longest_context = -1;

    nb::list ints(const std::vector<int64_t>& values) const {
        nb::list out;
        for (int64_t value : values) {
            nb::object item = nb::steal(PyLong_FromLongLong(value));
            if (PyList_Append(out.ptr(), item.ptr()) != 0) throw nb::python_error();
        }
        return out;
    }

    // Empty again, keeping the vectors' room (the step loop reuses its outputs).
    void clear() {
        scheduled.clear();
        num_scheduled.clear();
        partial.clear();
        prefill_new_tokens.clear();
        prefill_context_tokens.clear();
        decode_context_lens.clear();
        preempted.clear();
        admitted.clear();
        total_num_scheduled_tokens = 0;
        carries_prefill = false;
        step_id = -1;
        num_lazy_decodes = 0;
        lazy_kv_tokens = 0;
        lazy_longest_context = -1;
    }

    void add(const State& state, int64_t num_new_tokens) {
        scheduled.push_back(state);
        num_scheduled.push_back(num_new_tokens);
    }

    // Drop a preempted request from the batch; the tokens it had (0 if none).
    int64_t take_back(const State& state) {
        for (size_t i = 0; i < scheduled.size(); ++i) {
            if (scheduled[i] == state) {
                int64_t tokens = num_scheduled[i];
                scheduled.erase(scheduled.begin() + long(i));
                num_scheduled.erase(num_scheduled.begin() + long(i));
                return tokens;
            }
        }
        return 0;
    }
};

// What update_from_output reports: the requests that sampled a token and those that finished,
// in step order, and the prefix-cache counters since the previous step (the Python lists and
// PrefixCacheStats built, and requests synced, when read).
struct StepFinished {
    std::vector<State> sampled;
    std::vector<State> finished;
    LookupCounts counts;
    nb::object stats_type;  // sim.kvcache.PrefixCacheStats
};

// Event-driven decoding for the compiled step loop, as sim/sched/lazy_decode.py does for the
// reference scheduler (there with sync scheduling only; here with async too). A request the
// running pass would give one decode token, whose next steps allocate, fill-and-cache or cache
// no block, do not sample its last token and stay below max_model_len, becomes *lazy*: the
// steps take it implicitly (in their batch shape, budget and records, not in their request
// lists) and their effects on it (computed tokens, sampled tokens, inter-token latencies,
// placeholders) are applied in bulk when it is next due or needed (a step that could run
// short of budget or blocks, an abort, Python reading the running list). A step of its still
// in flight then lists it as any other (only request-local effects are left for it: the
// window excludes the rest). Decisions, block ids, times and counters are those of stepping
// every request (tests/native/test_lazy_decoding.py compares both, file for file).
//
// Steps are numbered as scheduled (those with tokens only: a lazy request makes its steps
// non-empty) and applied in that order; a lazy request's context in step s is
// lazy_offset + s.
class LazyDecoders {
  public:
    LazyDecoders(int64_t block_size, bool async_scheduling)
        : block_size_(block_size), async_scheduling_(async_scheduling) {}

    int64_t num_lazy() const { return num_lazy_; }
    int64_t num_implicit_decodes = 0;  // decode tokens steps took implicitly so far

    // `state` decodes implicitly from the step being scheduled on, `num_steps` steps at most.
    void start(const State& state, int64_t num_steps) {
        ReqState& request = *state;
        int64_t step = next_step_id_;
        request.lazy_from = step;
        request.lazy_offset = request.num_computed_tokens - step;
        ++num_lazy_;
        context_offset_sum_ += request.lazy_offset;
        push(due_, Entry{step + num_steps, step, state}, std::greater<>());
        push(longest_, Entry{request.lazy_offset, step, state}, std::less<>());
    }

    // The lazy requests due in the step about to be scheduled, appended to `due`.
    void take_due(std::vector<State>& due) {
        while (!due_.empty() && due_.front().key <= next_step_id_) {
            std::pop_heap(due_.begin(), due_.end(), std::greater<>());
            Entry entry = std::move(due_.back());
            due_.pop_back();
            if (entry.is_live()) due.push_back(std::move(entry.state));
        }
    }

    // Apply the steps a lazy request skipped (through the last applied one), count the ones
    // in flight, and list it in those; it is stepped again from the step being scheduled.
    void materialize(const State& state) {
        ReqState& request = *state;
        int64_t from = request.lazy_from;
        int64_t num_scheduled = next_step_id_ - from;
        int64_t num_applied = std::max<int64_t>(0, last_applied_id_ + 1 - from);
        if (num_applied) {
            request.append_tokens(num_applied, block_size_);
            // The latencies the samples would have appended one by one, the same differences.
            const double* at = applied_at_.data() + (from - first_applied_id_);
            std::vector<double>& itls = request.new_itls;
            itls.push_back(at[0] - request.last_token_at);
            for (int64_t i = 1; i < num_applied; ++i) itls.push_back(at[i] - at[i - 1]);
            request.last_token_at = at[num_applied - 1];
        }
        request.num_computed_tokens += num_scheduled;
        if (async_scheduling_) {
            request.num_output_placeholders += num_scheduled - num_applied;
            request.num_in_flight_tokens += num_scheduled - num_applied;
        }
        for (StepOutput* output : in_flight_) {
            if (output->step_id < from) continue;
            output->scheduled.push_back(state);
            output->num_scheduled.push_back(1);
            output->partial.push_back(0);
        }
        request.lazy_from = -1;
        --num_lazy_;
        context_offset_sum_ -= request.lazy_offset;
    }

    // A request's queued tokens (SchedulerCore::num_queued_tokens) from its state as stored:
    // with async scheduling a skipped step adds a computed token and a placeholder and its
    // sample trades the placeholder for a token, so nothing changes; with sync scheduling a
    // skipped step in flight has computed a token not yet sampled.
    int64_t queued_tokens(const ReqState& request) const {
        int64_t queued =
            request.num_tokens() + request.num_output_placeholders - request.num_computed_tokens;
        if (request.lazy_from < 0 || async_scheduling_) return queued;
        int64_t num_scheduled = next_step_id_ - request.lazy_from;
        int64_t num_applied = std::max<int64_t>(0, last_applied_id_ + 1 - request.lazy_from);
        return queued - (num_scheduled - num_applied);
    }

    // The implicit decodes of the step scheduled into `output` (its running pass done).
    void add_to_batch(StepOutput& output) {
        if (num_lazy_ == 0) return;
        num_implicit_decodes += num_lazy_;
        output.num_lazy_decodes = num_lazy_;
        output.lazy_kv_tokens = context_offset_sum_ + num_lazy_ * next_step_id_;
        while (!longest_.front().is_live()) {
            std::pop_heap(longest_.begin(), longest_.end(), std::less<>());
            longest_.pop_back();
        }
        output.lazy_longest_context = longest_.front().key + next_step_id_;
        if (longest_.size() > 2 * size_t(num_lazy_) + kCompactSlack) keep_live(longest_, std::less<>());
    }

    // The step scheduled into `output` is launched: a step with tokens takes the next id and
    // is remembered until applied.
    void launched(StepOutput& output) {
        if (!output.total_num_scheduled_tokens) return;
        output.step_id = next_step_id_++;
        in_flight_.push_back(&output);
    }

    // `output`, the oldest step in flight, is applied at `now`.
    void applied(const StepOutput& output, double now) {
        if (in_flight_.empty() || in_flight_.front() != &output) {
            throw std::logic_error("lazy decoding: steps must be applied in launch order");
        }
        in_flight_.pop_front();
        last_applied_id_ = output.step_id;
        if (num_lazy_ == 0) {  // no request can need this step's time or any before it
            applied_at_.clear();
            first_applied_id_ = last_applied_id_ + 1;
            return;
        }
        applied_at_.push_back(now);
        if (applied_at_.size() >= kCompactEverySteps) drop_times_no_request_needs();
    }

  private:
    static constexpr size_t kCompactEverySteps = 8192;
    static constexpr size_t kCompactSlack = 1024;

    // A heap entry: a key, the lazy period it was pushed for (stale once the request left it).
    struct Entry {
        int64_t key;
        int64_t lazy_from;
        State state;

        bool is_live() const { return state->lazy_from == lazy_from; }
        bool operator<(const Entry& other) const { return key < other.key; }
        bool operator>(const Entry& other) const { return key > other.key; }
    };

    template <typename Order>
    static void push(std::vector<Entry>& heap, Entry entry, Order order) {
        heap.push_back(std::move(entry));
        std::push_heap(heap.begin(), heap.end(), order);
    }

    template <typename Order>
    static void keep_live(std::vector<Entry>& heap, Order order) {
        std::erase_if(heap, [](const Entry& entry) { return !entry.is_live(); });
        std::make_heap(heap.begin(), heap.end(), order);
    }

    // Every lazy request has its live entry in `due_`: times before the earliest one's first
    // skipped step are never read again.
    void drop_times_no_request_needs() {
        int64_t oldest = last_applied_id_ + 1;
        for (const Entry& entry : due_) {
            if (entry.is_live()) oldest = std::min(oldest, entry.lazy_from);
        }
        int64_t num_dropped = oldest - first_applied_id_;
        applied_at_.erase(applied_at_.begin(), applied_at_.begin() + num_dropped);
        first_applied_id_ = oldest;
    }

    int64_t block_size_;
    bool async_scheduling_;
    int64_t num_lazy_ = 0;
    int64_t context_offset_sum_ = 0;  // sum of the lazy requests' lazy_offset
    int64_t next_step_id_ = 0;
    int64_t last_applied_id_ = -1;
    // applied_at_[s - first_applied_id_]: when step s was applied (its tokens sampled).
    std::vector<double> applied_at_;
    int64_t first_applied_id_ = 0;
    std::deque<StepOutput*> in_flight_;  // launched steps with tokens, oldest first
    std::vector<Entry> due_;      // min-heap on the step a request is due in
    std::vector<Entry> longest_;  // max-heap on lazy_offset
};

class SchedulerCore {
  public:
    SchedulerCore(nb::object manager, SchedulerLimits limits, nb::dict requests,
                  nb::object running_status, nb::object preempted_status,
                  nb::object finished_status, nb::object admission_type, nb::object stats_type)
        : manager_object_(manager),
          manager_(nb::cast<CacheCore*>(manager)),
          limits_(limits),
          requests_(requests),
          admission_type_(admission_type),
          stats_type_(stats_type),
          last_prefill_step_(-limits.prefill_schedule_interval) {
        // RequestStatus members live as long as the interpreter: the references are never
        // released.
        status_objects = StatusObjects{running_status.inc_ref().ptr(),
                                       preempted_status.inc_ref().ptr(),
                                       finished_status.inc_ref().ptr()};
    }

    int64_t num_running() const { return int64_t(running_.size()); }
    int64_t num_waiting() const { return int64_t(waiting_.size()); }
    int64_t num_preemptions = 0;
    int64_t num_executed_steps() const { return num_executed_steps_; }

    nb::list running() {
        materialize_all();
        return synced_list(running_);
    }

    nb::list waiting() const {
        return synced_list(std::vector<State>(waiting_.begin(), waiting_.end()));
    }

    // Tokens of unfinished requests not yet scheduled, an output placeholder counted as one
    // (what SchedulerReplica.num_queued_tokens balances on).
    int64_t num_queued_tokens() const {
        int64_t total = 0;
        for (const State& state : running_) {
            total += lazy_ ? lazy_->queued_tokens(*state) : queued_tokens(*state);
        }
        for (const State& state : waiting_) total += queued_tokens(*state);
        return total;
    }

    // Lazy decoding from now on (the compiled step loop, which launches and applies every
    // step; Python's schedule and update_from_output are refused then).
    void enable_lazy_decoding() {
        if (!lazy_) {
            lazy_ = std::make_unique<LazyDecoders>(manager_->block_size(),
                                                   limits_.async_scheduling);
        }
    }

    bool lazy_decoding() const { return lazy_ != nullptr; }

    // Decode tokens steps took implicitly so far (0 without lazy decoding).
    int64_t num_implicit_decodes() const { return lazy_ ? lazy_->num_implicit_decodes : 0; }

    void add_request(nb::handle request) {
        resolve_slots(Py_TYPE(request.ptr()));
        State state = make_state(request, finished_turns_);
        states_[request.ptr()] = state;
        waiting_.push_back(std::move(state));
    }

    // The compiled step loop stops right after the step that finishes `request`, if it
    // holds it (a flag on its state: nothing outlives the request).
    void stop_on_finish_of(nb::handle request) {
        auto found = states_.find(request.ptr());
        if (found != states_.end()) found->second->stop_on_finish = true;
    }

    // Take `request` out of its queue (abort), brought up to date; the caller frees its
    // blocks and marks it.
    void remove(nb::handle request) {
        auto found = states_.find(request.ptr());
        if (found == states_.end()) return;
        State state = found->second;
        if (state->lazy_from >= 0) materialize(state);
        state->sync();
        state->status = Status::kAborted;
        state->blocks = nullptr;  // the caller frees them
        release(*state);
        if (erase_from(running_, state)) {
            erase_from(stepped_, state);
        } else {
            erase_from(waiting_, state);
        }
    }

    StepOutput* schedule(double now) {
        refuse_python_steps();
        auto output = std::make_unique<StepOutput>();
        schedule_into(*output, now);
        return output.release();
    }

    // Schedule a step into `output`, which must be empty (a new or a cleared one).
    void schedule_into(StepOutput& output, double now) {
        output.admission_type = admission_type_;
        output.scheduled.reserve(running_.size() + 1);
        output.num_scheduled.reserve(running_.size() + 1);
        int64_t threshold = long_prefill_threshold();
        bool hold_prefill = hold_prefill_now();
        int64_t budget = limits_.max_num_batched_tokens;
        if (lazy_) budget = advance_lazy_decoders(budget, threshold);
        budget = schedule_running(output, budget, threshold, hold_prefill, now);
        if (output.preempted.empty()) {
            schedule_waiting(output, budget, threshold, hold_prefill, now);
            if (!hold_prefill) prefill_capacity_bound_ = waiting_.size() > deferred_.size();
        }
        if (lazy_) lazy_->add_to_batch(output);
        update_after_schedule(output);
        if (lazy_) lazy_->launched(output);
    }

    // Steps scheduled and applied from Python: not while the compiled loop decodes lazily.
    void refuse_python_steps() const {
        if (lazy_) throw std::logic_error("this scheduler's steps are run by its compiled step loop");
    }

    // With async scheduling `output` is the oldest step in flight: requests aborted or
    // finished since are skipped, and a preempted request still receives its token. The
    // requests that sampled are listed only with `list_sampled`.
    StepFinished update_from_output(const StepOutput& output, double now, bool list_sampled) {
        StepFinished result;
        if (lazy_) lazy_->applied(output, now);
        if (list_sampled) result.sampled.reserve(output.scheduled.size());
        bool async_scheduling = limits_.async_scheduling;
        int64_t block_size = manager_->block_size();
        for (size_t i = 0; i < output.scheduled.size(); ++i) {
            prefetch_ahead(output.scheduled, i);
            const State& state = output.scheduled[i];
            ReqState& request = *state;
            bool stale = false;
            if (async_scheduling) {
                if (request.is_finished()) continue;  // aborted while its step was in flight
                int64_t num_new_tokens = output.num_scheduled[i];
                request.num_in_flight_tokens -= num_new_tokens;
                if (request.num_stale_output_tokens) {
                    request.num_stale_output_tokens -= num_new_tokens;
                    stale = true;
                }
            }
            if (output.partial[i]) continue;
            int64_t num_output_tokens = request.num_output_tokens();
            int64_t num_hashes = request.num_hashes_;
            request.append_tokens(1, block_size);
            if (request.num_hashes_ > num_hashes && manager_->enable_caching()) {
                manager_->prefetch_slot(request.hashes.back());
            }
            if (std::isnan(request.last_token_at)) {
                request.first_token_at = now;
                // The front end's queue limit reads it (EngineCore._queue_limit_problem).
                set_time(request.request, snames.first_token_at, now);
            } else {
                request.new_itls.push_back(now - request.last_token_at);
            }
            request.last_token_at = now;
            if (list_sampled) result.sampled.push_back(state);
            if (!stale && request.num_output_placeholders) {
                --request.num_output_placeholders;
                if (manager_->enable_caching()) {
                    // The block this token completes registers now, a step after sync.
                    manager_->cache_blocks_of(
                        held_blocks(request), request.hash_span(),
                        request.num_computed_tokens - request.num_in_flight_tokens, now);
                }
            }
            if (num_output_tokens + 1 >= request.max_tokens ||
                request.num_tokens() >= limits_.max_model_len) {
                finish(request, now);
                result.finished.push_back(state);
            }
        }
        // Finished requests leave their queues after the walk, as vLLM does.
        for (const State& state : result.finished) {
            if (state->status == Status::kPreempted) {
                erase_from(waiting_, state);  // async: finished by a step scheduled before
            } else {
                erase_from(running_, state);
                erase_from(stepped_, state);
            }
            state->status = Status::kFinished;
            state->sync();
            if (state->hasher != nullptr && !state->symbolic) {
                finished_turns_.keep(state->request, state->hasher, std::move(state->hashes));
            }
        }
        result.counts = manager_->take_lookup_counts();
        result.stats_type = stats_type_;
        return result;
    }

  private:
    // A window shorter than this is not worth the bookkeeping: the request is stepped.
    static constexpr int64_t kMinLazySteps = 2;

    template <typename Queue>
    static bool erase_from(Queue& queue, const State& state) {
        auto found = std::find(queue.begin(), queue.end(), state);
        if (found == queue.end()) return false;
        queue.erase(found);
        return true;
    }

    static int64_t queued_tokens(const ReqState& state) {
        return state.num_tokens() + state.num_output_placeholders - state.num_computed_tokens;
    }

    // Before the step about to be scheduled: bring the requests due in it up to date, and all
    // of them when the step could run short; the budget the lazy decodes leave.
    int64_t advance_lazy_decoders(int64_t budget, int64_t threshold) {
        due_.clear();
        lazy_->take_due(due_);
        for (const State& state : due_) materialize(state);
        if (lazy_->num_lazy() && !lazy_step_is_safe(budget, threshold)) materialize_all();
        return budget - lazy_->num_lazy();
    }

    // A lazy request is stepped again, in its place in the running order.
    void materialize(const State& state) {
        lazy_->materialize(state);
        int64_t rank = state->running_rank;
        auto place = std::lower_bound(
            stepped_.begin(), stepped_.end(), rank,
            [](const State& other, int64_t value) { return other->running_rank < value; });
        stepped_.insert(place, state);
    }

    void materialize_all() {
        if (!lazy_ || !lazy_->num_lazy()) return;
        for (const State& state : running_) {
            if (state->lazy_from >= 0) lazy_->materialize(state);
        }
        stepped_ = running_;
    }

    // True when the running pass cannot run out of budget or blocks before it has served
    // every running request (every allocation of a stepped request then succeeds): lazy
    // requests can skip the step, as nothing they could take part in happens (no request
    // preempted, none left out).
    bool lazy_step_is_safe(int64_t budget, int64_t threshold) const {
        int64_t block_size = manager_->block_size();
        int64_t max_model_len = limits_.max_model_len;
        int64_t demand = lazy_->num_lazy();
        int64_t blocks_needed = 0;
        for (const State& state : stepped_) {
            const ReqState& request = *state;
            int64_t num_computed = request.num_computed_tokens;
            int64_t placeholders = limits_.async_scheduling ? request.num_output_placeholders : 0;
            int64_t num_new_tokens = request.num_tokens() + placeholders - num_computed;
            if (0 < threshold && threshold < num_new_tokens) num_new_tokens = threshold;
            num_new_tokens = std::min(num_new_tokens, max_model_len - 1 - num_computed);
            if (num_new_tokens <= 0) continue;
            demand += num_new_tokens;
            int64_t num_slots = std::min(num_computed + num_new_tokens, max_model_len);
            int64_t num_held =
                request.blocks == nullptr ? 0 : int64_t(request.blocks->blocks.size());
            if (num_slots > num_held * block_size) {
                blocks_needed += (num_slots + block_size - 1) / block_size - num_held;
            }
        }
        return demand <= budget && blocks_needed <= manager_->num_free_blocks();
    }

    // How many steps from the one being scheduled `request` (due one decode token in it) can
    // decode lazily: in none of them does it allocate a block, cache one (at schedule or,
    // with async scheduling, at its sample), sample its last token or reach max_model_len.
    // 0 for a request whose blocks Python's hasher hashes (extra hash keys).
    int64_t lazy_window(const ReqState& request) const {
        if (request.hasher == nullptr || request.blocks == nullptr || request.is_prefill_chunk ||
            request.num_stale_output_tokens) {
            return 0;
        }
        int64_t placeholders = limits_.async_scheduling ? request.num_output_placeholders : 0;
        if (request.num_tokens() + placeholders <= request.num_prompt_tokens) return 0;  // prefill
        int64_t block_size = manager_->block_size();
        int64_t num_computed = request.num_computed_tokens;
        // Step j of the window (from 0) computes token num_computed + j; the sample of step j
        // makes the sequence num_computed + j + 2 tokens long.
        int64_t window = int64_t(request.blocks->blocks.size()) * block_size - num_computed;
        if (manager_->enable_caching()) {
            window = std::min(
                window, (request.blocks->num_cached_blocks + 1) * block_size - num_computed - 1);
        }
        int64_t num_outputs = std::min(request.max_tokens, int64_t(request.planned.size()));
        return std::min({window, request.num_prompt_tokens + num_outputs - num_computed - 2,
                         limits_.max_model_len - num_computed - 2});
    }

    // The scheduler lets go of a finished or aborted request.
    void release(ReqState& state) {
        deferred_.erase(&state);
        manager_->forget_lookup_of(state.hash_span().source());
        states_.erase(state.request.ptr());
    }

    // The step's chunk cap: none when at most one request is eligible (spec §12.1), raised
    // to a fair share of the budget when adaptive (§12.8).
    int64_t long_prefill_threshold() const {
        int64_t num_eligible = int64_t(running_.size() + waiting_.size());
        if (num_eligible <= 1) return 0;
        int64_t threshold = limits_.long_prefill_token_threshold;
        if (threshold > 0 && limits_.long_prefill_token_threshold_adaptive) {
            threshold = std::max(threshold, limits_.max_num_batched_tokens / num_eligible);
        }
        return threshold;
    }

    // prefill_schedule_interval (spec §12.8), as Scheduler._hold_prefill.
    bool hold_prefill_now() const {
        int64_t interval = limits_.prefill_schedule_interval;
        if (interval <= 1 || prefill_capacity_bound_ ||
            num_executed_steps_ + 1 - last_prefill_step_ >= interval) {
            return false;
        }
        for (const State& state : running_) {
            if (!state->is_prefill_chunk) return true;
        }
        return false;
    }

    // Async: the steps in flight already sample the request's last token, so vLLM schedules
    // no further step for it (spec §7.4).
    static bool output_limit_in_flight(const ReqState& request) {
        int64_t placeholders = request.num_output_placeholders;
        return placeholders > 0 && request.num_computed_tokens + 2 - placeholders >=
                                       request.num_prompt_tokens + request.max_tokens;
    }

    int64_t schedule_running(StepOutput& output, int64_t budget, int64_t threshold,
                             bool hold_prefill, double now) {
        size_t index = 0;
        int64_t max_model_len = limits_.max_model_len;
        bool started_lazy = false;
        while (index < stepped_.size() && budget > 0) {
            prefetch_ahead(stepped_, index);
            const State& state = stepped_[index];
            ReqState& request = *state;
            int64_t num_computed = request.num_computed_tokens;
            int64_t placeholders = limits_.async_scheduling ? request.num_output_placeholders : 0;
            if ((limits_.async_scheduling && output_limit_in_flight(request)) ||
                (hold_prefill && request.is_prefill_chunk)) {
                ++index;
                continue;
            }
            int64_t num_tokens = request.num_tokens();
            int64_t num_new_tokens = num_tokens + placeholders - num_computed;
            if (lazy_ && num_new_tokens == 1 && num_computed < max_model_len - 1) {
                int64_t window = lazy_window(request);
                if (window >= kMinLazySteps) {
                    lazy_->start(state, window);  // this step's token among them
                    started_lazy = true;
                    budget -= 1;
                    ++index;
                    continue;
                }
            }
            if (num_new_tokens == 1 && num_computed < max_model_len - 1 &&
                manager_->allocate_one(held_blocks(request), num_computed, num_tokens,
                                       request.hash_span(), now)) {
                // A decode token (or a prefill's last): the same blocks and caching as
                // allocate_slots, done lean (if no block is free, the general path preempts).
                if (request.is_prefill_chunk) output.carries_prefill = true;
                output.add(state, 1);
                budget -= 1;
                ++index;
                continue;
            }
            if (0 < threshold && threshold < num_new_tokens) num_new_tokens = threshold;
            num_new_tokens = std::min({num_new_tokens, budget, max_model_len - 1 - num_computed});
            if (num_new_tokens <= 0) {
                ++index;
                continue;
            }
            State kept = state;  // stepped_ may drop it (preempted)
            bool allocated = allocate_or_preempt(kept, num_new_tokens, budget, output, now);
            if (!allocated) break;
            if (kept->is_prefill_chunk) output.carries_prefill = true;
            output.add(kept, num_new_tokens);
            budget -= num_new_tokens;
            ++index;
        }
        if (started_lazy) {
            std::erase_if(stepped_, [](const State& state) { return state->lazy_from >= 0; });
        }
        return budget;
    }

    // allocate_slots for a request's new tokens (after a prefix hit of `hits`).
    bool allocate(ReqState& request, int64_t num_new_tokens, int64_t num_hit_tokens,
                  bool full_sequence_must_fit, bool has_running_requests, double now) {
        new_ids_.clear();
        bool apply_watermark = has_running_requests && (request.status == Status::kWaiting ||
                                                        request.status == Status::kPreempted);
        if (!manager_->allocate_ids(request.id, request.num_tokens(), request.num_computed_tokens,
                                    apply_watermark, request.hash_span(), num_new_tokens,
                                    num_hit_tokens, hit_blocks_, full_sequence_must_fit, 0, false,
                                    0, now, new_ids_)) {
            return false;
        }
        if (request.blocks == nullptr) request.blocks = &manager_->held(request.id);
        return true;
    }

    static RequestBlocks& held_blocks(const ReqState& request) {
        if (request.blocks == nullptr) throw nb::key_error("request holds no blocks");
        return *request.blocks;
    }

    void free_blocks(ReqState& request) {
        manager_->free_id(request.id);
        request.blocks = nullptr;
    }

    // Allocate the request's blocks, preempting the last running request (never one before
    // the request under FCFS, spec §12.5) until they fit or the request itself is the victim.
    // Tokens the victims had in this step go back to the budget.
    bool allocate_or_preempt(const State& state, int64_t num_new_tokens, int64_t& budget,
                             StepOutput& output, double now) {
        hit_blocks_.clear();
        while (!allocate(*state, num_new_tokens, 0, false, false, now)) {
            State victim = running_.back();
            // Victims come after the request being allocated, and a step that may preempt has
            // every earlier lazy request brought up to date first: the victim is stepped too.
            if (stepped_.back() != victim) {
                throw std::logic_error("lazy decoding: a lazy request would be preempted");
            }
            running_.pop_back();
            stepped_.pop_back();
            budget += output.take_back(victim);
            preempt(victim);
            output.preempted.push_back(victim);
            if (victim == state) return false;
        }
        return true;
    }

    void preempt(const State& state) {
        ReqState& request = *state;
        free_blocks(request);
        request.status = Status::kPreempted;
        request.num_computed_tokens = 0;
        request.num_stale_output_tokens = request.num_in_flight_tokens;
        request.num_output_placeholders = 0;
        ++request.num_preemptions;
        ++num_preemptions;
        request.sync();
        waiting_.push_front(state);
    }

    // The waiting pass: admit requests in arrival order until one does not fit; a request
    // whose pre-preemption step is still in flight (async) is skipped, not head of line.
    void schedule_waiting(StepOutput& output, int64_t budget, int64_t threshold,
                          bool hold_prefill, double now) {
        std::vector<State> skipped;
        while (budget > 0 && !waiting_.empty() &&
               int64_t(running_.size()) < limits_.max_num_admitted_seqs) {
            State state = waiting_.front();
            ReqState& request = *state;
            if (limits_.async_scheduling && request.num_stale_output_tokens) {
                waiting_.pop_front();
                deferred_.insert(&request);
                skipped.push_back(state);
                continue;
            }
            int64_t num_computed = request.num_computed_tokens;
            int64_t num_tokens = request.num_tokens();
            hit_blocks_.clear();
            if (num_computed == 0 && manager_->enable_caching() &&
                !request.skip_reading_prefix_cache) {
                hit_blocks_ = manager_->lookup(request.request, nb::none(), request.hash_span(),
                                               num_tokens);
            }
            int64_t num_hit_tokens = int64_t(hit_blocks_.size()) * manager_->block_size();
            num_computed += num_hit_tokens;
            if (hold_prefill && num_computed < num_tokens - 1) break;
            int64_t num_new_tokens = num_tokens - num_computed;
            if (0 < threshold && threshold < num_new_tokens) num_new_tokens = threshold;
            if (!limits_.enable_chunked_prefill && num_new_tokens > budget) break;
            num_new_tokens = std::min(num_new_tokens, budget);
            if (!allocate(request, num_new_tokens, num_hit_tokens,
                          limits_.scheduler_reserve_full_isl, !running_.empty(), now)) {
                break;  // head-of-line blocking on KV capacity
            }
            manager_->count_lookup(num_tokens, num_hit_tokens, request.num_preemptions > 0,
                                   request.skip_reading_prefix_cache);
            waiting_.pop_front();
            admit(output, state, num_computed, num_tokens, num_new_tokens, now);
            budget -= num_new_tokens;
        }
        waiting_.insert(waiting_.begin(), skipped.begin(), skipped.end());
    }

    void admit(StepOutput& output, const State& state, int64_t num_computed, int64_t num_tokens,
               int64_t num_new_tokens, double now) {
        ReqState& request = *state;
        deferred_.erase(&request);
        running_.push_back(state);
        request.running_rank = next_running_rank_++;
        stepped_.push_back(state);
        if (num_computed < num_tokens - 1) output.carries_prefill = true;
        bool resumed = request.status == Status::kPreempted;
        output.admitted.emplace_back(state, num_computed, resumed);
        request.status = Status::kRunning;
        request.num_computed_tokens = num_computed;
        if (request.num_cached_tokens < 0) request.num_cached_tokens = num_computed;
        if (std::isnan(request.first_scheduled_at)) request.first_scheduled_at = now;
        output.add(state, num_new_tokens);
    }

    // Advance each scheduled request's progress and record the batch shape.
    void update_after_schedule(StepOutput& output) {
        bool async_scheduling = limits_.async_scheduling;
        int64_t total = 0;
        output.partial.assign(output.scheduled.size(), 0);
        for (size_t i = 0; i < output.scheduled.size(); ++i) {
            ReqState& request = *output.scheduled[i];
            int64_t num_new_tokens = output.num_scheduled[i];
            int64_t num_computed = request.num_computed_tokens;
            int64_t placeholders = async_scheduling ? request.num_output_placeholders : 0;
            int64_t sequence_end = request.num_tokens() + placeholders;
            if (num_new_tokens == 1 && num_computed == sequence_end - 1 &&
                sequence_end > request.num_prompt_tokens) {
                output.decode_context_lens.push_back(num_computed);
            } else {
                output.prefill_new_tokens.push_back(num_new_tokens);
                output.prefill_context_tokens.push_back(num_computed);
                request.num_computed_prefill_tokens += num_new_tokens;
            }
            num_computed += num_new_tokens;
            request.num_computed_tokens = num_computed;
            total += num_new_tokens;
            bool is_prefill_chunk = num_computed < sequence_end;
            request.is_prefill_chunk = is_prefill_chunk;
            output.partial[i] = is_prefill_chunk;
            if (async_scheduling) {
                if (!is_prefill_chunk) request.num_output_placeholders = placeholders + 1;
                request.num_in_flight_tokens += num_new_tokens;
            }
        }
        total += output.num_lazy_decodes;
        output.total_num_scheduled_tokens = total;
        if (total) {
            ++num_executed_steps_;
            if (output.carries_prefill) last_prefill_step_ = num_executed_steps_;
        }
    }

    // A request that produced its last token: blocks freed at once, in step order.
    void finish(ReqState& request, double now) {
        if (PyDict_DelItem(requests_.ptr(), request.request_id.ptr()) != 0) {
            throw nb::python_error();
        }
        free_blocks(request);
        request.finished_at = now;
        release(request);
    }

    nb::object manager_object_;  // keeps the manager alive
    CacheCore* manager_;
    SchedulerLimits limits_;
    nb::dict requests_;
    nb::object admission_type_;
    nb::object stats_type_;
    // Scratch: the waiting head's prefix hit, blocks allocated (unused: ids stay in the core).
    std::vector<int32_t> hit_blocks_, new_ids_;
    std::vector<State> running_;
    // The running requests that are not lazy, in running order (all of them without lazy
    // decoding): what the running pass walks.
    std::vector<State> stepped_;
    int64_t next_running_rank_ = 0;
    std::vector<State> due_;  // scratch: lazy requests due in the step being scheduled
    std::deque<State> waiting_;
    // Every request the scheduler holds, by its Python object.
    std::unordered_map<PyObject*, State> states_;
    FinishedTurns finished_turns_;
    // Waiting requests the waiting pass skipped (async: output in flight), not yet admitted.
    std::unordered_set<const ReqState*> deferred_;
    int64_t num_executed_steps_ = 0;
    int64_t last_prefill_step_;
    bool prefill_capacity_bound_ = false;
    std::unique_ptr<LazyDecoders> lazy_;  // null: every request is stepped
};

void bind_scheduler(nb::module_& m) {
    intern_scheduler_names();
    nb::class_<StepOutput>(m, "StepOutput")
        .def_ro("total_num_scheduled_tokens", &StepOutput::total_num_scheduled_tokens)
        .def_prop_ro("num_scheduled_tokens",
                     [](const StepOutput& out) {
                         nb::dict tokens;
                         for (size_t i = 0; i < out.scheduled.size(); ++i) {
                             tokens[out.scheduled[i]->request_id] = out.num_scheduled[i];
                         }
                         return tokens;
                     })
        .def_prop_ro("scheduled",
                     [](const StepOutput& out) { return synced_list(out.scheduled); })
        .def_prop_ro("admitted",
                     [](const StepOutput& out) {
                         nb::list admissions;
                         for (const auto& [state, num_hit_tokens, resumed] : out.admitted) {
                             state->sync();
                             admissions.append(
                                 out.admission_type(state->request, num_hit_tokens, resumed));
                         }
                         return admissions;
                     })
        .def_prop_ro("preempted",
                     [](const StepOutput& out) { return synced_list(out.preempted); })
        // Steps Python schedules decode every request explicitly (lazy decoding is the
        // compiled loop's); no CPU tier.
        .def_prop_ro("num_lazy_decodes", [](const StepOutput&) { return 0; })
        .def_prop_ro("lazy_decode_kv_tokens", [](const StepOutput&) { return 0; })
        .def_prop_ro("lazy_longest_context", [](const StepOutput&) { return 0; })
        .def_prop_ro("transfers", [](const StepOutput&) { return nb::none(); })
        .def_prop_ro("prefill_new_tokens",
                     [](const StepOutput& out) { return out.ints(out.prefill_new_tokens); })
        .def_prop_ro("prefill_context_tokens",
                     [](const StepOutput& out) { return out.ints(out.prefill_context_tokens); })
        .def_prop_ro("decode_context_lens",
                     [](const StepOutput& out) { return out.ints(out.decode_context_lens); })
        .def_prop_ro("num_prefill_tokens",
                     [](const StepOutput& out) {
                         int64_t total = 0;
                         for (int64_t tokens : out.prefill_new_tokens) total += tokens;
                         return total;
                     })
        .def_prop_ro("num_decode_tokens",
                     [](const StepOutput& out) { return int64_t(out.decode_context_lens.size()); });

    nb::class_<StepFinished>(m, "StepUpdate")
        .def_prop_ro("sampled",
                     [](const StepFinished& result) { return synced_list(result.sampled); })
        .def_prop_ro("finished",
                     [](const StepFinished& result) { return synced_list(result.finished); })
        .def_prop_ro("prefix_cache_stats", [](const StepFinished& result) {
            return result.stats_type(*result.counts.fields());
        });

    nb::class_<SchedulerCore>(m, "SchedulerCore")
        .def(
            "__init__",
            [](SchedulerCore* self, nb::object manager, int64_t max_num_batched_tokens,
               int64_t max_num_admitted_seqs, int64_t max_model_len, bool enable_chunked_prefill,
               int64_t long_prefill_token_threshold, bool long_prefill_token_threshold_adaptive,
               bool scheduler_reserve_full_isl, int64_t prefill_schedule_interval,
               bool async_scheduling, nb::dict requests, nb::object running_status,
               nb::object preempted_status, nb::object finished_status,
               nb::object admission_type, nb::object stats_type) {
                SchedulerLimits limits{max_num_batched_tokens,
                                       max_num_admitted_seqs,
                                       max_model_len,
                                       enable_chunked_prefill,
                                       long_prefill_token_threshold,
                                       long_prefill_token_threshold_adaptive,
                                       scheduler_reserve_full_isl,
                                       prefill_schedule_interval,
                                       async_scheduling};
                new (self) SchedulerCore(manager, limits, requests, running_status,
                                         preempted_status, finished_status, admission_type,
                                         stats_type);
            },
            nb::arg("manager"), nb::arg("max_num_batched_tokens"),
            nb::arg("max_num_admitted_seqs"), nb::arg("max_model_len"),
            nb::arg("enable_chunked_prefill"), nb::arg("long_prefill_token_threshold"),
            nb::arg("long_prefill_token_threshold_adaptive"),
            nb::arg("scheduler_reserve_full_isl"), nb::arg("prefill_schedule_interval"),
            nb::arg("async_scheduling"), nb::arg("requests"), nb::arg("running_status"),
            nb::arg("preempted_status"), nb::arg("finished_status"), nb::arg("admission_type"),
            nb::arg("stats_type"))
        .def_prop_ro("num_running", &SchedulerCore::num_running)
        .def_prop_ro("num_waiting", &SchedulerCore::num_waiting)
        .def_prop_ro("num_executed_steps", &SchedulerCore::num_executed_steps)
        .def_prop_ro("num_queued_tokens", &SchedulerCore::num_queued_tokens)
        .def_prop_ro("num_implicit_decodes", &SchedulerCore::num_implicit_decodes)
        .def_ro("num_preemptions", &SchedulerCore::num_preemptions)
        .def("running", &SchedulerCore::running)
        .def("waiting", &SchedulerCore::waiting)
        .def("add_request", &SchedulerCore::add_request)
        .def("remove", &SchedulerCore::remove)
        .def("schedule", &SchedulerCore::schedule, nb::rv_policy::take_ownership)
        .def("update_from_output", [](SchedulerCore& self, const StepOutput& output, double now) {
            self.refuse_python_steps();
            return self.update_from_output(output, now, true);
        });
}

// ---------------------------------------------------------------------------------------------
// What the step loop (step_loop.hpp) reads of a scheduled and an applied step: the only place
// it touches StepOutput and update_from_output's result.

// A scheduled step's batch shape: batch.step_features and longest_context of
// sim/costmodel/batch.py, and the record's token counts.
struct LoopStepShape {
    int64_t num_scheduled_tokens = 0;
    bool preempted = false;
    int64_t num_tokens = 0;
    int64_t twice_attention_pairs = 0;
    int64_t kv_tokens = 0;
    int64_t num_decodes = 0;
    int64_t longest_context = 0;
};

LoopStepShape loop_step_shape(const StepOutput& output) {
    LoopStepShape shape;
    shape.num_scheduled_tokens = output.total_num_scheduled_tokens;
    shape.preempted = !output.preempted.empty();
    shape.num_decodes = int64_t(output.decode_context_lens.size()) + output.num_lazy_decodes;
    shape.num_tokens = shape.num_decodes;
    shape.kv_tokens = output.lazy_kv_tokens;
    int64_t longest = output.lazy_longest_context;
    for (int64_t context : output.decode_context_lens) {
        shape.kv_tokens += context;
        longest = std::max(longest, context);
    }
    longest += 1;
    for (size_t i = 0; i < output.prefill_new_tokens.size(); ++i) {
        int64_t num_new = output.prefill_new_tokens[i];
        int64_t num_context = output.prefill_context_tokens[i];
        shape.num_tokens += num_new;
        shape.twice_attention_pairs += num_new * (2 * num_context + num_new + 1);
        shape.kv_tokens += num_context;
        longest = std::max(longest, num_new + num_context);
    }
    shape.longest_context = longest;
    return shape;
}

// An applied step: the requests it finished (in step order, their Python requests synced),
// its prefix-cache counters and the record's token counts.
struct LoopAppliedStep {
    std::vector<State> finished;
    int64_t num_queries = 0;
    int64_t num_hits = 0;
    int64_t num_prefill_tokens = 0;
    int64_t num_decode_tokens = 0;
};

LoopAppliedStep loop_apply_step(SchedulerCore& scheduler, const StepOutput& output, double now) {
    StepFinished result = scheduler.update_from_output(output, now, false);
    LoopAppliedStep applied;
    applied.finished = std::move(result.finished);
    applied.num_queries = result.counts.queries;
    applied.num_hits = result.counts.hits;
    for (int64_t tokens : output.prefill_new_tokens) applied.num_prefill_tokens += tokens;
    applied.num_decode_tokens =
        int64_t(output.decode_context_lens.size()) + output.num_lazy_decodes;
    return applied;
}
