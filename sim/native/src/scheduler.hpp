// vLLM v1's scheduler step in C++: sync or async scheduling, FCFS, no CPU tier (spec §7, §12).
//
// The same decisions as sim/sched/scheduler.py (the readable reference) in the configurations
// it covers; sim/sched/native_scheduler.py says which and falls back to the reference for the
// rest. Requests stay the Python objects the rest of the simulator reads; the scheduler reads
// and writes their slots in place and drives CacheCore directly. Per sampled token it calls
// only the C methods that append to the request's token and inter-token-latency arrays; Python
// code runs when a block fills (the request's hasher), a request is admitted (the lookup
// counters) and once per step (the step's cache counters).
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
    Field hash_keys;
    Field hasher;
    Field extend;
    Field append;
    Field request_id;
    Field record_prefix_cache_stats;
    Field num_output_placeholders;
    Field num_in_flight_tokens;
    Field num_stale_output_tokens;
};

SchedulerNames snames;
PyTypeObject* slot_type = nullptr;

void intern_scheduler_names() {
    snames.all_token_ids.name = PyUnicode_InternFromString("all_token_ids");
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
    snames.hash_keys.name = PyUnicode_InternFromString("hash_keys");
    snames.hasher.name = PyUnicode_InternFromString("_hasher");
    snames.extend.name = PyUnicode_InternFromString("extend");
    snames.append.name = PyUnicode_InternFromString("append");
    snames.request_id.name = PyUnicode_InternFromString("request_id");
    snames.record_prefix_cache_stats.name = PyUnicode_InternFromString("record_prefix_cache_stats");
    snames.num_output_placeholders.name = PyUnicode_InternFromString("num_output_placeholders");
    snames.num_in_flight_tokens.name = PyUnicode_InternFromString("num_in_flight_tokens");
    snames.num_stale_output_tokens.name = PyUnicode_InternFromString("num_stale_output_tokens");
}

// Requests are slotted objects; reading and writing their slots directly skips the attribute
// lookup (type dicts, descriptors) that dominates a step's cost. Resolved for the first
// request type the scheduler sees; any other type goes through the generic protocol.
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

void set_float(nb::handle object, const Field& field, double value) {
    set_attr(object, field, nb::steal(PyFloat_FromDouble(value)));
}

