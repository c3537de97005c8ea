// The engine step loop in C++: sim/engine/core.py EngineCore's loop for the compiled scheduler
// and the linear step-time model, for the replicas of one SimPy clock together.
//
// StepLoop is one replica's loop, the same state machine as EngineCore._run (the readable
// reference): schedule a step, keep it in flight (one step with sync scheduling, two with
// async), wait until the oldest ends on the GPU clock, apply its output, record it. `resume`
// runs it from one SimPy wait of the Python loop to the next. ClusterLoop keeps every replica's
// pending wait as a wake with the id SimPy would give that event and runs the wakes in SimPy's
// order until the next event in SimPy's own queue is due (sim/engine/compiled.py), so nothing
// outside the replicas can tell the two loops apart.
//
// Included by core.cpp inside its anonymous namespace, after scheduler.hpp.

// The step-time form of sim/costmodel/model.py StepTimeModel, evaluated in the same order.
struct StepCosts {
    double step_overhead_s;
    double per_token_s;
    int64_t t_star_tokens;
    double half_pair_s;
    double per_kv_token_s;
    double per_decode_seq_s;
};

// A column's values as a numpy array that owns them (moved out, no copy); `values` starts
// empty again, with room for as many (the next batch is as long, most likely).
template <typename T>
void move_out(nb::dict& columns, const char* name, std::vector<T>& values) {
    auto* owned = new std::vector<T>(std::move(values));
    values = std::vector<T>();
    values.reserve(owned->size());
    nb::capsule owner(owned, [](void* pointer) noexcept {
        delete static_cast<std::vector<T>*>(pointer);
    });
    size_t shape[1] = {owned->size()};
    columns[name] = nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), 1, shape, owner);
}

// The step records' columns (sim.metrics.StepColumns' fields but the CPU-tier counters, which
// are 0 without a tier), appended as steps are applied. One buffer may serve several replicas:
// its rows are then in the order the replicas applied their steps.
class StepColumnsBuffer {
  public:
    std::vector<int64_t> step_index, num_prefill_tokens, num_decode_tokens, num_running,
        num_waiting, num_free_blocks, num_preemptions, num_queries, num_hits, num_evictions,
        replica;
    std::vector<double> started_at, duration_s, usage, cached_free_usage;

    size_t size() const { return step_index.size(); }

    // The columns so far as numpy arrays; the buffer starts empty again.
    nb::dict take() {
        nb::dict columns;
        move_out(columns, "step_index", step_index);
        move_out(columns, "started_at", started_at);
        move_out(columns, "duration_s", duration_s);
        move_out(columns, "num_prefill_tokens", num_prefill_tokens);
        move_out(columns, "num_decode_tokens", num_decode_tokens);
        move_out(columns, "num_running", num_running);
        move_out(columns, "num_waiting", num_waiting);
        move_out(columns, "num_free_blocks", num_free_blocks);
        move_out(columns, "usage", usage);
        move_out(columns, "num_preemptions", num_preemptions);
        move_out(columns, "num_queries", num_queries);
        move_out(columns, "num_hits", num_hits);
        move_out(columns, "num_evictions", num_evictions);
        move_out(columns, "replica", replica);
        move_out(columns, "cached_free_usage", cached_free_usage);
        return columns;
    }
};

// Finished requests' records as the engine sees them (sim.metrics.RequestColumns without a
// front end: sim/engine/core.py request_record's fields), appended in finishing order. One
// buffer may serve several replicas, as StepColumnsBuffer does.
class RequestColumnsBuffer {
  public:
    nb::list request_id, session_id, tenant;
    std::vector<double> arrival_at, first_scheduled_at, first_token_at, finished_at,
        inter_token_latencies_s;
    std::vector<int64_t> num_prompt_tokens, num_cached_tokens, num_computed_prefill_tokens,
        num_output_tokens, num_preemptions, replica, num_gaps;

    size_t size() const { return num_gaps.size(); }

