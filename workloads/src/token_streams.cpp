// Synthetic token streams in one pass (workloads/synthetic_tokens.py: `_streams` calls this,
// `reference_streams` is the readable numpy reference; tests check both give the same ids).
// Token i of a stream seeded by s is mix64(s + (i + 1) * golden) % vocab_size, all modulo 2^64.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <stdexcept>

namespace nb = nanobind;

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// SplitMix64's finaliser.
inline uint64_t mix64(uint64_t value) {
    value ^= value >> 30;
    value *= 0xBF58476D1CE4E5B9ULL;
    value ^= value >> 27;
    value *= 0x94D049BB133111EBULL;
    value ^= value >> 31;
    return value;
}

// x % divisor by a multiply: floor(x * reciprocal / 2^64) undershoots the quotient by at most
// two, so two subtractions make the remainder exact. Masks, not branches: which correction a
// token needs is random, and mispredicted branches (or a hardware divide) would more than double
// the pass.
class Remainder {
public:
    explicit Remainder(uint64_t divisor) : divisor_(divisor), reciprocal_(~0ULL / divisor) {}

    uint64_t operator()(uint64_t value) const {
        const auto quotient =
            static_cast<uint64_t>((static_cast<unsigned __int128>(value) * reciprocal_) >> 64);
        uint64_t remainder = value - quotient * divisor_;
        remainder -= divisor_ & (0 - uint64_t(remainder >= divisor_));
        remainder -= divisor_ & (0 - uint64_t(remainder >= divisor_));
        return remainder;
    }

private:
    uint64_t divisor_;
    uint64_t reciprocal_;
};

using Seeds = nb::ndarray<const uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Lengths = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Tokens = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void fill_streams(Seeds seeds, Lengths lengths, uint64_t vocab_size, Tokens out) {
    if (vocab_size < 1) throw std::invalid_argument("fill_streams: vocab_size must be >= 1");
    const size_t num_streams = seeds.shape(0);
    if (lengths.shape(0) != num_streams)
        throw std::invalid_argument("fill_streams: one length per seed");
    const uint64_t* seed = seeds.data();
    const int64_t* length = lengths.data();
    size_t total = 0;
    for (size_t stream = 0; stream < num_streams; ++stream) {
        if (length[stream] < 0) throw std::invalid_argument("fill_streams: a negative length");
        total += static_cast<size_t>(length[stream]);
    }
    if (total != out.shape(0))
        throw std::invalid_argument("fill_streams: out must hold the streams' total length");
    const Remainder remainder(vocab_size);
    int64_t* token = out.data();
    for (size_t stream = 0; stream < num_streams; ++stream) {
        uint64_t position = seed[stream];
        for (int64_t index = 0; index < length[stream]; ++index) {
            position += kGolden;
            *token++ = static_cast<int64_t>(remainder(mix64(position)));
        }
    }
}

}  // namespace

NB_MODULE(_token_streams, m) {
    m.doc() = "Synthetic token streams in one compiled pass.";
    m.def("fill_streams", &fill_streams, nb::arg("seeds"), nb::arg("lengths"),
          nb::arg("vocab_size"), nb::arg("out"),
          "Writes the first lengths[r] ids of the stream seeded by seeds[r], for every r, end "
          "to end into `out` (int64, exactly as long as the lengths' sum).");
}