bool bool_attr(nb::handle object, const Field& field) {
    nb::object value = get(object, field);
    int truth = PyObject_IsTrue(value.ptr());
    if (truth < 0) throw nb::python_error();
    return truth != 0;
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
    std::vector<nb::object> scheduled;
    std::vector<int64_t> num_scheduled;
    std::vector<uint8_t> partial;  // the request's chunk stops short of its sequence end
    std::vector<int64_t> prefill_new_tokens;
    std::vector<int64_t> prefill_context_tokens;
    std::vector<int64_t> decode_context_lens;
    std::vector<nb::object> preempted;
    // Admissions in order: the request, its tokens already in KV (the prefix hit), resumed.
    std::vector<std::tuple<nb::object, int64_t, bool>> admitted;
    nb::object admission_type;  // sim.sched.Admission, built when Python reads `admitted`
    int64_t total_num_scheduled_tokens = 0;
    bool carries_prefill = false;

    nb::list ints(const std::vector<int64_t>& values) const {
        nb::list out;
        for (int64_t value : values) {
            nb::object item = nb::steal(PyLong_FromLongLong(value));
            if (PyList_Append(out.ptr(), item.ptr()) != 0) throw nb::python_error();
        }
        return out;
    }

    void add(nb::handle request, int64_t num_new_tokens) {
        scheduled.push_back(nb::borrow(request));
        num_scheduled.push_back(num_new_tokens);
    }

    // Drop a preempted request from the batch; the tokens it had (0 if none).
    int64_t take_back(nb::handle request) {
        for (size_t i = 0; i < scheduled.size(); ++i) {
            if (scheduled[i].is(request)) {
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
// in step order.
struct StepFinished {
    nb::list sampled;
    nb::list finished;
    nb::object prefix_cache_stats;
};

class SchedulerCore {
  public:
    SchedulerCore(nb::object manager, SchedulerLimits limits, nb::dict requests,
                  nb::object running_status, nb::object preempted_status,
                  nb::object finished_status, nb::tuple finished_statuses,
                  nb::object admission_type)
        : manager_object_(manager),
          manager_(nb::cast<CacheCore*>(manager)),
          limits_(limits),
          requests_(requests),
          running_status_(running_status),
          preempted_status_(preempted_status),
          finished_status_(finished_status),
          finished_statuses_(finished_statuses),
          admission_type_(admission_type),
          last_prefill_step_(-limits.prefill_schedule_interval) {}

    int64_t num_running() const { return int64_t(running_.size()); }
    int64_t num_waiting() const { return int64_t(waiting_.size()); }
    int64_t num_preemptions = 0;
    int64_t num_executed_steps() const { return num_executed_steps_; }

    nb::list running() const {
        nb::list out;
        for (const nb::object& request : running_) out.append(request);
        return out;
    }

    nb::list waiting() const {
        nb::list out;
        for (const nb::object& request : waiting_) out.append(request);
        return out;
    }

    void add_request(nb::handle request) {
        resolve_slots(Py_TYPE(request.ptr()));
        waiting_.push_back(nb::borrow(request));
    }

    // Take `request` out of its queue (abort); the caller frees its blocks and marks it.
    void remove(nb::handle request) {
        deferred_.erase(request.ptr());
        if (erase_from(running_, request)) return;
        erase_from(waiting_, request);
    }

    StepOutput* schedule(double now) {
        auto output = std::make_unique<StepOutput>();
        output->admission_type = admission_type_;
        int64_t threshold = long_prefill_threshold();
        bool hold_prefill = hold_prefill_now();
        int64_t budget = limits_.max_num_batched_tokens;
        budget = schedule_running(*output, budget, threshold, hold_prefill, now);
        if (output->preempted.empty()) {
            schedule_waiting(*output, budget, threshold, hold_prefill, now);
            if (!hold_prefill) prefill_capacity_bound_ = waiting_.size() > deferred_.size();
        }
        update_after_schedule(*output);
        return output.release();
    }

    // With async scheduling `output` is the oldest step in flight: requests aborted or
    // finished since are skipped, and a preempted request still receives its token.
    StepFinished update_from_output(const StepOutput& output, double now) {
        StepFinished result;
        bool async_scheduling = limits_.async_scheduling;
        for (size_t i = 0; i < output.scheduled.size(); ++i) {
            nb::handle request = output.scheduled[i];
            bool stale = false;
            if (async_scheduling) {
                if (is_finished(request)) continue;  // aborted while its step was in flight
                int64_t num_new_tokens = output.num_scheduled[i];
                add_to(request, snames.num_in_flight_tokens, -num_new_tokens);
                if (get_int(request, snames.num_stale_output_tokens)) {
                    add_to(request, snames.num_stale_output_tokens, -num_new_tokens);
                    stale = true;
                }
            }
            if (output.partial[i]) continue;
            nb::object tokens = get(request, snames.all_token_ids);
            int64_t num_tokens = length(tokens);
            int64_t num_output_tokens = num_tokens - get_int(request, snames.num_prompt_tokens);
            append_token(request, tokens, num_output_tokens);
            ++num_tokens;
            nb::object last_token_at = get(request, snames.last_token_at);
            nb::object now_object = nb::steal(PyFloat_FromDouble(now));
            if (last_token_at.is_none()) {
                set_attr(request, snames.first_token_at, now_object);
            } else {
                double gap = now - PyFloat_AsDouble(last_token_at.ptr());
                nb::object itl = get(request, snames.inter_token_latencies_s);
                nb::object gap_object = nb::steal(PyFloat_FromDouble(gap));
                PyObject* appended =
                    PyObject_CallMethodOneArg(itl.ptr(), snames.append.name, gap_object.ptr());
                if (appended == nullptr) throw nb::python_error();
                Py_DECREF(appended);
            }
            set_attr(request, snames.last_token_at, now_object);
            result.sampled.append(request);
            if (!stale) {
                int64_t placeholders = get_int(request, snames.num_output_placeholders);
                if (placeholders) {
                    set_int(request, snames.num_output_placeholders, placeholders - 1);
                    if (manager_->enable_caching()) {
                        // The block this token completes registers now, a step after sync.
                        manager_->cache_blocks(
                            request,
                            get_int(request, snames.num_computed_tokens) -
                                get_int(request, snames.num_in_flight_tokens),
                            now);
                    }
                }
            }
            if (num_output_tokens + 1 >= get_int(request, snames.max_tokens) ||
                num_tokens >= limits_.max_model_len) {
                finish(request, now);
                result.finished.append(request);
            }
        }
        // Finished requests leave their queues after the walk, as vLLM does.
        for (nb::handle request : result.finished) {
            if (get(request, snames.status).is(preempted_status_)) {
                erase_from(waiting_, request);  // async: finished by a step scheduled before
            } else {
                erase_from(running_, request);
            }
            set_attr(request, snames.status, finished_status_);
        }
        result.prefix_cache_stats = manager_object_.attr("make_prefix_cache_stats")();
        return result;
    }

  private:
    template <typename Queue>
    static bool erase_from(Queue& queue, nb::handle request) {
        for (auto it = queue.begin(); it != queue.end(); ++it) {
            if (it->is(request)) {
                queue.erase(it);
                return true;
            }
        }
        return false;
    }

    static void add_to(nb::handle request, const Field& field, int64_t delta) {
        set_int(request, field, get_int(request, field) + delta);
    }

    bool is_finished(nb::handle request) const {
        nb::object status = get(request, snames.status);
        for (nb::handle finished : finished_statuses_) {
            if (status.is(finished)) return true;
        }
        return false;
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
        for (const nb::object& request : running_) {
            if (!bool_attr(request, snames.is_prefill_chunk)) return true;
        }
        return false;
    }

    // Async: the steps in flight already sample the request's last token, so vLLM schedules
    // no further step for it (spec §7.4).
    static bool output_limit_in_flight(nb::handle request, int64_t num_computed,
                                       int64_t placeholders) {
        return placeholders > 0 &&
               num_computed + 2 - placeholders >=
                   get_int(request, snames.num_prompt_tokens) +
                       get_int(request, snames.max_tokens);
    }

    int64_t schedule_running(StepOutput& output, int64_t budget, int64_t threshold,
                             bool hold_prefill, double now) {
        size_t index = 0;
        int64_t max_model_len = limits_.max_model_len;
        while (index < running_.size() && budget > 0) {
            nb::object request = running_[index];
            int64_t num_computed = get_int(request, snames.num_computed_tokens);
            int64_t placeholders =
                limits_.async_scheduling ? get_int(request, snames.num_output_placeholders) : 0;
            bool is_prefill_chunk = bool_attr(request, snames.is_prefill_chunk);
            if (output_limit_in_flight(request, num_computed, placeholders) ||
                (hold_prefill && is_prefill_chunk)) {
                ++index;
                continue;
            }
            int64_t num_new_tokens =
                length(get(request, snames.all_token_ids)) + placeholders - num_computed;
            if (num_new_tokens == 1 && num_computed < max_model_len - 1 &&
                manager_->allocate_one_slot(request, now)) {
                // A decode token (or a prefill's last): the same blocks and caching as
                // allocate_slots, done lean (if no block is free, the general path preempts).
                if (is_prefill_chunk) output.carries_prefill = true;
                output.add(request, 1);
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
            bool allocated = allocate_or_preempt(request, num_new_tokens, budget, output, now);
            if (!allocated) break;
            if (is_prefill_chunk) output.carries_prefill = true;
            output.add(request, num_new_tokens);
            budget -= num_new_tokens;
            ++index;
        }
        return budget;
    }

    // Allocate the request's blocks, preempting the last running request (never one before
    // the request under FCFS, spec §12.5) until they fit or the request itself is the victim.
    // Tokens the victims had in this step go back to the budget.
    bool allocate_or_preempt(nb::handle request, int64_t num_new_tokens, int64_t& budget,
                             StepOutput& output, double now) {
        new_ids_.clear();
        while (!manager_->allocate_slots_ids(request, num_new_tokens, 0, {}, false, false, 0,
                                             false, 0, now, new_ids_)) {
            nb::object victim = running_.back();
            running_.pop_back();
            budget += output.take_back(victim);
            preempt(victim);
            output.preempted.push_back(victim);
            if (victim.is(request)) return false;
        }
        return true;
    }

    void preempt(nb::handle request) {
        manager_->free(request);
        set_attr(request, snames.status, preempted_status_);
        set_int(request, snames.num_computed_tokens, 0);
        set_int(request, snames.num_stale_output_tokens,
                get_int(request, snames.num_in_flight_tokens));
        set_int(request, snames.num_output_placeholders, 0);
        add_to(request, snames.num_preemptions, 1);
        ++num_preemptions;
        waiting_.push_front(nb::borrow(request));
    }

    // The waiting pass: admit requests in arrival order until one does not fit; a request
    // whose pre-preemption step is still in flight (async) is skipped, not head of line.
    void schedule_waiting(StepOutput& output, int64_t budget, int64_t threshold,
                          bool hold_prefill, double now) {
        std::vector<nb::object> skipped;
        while (budget > 0 && !waiting_.empty() &&
               int64_t(running_.size()) < limits_.max_num_admitted_seqs) {
            nb::object request = waiting_.front();
            if (limits_.async_scheduling && get_int(request, snames.num_stale_output_tokens)) {
                waiting_.pop_front();
                deferred_.insert(request.ptr());
                skipped.push_back(request);
                continue;
            }
            int64_t num_computed = get_int(request, snames.num_computed_tokens);
            hit_blocks_.clear();
            if (num_computed == 0) hit_blocks_ = manager_->computed_block_ids(request);
            int64_t num_hit_tokens = int64_t(hit_blocks_.size()) * manager_->block_size();
            num_computed += num_hit_tokens;
            int64_t num_tokens = length(get(request, snames.all_token_ids));
            if (hold_prefill && num_computed < num_tokens - 1) break;
            int64_t num_new_tokens = num_tokens - num_computed;
            if (0 < threshold && threshold < num_new_tokens) num_new_tokens = threshold;
            if (!limits_.enable_chunked_prefill && num_new_tokens > budget) break;
            num_new_tokens = std::min(num_new_tokens, budget);
            new_ids_.clear();
            bool allocated = manager_->allocate_slots_ids(
                request, num_new_tokens, num_hit_tokens, hit_blocks_,
                limits_.scheduler_reserve_full_isl, !running_.empty(), 0, false, 0, now, new_ids_);
            if (!allocated) break;  // head-of-line blocking on KV capacity
            manager_object_.attr(snames.record_prefix_cache_stats.name)(request, num_hit_tokens);
            waiting_.pop_front();
            admit(output, request, num_computed, num_tokens, num_new_tokens, now);
            budget -= num_new_tokens;
        }
        waiting_.insert(waiting_.begin(), skipped.begin(), skipped.end());
    }

    void admit(StepOutput& output, nb::handle request, int64_t num_computed, int64_t num_tokens,
               int64_t num_new_tokens, double now) {
        deferred_.erase(request.ptr());
        running_.push_back(nb::borrow(request));
        if (num_computed < num_tokens - 1) output.carries_prefill = true;
        bool resumed = get(request, snames.status).is(preempted_status_);
        output.admitted.emplace_back(nb::borrow(request), num_computed, resumed);
        set_attr(request, snames.status, running_status_);
        set_int(request, snames.num_computed_tokens, num_computed);
        if (get_int(request, snames.num_cached_tokens) < 0) {
            set_int(request, snames.num_cached_tokens, num_computed);
        }
        if (get(request, snames.first_scheduled_at).is_none()) {
            set_float(request, snames.first_scheduled_at, now);
        }
        output.add(request, num_new_tokens);
    }

    // Advance each scheduled request's progress and record the batch shape.
    void update_after_schedule(StepOutput& output) {
        bool async_scheduling = limits_.async_scheduling;
        int64_t total = 0;
        output.partial.assign(output.scheduled.size(), 0);
        for (size_t i = 0; i < output.scheduled.size(); ++i) {
            nb::handle request = output.scheduled[i];
            int64_t num_new_tokens = output.num_scheduled[i];
            int64_t num_computed = get_int(request, snames.num_computed_tokens);
            int64_t placeholders =
                async_scheduling ? get_int(request, snames.num_output_placeholders) : 0;
            int64_t sequence_end = length(get(request, snames.all_token_ids)) + placeholders;
            if (num_new_tokens == 1 && num_computed == sequence_end - 1 &&
                sequence_end > get_int(request, snames.num_prompt_tokens)) {
                output.decode_context_lens.push_back(num_computed);
            } else {
                output.prefill_new_tokens.push_back(num_new_tokens);
                output.prefill_context_tokens.push_back(num_computed);
                add_to(request, snames.num_computed_prefill_tokens, num_new_tokens);
            }
            num_computed += num_new_tokens;
            set_int(request, snames.num_computed_tokens, num_computed);
            total += num_new_tokens;
            bool is_prefill_chunk = num_computed < sequence_end;
            set_attr(request, snames.is_prefill_chunk, is_prefill_chunk ? Py_True : Py_False);
            output.partial[i] = is_prefill_chunk;
            if (async_scheduling) {
                if (!is_prefill_chunk) set_int(request, snames.num_output_placeholders, placeholders + 1);
                add_to(request, snames.num_in_flight_tokens, num_new_tokens);
            }
        }
        output.total_num_scheduled_tokens = total;
        if (total) {
            ++num_executed_steps_;
            if (output.carries_prefill) last_prefill_step_ = num_executed_steps_;
        }
    }

    // Sample the request's next planned token; hash the block it fills (a Python call only
    // then, through the request's own hasher, as CacheRequest.append_output_token_ids does).
    void append_token(nb::handle request, nb::handle tokens, int64_t num_output_tokens) {
        nb::object planned = get(request, snames.planned_output_token_ids);
        nb::object token =
            nb::steal(PySequence_GetItem(planned.ptr(), Py_ssize_t(num_output_tokens)));
        if (!token.is_valid()) throw nb::python_error();
        if (PyList_CheckExact(tokens.ptr())) {
            if (PyList_Append(tokens.ptr(), token.ptr()) != 0) throw nb::python_error();
        } else {  // any other sequence with an append method (an int64 array)
            PyObject* appended = PyObject_CallMethodOneArg(tokens.ptr(), snames.append.name, token.ptr());
            if (appended == nullptr) throw nb::python_error();
            Py_DECREF(appended);
        }
        nb::object hashes = get(request, snames.block_hashes);
        if (length(tokens) / manager_->block_size() <= length(hashes)) return;
        nb::object hasher = get(request, snames.hasher);
        hasher.attr(snames.extend.name)(hashes, tokens, get(request, snames.hash_keys));
    }

    // A request that produced its last token: blocks freed at once, in step order.
    void finish(nb::handle request, double now) {
        if (PyDict_DelItem(requests_.ptr(), get(request, snames.request_id).ptr()) != 0) {
            throw nb::python_error();
        }
        manager_->free(request);
        deferred_.erase(request.ptr());
        set_float(request, snames.finished_at, now);
    }

    nb::object manager_object_;
    CacheCore* manager_;
    SchedulerLimits limits_;
    nb::dict requests_;
    nb::object running_status_, preempted_status_, finished_status_;
    nb::tuple finished_statuses_;
    nb::object admission_type_;
    // Scratch: the waiting head's prefix hit, blocks allocated (unused: ids stay in the core).
    std::vector<int32_t> hit_blocks_, new_ids_;
    std::vector<nb::object> running_;
    std::deque<nb::object> waiting_;
    // Waiting requests the waiting pass skipped (async: output in flight), not yet admitted.
    std::unordered_set<PyObject*> deferred_;
    int64_t num_executed_steps_ = 0;
    int64_t last_prefill_step_;
    bool prefill_capacity_bound_ = false;
};

void bind_scheduler(nb::module_& m) {
    intern_scheduler_names();
    nb::class_<StepOutput>(m, "StepOutput")
        .def_ro("total_num_scheduled_tokens", &StepOutput::total_num_scheduled_tokens)
        .def_prop_ro("num_scheduled_tokens",
                     [](const StepOutput& out) {
                         nb::dict tokens;
                         for (size_t i = 0; i < out.scheduled.size(); ++i) {
                             tokens[get(out.scheduled[i], snames.request_id)] = out.num_scheduled[i];
                         }
                         return tokens;
                     })
        .def_prop_ro("scheduled",
                     [](const StepOutput& out) {
                         nb::list requests;
                         for (const nb::object& request : out.scheduled) requests.append(request);
                         return requests;
                     })
        .def_prop_ro("admitted",
                     [](const StepOutput& out) {
                         nb::list admissions;
                         for (const auto& [request, num_hit_tokens, resumed] : out.admitted) {
                             admissions.append(out.admission_type(request, num_hit_tokens, resumed));
                         }
                         return admissions;
                     })
        .def_prop_ro("preempted",
                     [](const StepOutput& out) {
                         nb::list victims;
                         for (const nb::object& victim : out.preempted) victims.append(victim);
                         return victims;
                     })
        // The compiled step decodes every request every step: no lazy decoders, no CPU tier.
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

    nb::class_<SchedulerCore>(m, "SchedulerCore")
        .def(
            "__init__",
            [](SchedulerCore* self, nb::object manager, int64_t max_num_batched_tokens,
               int64_t max_num_admitted_seqs, int64_t max_model_len, bool enable_chunked_prefill,
               int64_t long_prefill_token_threshold, bool long_prefill_token_threshold_adaptive,
               bool scheduler_reserve_full_isl, int64_t prefill_schedule_interval,
               bool async_scheduling, nb::dict requests, nb::object running_status,
               nb::object preempted_status, nb::object finished_status,
               nb::tuple finished_statuses, nb::object admission_type) {
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
                                         preempted_status, finished_status, finished_statuses,
                                         admission_type);
            },
            nb::arg("manager"), nb::arg("max_num_batched_tokens"),
            nb::arg("max_num_admitted_seqs"), nb::arg("max_model_len"),
            nb::arg("enable_chunked_prefill"), nb::arg("long_prefill_token_threshold"),
            nb::arg("long_prefill_token_threshold_adaptive"),
            nb::arg("scheduler_reserve_full_isl"), nb::arg("prefill_schedule_interval"),
            nb::arg("async_scheduling"), nb::arg("requests"), nb::arg("running_status"),
            nb::arg("preempted_status"), nb::arg("finished_status"),
            nb::arg("finished_statuses"), nb::arg("admission_type"))
        .def_prop_ro("num_running", &SchedulerCore::num_running)
        .def_prop_ro("num_waiting", &SchedulerCore::num_waiting)
        .def_prop_ro("num_executed_steps", &SchedulerCore::num_executed_steps)
        .def_ro("num_preemptions", &SchedulerCore::num_preemptions)
        .def("running", &SchedulerCore::running)
        .def("waiting", &SchedulerCore::waiting)
        .def("add_request", &SchedulerCore::add_request)
        .def("remove", &SchedulerCore::remove)
        .def("schedule", &SchedulerCore::schedule, nb::rv_policy::take_ownership)
        .def("update_from_output",
             [](SchedulerCore& self, const StepOutput& output, double now) {
                 StepFinished result = self.update_from_output(output, now);
                 return nb::make_tuple(result.sampled, result.finished,
                                       result.prefix_cache_stats);
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
    shape.num_decodes = int64_t(output.decode_context_lens.size());
    shape.num_tokens = shape.num_decodes;
    int64_t longest = -1;
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

// An applied step: the requests it finished (in step order), its prefix-cache counters and
// the record's token counts.
struct LoopAppliedStep {
    nb::list finished;
    int64_t num_queries = 0;
    int64_t num_hits = 0;
    int64_t num_prefill_tokens = 0;
    int64_t num_decode_tokens = 0;
};

LoopAppliedStep loop_apply_step(SchedulerCore& scheduler, const StepOutput& output, double now) {
    StepFinished result = scheduler.update_from_output(output, now);
    LoopAppliedStep applied;
    applied.finished = result.finished;
    applied.num_queries = nb::cast<int64_t>(result.prefix_cache_stats.attr("queries"));
    applied.num_hits = nb::cast<int64_t>(result.prefix_cache_stats.attr("hits"));
    for (int64_t tokens : output.prefill_new_tokens) applied.num_prefill_tokens += tokens;
    applied.num_decode_tokens = int64_t(output.decode_context_lens.size());
    return applied;
}