    // The finished request `state`, served by `replica_index`, written back to its Python
    // request (sync) already: its gaps are read from there, where all of them are.
    void add(const ReqState& state, int64_t replica_index) {
        nb::handle request = state.request;
        append(request_id, state.request_id);
        append(session_id, get(request, snames.session_id));
        append(tenant, get(request, snames.tenant));
        arrival_at.push_back(get_time(request, snames.arrival_at));
        first_scheduled_at.push_back(state.first_scheduled_at);
        first_token_at.push_back(state.first_token_at);
        finished_at.push_back(state.finished_at);
        num_prompt_tokens.push_back(state.num_prompt_tokens);
        num_cached_tokens.push_back(state.num_cached_tokens);
        num_computed_prefill_tokens.push_back(state.num_computed_prefill_tokens);
        num_output_tokens.push_back(state.num_output_tokens());
        num_preemptions.push_back(state.num_preemptions);
        replica.push_back(replica_index);
        size_t num_before = inter_token_latencies_s.size();
        read_numbers(get(request, snames.inter_token_latencies_s), inter_token_latencies_s);
        num_gaps.push_back(int64_t(inter_token_latencies_s.size() - num_before));
    }

    // The columns so far (ids as lists, numbers as numpy arrays); the buffer starts empty again.
    nb::dict take() {
        nb::dict columns;
        columns["request_id"] = std::exchange(request_id, nb::list());
        columns["session_id"] = std::exchange(session_id, nb::list());
        columns["tenant"] = std::exchange(tenant, nb::list());
        move_out(columns, "arrival_at", arrival_at);
        move_out(columns, "first_scheduled_at", first_scheduled_at);
        move_out(columns, "first_token_at", first_token_at);
        move_out(columns, "finished_at", finished_at);
        move_out(columns, "num_prompt_tokens", num_prompt_tokens);
        move_out(columns, "num_cached_tokens", num_cached_tokens);
        move_out(columns, "num_computed_prefill_tokens", num_computed_prefill_tokens);
        move_out(columns, "num_output_tokens", num_output_tokens);
        move_out(columns, "num_preemptions", num_preemptions);
        move_out(columns, "replica", replica);
        move_out(columns, "inter_token_latencies_s", inter_token_latencies_s);
        move_out(columns, "num_gaps", num_gaps);
        return columns;
    }

  private:
    static void append(nb::list& items, nb::handle item) {
        if (PyList_Append(items.ptr(), item.ptr()) != 0) throw nb::python_error();
    }
};

// How a replica's resume ended: the SimPy wait the Python loop would start there.
enum class Yield : int {
    kIdle = 0,      // nothing to do: wait for a request (EngineCore.submit wakes the replica)
    kTimeout = 1,   // a timeout to `at` (the end of the oldest step, or now when others are due)
    kFinished = 2,  // a request whose finish the caller needs at once finished now
};

struct Resumed {
    Yield kind;
    double at;
};

class StepLoop {
  public:
    StepLoop(nb::object scheduler, nb::object manager, nb::dict requests, StepCosts costs,
             nb::object cost_model, nb::object covered, nb::object buffer,
             nb::object request_buffer, int64_t replica, bool async_scheduling,
             bool lazy_decoding)
        : scheduler_object_(scheduler),
          scheduler_(nb::cast<SchedulerCore*>(scheduler)),
          manager_object_(manager),
          manager_(nb::cast<CacheCore*>(manager)),
          requests_(requests),
          costs_(costs),
          cost_model_(cost_model),
          buffer_object_(buffer),
          buffer_(nb::cast<StepColumnsBuffer*>(buffer)),
          request_buffer_object_(request_buffer),
          request_buffer_(nb::cast<RequestColumnsBuffer*>(request_buffer)),
          replica_(replica),
          max_in_flight_(async_scheduling ? 2 : 1) {
        if (lazy_decoding) scheduler_->enable_lazy_decoding();
        check_range_ = !covered.is_none() && !nb::cast<bool>(cost_model.attr("_warned"));
        if (!covered.is_none()) {
            const char* features[5] = {"num_tokens", "attention_pairs", "kv_tokens",
                                       "num_decodes", "longest_context"};
            for (int i = 0; i < 5; ++i) {
                nb::object range = covered.attr(features[i]);
                covered_[i][0] = nb::cast<double>(range[0]);
                covered_[i][1] = nb::cast<double>(range[1]);
            }
        }
    }

