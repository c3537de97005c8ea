// prefixsim's compiled cache core: block hashing and vLLM v1's block pool and KV cache manager.
//
// The same decisions as sim/kvcache (the readable reference), block for block: the free queue
// order, eviction, no de-duplication, the lookup of the oldest cached copy, the admission
// checks. Blocks are ids into an array of block records (one cache line each) instead of
// Python objects; requests stay Python objects and are read through their attributes.
#include <dlfcn.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <structmember.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <unordered_set>
#include <string>
#include <string_view>
#include <queue>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "serialise.hpp"
#include "sha256.hpp"

namespace nb = nanobind;
using namespace prefixsim;

namespace {

// ---------------------------------------------------------------------------------------------
// Small helpers over the Python C API

struct Names {
    PyObject* request_id;
    PyObject* num_tokens;
    PyObject* block_hashes;
    PyObject* num_computed_tokens;
    PyObject* num_preemptions;
    PyObject* status;
    PyObject* skip_reading_prefix_cache;
    PyObject* is_empty;
    PyObject* on_block_event;
    PyObject* stored;
    PyObject* hit;
    PyObject* evicted;
    PyObject* cleared;
};

Names names;

void intern_names() {
    names.request_id = PyUnicode_InternFromString("request_id");
    names.num_tokens = PyUnicode_InternFromString("num_tokens");
    names.block_hashes = PyUnicode_InternFromString("block_hashes");
    names.num_computed_tokens = PyUnicode_InternFromString("num_computed_tokens");
    names.num_preemptions = PyUnicode_InternFromString("num_preemptions");
    names.status = PyUnicode_InternFromString("status");
    names.skip_reading_prefix_cache = PyUnicode_InternFromString("skip_reading_prefix_cache");
    names.is_empty = PyUnicode_InternFromString("is_empty");
    names.on_block_event = PyUnicode_InternFromString("on_block_event");
    names.stored = PyUnicode_InternFromString("stored");
    names.hit = PyUnicode_InternFromString("hit");
    names.evicted = PyUnicode_InternFromString("evicted");
    names.cleared = PyUnicode_InternFromString("cleared");
}

nb::object attr(nb::handle object, PyObject* name) {
    PyObject* value = PyObject_GetAttr(object.ptr(), name);
    if (value == nullptr) throw nb::python_error();
    return nb::steal(value);
}

int64_t int_attr(nb::handle object, PyObject* name) {
    nb::object value = attr(object, name);
    int64_t result = PyLong_AsLongLong(value.ptr());
    if (result == -1 && PyErr_Occurred()) throw nb::python_error();
    return result;
}

// A request's block hashes, which must be a list.
nb::object hash_list(nb::handle request) {
    nb::object hashes = attr(request, names.block_hashes);
    if (!PyList_Check(hashes.ptr())) throw nb::type_error("request.block_hashes must be a list");
    return hashes;
}

// A request id viewed as UTF-8 without a copy.
std::string_view id_view(nb::handle request_id) {
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(request_id.ptr(), &size);
    if (data == nullptr) throw nb::python_error();
    return std::string_view(data, size_t(size));
}

// ---------------------------------------------------------------------------------------------
// Digests

// libcrypto's low-level SHA-256 (SHA instructions where the CPU has them) when the process has
// it loaded, as Python's hashlib does; its one-shot SHA256() looks the algorithm up on every call.
using Sha256Init = int (*)(void*);
using Sha256Update = int (*)(void*, const void*, size_t);
using Sha256Final = int (*)(unsigned char*, void*);

struct Libcrypto {
    Sha256Init init = nullptr;
    Sha256Update update = nullptr;
    Sha256Final final = nullptr;
};

Libcrypto libcrypto;

bool find_libcrypto() {
    const char* libraries[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
    for (const char* library : libraries) {
        void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
        if (handle == nullptr) continue;
        auto init = reinterpret_cast<Sha256Init>(dlsym(handle, "SHA256_Init"));
        auto update = reinterpret_cast<Sha256Update>(dlsym(handle, "SHA256_Update"));
        auto final = reinterpret_cast<Sha256Final>(dlsym(handle, "SHA256_Final"));
        if (init != nullptr && update != nullptr && final != nullptr) {
            libcrypto = Libcrypto{init, update, final};
            return true;
        }
    }
    return false;
}

void sha256(const std::string& data, uint8_t* out) {
    if (libcrypto.init != nullptr) {
        alignas(16) unsigned char context[256];  // SHA256_CTX is 112 bytes
        libcrypto.init(context);
        libcrypto.update(context, data.data(), data.size());
        libcrypto.final(out, context);
    } else {
        sha256_portable(reinterpret_cast<const uint8_t*>(data.data()), data.size(), out);
    }
}

// A block hash as the pool keys it: up to 32 bytes (sha256) or 16 (xxh3_128). The bytes past
// `size` stay zero, so digests compare and mix as whole words (fixed sizes, no library call).
struct Digest {
    uint8_t size = 0;
    uint8_t bytes[32] = {0};

    bool operator==(const Digest& other) const {
        return std::memcmp(this, &other, sizeof(Digest)) == 0;
    }
};
static_assert(sizeof(Digest) == 33, "a digest has no padding: it compares byte for byte");

Digest digest_of(PyObject* bytes) {
    if (!PyBytes_Check(bytes)) throw nb::type_error("block hashes must be bytes");
    Py_ssize_t size = PyBytes_GET_SIZE(bytes);
    if (size > 32) throw nb::value_error("block hashes longer than 32 bytes are not supported");
    Digest digest;
    digest.size = uint8_t(size);
    std::memcpy(digest.bytes, PyBytes_AS_STRING(bytes), size_t(size));
    return digest;
}

nb::object digest_bytes(const Digest& digest) {
    return nb::steal(
        PyBytes_FromStringAndSize(reinterpret_cast<const char*>(digest.bytes), digest.size));
}

// A request's block hashes as the manager reads them: its Python list of bytes, or the
// scheduler's C++ copy (sim/native/src/scheduler.hpp).
struct HashSpan {
    PyObject* list = nullptr;
    const Digest* digests = nullptr;
    int64_t size = 0;

    static HashSpan of_list(nb::handle hashes) {
        return HashSpan{hashes.ptr(), nullptr, int64_t(PyList_GET_SIZE(hashes.ptr()))};
    }
    static HashSpan of(const std::vector<Digest>& hashes) {
        return HashSpan{nullptr, hashes.data(), int64_t(hashes.size())};
    }
    // What the prefix-lookup memo knows the storage by.
    const void* source() const { return list != nullptr ? static_cast<const void*>(list) : digests; }
    Digest at(int64_t index) const {
        return list != nullptr ? digest_of(PyList_GET_ITEM(list, index)) : digests[index];
    }
};

// ---------------------------------------------------------------------------------------------
// Block hashing

// XXH3-128 from the xxhash package's extension module when the process has it loaded (it
// exports the C function; sim.native hands over its path): xxhash's block digests and the
// block identity then need no Python call. Without it, the Python function is called.
struct Xxh128 {
    uint64_t low64;
    uint64_t high64;
};
using Xxh3_128 = Xxh128 (*)(const void*, size_t);

Xxh3_128 xxh3_128 = nullptr;

bool find_xxh3(const std::string& library) {
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) return false;
    xxh3_128 = reinterpret_cast<Xxh3_128>(dlsym(handle, "XXH3_128bits"));
    return xxh3_128 != nullptr;
}

enum class Algo { kSha256Pickle, kSha256Cbor, kXxhashPickle, kXxhashCbor };

Algo parse_algo(const std::string& algo) {
    if (algo == "sha256") return Algo::kSha256Pickle;
    if (algo == "sha256_cbor") return Algo::kSha256Cbor;
    if (algo == "xxhash") return Algo::kXxhashPickle;
    if (algo == "xxhash_cbor") return Algo::kXxhashCbor;
    throw nb::value_error("unknown hash_algo");
}

// Chained block hashes of plain blocks (vLLM's digests, or with `identity` the block identity:
// XXH3-128 of the parent's bytes and the raw int64 tokens, as sim.kvcache.hashing defines it);
// requests with extra keys, tokens beyond int64 or non-int tokens go to the reference hasher
// (the Python BlockHasher), which gives the same bytes.
class NativeHasher {
  public:
    NativeHasher(const std::string& algo, int64_t block_size, nb::bytes none_hash,
                 nb::object reference, nb::object no_hash_keys, nb::object xxh3_128_digest,
                 bool identity)
        : algo_(parse_algo(algo)),
          identity_(identity),
          block_size_(block_size),
          none_hash_(none_hash),
          none_digest_(digest_of(none_hash.ptr())),
          reference_(reference),
          no_hash_keys_(no_hash_keys),
          xxh3_128_digest_(xxh3_128_digest) {
        if (block_size < 1) throw nb::value_error("block_size must be >= 1");
        tokens_.resize(size_t(block_size));
        identity_input_.resize(sizeof(Digest::bytes) + size_t(block_size) * sizeof(int64_t));
    }

