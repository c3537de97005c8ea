// The bytes vLLM digests for a block without extra keys: (parent_hash, tuple(tokens), None)
// serialised by pickle protocol 5 (sha256, xxhash) or canonical CBOR (the _cbor variants).
// Written from the pickle and CBOR (RFC 8949) formats; the tests compare them with pickle.dumps
// and cbor2.dumps on random blocks.
#pragma once

#include <cstdint>
#include <string>

namespace prefixsim {

// Largest serialised block kept in one pickle frame (pickle splits frames at 64 KiB).
constexpr size_t kMaxPickleFrame = 60000;

inline void put_le(std::string& out, uint64_t value, int num_bytes) {
    for (int i = 0; i < num_bytes; ++i) out.push_back(char(uint8_t(value >> (8 * i))));
}

inline void put_be(std::string& out, uint64_t value, int num_bytes) {
    for (int i = num_bytes - 1; i >= 0; --i) out.push_back(char(uint8_t(value >> (8 * i))));
}

// One int as pickle's save_long writes it at protocol >= 2.
inline void pickle_int(std::string& out, int64_t value) {
    if (value >= 0 && value <= 0xff) {
        out.push_back('K');
        out.push_back(char(uint8_t(value)));
    } else if (value >= 0 && value <= 0xffff) {
        out.push_back('M');
        put_le(out, uint64_t(value), 2);
    } else if (value >= INT32_MIN && value <= INT32_MAX) {
        out.push_back('J');
        put_le(out, uint64_t(uint32_t(int32_t(value))), 4);
    } else {
        // LONG1: little-endian two's complement in (bit_length(|value|) // 8) + 1 bytes, one
        // redundant 0xff dropped from a negative number.
        uint64_t magnitude = value < 0 ? uint64_t(0) - uint64_t(value) : uint64_t(value);
        int bit_length = 64 - __builtin_clzll(magnitude);
        int num_bytes = (bit_length >> 3) + 1;
        uint8_t bytes[9];
        for (int i = 0; i < 9; ++i) {
            bytes[i] = i < 8 ? uint8_t(uint64_t(value) >> (8 * i)) : (value < 0 ? 0xff : 0x00);
        }
        if (value < 0 && num_bytes > 1 && bytes[num_bytes - 1] == 0xff &&
            (bytes[num_bytes - 2] & 0x80) != 0) {
            --num_bytes;
        }
        out.push_back(char(0x8a));
        out.push_back(char(uint8_t(num_bytes)));
        out.append(reinterpret_cast<const char*>(bytes), size_t(num_bytes));
    }
}

// pickle.dumps((parent, tuple(tokens), None), protocol=5)
inline void pickle_block(std::string& out, const uint8_t* parent, size_t parent_size,
                         const int64_t* tokens, size_t num_tokens) {
    out.clear();
    out.append("\x80\x05\x95", 3);
    put_le(out, 0, 8);  // frame length, filled in below
    out.push_back('C');  // SHORT_BINBYTES
    out.push_back(char(uint8_t(parent_size)));
    out.append(reinterpret_cast<const char*>(parent), parent_size);
    out.push_back(char(0x94));  // MEMOIZE
    if (num_tokens == 0) {
        out.push_back(')');  // the empty tuple is a singleton and is not memoised
    } else {
        if (num_tokens > 3) out.push_back('(');
        for (size_t i = 0; i < num_tokens; ++i) pickle_int(out, tokens[i]);
        out.push_back(num_tokens > 3 ? 't' : char(0x84 + num_tokens));
        out.push_back(char(0x94));
    }
    out.append("N\x87\x94.", 4);
    uint64_t frame = out.size() - 11;
    for (int i = 0; i < 8; ++i) out[3 + i] = char(uint8_t(frame >> (8 * i)));
}

inline void cbor_head(std::string& out, int major, uint64_t value) {
    uint8_t type = uint8_t(major << 5);
    if (value < 24) {
        out.push_back(char(type | uint8_t(value)));
    } else if (value <= 0xff) {
        out.push_back(char(type | 24));
        put_be(out, value, 1);
    } else if (value <= 0xffff) {
        out.push_back(char(type | 25));
        put_be(out, value, 2);
    } else if (value <= 0xffffffffULL) {
        out.push_back(char(type | 26));
        put_be(out, value, 4);
    } else {
        out.push_back(char(type | 27));
        put_be(out, value, 8);
    }
}

// cbor2.dumps((parent, tuple(tokens), None), canonical=True)
inline void cbor_block(std::string& out, const uint8_t* parent, size_t parent_size,
                       const int64_t* tokens, size_t num_tokens) {
    out.clear();
    out.push_back(char(0x83));
    cbor_head(out, 2, parent_size);
    out.append(reinterpret_cast<const char*>(parent), parent_size);
    cbor_head(out, 4, num_tokens);
    for (size_t i = 0; i < num_tokens; ++i) {
        int64_t token = tokens[i];
        if (token >= 0) {
            cbor_head(out, 0, uint64_t(token));
        } else {
            cbor_head(out, 1, uint64_t(-(token + 1)));
        }
    }
    out.push_back(char(0xf6));
}

}  // namespace prefixsim