    StepLoop(const StepLoop&) = delete;
    StepLoop& operator=(const StepLoop&) = delete;

    int64_t num_steps = 0;

    // A request whose finish ends the resume right after the step that finishes it.
    void stop_on_finish_of(nb::handle request) { scheduler_->stop_on_finish_of(request); }

    // Go on from where the replica waited, at time `t`, until it waits again; `other_due_at`
    // is the earliest time any other event is due (SimPy's peek while this replica runs).
    // Applied steps' finished requests are appended to `finished` as (replica, request), their
    // records to the request buffer.
    Resumed resume(double t, double other_due_at, nb::list& finished) {
        for (;;) {
            switch (phase_) {
                case Phase::kTop:
                    if (PyDict_GET_SIZE(requests_.ptr()) > 0) {
                        phase_ = Phase::kSchedule;
                        // Other events due now run first: the Python loop yields once.
                        if (other_due_at <= t) return {Yield::kTimeout, t};
                        break;
                    }
                    if (in_flight_.empty()) return {Yield::kIdle, t};
                    phase_ = Phase::kPop;
                    break;
                case Phase::kSchedule:
                    phase_ = launch(t);
                    break;
                case Phase::kPop: {
                    const InFlight& batch = in_flight_.back();
                    double ends_at = batch.started_at + batch.duration_s;
                    phase_ = Phase::kApply;
                    // SimPy's clock after the Python loop's timeout from t.
                    if (batch.started_at == t) return {Yield::kTimeout, t + batch.duration_s};
                    if (ends_at > t) return {Yield::kTimeout, t + (ends_at - t)};
                    break;
                }
                case Phase::kApply:
                    phase_ = Phase::kTop;
                    if (apply(t, finished)) return {Yield::kFinished, t};
                    break;
            }
        }
    }

  private:
    enum class Phase { kTop, kSchedule, kPop, kApply };

    struct InFlight {
        std::unique_ptr<StepOutput> output;
        double started_at;
        double duration_s;
        int64_t num_running;
        int64_t num_waiting;
        int64_t num_preemptions;
        int64_t num_evictions;
    };

    // Schedule a step at `now`; the phase that follows (EngineCore._run's branches).
    Phase launch(double now) {
        int64_t preemptions_before = scheduler_->num_preemptions;
        int64_t evictions_before = manager_->num_evictions;
        std::unique_ptr<StepOutput> output = spare_output();
        scheduler_->schedule_into(*output, now);
        LoopStepShape shape = loop_step_shape(*output);
        double started_at = now;
        double duration_s = 0.0;
        if (shape.num_scheduled_tokens) {
            duration_s = step_time_s(shape);
            started_at = std::max(now, gpu_free_at_);
            gpu_free_at_ = started_at + duration_s;
        }
        InFlight batch{std::move(output),
                       started_at,
                       duration_s,
                       scheduler_->num_running(),
                       scheduler_->num_waiting(),
                       scheduler_->num_preemptions - preemptions_before,
                       manager_->num_evictions - evictions_before};
        if (shape.num_scheduled_tokens) {
            in_flight_.push_front(std::move(batch));
            // Async: schedule the next step before this one's output.
            return in_flight_.size() < max_in_flight_ ? Phase::kTop : Phase::kPop;
        }
        recycle(std::move(batch.output));
        if (!in_flight_.empty()) return Phase::kPop;  // a flush step: nothing to run or record
        if (!shape.preempted) {
            throw std::runtime_error("engine step scheduled nothing while requests are unfinished");
        }
        return Phase::kTop;  // a request preempted itself; vLLM's next iteration goes on
    }

    // Step outputs are reused, so a step allocates nothing once the vectors have grown.
    std::unique_ptr<StepOutput> spare_output() {
        if (spare_.empty()) return std::make_unique<StepOutput>();
        std::unique_ptr<StepOutput> output = std::move(spare_.back());
        spare_.pop_back();
        return output;
    }

    // An applied (or empty) step's output: its requests are let go of now, as when it was
    // destroyed.
    void recycle(std::unique_ptr<StepOutput> output) {
        output->clear();
        spare_.push_back(std::move(output));
    }