    int64_t block_size() const { return block_size_; }

    // Whether this hasher hashes blocks carrying `keys` itself (no extra keys, a block that
    // fits one pickle frame) rather than through the reference hasher.
    bool hashes_natively(nb::handle keys_or_none) const {
        nb::handle keys = keys_or_none.is_none() ? nb::handle(no_hash_keys_) : keys_or_none;
        return (keys.is(no_hash_keys_) || nb::cast<bool>(attr(keys, names.is_empty))) &&
               block_size_ * 10 + 64 <= int64_t(kMaxPickleFrame);
    }

    // BlockHasher.extend: token_ids[0] is the token at position `start`.
    int64_t extend(nb::list block_hashes, nb::handle token_ids, nb::handle keys_or_none,
                   int64_t start) {
        nb::handle keys = keys_or_none.is_none() ? nb::handle(no_hash_keys_) : keys_or_none;
        if (!hashes_natively(keys) || !PyList_Check(block_hashes.ptr())) {
            return nb::cast<int64_t>(
                reference_.attr("extend")(block_hashes, token_ids, keys, start));
        }
        if (start < 0 || start > PyList_GET_SIZE(block_hashes.ptr()) * block_size_) {
            throw nb::value_error("the tokens start after a block without a hash");
        }
        if (!PyList_Check(token_ids.ptr()) && PyObject_CheckBuffer(token_ids.ptr())) {
            Py_buffer view;
            if (PyObject_GetBuffer(token_ids.ptr(), &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
                throw nb::python_error();
            }
            std::string_view format = view.format == nullptr ? "B" : view.format;
            if (view.itemsize == 8 && (format == "q" || format == "l" || format == "<q" ||
                                       format == "<l" || format == "=q" || format == "=l")) {
                int64_t added = extend_from(block_hashes, static_cast<const int64_t*>(view.buf),
                                            start, start + view.len / 8);
                PyBuffer_Release(&view);
                return added;
            }
            PyBuffer_Release(&view);
        }
        nb::object sequence = nb::steal(PySequence_Fast(token_ids.ptr(), "tokens must be a sequence"));
        if (!sequence.is_valid()) throw nb::python_error();
        Py_ssize_t num_tokens = start + PySequence_Fast_GET_SIZE(sequence.ptr());
        PyObject** items = PySequence_Fast_ITEMS(sequence.ptr());
        Py_ssize_t start_block = PyList_GET_SIZE(block_hashes.ptr());
        Py_ssize_t num_full_blocks = num_tokens / block_size_;
        if (num_full_blocks <= start_block) return 0;
        for (Py_ssize_t i = start_block * block_size_ - start; i < num_full_blocks * block_size_ - start;
             ++i) {
            if (!PyLong_CheckExact(items[i])) {
                return nb::cast<int64_t>(
                    reference_.attr("extend")(block_hashes, token_ids, keys, start));
            }
            int overflow = 0;
            PyLong_AsLongLongAndOverflow(items[i], &overflow);
            if (overflow != 0) {
                return nb::cast<int64_t>(
                    reference_.attr("extend")(block_hashes, token_ids, keys, start));
            }
        }
        Digest parent = parent_of(block_hashes);
        for (Py_ssize_t index = start_block; index < num_full_blocks; ++index) {
            PyObject** block = items + (index * block_size_ - start);
            for (int64_t i = 0; i < block_size_; ++i) tokens_[size_t(i)] = PyLong_AsLongLong(block[i]);
            parent = hash_block(parent, tokens_.data());
            append_bytes(block_hashes, parent);
        }
        return num_full_blocks - start_block;
    }

    // extend() for the tokens at positions [start, num_tokens) held in one int64 buffer
    // (array('q'), numpy int64): no Python int is read. The buffer is only read here, and
    // nothing here can run Python code that resizes it.
    int64_t extend_from(nb::list block_hashes, const int64_t* token_ids, int64_t start,
                        int64_t num_tokens) {
        return hash_blocks(parent_of(block_hashes), PyList_GET_SIZE(block_hashes.ptr()), token_ids,
                           start, num_tokens,
                           [&](const Digest& digest) { append_bytes(block_hashes, digest); });
    }

    // Whether the blocks of a prompt of trace blocks of `trace_block_size` tokens carrying
    // `keys` are identified from the block ids (BlockHasher.identifies_trace_blocks).
    bool identifies_trace_blocks(int64_t trace_block_size, nb::handle keys_or_none) const {
        nb::handle keys = keys_or_none.is_none() ? nb::handle(no_hash_keys_) : keys_or_none;
        return identity_ && trace_block_size % block_size_ == 0 &&
               (keys.is(no_hash_keys_) || nb::cast<bool>(attr(keys, names.is_empty)));
    }

    // Append the identities of the full blocks of the first num_tokens tokens of a prompt of
    // trace blocks beyond block_hashes (BlockHasher.extend_trace_blocks): a block's identity
    // is the XOR of its trace block's anchor (XXH3-128 of the identity before the trace block,
    // the namespace key and the trace block id as little-endian uint64s, and a zero byte) and
    // its offset's mask (offset_masks).
    int64_t extend_trace_blocks(nb::list block_hashes, uint64_t namespace_key, nb::handle block_ids,
                                int64_t trace_block_size, int64_t num_tokens) {
        if (!identity_ || trace_block_size < 1 || trace_block_size % block_size_ != 0) {
            throw nb::value_error("these trace blocks are not identified by this hasher");
        }
        nb::object ids = nb::steal(PySequence_Fast(block_ids.ptr(), "block ids must be a sequence"));
        if (!ids.is_valid()) throw nb::python_error();
        PyObject** items = PySequence_Fast_ITEMS(ids.ptr());
        int64_t start_block = PyList_GET_SIZE(block_hashes.ptr());
        Digest parent = trace_parent(start_block, trace_block_size, [&](int64_t index) {
            return digest_of(PyList_GET_ITEM(block_hashes.ptr(), index));
        });
        return identify_trace_blocks(
            parent, start_block, namespace_key,
            [&](int64_t index) {
                uint64_t block_id = PyLong_AsUnsignedLongLong(items[index]);
                if (block_id == uint64_t(-1) && PyErr_Occurred()) throw nb::python_error();
                return block_id;
            },
            PySequence_Fast_GET_SIZE(ids.ptr()), trace_block_size, num_tokens,
            [&](const Digest& digest) { append_bytes(block_hashes, digest); });
    }

    // For C++ callers (the scheduler, adding a request): extend_trace_blocks into `hashes`,
    // the trace block ids read already.
    int64_t extend_trace_digests(std::vector<Digest>& hashes, uint64_t namespace_key,
                                 const std::vector<int64_t>& block_ids, int64_t trace_block_size,
                                 int64_t num_tokens) {
        if (!identity_ || trace_block_size < 1 || trace_block_size % block_size_ != 0) {
            throw nb::value_error("these trace blocks are not identified by this hasher");
        }
        hashes.reserve(hashes.size() + size_t(num_tokens / block_size_) + 1);
        int64_t start_block = int64_t(hashes.size());
        Digest parent = trace_parent(start_block, trace_block_size,
                                     [&](int64_t index) { return hashes[size_t(index)]; });
        return identify_trace_blocks(
            parent, start_block, namespace_key,
            [&](int64_t index) { return uint64_t(block_ids[size_t(index)]); },
            int64_t(block_ids.size()),
            trace_block_size, num_tokens, [&](const Digest& digest) { hashes.push_back(digest); });
    }

    // For C++ callers (the scheduler, when a decode fills a block): append the digests of the
    // full blocks of the tokens at positions [0, num_tokens) beyond hashes.size(), chained to
    // hashes.back() (or NONE_HASH), where token_ids[0] is the token at position `start`;
    // returns how many were added. Plain blocks only: a request with extra keys goes through
    // extend(). Needs the GIL (xxhash may be the Python function).
    int64_t extend_digests(std::vector<Digest>& hashes, const int64_t* token_ids, int64_t start,
                           int64_t num_tokens) {
        return hash_blocks(hashes.empty() ? none_digest_ : hashes.back(), int64_t(hashes.size()),
                           token_ids, start, num_tokens,
                           [&](const Digest& digest) { hashes.push_back(digest); });
    }

    // The hash of one block of block_size tokens, chained to `parent`.
    Digest hash_block(const Digest& parent, const int64_t* tokens) {
        size_t num_tokens = size_t(block_size_);
        if (identity_ && xxh3_128 != nullptr) {
            // Parent and tokens side by side in a buffer sized once: no growth checks.
            size_t token_bytes = num_tokens * sizeof(int64_t);
            std::memcpy(identity_input_.data(), parent.bytes, parent.size);
            std::memcpy(identity_input_.data() + parent.size, tokens, token_bytes);
            return canonical_digest(xxh3_128(identity_input_.data(), parent.size + token_bytes));
        }
        if (identity_) {
            buffer_.assign(reinterpret_cast<const char*>(parent.bytes), parent.size);
            buffer_.append(reinterpret_cast<const char*>(tokens), num_tokens * sizeof(int64_t));
            return xxh3_digest();
        }
        if (algo_ == Algo::kSha256Pickle || algo_ == Algo::kXxhashPickle) {
            pickle_block(buffer_, parent.bytes, parent.size, tokens, num_tokens);
        } else {
            cbor_block(buffer_, parent.bytes, parent.size, tokens, num_tokens);
        }
        if (algo_ == Algo::kSha256Pickle || algo_ == Algo::kSha256Cbor) {
            Digest digest;
            digest.size = 32;
            sha256(buffer_, digest.bytes);
            return digest;
        }
        return xxh3_digest();
    }

  private:
    // Hash blocks start_block.. of the int64 tokens at positions [start, num_tokens) (none of
    // them before start_block's) chained from `parent`, handing each digest to `append`;
    // returns how many.
    template <class Append>
    int64_t hash_blocks(Digest parent, int64_t start_block, const int64_t* token_ids,
                        int64_t start, int64_t num_tokens, Append append) {
        int64_t num_full_blocks = num_tokens / block_size_;
        if (num_full_blocks <= start_block) return 0;
        for (int64_t index = start_block; index < num_full_blocks; ++index) {
            parent = hash_block(parent, token_ids + (index * block_size_ - start));
            append(parent);
        }
        return num_full_blocks - start_block;
    }

    // The identities of blocks start_block.. of the first num_tokens tokens of a prompt of
    // `num_ids` trace blocks (`block_id(i)` reads the i-th id), handing each to `append`;
    // returns how many. `trace_parent` is the identity of the block before the first block of
    // the trace block start_block lies in (NONE_HASH for the first).
    template <class BlockId, class Append>
    int64_t identify_trace_blocks(const Digest& trace_parent, int64_t start_block,
                                  uint64_t namespace_key, BlockId block_id_at, int64_t num_ids,
                                  int64_t trace_block_size, int64_t num_tokens, Append append) {
        int64_t num_full_blocks = num_tokens / block_size_;
        if (num_full_blocks * block_size_ > num_ids * trace_block_size) {
            throw nb::value_error("the trace blocks hold fewer tokens than asked for");
        }
        int64_t blocks_per_id = trace_block_size / block_size_;
        const uint64_t* masks = offset_masks(blocks_per_id);
        // One XXH3-128 per trace block (its anchor), assembled in place on the stack over the
        // parent's bytes; each engine block in it is the anchor XOR its offset's mask.
        char input[sizeof(trace_parent.bytes) + 2 * sizeof(uint64_t) + 1];
        std::memcpy(input, trace_parent.bytes, sizeof(trace_parent.bytes));
        size_t parent_size = trace_parent.size;
        for (int64_t index = start_block; index < num_full_blocks;) {
            int64_t id_index = index / blocks_per_id;
            const uint64_t values[2] = {namespace_key, block_id_at(id_index)};
            std::memcpy(input + parent_size, values, sizeof(values));
            input[parent_size + sizeof(values)] = '\0';
            uint64_t anchor[2];
            xxh3_words(input, parent_size + sizeof(values) + 1, anchor);
            int64_t first = id_index * blocks_per_id;
            int64_t end = std::min(num_full_blocks, first + blocks_per_id);
            uint64_t words[2] = {0, 0};
            for (; index < end; ++index) {
                const uint64_t* mask = masks + 2 * (index - first);
                words[0] = anchor[0] ^ mask[0];
                words[1] = anchor[1] ^ mask[1];
                Digest digest;
                digest.size = uint8_t(sizeof(words));
                std::memcpy(digest.bytes, words, sizeof(words));
                append(digest);
            }
            // The next trace block's parent: this one's last block.
            std::memcpy(input, words, sizeof(words));
            parent_size = sizeof(words);
        }
        return std::max<int64_t>(num_full_blocks - start_block, 0);
    }

    // The masks of the first `count` engine blocks of a trace block, two words each: block k's
    // is XXH3-128 of its offset k * block_size as a little-endian uint64 and a one byte.
    const uint64_t* offset_masks(int64_t count) {
        for (int64_t k = int64_t(masks_.size() / 2); k < count; ++k) {
            char input[sizeof(uint64_t) + 1];
            const uint64_t offset = uint64_t(k * block_size_);
            std::memcpy(input, &offset, sizeof(offset));
            input[sizeof(offset)] = '\1';
            uint64_t words[2];
            xxh3_words(input, sizeof(input), words);
            masks_.push_back(words[0]);
            masks_.push_back(words[1]);
        }
        return masks_.data();
    }

    // The identity before the first block of the trace block `start_block` lies in, when
    // `identity_at(i)` gives block i's.
    template <class IdentityAt>
    Digest trace_parent(int64_t start_block, int64_t trace_block_size, IdentityAt identity_at) const {
        int64_t first = start_block - start_block % (trace_block_size / block_size_);
        return first > 0 ? identity_at(first - 1) : none_digest_;
    }

    // XXH3-128 of data[0:size) in xxhash's canonical (big-endian) byte order, as two words.
    void xxh3_words(const char* data, size_t size, uint64_t words[2]) {
        if (xxh3_128 == nullptr) {
            buffer_.assign(data, size);
            Digest digest = xxh3_digest();
            std::memcpy(words, digest.bytes, 2 * sizeof(uint64_t));
            return;
        }
        Xxh128 hash = xxh3_128(data, size);
        words[0] = __builtin_bswap64(hash.high64);
        words[1] = __builtin_bswap64(hash.low64);
    }

    static_assert(std::endian::native == std::endian::little,
                  "the block identity reads tokens as little-endian int64, as array('q') holds them");

    // XXH3-128 of buffer_ in xxhash's canonical (big-endian) byte order.
    Digest xxh3_digest() {
        if (xxh3_128 == nullptr) {
            nb::object data =
                nb::steal(PyBytes_FromStringAndSize(buffer_.data(), Py_ssize_t(buffer_.size())));
            return digest_of(xxh3_128_digest_(data).ptr());
        }
        return canonical_digest(xxh3_128(buffer_.data(), buffer_.size()));
    }

    static Digest canonical_digest(const Xxh128& hash) {
        Digest digest;
        digest.size = 16;
        const uint64_t words[2] = {__builtin_bswap64(hash.high64), __builtin_bswap64(hash.low64)};
        std::memcpy(digest.bytes, words, sizeof(words));
        return digest;
    }

    Digest parent_of(nb::handle block_hashes) const {
        Py_ssize_t size = PyList_GET_SIZE(block_hashes.ptr());
        return size > 0 ? digest_of(PyList_GET_ITEM(block_hashes.ptr(), size - 1)) : none_digest_;
    }

    static void append_bytes(nb::handle block_hashes, const Digest& digest) {
        nb::object item = digest_bytes(digest);
        if (PyList_Append(block_hashes.ptr(), item.ptr()) != 0) throw nb::python_error();
    }

    Algo algo_;
    bool identity_;
    int64_t block_size_;
    nb::bytes none_hash_;
    Digest none_digest_;
    nb::object reference_;
    nb::object no_hash_keys_;
    nb::object xxh3_128_digest_;
    std::vector<int64_t> tokens_;
    std::string buffer_;
    std::vector<char> identity_input_;  // scratch of hash_block: a parent's bytes, then tokens
    std::vector<uint64_t> masks_;  // offset_masks(), two words per engine block of a trace block
};

// ---------------------------------------------------------------------------------------------
// The block pool and KV cache manager

// One KV block's bookkeeping, in one cache line: taking a block from the free queue, evicting
// its hash and caching a new one touch this line and the prefix map's slot only (the pool is
// several MB per replica, so each line touched is a likely cache miss).
constexpr int64_t kNotQueued = std::numeric_limits<int64_t>::min();

struct alignas(64) Block {
    int64_t queue_pos = kNotQueued;  // its place in the free queue
    int32_t ref_cnt = 0;
    // The next younger block cached under the same hash (vLLM keeps no de-duplication), -1 none.
    int32_t same_hash_next = -1;
    int64_t num_tokens = 0;  // tokens up to the end of this block in the request that cached it
    uint32_t fingerprint = 0;  // of `hash`, while hashed
    uint8_t hashed = 0;
    uint8_t in_memo = 0;  // one of the lookup memo's hits
    Digest hash;
};
static_assert(sizeof(Block) == 64);

// The prefix map: each cached hash and the blocks carrying it, oldest cached first. Open
// addressing with linear probing over a power-of-two array of 8-byte slots (a 32-bit
// fingerprint of the digest and the oldest block carrying it; the younger ones follow it
// through `Block::same_hash_next`); the digest itself is the block's. A miss touches only the
// slot array; evicting a block whose slot names it touches no other block. Removal shifts the
// rest of the probe run back, so no tombstones build up. It is never iterated, so no order can
// leak into a decision.
class DigestTable {
  public:
    explicit DigestTable(std::vector<Block>& blocks) : blocks_(blocks) {}

