import Foundation

/// The Keccak sponge (FIPS 202, section 4) over Keccak-f[1600], written in Swift: OpenSSL 3.0 has
/// SHA-3 but cannot squeeze a XOF incrementally (`EVP_DigestSqueeze` came in 3.3), and ML-KEM and
/// ML-DSA squeeze SHAKE streams block by block.
///
/// Lanes are stored in the host's byte order; the byte view used by absorb and squeeze is FIPS 202's
/// little-endian lane order, which is the host's order on every platform Swift targets here.
struct Keccak: Sendable {
    #if !_endian(little)
        #error("Keccak's byte view assumes a little-endian host")
    #endif

    /// The rate in bytes: 168 for SHAKE128, 136 for SHA3-256 and SHAKE256, 72 for SHA3-512.
    let rate: Int
    /// The domain-separation suffix and first padding bit: 0x06 for SHA-3, 0x1F for SHAKE (FIPS 202,
    /// sections 6.1 and 6.2, with pad10*1's first bit).
    let suffix: UInt8

    private var lanes = [UInt64](repeating: 0, count: 25)
    /// Bytes absorbed into, or squeezed from, the current block.
    private var offset = 0
    private var squeezing = false

    init(rate: Int, suffix: UInt8) {
        self.rate = rate
        self.suffix = suffix
    }

    /// Absorbs more input. Absorbing after squeezing has started is a programming error.
    mutating func absorb(_ input: UnsafeRawBufferPointer) {
        precondition(!squeezing, "a Keccak sponge cannot absorb after it has started squeezing")
        guard var source = input.baseAddress else { return }
        var remaining = input.count
        let rate = self.rate
        var offset = self.offset
        lanes.withUnsafeMutableBufferPointer { lanes in
            let state = UnsafeMutableRawPointer(lanes.baseAddress!)
            while remaining > 0 {
                if offset == 0 && remaining >= rate {
                    // Whole blocks: XOR lane by lane.
                    for lane in 0..<(rate / 8) {
                        lanes[lane] ^= UInt64(
                            littleEndian: source.loadUnaligned(fromByteOffset: lane * 8, as: UInt64.self))
                    }
                    Keccak.permute(lanes.baseAddress!)
                    source += rate
                    remaining -= rate
                    continue
                }
                let take = min(rate - offset, remaining)
                for index in 0..<take {
                    state.storeBytes(
                        of: state.load(fromByteOffset: offset + index, as: UInt8.self)
                            ^ source.load(fromByteOffset: index, as: UInt8.self),
                        toByteOffset: offset + index, as: UInt8.self)
                }
                offset += take
                source += take
                remaining -= take
                if offset == rate {
                    Keccak.permute(lanes.baseAddress!)
                    offset = 0
                }
            }
        }
        self.offset = offset
    }

    mutating func absorb(_ data: some DataProtocol) {
        for region in data.regions {
            region.withUnsafeBytes { absorb($0) }
        }
    }

    /// Squeezes the next `output.count` bytes.
    mutating func squeeze(into output: UnsafeMutableRawBufferPointer) {
        if !squeezing { pad() }
        guard var destination = output.baseAddress else { return }
        var remaining = output.count
        let rate = self.rate
        var offset = self.offset
        lanes.withUnsafeMutableBufferPointer { lanes in
            let state = UnsafeRawPointer(lanes.baseAddress!)
            while remaining > 0 {
                if offset == rate {
                    Keccak.permute(lanes.baseAddress!)
                    offset = 0
                }
                let take = min(rate - offset, remaining)
                destination.copyMemory(from: state + offset, byteCount: take)
                offset += take
                destination += take
                remaining -= take
            }
        }
        self.offset = offset
    }

    /// Pads the last block (suffix, pad10*1) and permutes: the sponge is then ready to squeeze.
    private mutating func pad() {
        let rate = self.rate
        let offset = self.offset
        let suffix = self.suffix
        lanes.withUnsafeMutableBufferPointer { lanes in
            let state = UnsafeMutableRawPointer(lanes.baseAddress!)
            state.storeBytes(
                of: state.load(fromByteOffset: offset, as: UInt8.self) ^ suffix, toByteOffset: offset, as: UInt8.self)
            state.storeBytes(
                of: state.load(fromByteOffset: rate - 1, as: UInt8.self) ^ 0x80, toByteOffset: rate - 1, as: UInt8.self)
            Keccak.permute(lanes.baseAddress!)
        }
        self.offset = 0
        squeezing = true
    }

    /// Wipes the state (it may hold secret input).
    mutating func wipe() {
        lanes.withUnsafeMutableBytes { OpenSSLMemory.cleanse($0) }
    }
}