    double step_time_s(const LoopStepShape& shape) {
        if (check_range_) check_range(shape);
        const StepCosts& c = costs_;
        return c.step_overhead_s +
               c.per_token_s * double(std::max(shape.num_tokens, c.t_star_tokens)) +
               c.half_pair_s * double(shape.twice_attention_pairs) +
               c.per_kv_token_s * double(shape.kv_tokens) +
               c.per_decode_seq_s * double(shape.num_decodes);
    }

    // The first step outside the fitted ranges: the model's own check warns (once per model).
    void check_range(const LoopStepShape& shape) {
        double values[5] = {double(shape.num_tokens), double(shape.twice_attention_pairs) / 2,
                            double(shape.kv_tokens), double(shape.num_decodes),
                            double(shape.longest_context)};
        for (int i = 0; i < 5; ++i) {
            if (covered_[i][0] <= values[i] && values[i] <= covered_[i][1]) continue;
            check_range_ = false;
            if (!nb::cast<bool>(cost_model_.attr("_warned"))) {
                cost_model_.attr("_check_range")(shape.num_tokens, shape.twice_attention_pairs,
                                                 shape.kv_tokens, shape.num_decodes,
                                                 shape.longest_context);
            }
            return;
        }
    }

    // Apply the oldest step's output at `now` and record it; true when a request whose
    // finish the caller needs at once finished.
    bool apply(double now, nb::list& finished) {
        InFlight batch = std::move(in_flight_.back());
        in_flight_.pop_back();
        LoopAppliedStep applied = loop_apply_step(*scheduler_, *batch.output, now);
        recycle(std::move(batch.output));
        ++num_steps;
        StepColumnsBuffer& b = *buffer_;
        b.step_index.push_back(num_steps);
        b.started_at.push_back(batch.started_at);
        b.duration_s.push_back(batch.duration_s);
        b.num_prefill_tokens.push_back(applied.num_prefill_tokens);
        b.num_decode_tokens.push_back(applied.num_decode_tokens);
        b.num_running.push_back(batch.num_running);
        b.num_waiting.push_back(batch.num_waiting);
        b.num_free_blocks.push_back(manager_->num_free_blocks());
        b.usage.push_back(manager_->usage());
        b.num_preemptions.push_back(batch.num_preemptions);
        b.num_queries.push_back(applied.num_queries);
        b.num_hits.push_back(applied.num_hits);
        b.num_evictions.push_back(batch.num_evictions);
        b.replica.push_back(replica_);
        b.cached_free_usage.push_back(manager_->cached_free_usage());
        bool stop = false;
        for (const State& state : applied.finished) {
            request_buffer_->add(*state, replica_);
            finished.append(nb::make_tuple(replica_, state->request));
            stop = stop || state->stop_on_finish;
        }
        return stop;
    }

    nb::object scheduler_object_;
    SchedulerCore* scheduler_;
    nb::object manager_object_;
    CacheCore* manager_;
    nb::dict requests_;  // the scheduler's unfinished requests by id
    StepCosts costs_;
    nb::object cost_model_;
    bool check_range_ = false;
    double covered_[5][2] = {};
    nb::object buffer_object_;
    StepColumnsBuffer* buffer_;
    nb::object request_buffer_object_;
    RequestColumnsBuffer* request_buffer_;
    int64_t replica_;
    size_t max_in_flight_;
    Phase phase_ = Phase::kTop;
    double gpu_free_at_ = 0.0;
    // Steps launched but not yet applied, newest first.
    std::deque<InFlight> in_flight_;
    std::vector<std::unique_ptr<StepOutput>> spare_;
};

// A SimPy event's place in the queue: (time, priority, id); SimPy fires events in this order.
struct EventKey {
    double at;
    int64_t priority;
    int64_t id;

    bool operator<(const EventKey& other) const {
        return std::tie(at, priority, id) < std::tie(other.at, other.priority, other.id);
    }
    bool operator>(const EventKey& other) const { return other < *this; }
};

constexpr int64_t kNormalPriority = 1;  // simpy.events.NORMAL: timeouts and succeeded events