    int64_t size() const { return size_; }

    // Mixes every byte in: block hashes are uniform, but test streams use short or alike ones.
    static uint32_t fingerprint_of(const Digest& digest) {
        uint64_t mixed = digest.size;
        for (size_t at = 0; at < digest.size; at += 8) {
            uint64_t word;
            std::memcpy(&word, digest.bytes + at, sizeof(word));  // zero past the digest
            mixed = (mixed ^ word) * 0x9E3779B97F4A7C15ull;
            mixed ^= mixed >> 29;
        }
        return uint32_t(mixed >> 32);
    }

    // The oldest block carrying `digest` (whose fingerprint is `fingerprint`), -1 when none does.
    int32_t find(const Digest& digest, uint32_t fingerprint) const {
        if (slots_.empty()) return -1;
        return slots_[probe(fingerprint, digest, -1)].block;
    }

    // Register `block`, which carries `fingerprint` and its digest, after the blocks already
    // carrying that digest; false when it is one of them already.
    bool add(int32_t block) {
        // Grown before the probe, so the slot it stops at stays valid; load stays <= 1/2.
        if (2 * (size_ + 1) > int64_t(slots_.size())) grow();
        Block& added = blocks_[size_t(block)];
        Slot& slot = slots_[probe(added.fingerprint, added.hash, block)];
        if (slot.block == kEmpty) {
            slot = Slot{added.fingerprint, block};
            added.same_hash_next = -1;
            ++size_;
            return true;
        }
        int32_t last = slot.block;
        while (true) {
            if (last == block) return false;
            int32_t next = blocks_[size_t(last)].same_hash_next;
            if (next < 0) break;
            last = next;
        }
        blocks_[size_t(last)].same_hash_next = block;
        added.same_hash_next = -1;
        return true;
    }