// Why ClusterLoop.run returned.
enum class ClusterStop : int {
    kReached = 0,   // every wait due before the next outside event is done
    kFinished = 1,  // a replica finished a request the caller needs at once, at `at`
    kSubmit = 2,    // the front end hands a burst of requests to the engines, at `at`
    // A replica finished a request at `at` under an urgent wake, where the Python loop's
    // hand-over would be an event after the next outside event: the caller schedules it.
    kFinishedLater = 3,
};

// Several replicas' step loops on one SimPy clock, run as SimPy would run their processes:
// each wait the Python loop would start is a wake with the event id SimPy would give it, and
// wakes run in SimPy's order until the next event in SimPy's own queue (an arrival, a
// session's next turn, a wake the caller gave SimPy) is due. So steps, finishes and block
// events come in the same order as with one SimPy process per replica, interleaved the same
// way with everything else; SimPy only sees the waits that meet an outside event.
//
// The serving front end's bursts (sim/engine/frontend_stage.py) are held here too where the
// caller drives the clock from here and no replica runs the Python loop (which reads SimPy's
// queue, where these are not): a hand-off opens a burst with its close event (now, the
// next id), the close schedules the burst's submit (now plus the slowest ingress, the next id
// then), and only the submit returns to the caller. So are sessions' next turns, released
// after their think time (sim/engine/arrivals.py): the release hands the turn off here. They
// count as outside events for the replicas, exactly as they would in SimPy's queue.
class ClusterLoop {
  public:
    ClusterLoop() = default;

    ClusterLoop(const ClusterLoop&) = delete;
    ClusterLoop& operator=(const ClusterLoop&) = delete;

    int64_t next_event_id = 0;  // SimPy's next event id; the caller keeps the two in step
    double last_at = 0.0;   // when the last wake ran
    int64_t last_id = -1;   // that wake's event id

    // A replica's loop; its index. It starts as its process would: at `now`, with the
    // process's start event (`event_id`, SimPy's urgent priority).
    int64_t add(nb::object loop, double now, int64_t event_id, int64_t urgent_priority) {
        int64_t replica = int64_t(loops_.size());
        loops_.push_back(nb::cast<StepLoop*>(loop));
        loop_objects_.push_back(std::move(loop));
        idle_.push_back(0);
        wakes_.push(Wake{{now, urgent_priority, event_id}, replica});
        return replica;
    }

    bool is_idle(int64_t replica) const { return idle_.at(size_t(replica)) != 0; }

    // A request reached an idle replica: its wake-up event, with the id SimPy gave it.
    void wake(int64_t replica, double now, int64_t event_id) {
        idle_.at(size_t(replica)) = 0;
        wakes_.push(Wake{{now, kNormalPriority, event_id}, replica});
    }

    // The earliest event held here (a wake or a front-end event) as (at, priority, event id),
    // or None when every replica is idle and no burst is pending.
    nb::object next_wake() const {
        const EventKey* key = earliest_held();
        if (key == nullptr) return nb::none();
        return nb::make_tuple(key->at, key->priority, key->id);
    }

    // A request reaches the front end at `now`, `ingress_s` (> 0) before the engines may have
    // it: it joins the open burst, or opens one whose close takes event id `next_id`. Returns
    // the next free event id.
    int64_t hand_off(nb::handle spec, double ingress_s, double now, int64_t next_id) {
        if (PyList_GET_SIZE(burst_.ptr()) == 0) {
            stage_.push(StageEvent{{now, kNormalPriority, next_id++}, StageKind::kClose});
            burst_ingress_s_ = ingress_s;
        } else if (ingress_s > burst_ingress_s_) {
            burst_ingress_s_ = ingress_s;
        }
        if (PyList_Append(burst_.ptr(), spec.ptr()) != 0) throw nb::python_error();
        return next_id;
    }

    // A session's next turn reaches the front end at `at`, the event SimPy would give id
    // `event_id`: handed off then with `ingress_s`, or submitted then when that is 0.
    void release(nb::object spec, double at, int64_t event_id, double ingress_s) {
        if (ingress_s == 0.0) {
            nb::list burst;
            if (PyList_Append(burst.ptr(), spec.ptr()) != 0) throw nb::python_error();
            stage_.push(StageEvent{{at, kNormalPriority, event_id}, StageKind::kSubmit, burst});
            return;
        }
        stage_.push(StageEvent{
            {at, kNormalPriority, event_id}, StageKind::kRelease, std::move(spec), ingress_s});
    }