    // Drop `block`, which must be registered; its hash goes when no other block carries it.
    void remove(int32_t block) {
        const Block& removed = blocks_[size_t(block)];
        size_t at = probe(removed.fingerprint, removed.hash, block);
        int32_t first = slots_[at].block;
        if (first == kEmpty) throw std::logic_error("evicted block's hash is not cached");
        if (first == block) {
            if (removed.same_hash_next >= 0) {
                slots_[at].block = removed.same_hash_next;
            } else {
                vacate(at);
                --size_;
            }
            return;
        }
        int32_t previous = first;
        while (blocks_[size_t(previous)].same_hash_next != block) {
            previous = blocks_[size_t(previous)].same_hash_next;
            if (previous < 0) throw std::logic_error("evicted block's hash is not cached");
        }
        blocks_[size_t(previous)].same_hash_next = removed.same_hash_next;
    }

    // Start loading the slot a probe for `fingerprint` begins at: callers that are about to
    // probe for many hashes ask for all their slots first, so the cache misses overlap.
    void prefetch(uint32_t fingerprint) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[home(fingerprint)]);
    }

    // Start loading the block a find for `fingerprint` will compare first (its slot should
    // be loaded by now: prefetch() it well before).
    void prefetch_carrier(uint32_t fingerprint) const {
        if (slots_.empty()) return;
        const Slot& slot = slots_[home(fingerprint)];
        if (slot.block != kEmpty && slot.fingerprint == fingerprint) {
            __builtin_prefetch(&blocks_[size_t(slot.block)]);
        }
    }

    void clear() {
        std::fill(slots_.begin(), slots_.end(), Slot{0, kEmpty});
        size_ = 0;
    }

  private:
    static constexpr int32_t kEmpty = -1;

    struct Slot {
        uint32_t fingerprint;
        int32_t block;  // the oldest block carrying the hash, kEmpty for a free slot
    };

    size_t home(uint32_t fingerprint) const { return size_t(fingerprint >> shift_); }

    // The slot holding `digest`, or the free slot where its probe run ends. A slot naming
    // `carrier` (a block known to carry the digest, or -1) matches without reading a digest.
    size_t probe(uint32_t fingerprint, const Digest& digest, int32_t carrier) const {
        size_t at = home(fingerprint);
        while (true) {
            const Slot& slot = slots_[at];
            if (slot.block == kEmpty || slot.block == carrier) return at;
            if (slot.fingerprint == fingerprint && blocks_[size_t(slot.block)].hash == digest) {
                return at;
            }
            at = (at + 1) & mask_;
        }
    }

    // Free slot `at`, moving back each later slot of its run whose home is not past the gap.
    void vacate(size_t at) {
        size_t gap = at;
        for (size_t next = (gap + 1) & mask_; slots_[next].block != kEmpty;
             next = (next + 1) & mask_) {
            size_t distance_from_home = (next - home(slots_[next].fingerprint)) & mask_;
            if (distance_from_home >= ((next - gap) & mask_)) {
                slots_[gap] = slots_[next];
                gap = next;
            }
        }
        slots_[gap].block = kEmpty;
    }

    void grow() {
        size_t capacity = std::max<size_t>(64, slots_.size() * 2);
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{0, kEmpty});
        mask_ = capacity - 1;
        shift_ = 32 - std::countr_zero(capacity);
        for (const Slot& slot : old) {
            if (slot.block == kEmpty) continue;
            size_t at = home(slot.fingerprint);
            while (slots_[at].block != kEmpty) at = (at + 1) & mask_;
            slots_[at] = slot;
        }
    }

    std::vector<Block>& blocks_;
    std::vector<Slot> slots_;
    int64_t size_ = 0;
    size_t mask_ = 0;
    int shift_ = 32;
};

// Vectors let go of, kept with their room for the next owner: requests come and go at a
// steady rate with like sizes, so a new one's vectors need no allocation, nor grow as it runs.
// Only a few, of bounded room, are kept.
template <typename T>
class SparePool {
  public:
    std::vector<T> take() {
        if (spares_.empty()) return {};
        std::vector<T> spare = std::move(spares_.back());
        spares_.pop_back();
        return spare;
    }

    void give(std::vector<T>& values) {
        if (spares_.size() >= kMaxSpares || values.capacity() == 0 ||
            values.capacity() * sizeof(T) > kMaxBytes) {
            return;
        }
        values.clear();
        spares_.push_back(std::move(values));
    }

  private:
    static constexpr size_t kMaxSpares = 32;
    static constexpr size_t kMaxBytes = size_t(1) << 18;
    std::vector<std::vector<T>> spares_;
};

struct RequestBlocks {
    std::vector<int32_t> blocks;
    int64_t num_cached_blocks = 0;  // leading blocks already registered in the cache
};

struct IdHash {
    using is_transparent = void;
    size_t operator()(std::string_view id) const { return std::hash<std::string_view>()(id); }
};