    // Run every event held here before `queue_top` (the first event in SimPy's queue), SimPy's
    // clock at `now`. Returns (stop, at, event id of the event that stopped, the burst to
    // submit for kSubmit, else None).
    std::tuple<int, double, int64_t, nb::object> run(double now, double top_at,
                                                     int64_t top_priority, int64_t top_id,
                                                     nb::list finished) {
        EventKey queue_top{top_at, top_priority, top_id};
        if (resuming_ >= 0) {  // the replica whose finish stopped the last run goes on
            int64_t replica = resuming_;
            resuming_ = -1;
            if (resume(replica, now, outside_top(queue_top), finished)) {
                return {int(ClusterStop::kFinished), now, last_id, nb::none()};
            }
        }
        int64_t num_run = 0;
        while (true) {
            // A run may go on for many steps: Ctrl-C and SIGTERM are seen inside it too.
            if (++num_run % 4096 == 0 && PyErr_CheckSignals() != 0) throw nb::python_error();
            EventKey top = outside_top(queue_top);
            if (!wakes_.empty() && wakes_.top().key < top) {
                Wake wake = wakes_.top();
                wakes_.pop();
                last_at = wake.key.at;
                last_id = wake.key.id;
                if (resume(wake.replica, wake.key.at, top, finished)) {
                    EventKey handed_over{wake.key.at, kNormalPriority, wake.key.id};
                    ClusterStop stop = wake.key.at != now && top < handed_over
                                           ? ClusterStop::kFinishedLater
                                           : ClusterStop::kFinished;
                    return {int(stop), wake.key.at, wake.key.id, nb::none()};
                }
                continue;
            }
            if (stage_.empty() || !(stage_.top().key < queue_top)) break;
            StageEvent event = stage_.top();
            stage_.pop();
            switch (event.kind) {
                case StageKind::kClose: {  // the burst's submit, after its slowest ingress
                    nb::list burst = std::exchange(burst_, nb::list());
                    stage_.push(StageEvent{
                        {event.key.at + burst_ingress_s_, kNormalPriority, next_event_id++},
                        StageKind::kSubmit,
                        burst});
                    break;
                }
                case StageKind::kRelease:
                    next_event_id =
                        hand_off(event.payload, event.ingress_s, event.key.at, next_event_id);
                    break;
                case StageKind::kSubmit:
                    return {int(ClusterStop::kSubmit), event.key.at, event.key.id, event.payload};
            }
        }
        return {int(ClusterStop::kReached), last_at, last_id, nb::none()};
    }

  private:
    struct Wake {
        EventKey key;
        int64_t replica;
        bool operator>(const Wake& other) const { return key > other.key; }
    };

    // A front-end event: a burst's close, its submit (the payload: the burst's specs), or a
    // session turn's release (the payload: its spec, handed off with `ingress_s`).
    enum class StageKind : uint8_t { kClose, kSubmit, kRelease };
    struct StageEvent {
        EventKey key;
        StageKind kind;
        nb::object payload = nb::none();
        double ingress_s = 0.0;
        bool operator>(const StageEvent& other) const { return key > other.key; }
    };

    // The first event a replica must stop before: SimPy's, or a front-end event before it.
    EventKey outside_top(const EventKey& queue_top) const {
        if (!stage_.empty() && stage_.top().key < queue_top) return stage_.top().key;
        return queue_top;
    }

    const EventKey* earliest_held() const {
        const EventKey* wake = wakes_.empty() ? nullptr : &wakes_.top().key;
        const EventKey* stage = stage_.empty() ? nullptr : &stage_.top().key;
        if (wake == nullptr) return stage;
        if (stage == nullptr) return wake;
        return *stage < *wake ? stage : wake;
    }

    // True when the replica stopped on a finish the caller needs at once.
    bool resume(int64_t replica, double at, const EventKey& top, nb::list& finished) {
        double other_due_at = std::min(top.at, wakes_.empty() ? top.at : wakes_.top().key.at);
        Resumed resumed = loops_[size_t(replica)]->resume(at, other_due_at, finished);
        switch (resumed.kind) {
            case Yield::kIdle:
                idle_[size_t(replica)] = 1;
                return false;
            case Yield::kTimeout:
                wakes_.push(Wake{{resumed.at, kNormalPriority, next_event_id++}, replica});
                return false;
            case Yield::kFinished:
                resuming_ = replica;
                return true;
        }
        return false;
    }

    std::vector<nb::object> loop_objects_;
    std::vector<StepLoop*> loops_;
    std::vector<uint8_t> idle_;
    std::priority_queue<Wake, std::vector<Wake>, std::greater<Wake>> wakes_;
    std::priority_queue<StageEvent, std::vector<StageEvent>, std::greater<StageEvent>> stage_;
    nb::list burst_;  // the open burst's specs, in hand-off order
    double burst_ingress_s_ = 0.0;  // its slowest ingress
    int64_t resuming_ = -1;
};

void bind_step_loop(nb::module_& m) {
    nb::class_<StepColumnsBuffer>(m, "StepColumnsBuffer")
        .def(nb::init<>())
        .def("__len__", &StepColumnsBuffer::size)
        .def("take", &StepColumnsBuffer::take);

    nb::class_<RequestColumnsBuffer>(m, "RequestColumnsBuffer")
        .def(nb::init<>())
        .def("__len__", &RequestColumnsBuffer::size)
        .def("take", &RequestColumnsBuffer::take);

    nb::class_<StepLoop>(m, "StepLoop")
        .def(
            "__init__",
            [](StepLoop* self, nb::object scheduler, nb::object manager, nb::dict requests,
               double step_overhead_s, double per_token_s, int64_t t_star_tokens,
               double half_pair_s, double per_kv_token_s, double per_decode_seq_s,
               nb::object cost_model, nb::object covered, nb::object buffer,
               nb::object request_buffer, int64_t replica, bool async_scheduling,
               bool lazy_decoding) {
                StepCosts costs{step_overhead_s, per_token_s,     t_star_tokens,
                                half_pair_s,     per_kv_token_s, per_decode_seq_s};
                new (self) StepLoop(scheduler, manager, requests, costs, cost_model, covered,
                                    buffer, request_buffer, replica, async_scheduling,
                                    lazy_decoding);
            },
            nb::arg("scheduler"), nb::arg("manager"), nb::arg("requests"),
            nb::arg("step_overhead_s"), nb::arg("per_token_s"), nb::arg("t_star_tokens"),
            nb::arg("half_pair_s"), nb::arg("per_kv_token_s"), nb::arg("per_decode_seq_s"),
            nb::arg("cost_model"), nb::arg("covered").none(), nb::arg("buffer"),
            nb::arg("request_buffer"), nb::arg("replica"), nb::arg("async_scheduling"), nb::arg("lazy_decoding") = true)
        .def_ro("num_steps", &StepLoop::num_steps)
        .def("stop_on_finish_of", &StepLoop::stop_on_finish_of);

    nb::class_<ClusterLoop>(m, "ClusterLoop")
        .def(nb::init<>())
        .def("add", &ClusterLoop::add, nb::arg("loop"), nb::arg("now"), nb::arg("event_id"),
             nb::arg("urgent_priority"))
        .def_rw("next_event_id", &ClusterLoop::next_event_id)
        .def_ro("last_at", &ClusterLoop::last_at)
        .def_ro("last_id", &ClusterLoop::last_id)
        .def("is_idle", &ClusterLoop::is_idle)
        .def("wake", &ClusterLoop::wake, nb::arg("replica"), nb::arg("now"), nb::arg("event_id"))
        .def("next_wake", &ClusterLoop::next_wake)
        .def("hand_off", &ClusterLoop::hand_off, nb::arg("spec"), nb::arg("ingress_s"),
             nb::arg("now"), nb::arg("next_id"))
        .def("release", &ClusterLoop::release, nb::arg("spec"), nb::arg("at"),
             nb::arg("event_id"), nb::arg("ingress_s"))
        .def("run", &ClusterLoop::run, nb::arg("now"), nb::arg("top_at"), nb::arg("top_priority"),
             nb::arg("top_id"), nb::arg("finished"));
}