struct IdEqual {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

// Prefix-cache lookup counters, counted where vLLM counts them (sim.kvcache.PrefixCacheStats).
struct LookupCounts {
    int64_t requests = 0;
    int64_t queries = 0;
    int64_t hits = 0;
    int64_t preempted_requests = 0;
    int64_t preempted_queries = 0;
    int64_t preempted_hits = 0;
    bool reset = false;

    void record(int64_t num_tokens, int64_t num_hit_tokens, bool preempted) {
        if (preempted) {
            ++preempted_requests;
            preempted_queries += num_tokens;
            preempted_hits += num_hit_tokens;
        } else {
            ++requests;
            queries += num_tokens;
            hits += num_hit_tokens;
        }
    }

    // PrefixCacheStats's fields in order, for its constructor.
    nb::tuple fields() const {
        return nb::make_tuple(requests, queries, hits, preempted_requests, preempted_queries,
                              preempted_hits, reset);
    }
};

class CacheCore {
  public:
    CacheCore(int64_t num_gpu_blocks, int64_t block_size, int64_t max_model_len,
              bool enable_caching, int64_t watermark_blocks, nb::object observer,
              nb::object waiting_status, nb::object preempted_status)
        : num_gpu_blocks_(int32_t(num_gpu_blocks)),
          block_size_(block_size),
          max_model_len_(max_model_len),
          enable_caching_(enable_caching),
          watermark_blocks_(watermark_blocks),
          observer_(observer),
          waiting_status_(waiting_status),
          preempted_status_(preempted_status),
          blocks_(size_t(num_gpu_blocks)),
          cached_(blocks_) {
        make_room(num_gpu_blocks);
        for (int32_t block = 0; block < num_gpu_blocks_; ++block) push_back(block);
        // vLLM takes the first free block as the null block; it never returns to the queue.
        null_block_ = popleft();
    }

    // --- pool state -------------------------------------------------------------------------

    int64_t num_free_blocks() const { return num_free_; }
    double usage() const { return 1.0 - double(num_free_) / double(num_gpu_blocks_ - 1); }
    // Free blocks that still hold a cached prefix, as a fraction of the usable blocks.
    double cached_free_usage() const {
        return double(num_cached_free_) / double(num_gpu_blocks_ - 1);
    }

    nb::list free_queue_entries() const {
        nb::list entries;
        for (int64_t pos = front_; pos < back_; ++pos) {
            int32_t block = queue_[slot_of(pos)];
            if (block == kHole) continue;
            nb::object hash = blocks_[block].hashed ? digest_bytes(blocks_[block].hash) : nb::none();
            entries.append(nb::make_tuple(block, hash));
        }
        return entries;
    }

    nb::object block_hash(int32_t block) const {
        check_block(block);
        return blocks_[block].hashed ? digest_bytes(blocks_[block].hash) : nb::none();
    }

    int64_t ref_cnt(int32_t block) const {
        check_block(block);
        return blocks_[block].ref_cnt;
    }

    // --- manager ----------------------------------------------------------------------------

    nb::tuple get_computed_blocks(nb::handle request) {
        std::vector<int32_t> hits = computed_block_ids(request);
        nb::list ids;
        for (int32_t block : hits) {
            nb::object id = nb::steal(PyLong_FromLong(block));
            if (PyList_Append(ids.ptr(), id.ptr()) != 0) throw nb::python_error();
        }
        return nb::make_tuple(ids, int64_t(hits.size()) * block_size_);
    }

    // The longest cached prefix of full blocks (oldest cached copy of each), capped so at
    // least one token is left to compute.
    std::vector<int32_t> computed_block_ids(nb::handle request) {
        if (!enable_caching_ || nb::cast<bool>(attr(request, names.skip_reading_prefix_cache))) {
            return {};
        }
        int64_t num_tokens = int_attr(request, names.num_tokens);
        nb::object hashes = hash_list(request);
        return lookup(request, hashes, HashSpan::of_list(hashes), num_tokens);
    }

    // computed_block_ids on hashes already read; `hashes_owner` keeps a Python list the memo
    // refers to alive (None for the scheduler's C++ storage, dropped by forget_lookup_of).
    const std::vector<int32_t>& lookup(nb::handle request, nb::handle hashes_owner,
                                       HashSpan hashes, int64_t num_tokens) {
        int64_t max_blocks = (num_tokens - 1) / block_size_;
        int64_t count = std::min<int64_t>(max_blocks, hashes.size);
        // A request blocked at the head of the waiting queue is looked up again every step.
        // Its last hits stay hits while none of their blocks is evicted (only an eviction
        // drops a hash or changes which block is its oldest copy), and its hash list only
        // grows, so the scan resumes after them.
        if (!memo_.request.is(request) || memo_.source != hashes.source() ||
            int64_t(memo_.hits.size()) > count) {
            forget_lookup();
            memo_.request = nb::borrow(request);
            memo_.hashes = nb::borrow(hashes_owner);
            memo_.source = hashes.source();
        }
        // The hashes are probed in batches, each in three passes: fetch every slot, then every
        // block a slot names (whose digest the probe compares), then probe. A batch waits for
        // memory about twice, however long, rather than once or twice per hash.
        uint32_t fingerprints[kLookupBatch];
        for (int64_t begin = int64_t(memo_.hits.size()); begin < count; begin += kLookupBatch) {
            int64_t size = std::min(kLookupBatch, count - begin);
            for (int64_t i = 0; i < size; ++i) {
                fingerprints[i] = DigestTable::fingerprint_of(hashes.at(begin + i));
                cached_.prefetch(fingerprints[i]);
            }
            for (int64_t i = 0; i < size; ++i) cached_.prefetch_carrier(fingerprints[i]);
            for (int64_t i = 0; i < size; ++i) {
                int32_t found = cached_.find(hashes.at(begin + i), fingerprints[i]);
                if (found < 0) return memo_.hits;
                memo_.hits.push_back(found);
                blocks_[size_t(found)].in_memo = 1;
            }
        }
        return memo_.hits;
    }

    int64_t num_blocks_to_allocate(nb::handle request_id, int64_t num_tokens,
                                   nb::handle hit_blocks) {
        std::vector<int32_t> hits = block_ids(hit_blocks);
        return blocks_to_allocate(id_view(request_id), num_tokens, hits);
    }

    // CPU offload (spec §13.7.2): `num_external_computed_tokens` follow the GPU hit and get
    // new blocks now; with `delay_cache_blocks` (an async load) they are cached only when the
    // load is done; the allocation itself must leave `reserved_blocks` free.
    nb::object allocate_slots(nb::handle request, int64_t num_new_tokens,
                              int64_t num_new_computed_tokens, nb::handle new_computed_blocks,
                              bool full_sequence_must_fit, bool has_running_requests,
                              int64_t num_external_computed_tokens, bool delay_cache_blocks,
                              int64_t reserved_blocks, double now) {
        std::vector<int32_t> new_ids;
        if (!allocate_slots_ids(request, num_new_tokens, num_new_computed_tokens,
                                block_ids(new_computed_blocks), full_sequence_must_fit,
                                has_running_requests, num_external_computed_tokens,
                                delay_cache_blocks, reserved_blocks, now, new_ids)) {
            return nb::none();
        }
        nb::list ids;
        for (int32_t block : new_ids) {
            nb::object id = nb::steal(PyLong_FromLong(block));
            if (PyList_Append(ids.ptr(), id.ptr()) != 0) throw nb::python_error();
        }
        return ids;
    }

    // allocate_slots on block ids: false (nothing changes) when the blocks do not fit, else
    // the newly allocated blocks are appended to `new_ids`.
    bool allocate_slots_ids(nb::handle request, int64_t num_new_tokens,
                            int64_t num_new_computed_tokens, const std::vector<int32_t>& hits,
                            bool full_sequence_must_fit, bool has_running_requests,
                            int64_t num_external_computed_tokens, bool delay_cache_blocks,
                            int64_t reserved_blocks, double now, std::vector<int32_t>& new_ids) {
        nb::object request_id = attr(request, names.request_id);
        bool apply_watermark = false;
        if (has_running_requests) {
            nb::object status = attr(request, names.status);
            apply_watermark = status.is(waiting_status_) || status.is(preempted_status_);
        }
        nb::object hashes = hash_list(request);
        return allocate_ids(id_view(request_id), int_attr(request, names.num_tokens),
                            int_attr(request, names.num_computed_tokens), apply_watermark,
                            HashSpan::of_list(hashes), num_new_tokens, num_new_computed_tokens,
                            hits, full_sequence_must_fit, num_external_computed_tokens,
                            delay_cache_blocks, reserved_blocks, now, new_ids);
    }

    // allocate_slots_ids on the request's state already read: its id, tokens, computed tokens,
    // whether the watermark applies (waiting or preempted, with requests running) and hashes.
    bool allocate_ids(std::string_view id, int64_t num_tokens, int64_t num_computed_tokens,
                      bool apply_watermark, HashSpan hashes, int64_t num_new_tokens,
                      int64_t num_new_computed_tokens, const std::vector<int32_t>& hits,
                      bool full_sequence_must_fit, int64_t num_external_computed_tokens,
                      bool delay_cache_blocks, int64_t reserved_blocks, double now,
                      std::vector<int32_t>& new_ids) {
        int64_t num_local_computed = std::min(
            num_computed_tokens + num_new_computed_tokens + num_external_computed_tokens,
            max_model_len_);
        int64_t watermark = apply_watermark ? watermark_blocks_ : 0;
        if (full_sequence_must_fit) {
            int64_t needed = blocks_to_allocate(id, std::min(num_tokens, max_model_len_), hits);
            if (needed + watermark > num_free_) return false;
        }
        int64_t num_slots = std::min(num_local_computed + num_new_tokens, max_model_len_);
        if (blocks_to_allocate(id, num_slots, hits) + watermark > num_free_ - reserved_blocks) {
            return false;
        }

        auto found = requests_.find(id);
        if (found == requests_.end()) {
            found = requests_.emplace(std::string(id), RequestBlocks{spare_block_lists_.take(), 0})
                        .first;
        }
        RequestBlocks& state = found->second;
        if (!hits.empty()) {
            touch(hits);
            state.blocks.insert(state.blocks.end(), hits.begin(), hits.end());
            state.num_cached_blocks = int64_t(state.blocks.size());
            if (!observer_.is_none()) {
                for (int32_t block : hits) emit(names.hit, blocks_[block].hash, block, now);
            }
        }
        int64_t num_new_blocks = ceil_div(num_slots) - int64_t(state.blocks.size());
        if (num_new_blocks > 0) {
            size_t first_new = state.blocks.size();
            get_new_blocks(num_new_blocks, now, state.blocks);
            new_ids.insert(new_ids.end(), state.blocks.begin() + long(first_new), state.blocks.end());
        }
        if (enable_caching_ && !delay_cache_blocks) {
            cache_request_blocks(hashes, state,
                                 std::min(num_local_computed + num_new_tokens, num_tokens), now);
        }
        return true;
    }

    bool allocate_one_slot(nb::handle request, double now) {
        nb::object request_id = attr(request, names.request_id);
        nb::object hashes = hash_list(request);
        return allocate_one(held(id_view(request_id)), int_attr(request, names.num_computed_tokens),
                            int_attr(request, names.num_tokens), HashSpan::of_list(hashes),
                            now);
    }

    // allocate_one_slot on the request's blocks and state already read.
    bool allocate_one(RequestBlocks& state, int64_t num_computed_tokens, int64_t num_tokens,
                      HashSpan hashes, double now) {
        int64_t num_slots = num_computed_tokens + 1;
        if (num_slots > int64_t(state.blocks.size()) * block_size_) {
            if (num_free_ < 1) return false;
            get_new_blocks(1, now, state.blocks);
        }
        if (!enable_caching_) return true;
        // Async scheduling runs a token ahead of the known ones: cache what is known, checked
        // every time then (the block filled may be the one before the slot's).
        int64_t num_cacheable = std::min(num_slots, num_tokens);
        if (num_cacheable < num_slots || num_cacheable % block_size_ == 0) {
            cache_request_blocks(hashes, state, num_cacheable, now);
        }
        return true;
    }

    void cache_blocks(nb::handle request, int64_t num_tokens, double now) {
        nb::object request_id = attr(request, names.request_id);
        nb::object hashes = hash_list(request);
        cache_blocks_of(held(id_view(request_id)), HashSpan::of_list(hashes), num_tokens, now);
    }

    void cache_blocks_of(RequestBlocks& state, HashSpan hashes, int64_t num_tokens, double now) {
        cache_request_blocks(hashes, state, num_tokens, now);
    }

    void free(nb::handle request) {
        nb::object request_id = attr(request, names.request_id);
        free_id(id_view(request_id));
    }

    // Release the blocks held by the request `id` (none held: nothing happens).
    void free_id(std::string_view id) {
        auto found = requests_.find(id);
        if (found == requests_.end()) return;
        std::vector<int32_t> blocks = std::move(found->second.blocks);
        requests_.erase(found);
        free_blocks_reversed(blocks);
        spare_block_lists_.give(blocks);
    }

    // A deferred free (spec §13.9): forget the request's blocks now, release them later.
    nb::list pop_blocks(nb::handle request_id) {
        nb::list ids;
        auto found = requests_.find(id_view(request_id));
        if (found == requests_.end()) return ids;
        for (int32_t block : found->second.blocks) {
            nb::object item = nb::steal(PyLong_FromLong(block));
            if (PyList_Append(ids.ptr(), item.ptr()) != 0) throw nb::python_error();
        }
        requests_.erase(found);
        return ids;
    }

    void release_blocks(nb::handle blocks) { free_blocks_reversed(block_ids(blocks)); }

    nb::list get_block_ids(nb::handle request_id) {
        nb::list ids;
        auto found = requests_.find(id_view(request_id));
        if (found != requests_.end()) {
            for (int32_t block : found->second.blocks) ids.append(block);
        }
        return ids;
    }

    int64_t num_held_blocks(nb::handle request_id) {
        auto found = requests_.find(id_view(request_id));
        return found == requests_.end() ? 0 : int64_t(found->second.blocks.size());
    }

    // Count an admitted request's lookup (skipped lookups are not counted).
    void record_prefix_cache_stats(nb::handle request, int64_t num_hit_tokens) {
        count_lookup(int_attr(request, names.num_tokens), num_hit_tokens,
                     int_attr(request, names.num_preemptions) > 0,
                     nb::cast<bool>(attr(request, names.skip_reading_prefix_cache)));
    }

    void count_lookup(int64_t num_tokens, int64_t num_hit_tokens, bool preempted,
                      bool skip_reading_prefix_cache) {
        if (!enable_caching_ || skip_reading_prefix_cache) return;
        window_counts_.record(num_tokens, num_hit_tokens, preempted);
        cumulative_counts_.record(num_tokens, num_hit_tokens, preempted);
    }

    // The counters since the previous call (vLLM reports per-step deltas).
    LookupCounts take_lookup_counts() {
        LookupCounts counts = window_counts_;
        window_counts_ = LookupCounts();
        return counts;
    }

    const LookupCounts& window_counts() const { return window_counts_; }
    const LookupCounts& cumulative_counts() const { return cumulative_counts_; }

    // Clear the cache if no request holds a block.
    bool reset_prefix_cache(double now) {
        if (num_free_ != num_gpu_blocks_ - 1) return false;
        window_counts_.reset = true;
        for (int32_t block = 0; block < num_gpu_blocks_; ++block) {
            if (!blocks_[block].hashed) continue;
            if (!observer_.is_none()) emit(names.cleared, blocks_[block].hash, block, now);
            blocks_[block].hashed = 0;
        }
        cached_.clear();
        forget_lookup();
        num_cached_free_ = 0;
        return true;
    }

    int64_t num_evictions = 0;
    int64_t num_stored = 0;
    int64_t num_gpu_blocks() const { return num_gpu_blocks_; }
    int64_t num_cached_hashes() const { return cached_.size(); }
    int64_t block_size() const { return block_size_; }
    int64_t max_model_len() const { return max_model_len_; }
    bool enable_caching() const { return enable_caching_; }
    int64_t watermark_blocks() const { return watermark_blocks_; }
    nb::object observer() const { return observer_; }

  private:
    // How many hashes a prefix lookup probes together (a prompt's hit is tens of blocks).
    static constexpr int64_t kLookupBatch = 32;
    // How many blocks ahead taking blocks fetches their lines (twice as far) and slots.
    static constexpr size_t kFetchAhead = 16;

    int64_t ceil_div(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

    void check_block(int32_t block) const {
        if (block < 0 || block >= num_gpu_blocks_) throw nb::index_error("no such block");
    }

    std::vector<int32_t> block_ids(nb::handle blocks) const {
        std::vector<int32_t> ids;
        for (nb::handle block : blocks) {
            int32_t id = nb::cast<int32_t>(block);
            check_block(id);
            ids.push_back(id);
        }
        return ids;
    }

  public:
    RequestBlocks& held(std::string_view request_id) {
        auto found = requests_.find(request_id);
        if (found == requests_.end()) throw nb::key_error("request holds no blocks");
        return found->second;
    }

    // Start loading the prefix-map slot caching `digest` will probe (a block a decode filled,
    // cached a step later).
    void prefetch_slot(const Digest& digest) const {
        cached_.prefetch(DigestTable::fingerprint_of(digest));
    }

    // The lookup memo forgets hashes stored at `source` (C++ storage about to be released).
    void forget_lookup_of(const void* source) {
        if (memo_.source == source) forget_lookup();
    }

  private:

    int64_t blocks_to_allocate(std::string_view id, int64_t num_tokens,
                               const std::vector<int32_t>& hits) const {
        auto found = requests_.find(id);
        int64_t num_held = found == requests_.end() ? 0 : int64_t(found->second.blocks.size());
        // Free hit blocks leave the free queue when touched, so they count against capacity.
        int64_t num_evictable_hits = 0;
        for (int32_t block : hits) num_evictable_hits += blocks_[block].ref_cnt == 0;
        return std::max<int64_t>(ceil_div(num_tokens) - int64_t(hits.size()) - num_held, 0) +
               num_evictable_hits;
    }

    void cache_request_blocks(HashSpan hashes, RequestBlocks& state, int64_t num_tokens,
                              double now) {
        // Most calls (a decode token each step) fill no block: no division then.
        if (num_tokens < (state.num_cached_blocks + 1) * block_size_) return;
        int64_t num_full = std::min(num_tokens, hashes.size * block_size_) / block_size_;
        if (num_full <= state.num_cached_blocks) return;
        // The blocks take their hashes first and their slots are fetched together, then they
        // join the prefix map in order.
        for (int64_t index = state.num_cached_blocks; index < num_full; ++index) {
            int32_t block = state.blocks[size_t(index)];
            if (block == null_block_) continue;
            Block& cached = blocks_[size_t(block)];
            cached.hash = hashes.at(index);
            cached.fingerprint = DigestTable::fingerprint_of(cached.hash);
            cached.hashed = 1;
            cached.num_tokens = (index + 1) * block_size_;
            cached_.prefetch(cached.fingerprint);
        }
        for (int64_t index = state.num_cached_blocks; index < num_full; ++index) {
            int32_t block = state.blocks[size_t(index)];
            if (block == null_block_) continue;
            const Block& cached = blocks_[size_t(block)];
            if (!cached_.add(block)) continue;
            ++num_stored;
            if (!observer_.is_none()) emit(names.stored, cached.hash, block, now);
        }
        state.num_cached_blocks = num_full;
    }

    void emit(PyObject* kind, const Digest& digest, int32_t block, double now) {
        observer_.attr(names.on_block_event)(nb::handle(kind), digest_bytes(digest), block,
                                             blocks_[block].num_tokens, now);
    }

    // --- free queue ----------------------------------------------------------------------------
    // Block ids in queue order in a ring: blocks join at the back (or, unhashed ones, at the
    // front) and leave from the front, or from the middle on a prefix hit, which leaves a hole.
    // Taking blocks reads consecutive ids rather than chasing links through the pool, so the
    // lines of the blocks about to be taken can be fetched together.

    static constexpr int32_t kHole = -1;

    size_t slot_of(int64_t pos) const { return size_t(uint64_t(pos) & queue_mask_); }

    // Room for `count` more entries; a full ring is rebuilt without its holes (and larger).
    void make_room(int64_t count) {
        if (back_ - front_ + count <= int64_t(queue_.size())) return;
        size_t capacity = std::max<size_t>(64, std::bit_ceil(size_t(2 * (num_free_ + count))));
        std::vector<int32_t> queue(capacity, kHole);
        int64_t pos = 0;
        for (int64_t old = front_; old < back_; ++old) {
            int32_t block = queue_[slot_of(old)];
            if (block == kHole) continue;
            queue[size_t(pos)] = block;
            blocks_[size_t(block)].queue_pos = pos++;
        }
        queue_ = std::move(queue);
        queue_mask_ = capacity - 1;
        front_ = 0;
        back_ = pos;
    }

    void push_back(int32_t block) {
        make_room(1);
        queue_[slot_of(back_)] = block;
        blocks_[size_t(block)].queue_pos = back_++;
        ++num_free_;
    }

    void push_front(int32_t block) {
        make_room(1);
        queue_[slot_of(--front_)] = block;
        blocks_[size_t(block)].queue_pos = front_;
        ++num_free_;
    }

    void unlink(int32_t block) {
        Block& unlinked = blocks_[block];
        if (unlinked.queue_pos == kNotQueued) throw nb::value_error("block is not in the free queue");
        queue_[slot_of(unlinked.queue_pos)] = kHole;
        unlinked.queue_pos = kNotQueued;
        --num_free_;
    }

    // The first free block, the holes before it dropped for good (num_free_ > 0).
    int32_t front_block() {
        while (queue_[slot_of(front_)] == kHole) ++front_;
        return queue_[slot_of(front_)];
    }

    int32_t popleft() {
        if (num_free_ == 0) throw nb::index_error("no free blocks");
        int32_t block = front_block();
        ++front_;
        blocks_[size_t(block)].queue_pos = kNotQueued;
        --num_free_;
        return block;
    }

    void get_new_blocks(int64_t count, double now, std::vector<int32_t>& out) {
        if (count > num_free_) throw nb::index_error("not enough free blocks");
        size_t first = out.size();
        while (int64_t(out.size() - first) < count) {
            int32_t block = queue_[slot_of(front_++)];
            if (block != kHole) out.push_back(block);
        }
        num_free_ -= count;
        // Each block's line, and for a cached block the prefix-map slot its eviction probes,
        // are fetched a few blocks ahead, so their cache misses overlap; the first few blocks'
        // slots as soon as their lines (asked for together) arrive, so a take of a few blocks
        // waits about twice, not twice per block.
        size_t end = out.size();
        for (size_t i = first; i < std::min(end, first + 2 * kFetchAhead); ++i) {
            __builtin_prefetch(&blocks_[size_t(out[i])]);
        }
        for (size_t i = first; i < std::min(end, first + kFetchAhead); ++i) {
            const Block& soon = blocks_[size_t(out[i])];
            if (soon.hashed) cached_.prefetch(soon.fingerprint);
        }
        for (size_t i = first; i < end; ++i) {
            if (i + 2 * kFetchAhead < end) __builtin_prefetch(&blocks_[size_t(out[i + 2 * kFetchAhead])]);
            if (i + kFetchAhead < end) {
                const Block& ahead = blocks_[size_t(out[i + kFetchAhead])];
                if (ahead.hashed) cached_.prefetch(ahead.fingerprint);
            }
            int32_t block = out[i];
            Block& taken = blocks_[size_t(block)];
            taken.queue_pos = kNotQueued;
            if (taken.hashed) evict(block, now);
            taken.ref_cnt = 1;
        }
        // The next block to be taken (by a decode, most likely, alone) is fetched now.
        if (num_free_ > 0) __builtin_prefetch(&blocks_[size_t(front_block())]);
    }

    void evict(int32_t block, double now) {
        Block& evicted = blocks_[block];
        cached_.remove(block);
        evicted.hashed = 0;
        if (evicted.in_memo) forget_lookup();
        ++num_evictions;
        --num_cached_free_;  // only free blocks are evicted
        if (!observer_.is_none()) emit(names.evicted, evicted.hash, block, now);
    }

    void touch(const std::vector<int32_t>& blocks) {
        for (int32_t block : blocks) {
            if (blocks_[block].ref_cnt == 0 && block != null_block_) {
                unlink(block);
                --num_cached_free_;  // a hit block carries a hash
            }
            ++blocks_[block].ref_cnt;
        }
    }

    // Release in reverse holding order: unhashed blocks to the queue front (keeping their
    // order), cached ones to the back.
    void free_blocks_reversed(const std::vector<int32_t>& blocks) {
        unhashed_.clear();
        make_room(int64_t(blocks.size()));
        // The blocks' lines are fetched a few ahead, so their cache misses overlap.
        size_t num_blocks = blocks.size();
        for (size_t i = 0; i < std::min(num_blocks, kFetchAhead); ++i) {
            __builtin_prefetch(&blocks_[size_t(blocks[num_blocks - 1 - i])]);
        }
        for (size_t i = 0; i < num_blocks; ++i) {
            if (i + kFetchAhead < num_blocks) {
                __builtin_prefetch(&blocks_[size_t(blocks[num_blocks - 1 - i - kFetchAhead])]);
            }
            int32_t block = blocks[num_blocks - 1 - i];
            if (block == null_block_) continue;
            if (--blocks_[block].ref_cnt != 0) continue;
            if (enable_caching_ && blocks_[block].hashed) {
                push_back(block);
                ++num_cached_free_;
            } else {
                unhashed_.push_back(block);
            }
        }
        for (auto it = unhashed_.rbegin(); it != unhashed_.rend(); ++it) push_front(*it);
    }

    int32_t num_gpu_blocks_;
    int64_t block_size_;
    int64_t max_model_len_;
    bool enable_caching_;
    int64_t watermark_blocks_;
    nb::object observer_;
    nb::object waiting_status_;
    nb::object preempted_status_;
    std::vector<Block> blocks_;
    std::vector<int32_t> queue_;  // the free queue's ring: positions [front_, back_)
    size_t queue_mask_ = 0;
    int64_t front_ = 0, back_ = 0;
    std::vector<int32_t> unhashed_;  // scratch of free_blocks_reversed
    SparePool<int32_t> spare_block_lists_;  // of requests that freed their blocks
    int32_t null_block_;
    int64_t num_free_ = 0;
    int64_t num_cached_free_ = 0;  // free-queue blocks that still carry a hash (evictable)
    LookupCounts window_counts_;  // since the last take_lookup_counts()
    LookupCounts cumulative_counts_;
    DigestTable cached_;
    std::unordered_map<std::string, RequestBlocks, IdHash, IdEqual> requests_;
    // The last prefix lookup (computed_block_ids) and which blocks its hits are.
    struct LookupMemo {
        nb::object request;
        nb::object hashes;  // the list `source` is, kept alive (None for C++ storage)
        const void* source = nullptr;
        std::vector<int32_t> hits;
    };
    LookupMemo memo_;

    void forget_lookup() {
        for (int32_t block : memo_.hits) blocks_[size_t(block)].in_memo = 0;
        memo_ = LookupMemo();
    }
};

#include "scheduler.hpp"
#include "step_loop.hpp"

}  // namespace

NB_MODULE(_core, m) {
    intern_names();
    find_libcrypto();
    // Managers still referenced at interpreter exit (module globals, uncollected cycles) are
    // normal for a Python object; nanobind would report each as a leak on stderr.
    nb::set_leak_warnings(false);
    m.doc() = "prefixsim's compiled cache core (block hashing, block pool, KV cache manager)";

    m.def("sha256_portable", [](nb::bytes data) {
        uint8_t out[32];
        sha256_portable(reinterpret_cast<const uint8_t*>(data.c_str()), data.size(), out);
        return nb::bytes(reinterpret_cast<const char*>(out), 32);
    });
    m.def("sha256", [](nb::bytes data) {
        uint8_t out[32];
        sha256(std::string(data.c_str(), data.size()), out);
        return nb::bytes(reinterpret_cast<const char*>(out), 32);
    });
    m.def("uses_libcrypto", []() { return libcrypto.init != nullptr; });
    m.def("find_xxh3", &find_xxh3, nb::arg("library"));
    m.def("find_libcrypto", &find_libcrypto);
    m.def("uses_xxh3", []() { return xxh3_128 != nullptr; });
    m.def("serialise_block", [](const std::string& algo, nb::bytes parent, std::vector<int64_t> tokens) {
        std::string out;
        const auto* parent_bytes = reinterpret_cast<const uint8_t*>(parent.c_str());
        if (algo == "pickle") {
            pickle_block(out, parent_bytes, parent.size(), tokens.data(), tokens.size());
        } else {
            cbor_block(out, parent_bytes, parent.size(), tokens.data(), tokens.size());
        }
        return nb::bytes(out.data(), out.size());
    });

    nb::class_<NativeHasher>(m, "HasherCore")
        .def(nb::init<const std::string&, int64_t, nb::bytes, nb::object, nb::object, nb::object,
                      bool>())
        .def("extend", &NativeHasher::extend, nb::arg("block_hashes"), nb::arg("token_ids"),
             nb::arg("keys").none() = nb::none(), nb::arg("start") = 0)
        .def("identifies_trace_blocks", &NativeHasher::identifies_trace_blocks,
             nb::arg("trace_block_size"), nb::arg("keys").none())
        .def("extend_trace_blocks", &NativeHasher::extend_trace_blocks, nb::arg("block_hashes"),
             nb::arg("namespace_key"), nb::arg("block_ids"), nb::arg("trace_block_size"),
             nb::arg("num_tokens"));

    nb::class_<CacheCore>(m, "CacheCore")
        .def(nb::init<int64_t, int64_t, int64_t, bool, int64_t, nb::object, nb::object,
                      nb::object>(),
             nb::arg("num_gpu_blocks"), nb::arg("block_size"), nb::arg("max_model_len"),
             nb::arg("enable_caching"), nb::arg("watermark_blocks"), nb::arg("observer").none(),
             nb::arg("waiting_status"), nb::arg("preempted_status"))
        .def_prop_ro("num_free_blocks", &CacheCore::num_free_blocks)
        .def_prop_ro("usage", &CacheCore::usage)
        .def_prop_ro("cached_free_usage", &CacheCore::cached_free_usage)
        .def_prop_ro("num_gpu_blocks", &CacheCore::num_gpu_blocks)
        .def_prop_ro("num_cached_hashes", &CacheCore::num_cached_hashes)
        .def_prop_ro("block_size", &CacheCore::block_size)
        .def_prop_ro("max_model_len", &CacheCore::max_model_len)
        .def_prop_ro("enable_caching", &CacheCore::enable_caching)
        .def_prop_ro("watermark_blocks", &CacheCore::watermark_blocks)
        .def_prop_ro("observer", &CacheCore::observer)
        .def_ro("num_evictions", &CacheCore::num_evictions)
        .def_ro("num_stored", &CacheCore::num_stored)
        .def("free_queue_entries", &CacheCore::free_queue_entries)
        .def("block_hash", &CacheCore::block_hash)
        .def("ref_cnt", &CacheCore::ref_cnt)
        .def("get_computed_blocks", &CacheCore::get_computed_blocks)
        .def("num_blocks_to_allocate", &CacheCore::num_blocks_to_allocate)
        .def("allocate_slots", &CacheCore::allocate_slots, nb::arg("request"),
             nb::arg("num_new_tokens"), nb::arg("num_new_computed_tokens") = 0,
             nb::arg("new_computed_blocks") = nb::tuple(), nb::kw_only(),
             nb::arg("full_sequence_must_fit") = false, nb::arg("has_running_requests") = false,
             nb::arg("num_external_computed_tokens") = 0, nb::arg("delay_cache_blocks") = false,
             nb::arg("reserved_blocks") = 0, nb::arg("now") = 0.0)
        .def("allocate_one_slot", &CacheCore::allocate_one_slot, nb::arg("request"),
             nb::arg("now") = 0.0)
        .def("cache_blocks", &CacheCore::cache_blocks, nb::arg("request"), nb::arg("num_tokens"),
             nb::arg("now") = 0.0)
        .def("free", &CacheCore::free)
        .def("pop_blocks", &CacheCore::pop_blocks)
        .def("release_blocks", &CacheCore::release_blocks)
        .def("get_block_ids", &CacheCore::get_block_ids)
        .def("num_held_blocks", &CacheCore::num_held_blocks)
        .def("reset_prefix_cache", &CacheCore::reset_prefix_cache, nb::arg("now") = 0.0)
        .def("record_prefix_cache_stats", &CacheCore::record_prefix_cache_stats)
        .def("_take_lookup_counts", [](CacheCore& core) { return core.take_lookup_counts().fields(); })
        .def("_lookup_counts",
             [](const CacheCore& core, bool cumulative) {
                 return (cumulative ? core.cumulative_counts() : core.window_counts()).fields();
             });

    bind_scheduler(m);
    bind_step_loop(m);
}
